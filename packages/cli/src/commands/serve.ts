import { chosenProfile } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { CliError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { runService } from '../run-service.js';

const spec = {
  name: 'svc serve',
  summary: 'Run the service in the foreground: the embedded management API, the node surface and the application gateway.',
  usage:
    'svc serve [--management-listen HOST:PORT] [--node-listen HOST:PORT] [--app-listen HOST:PORT|off] [--metrics-listen HOST:PORT] <PROJECT>',
  help: [
    '--management-listen HOST:PORT  the embedded management API (default: $SVC_MANAGEMENT_LISTEN, else 127.0.0.1:9090)',
    '                      SVC_MANAGEMENT_LISTEN=off disables it (for a separate `svc auth serve` process)',
    '--node-listen HOST:PORT  the node surface (default: $SVC_NODE_LISTEN, else :svc/node-listen, else 127.0.0.1:9091)',
    '                      SVC_NODE_LISTEN=off disables it (for a separate `svc node serve` process)',
    '--app-listen HOST:PORT  the application gateway (default: $SVC_APP_LISTEN, else :svc/app-listen, else 127.0.0.1:8080)',
    '                      network addresses are allowed (with :svc/app-tls or a TLS proxy); off disables it',
    '--metrics-listen HOST:PORT  Prometheus /metrics and the /livez, /readyz probes (default: $SVC_METRICS_LISTEN, else :svc/metrics-listen, else off)',
    '                      loopback only, unless :svc/metrics-listen in project.edn names a network address',
    '<PROJECT>             the project directory',
    PROJECT_HELP,
  ],
  options: {
    'management-listen': { type: 'string' },
    'node-listen': { type: 'string' },
    'app-listen': { type: 'string' },
    'metrics-listen': { type: 'string' },
    ...PROJECT_OPTIONS,
  },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc serve <PROJECT>`: the foreground service. It runs the embedded management API unless
 * `SVC_MANAGEMENT_LISTEN=off`, the node HTTP surface unless `SVC_NODE_LISTEN=off`, and the
 * application gateway unless its address is `off` (`--app-listen`, `SVC_APP_LISTEN` or
 * `:svc/app-listen`), each a {@link Surface} started in that order.
 *
 * @example
 * await serve.run(['./demo']);
 */
export const serve: Command = {
  path: ['serve'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [dir] = args.positionals as [string];
    return runService(spec.name, dir, {
      listen: {
        management: args.values['management-listen'],
        node: args.values['node-listen'],
        application: args.values['app-listen'],
        metrics: args.values['metrics-listen'],
      },
      listenFlags: { management: '--management-listen', node: '--node-listen', application: '--app-listen', metrics: '--metrics-listen' },
      profile: chosenProfile(args.values.profile, process.env),
      check(service) {
        if (service.listening.every((l) => l === 'metrics')) {
          throw new CliError(
            'svc serve: nothing to serve: the management API, the node surface and the application gateway are all off (SVC_MANAGEMENT_LISTEN=off, SVC_NODE_LISTEN=off, app listen off); unset one of them',
          );
        }
      },
    });
  },
};

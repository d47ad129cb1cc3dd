import { chosenProfile } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { runService } from '../run-service.js';

const spec = {
  name: 'svc app serve',
  summary: 'Run the application gateway alone in the foreground: application-realm sign-in, identity, then the application.',
  usage: 'svc app serve [--app-listen HOST:PORT] <PROJECT>',
  help: [
    '--app-listen HOST:PORT  where to listen (default: $SVC_APP_LISTEN, else :svc/app-listen of project.edn, else 127.0.0.1:8080)',
    '                      network and wildcard addresses are allowed: use :svc/app-tls, or a TLS proxy named in',
    '                      :svc/app-trusted-proxies; port 0 picks a free one. SIGHUP reloads the TLS certificate and key',
    '<PROJECT>             the project directory',
    PROJECT_HELP,
  ],
  options: { 'app-listen': { type: 'string' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc app serve <PROJECT>`: the application gateway alone, in the foreground, until
 * SIGINT/SIGTERM (in-flight requests finish, then the store closes); SIGHUP reloads its TLS
 * certificate and key.
 *
 * @example
 * await appServe.run(['--app-listen', '127.0.0.1:0', './demo']);
 */
export const appServe: Command = {
  path: ['app', 'serve'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [dir] = args.positionals as [string];
    return runService(spec.name, dir, {
      listeners: ['application'],
      listen: { application: args.values['app-listen'] },
      listenFlags: { application: '--app-listen' },
      profile: chosenProfile(args.values.profile, process.env),
      required: {
        listener: 'application',
        offMessage:
          'svc app serve is the application gateway and cannot be turned off: off (from --app-listen, SVC_APP_LISTEN or :svc/app-listen) only disables the gateway of `svc serve`; pass --app-listen HOST:PORT',
      },
    });
  },
};

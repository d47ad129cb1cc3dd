import { chosenProfile } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { runService } from '../run-service.js';

const spec = {
  name: 'svc node serve',
  summary: 'Run the node HTTP surface alone in the foreground: discovery, health, status, signed diagnostics, pairing.',
  usage: 'svc node serve [--listen HOST:PORT] <PROJECT>',
  help: [
    '--listen HOST:PORT    where to listen (default: $SVC_NODE_LISTEN, else :svc/node-listen of project.edn, else 127.0.0.1:9091)',
    '                      network and wildcard addresses are allowed (put TLS in front); port 0 picks a free one',
    '<PROJECT>             the project directory',
    PROJECT_HELP,
  ],
  options: { listen: { type: 'string' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc node serve <PROJECT>`: the node HTTP surface alone, in the foreground, until
 * SIGINT/SIGTERM (in-flight requests finish, then the store closes).
 *
 * @example
 * await nodeServe.run(['--listen', '127.0.0.1:0', './demo']);
 */
export const nodeServe: Command = {
  path: ['node', 'serve'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [dir] = args.positionals as [string];
    return runService(spec.name, dir, {
      listeners: ['node'],
      listen: { node: args.values.listen },
      listenFlags: { node: '--listen' },
      profile: chosenProfile(args.values.profile, process.env),
      required: {
        listener: 'node',
        offMessage:
          'svc node serve is the node surface and cannot be turned off: SVC_NODE_LISTEN=off only disables the node surface of `svc serve`; unset it or pass --listen HOST:PORT',
      },
    });
  },
};

import { chosenProfile } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { runService } from '../run-service.js';

const spec = {
  name: 'svc auth serve',
  summary: 'Run the loopback management API in the foreground.',
  usage: 'svc auth serve [--listen HOST:PORT] <PROJECT>',
  help: [
    '--listen HOST:PORT    loopback address (default: $SVC_MANAGEMENT_LISTEN, else 127.0.0.1:9090; port 0 picks one)',
    '                      wildcard and non-loopback addresses are refused',
    '<PROJECT>             the project directory',
    PROJECT_HELP,
  ],
  options: { listen: { type: 'string' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc auth serve`: the management API alone, in the foreground, until SIGINT/SIGTERM.
 *
 * @example
 * await authServe.run(['--listen', '127.0.0.1:0', './demo']);
 */
export const authServe: Command = {
  path: ['auth', 'serve'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [dir] = args.positionals as [string];
    return runService(spec.name, dir, {
      listeners: ['management'],
      listen: { management: args.values.listen },
      listenFlags: { management: '--listen' },
      profile: chosenProfile(args.values.profile, process.env),
      required: {
        listener: 'management',
        offMessage:
          'svc auth serve is the management server and cannot be turned off: SVC_MANAGEMENT_LISTEN=off only disables the API embedded in `svc serve`; unset it or pass --listen HOST:PORT',
      },
    });
  },
};

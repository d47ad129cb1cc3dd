import { parseCommandArgs } from '../args.js';
import { CliError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { assertOwnerOnly, ensureNodeIdentity } from '../control.js';
import { runForeground } from '../foreground.js';
import { chosenProfile, loadProject } from '../project.js';
import { nodeListen, nodeSurface } from '../surfaces/node-surface.js';
import { VERSION } from '../version.js';

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
    const project = loadProject(dir, { profile: chosenProfile(args.values.profile, process.env), env: process.env });
    const listen = nodeListen(args.values.listen, project, spec.name);
    if (listen === 'off') {
      throw new CliError(
        'svc node serve is the node surface and cannot be turned off: SVC_NODE_LISTEN=off only disables the node surface of `svc serve`; unset it or pass --listen HOST:PORT',
      );
    }
    // The node identity key signs diagnostics and names the node: refuse one others can read.
    if (ensureNodeIdentity(project)) {
      process.stderr.write(`svc: created this node's identity key ${project.nodeKey} (first start on an external store)\n`);
    }
    assertOwnerOnly(project.nodeKey, 'the node key');
    return runForeground(project, [nodeSurface(listen, { version: VERSION, flag: '--listen' })]);
  },
};

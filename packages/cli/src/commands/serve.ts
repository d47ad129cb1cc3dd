import { parseCommandArgs } from '../args.js';
import { CliError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { assertOwnerOnly } from '../control.js';
import { runForeground } from '../foreground.js';
import { managementListen } from '../listen.js';
import { chosenProfile, loadProject } from '../project.js';
import { managementSurface } from '../surfaces/management-surface.js';
import type { Surface } from '../surfaces/surface.js';

const spec = {
  name: 'svc serve',
  summary: 'Run the service in the foreground: the embedded management API (the node surface and the gateway come later).',
  usage: 'svc serve [--management-listen HOST:PORT] <PROJECT>',
  help: [
    '--management-listen HOST:PORT  the embedded management API (default: $SVC_MANAGEMENT_LISTEN, else 127.0.0.1:9090)',
    '                      SVC_MANAGEMENT_LISTEN=off disables it (for a separate `svc auth serve` process)',
    '<PROJECT>             the project directory',
    PROJECT_HELP,
  ],
  options: { 'management-listen': { type: 'string' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc serve <PROJECT>`: the foreground service. Today it runs the embedded management API
 * unless `SVC_MANAGEMENT_LISTEN=off`; the node HTTP surface and the application gateway are
 * further {@link Surface}s added to the same list.
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
    const listen = managementListen(args.values['management-listen'], spec.name);
    const [dir] = args.positionals as [string];
    const project = loadProject(dir, { profile: chosenProfile(args.values.profile, process.env), env: process.env });
    // The node identity key signs diagnostics; refuse one others can read before serving.
    assertOwnerOnly(project.nodeKey, 'the node key');
    const surfaces: Surface[] = [];
    if (listen !== 'off') surfaces.push(managementSurface(listen));
    if (surfaces.length === 0) {
      throw new CliError(
        'svc serve: nothing to serve: the management API is off (SVC_MANAGEMENT_LISTEN=off) and this build has no node surface or gateway yet; run `svc auth serve` instead',
      );
    }
    return runForeground(project, surfaces);
  },
};

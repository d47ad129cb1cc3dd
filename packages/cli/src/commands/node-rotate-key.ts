import { rotateProjectNodeKey, withProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc node rotate-key',
  summary: "Replace this node's identity key with a new one; discovery keeps publishing the old one with its validity window.",
  usage: 'svc node rotate-key <PROJECT> [--json]',
  help: [
    '<PROJECT>             the project directory',
    '--json                print {"node_id","public_key","valid_from","previous":{"node_id","public_key","valid_from","valid_until"}}',
    '                      a running node signs with the new key from its next request: no restart needed',
    PROJECT_HELP,
  ],
  options: { json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc node rotate-key <PROJECT>`: a new Ed25519 node key replaces the old one (whose private
 * half is destroyed); the old public key stays in the key history with the window it was valid
 * in, so discovery, signed diagnostics and `svc auth audit verify --checkpoints` still accept
 * what it signed in that window. The rotation is a `node.key_rotated` audit event.
 *
 * @example
 * await nodeRotateKey.run(['./demo', '--json']);
 */
export const nodeRotateKey: Command = {
  path: ['node', 'rotate-key'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [dir] = args.positionals as [string];
    const { previous, current } = await withProject(dir, args.values.profile, (open) => rotateProjectNodeKey(open));
    const retired = current.previousKeys?.[0];
    if (args.values.json === true) {
      printJson({
        node_id: current.nodeId,
        public_key: current.publicKeyHex,
        valid_from: current.validFrom ?? null,
        previous: retired ?? null,
      });
    } else {
      printText(`node key rotated: node id ${previous.nodeId} -> ${current.nodeId}`);
      printText(
        `the old key stays published (valid until ${retired?.valid_until ?? '?'}); a running node signs with the new key from its next request`,
      );
    }
    return 0;
  },
};

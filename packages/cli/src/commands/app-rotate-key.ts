import { ASSERTION_KEY_OVERLAP_SECONDS, ASSERTION_KEY_PREPUBLISH_SECONDS, formatLimit } from '@svc/core/settings';
import { rotateProjectAssertionKey, withProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc app rotate-key',
  summary: "Rotate the gateway's Svc-Assertion signing key: the new key is published first, the old one stays published for an overlap.",
  usage: 'svc app rotate-key <PROJECT> [--immediate] [--json]',
  help: [
    '<PROJECT>             the project directory',
    `                      the new key is in /.svc/jwks.json at once and signs ${formatLimit(ASSERTION_KEY_PREPUBLISH_SECONDS, 'seconds')} later;`,
    `                      the old key signs until then and stays published ${formatLimit(ASSERTION_KEY_OVERLAP_SECONDS, 'seconds')} longer`,
    '--immediate           the old key leaked: the new key signs now and every old key is withdrawn now',
    '                      (verifiers that cached the old key set fetch the new one on its unknown key id)',
    '--json                print {"kid","signs_from","previous":{"kid","signs_until","published_until"}|null}',
    PROJECT_HELP,
  ],
  options: { immediate: { type: 'boolean' }, json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT'],
} as const;

/**
 * `svc app rotate-key <PROJECT>`: a new key for the gateway's `Svc-Assertion`, published in
 * `/.svc/jwks.json` before it signs; the old one keeps signing until then and stays published
 * for the overlap, so no verifier meets an assertion whose key it cannot find. The key set is the
 * cluster's (in the control store): every running node picks the change up within a second. The
 * rotation is an `app.assertion_key_rotated` audit event.
 *
 * @example
 * await appRotateKey.run(['./demo', '--json']);
 */
export const appRotateKey: Command = {
  path: ['app', 'rotate-key'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [dir] = args.positionals as [string];
    const immediate = args.values.immediate === true;
    const { next, previous } = await withProject(dir, args.values.profile, (open) => rotateProjectAssertionKey(open, { immediate }));
    const prev =
      previous === null ? null : { kid: previous.kid, signs_until: previous.signs_until, published_until: previous.published_until };
    if (args.values.json === true) {
      printJson({ kid: next.kid, signs_from: next.signs_from, previous: prev });
    } else {
      if (prev === null) printText(`assertion key created: ${next.kid} is published and signs from ${next.signs_from}`);
      else printText(`assertion key rotated: ${next.kid} is published now and signs from ${next.signs_from}`);
      if (prev !== null)
        printText(`the previous key ${prev.kid} signs until ${prev.signs_until} and is published until ${prev.published_until}`);
    }
    return 0;
  },
};

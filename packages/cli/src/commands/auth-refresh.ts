import { parseCommandArgs } from '../args.js';
import type { Command } from '../command.js';
import { explainFailure } from '../errors-map.js';
import { DEVICE_SESSION_HELP, openSavedDeviceSession, SESSION_OPTIONS } from '../operator-api.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc auth refresh',
  summary: 'Rotate the saved token pair with its single-use refresh token and save the new pair.',
  usage: 'svc auth refresh [--context NAME] [--credentials FILE] [--url URL] [--json]',
  help: [...DEVICE_SESSION_HELP, '--json                print {"session_id","access_expires_at","refresh_expires_at"}'],
  options: { ...SESSION_OPTIONS },
  positionals: [],
} as const;

/**
 * `svc auth refresh`: rotates the pair (`POST /v1/auth/refresh`, or `/.svc/auth/v1/refresh` for an
 * application session) and replaces the saved one.
 *
 * @example
 * await authRefresh.run([]);
 */
export const authRefresh: Command = {
  path: ['auth', 'refresh'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const session = openSavedDeviceSession(args.values);
    let creds: Awaited<ReturnType<typeof session.refresh>>;
    try {
      creds = await session.refresh();
    } catch (error) {
      throw explainFailure('refresh failed', error);
    }
    if (args.values.json === true) {
      printJson({ session_id: creds.session_id, access_expires_at: creds.access_expires_at, refresh_expires_at: creds.refresh_expires_at });
    } else printText(`rotated the token pair of session ${creds.session_id}; access token valid until ${creds.access_expires_at}`);
    return 0;
  },
};

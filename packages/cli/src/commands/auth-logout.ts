import { ApiError } from '@svc/client';
import { parseCommandArgs } from '../args.js';
import type { Command } from '../command.js';
import { credentialStore } from '../credentials.js';
import { explainFailure } from '../errors-map.js';
import { DEVICE_SESSION_HELP, openSavedDeviceSession, SESSION_OPTIONS } from '../operator-api.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc auth logout',
  summary: 'Revoke the saved session on the server and forget it (the file goes with its last context).',
  usage: 'svc auth logout [--context NAME] [--credentials FILE] [--url URL] [--json]',
  help: [...DEVICE_SESSION_HELP, '--json                print {"session_id","revoked","already_ended"}'],
  options: { ...SESSION_OPTIONS },
  positionals: [],
} as const;

/** Codes meaning the session is already over on the server: logging out just forgets it. */
const ALREADY_ENDED = new Set(['invalid_refresh_token', 'refresh_token_reused']);

/**
 * `svc auth logout`: revokes the own session (`POST /v1/auth/revoke {}`, or
 * `/.svc/auth/v1/revoke` for an application session) and deletes the file.
 * A session the server already ended is forgotten too.
 *
 * @example
 * await authLogout.run([]);
 */
export const authLogout: Command = {
  path: ['auth', 'logout'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const session = openSavedDeviceSession(args.values);
    const sessionId = session.credentials().session_id;
    let revokedNow = true;
    try {
      await session.logout();
    } catch (error) {
      if (!(error instanceof ApiError && ALREADY_ENDED.has(error.code))) throw explainFailure('logout failed', error);
      credentialStore(args.values.credentials, args.values.context).remove();
      revokedNow = false;
    }
    if (args.values.json === true) printJson({ session_id: sessionId, revoked: true, already_ended: !revokedNow });
    else
      printText(
        revokedNow ? `session ${sessionId} revoked; credentials deleted` : `session ${sessionId} had already ended; credentials deleted`,
      );
    return 0;
  },
};

// The route both bearer ceilings serve (bench/sqlite-read-server.ts, bench/pg-read-server.ts): the
// bearer token's session id and digest (core's parseSessionToken, as every check must), the stored
// row from `storedRow`, a constant-time comparison of the digests, revocation and expiry. No
// principal, no hooks, no security headers, no error path beyond a bare 401; the bare route's body.
import { digestsEqual, parseSessionToken } from '@svc/core';
import Fastify from 'fastify';
import { serveUntilSignalled } from './serve.js';

/** The columns of a session row the check reads. */
export interface CeilingRow {
  readonly id: string;
  readonly access_digest: string;
  readonly access_expires_at: number;
  readonly revoked_at: number | null;
}

/**
 * Listens on 127.0.0.1 (a free port), prints `<name> listening on <url>`, and closes with
 * `close` after the app on SIGINT or SIGTERM.
 *
 * @example
 * await serveReadCeiling('sqlite read ceiling', storedRow, async () => db.close());
 */
export async function serveReadCeiling(
  name: string,
  storedRow: (sessionId: string) => Promise<CeilingRow | null>,
  close: () => Promise<void>,
): Promise<void> {
  const app = Fastify({ logger: false });
  app.get('/', async (req, reply) => {
    const header = req.headers.authorization;
    const presented = parseSessionToken(header?.startsWith('Bearer ') ? header.slice(7) : undefined, 'access');
    const row = presented === null ? null : await storedRow(presented.sessionId);
    const live = row !== null && row.revoked_at === null && row.access_expires_at > Date.now();
    if (presented === null || row === null || !live || !digestsEqual(row.access_digest, presented.digest)) {
      return reply.code(401).send({ error: 'invalid_token' });
    }
    return { subject: 'sub_baseline', realm: 'management' };
  });
  await serveUntilSignalled(app, { close }, name);
}

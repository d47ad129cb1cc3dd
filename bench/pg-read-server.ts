// The ceiling of a bearer check on PostgreSQL: a bare Fastify route that does the least any check
// must do when it reads PostgreSQL on every request, and nothing else. It takes the bearer
// token, splits off the session id and digests the token (core's parseSessionToken, as every
// check must), and reads that session's row with the store's columns and join (core's
// ACCESS_USER_COLUMNS over ACCESS_FROM: the session and its user's attributes, what the principal
// and the contract's identity attributes need), one primary-key lookup batched per event-loop
// turn (`id = ANY($1)`, one named statement always on its generic plan, where the store uses one
// per list length to the same end; a pool of the store's default size of 10), then compares the
// digests in constant time and checks that the session is neither revoked nor expired (with the
// default sender constraint a key-bound session's access token is still accepted as a bearer,
// as by svc here). No principal, no hooks, no security headers, no error path
// beyond a bare 401: what this machine allows a check against the database's truth per request
// (bench/run.ts, `postgres.bearer.ceiling`).
//
// `PG_READ_URL=postgres://... node --import tsx bench/pg-read-server.ts <schema>` (the address in
// the environment, never in the arguments: it may hold a password)
import { ACCESS_FROM, ACCESS_USER_COLUMNS } from '@svc/core/sql-rows';
import { ceilingPool } from './ceiling-pool.js';
import { type CeilingRow as Row, serveReadCeiling } from './read-ceiling.js';

const schema = process.argv[2];
const pool = ceilingPool('PG_READ_URL', schema, 'usage: PG_READ_URL=<postgres url> pg-read-server.ts <schema (lowercase identifier)>');
const query = { name: 'ceiling_sessions', text: `SELECT ${ACCESS_USER_COLUMNS} FROM ${ACCESS_FROM} WHERE s.id = ANY($1::text[])` };

interface Lookup {
  readonly sessionId: string;
  readonly resolve: (row: Row | null) => void;
  readonly reject: (error: unknown) => void;
}
let batch: Lookup[] = [];
const send = (): void => {
  const all = batch;
  batch = [];
  pool.query<Row>({ ...query, values: [[...new Set(all.map((l) => l.sessionId))]] }).then(
    (result) => {
      const byId = new Map(result.rows.map((row) => [row.id, row]));
      for (const lookup of all) lookup.resolve(byId.get(lookup.sessionId) ?? null);
    },
    (error: unknown) => {
      for (const lookup of all) lookup.reject(error);
    },
  );
};
/** The stored row of `sessionId`, read with the other checks of this turn. */
const storedRow = (sessionId: string): Promise<Row | null> =>
  new Promise((resolve, reject) => {
    if (batch.length === 0) setImmediate(send);
    batch.push({ sessionId, resolve, reject });
  });

await serveReadCeiling('pg read ceiling', storedRow, () => pool.end());

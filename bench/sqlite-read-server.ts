// The ceiling of a bearer check on SQLite: a bare Fastify route that does the least any check
// must do to answer from a SQLite store's truth, and nothing else. It takes the bearer token,
// splits off the session id and digests the token (core's parseSessionToken, as every check
// must), and finds that session's row with the store's columns and join (core's
// ACCESS_USER_COLUMNS over ACCESS_FROM). Rows are kept in memory between requests, as svc's
// bearer cache keeps them, but never trusted once another connection may have committed: the
// checks of one event-loop turn wait for its check phase (`setImmediate`) and share one
// `PRAGMA data_version` read, and a change empties the cache (the contract's "the next request
// with that access token gets 401, in every process sharing the store"). Then it compares the
// digests in constant time and checks that the session is neither revoked nor expired. No
// principal, no hooks, no security headers, no error path beyond a bare 401; it answers the
// bare route's body: what this machine allows a bearer check against a SQLite store
// (bench/run.ts, `sqlite.bearer.ceiling`).
//
// `node --import tsx bench/sqlite-read-server.ts <the project's store file>`: opened read-write
// (SQLite's WAL needs it) but never written.
import { ACCESS_FROM, ACCESS_USER_COLUMNS } from '@svc/core/sql-rows';
import Database from 'better-sqlite3';
import { type CeilingRow as Row, serveReadCeiling } from './read-ceiling.js';

const file = process.argv[2];
if (file === undefined) {
  process.stderr.write('usage: sqlite-read-server.ts <store file>\n');
  process.exit(2);
}
const db = new Database(file, { fileMustExist: true });
const dataVersion = db.prepare<[], number>('PRAGMA data_version').pluck();
const sessionRow = db.prepare<[string], Row>(`SELECT ${ACCESS_USER_COLUMNS} FROM ${ACCESS_FROM} WHERE s.id = ?`);

interface Lookup {
  readonly sessionId: string;
  readonly resolve: (row: Row | null) => void;
  readonly reject: (error: unknown) => void;
}
const rows = new Map<string, Row>();
let version = -1;
let batch: Lookup[] = [];
const answer = (): void => {
  const all = batch;
  batch = [];
  try {
    const now = dataVersion.get();
    if (now !== version) {
      rows.clear();
      version = now ?? Number.NaN;
    }
  } catch (error) {
    for (const lookup of all) lookup.reject(error);
    return;
  }
  for (const lookup of all) {
    let row = rows.get(lookup.sessionId);
    if (row === undefined) {
      row = sessionRow.get(lookup.sessionId);
      if (row !== undefined) rows.set(lookup.sessionId, row);
    }
    lookup.resolve(row ?? null);
  }
};
/** The stored row of `sessionId`, fresh as of this turn's check phase. */
const storedRow = (sessionId: string): Promise<Row | null> =>
  new Promise((resolve, reject) => {
    if (batch.length === 0) setImmediate(answer);
    batch.push({ sessionId, resolve, reject });
  });

await serveReadCeiling('sqlite read ceiling', storedRow, async () => {
  db.close();
});

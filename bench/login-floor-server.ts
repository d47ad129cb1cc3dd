// The ceiling of the login figure: the same two requests as a complete login
// (`POST /v1/auth/challenges`, then `POST /v1/auth/sessions` with the Ed25519 signature),
// answered by a bare Fastify server that stores nothing. It does what any Ed25519 sign-in
// server must do per login and nothing more: a random challenge kept in a Map, one
// signature verification (node:crypto, on the event loop, the cheaper way in CPU), two
// random tokens and their SHA-256 digests. No store, no audit, no attempt budget, no input
// checks, no logging: what the machine allows a login to cost, in its own process as the
// real server runs, driven by the same load generator in the same round.
//
// With the argument `sqlite`, the same server keeping what a sign-in must keep in a SQLite
// file instead (WAL, synchronous=NORMAL, as svc's store): the challenge, the device of its key,
// the session (its id and its tokens' digests, findable by subject and by device, as a user's
// disabling and a device's removal must find it) and an audit row chained by SHA-256. In the
// fewest write transactions: the challenge's insert, then its deletion with the session and
// the audit row in one, each group-committed per turn of the event loop. What the machine
// allows a login with durable, audited storage to cost (`sqlite.logins.storage-ceiling`).
//
// With `postgres <schema>` (the address in FLOOR_PG_URL, never in the arguments: it may hold a
// password), the same in tables of its own schema on PostgreSQL, in the fewest statements a
// login can make there, each shared by the logins of one event-loop turn as svc's store shares
// its own (packages/store-postgres/src/turn-batch.ts), on a pool of the store's default size:
// the challenge's multi-row insert; its use, one DELETE ... RETURNING of the turn's challenges
// with the device of each key (before the signature is checked, as svc uses it up); the
// sessions with their audit rows, one statement. No attempt budget, no user row, no sealer: the
// audit rows are chained in this process (`postgres.logins.storage-ceiling`).
import { createHash, createPublicKey, type KeyObject, randomBytes, verify } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import Fastify from 'fastify';
import { TurnBatch } from '../packages/store-postgres/src/turn-batch.js';
import { ceilingPool } from './ceiling-pool.js';

// An Ed25519 SubjectPublicKeyInfo is this prefix and the 32 raw key bytes.
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const keys = new Map<string, KeyObject>();
const keyOf = (hex: string): KeyObject => {
  let key = keys.get(hex);
  if (key === undefined) {
    key = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, Buffer.from(hex, 'hex')]), format: 'der', type: 'spki' });
    keys.set(hex, key);
  }
  return key;
};
const token = () => randomBytes(32).toString('base64url');
const digest = (t: string) => createHash('sha256').update(t).digest('hex');

interface Challenge {
  readonly publicKey: string;
  readonly challenge: string;
}

/** Where the challenges and sessions go: a Map and nothing (the default), or a SQLite file. */
interface Keeping {
  putChallenge(id: string, c: Challenge, expiresAt: number): Promise<void>;
  /** The challenge to verify against (PostgreSQL: used up already, in the same statement). */
  getChallenge(id: string): Challenge | undefined | Promise<Challenge | undefined>;
  /** Uses up the challenge and records the session; false when the challenge was used meanwhile. */
  signIn(challengeId: string, publicKey: string, accessDigest: string, refreshDigest: string): Promise<boolean>;
  close(): void | Promise<void>;
}

function inMemory(): Keeping {
  const challenges = new Map<string, Challenge>();
  return {
    putChallenge: async (id, c) => {
      challenges.set(id, c);
    },
    getChallenge: (id) => challenges.get(id),
    signIn: async (challengeId) => challenges.delete(challengeId),
    close: () => undefined,
  };
}

function inSqlite(): Keeping {
  const dir = mkdtempSync(join(tmpdir(), 'svc-login-floor-'));
  const db = new Database(join(dir, 'floor.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('temp_store = MEMORY');
  db.exec(`
    CREATE TABLE devices (id TEXT PRIMARY KEY, public_key TEXT NOT NULL UNIQUE, subject TEXT NOT NULL) WITHOUT ROWID;
    CREATE TABLE challenges (id TEXT PRIMARY KEY, public_key TEXT NOT NULL, challenge TEXT NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID;
    CREATE TABLE sessions (id TEXT PRIMARY KEY, subject TEXT NOT NULL, device_id TEXT NOT NULL, access_digest TEXT NOT NULL,
      refresh_digest TEXT NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;
    CREATE INDEX sessions_subject ON sessions (subject);
    CREATE INDEX sessions_device ON sessions (device_id);
    CREATE TABLE audit (seq INTEGER PRIMARY KEY, at INTEGER NOT NULL, type TEXT NOT NULL, subject TEXT NOT NULL,
      session_id TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL);
  `);
  const s = {
    insertChallenge: db.prepare('INSERT INTO challenges (id, public_key, challenge, expires_at) VALUES (?, ?, ?, ?)'),
    challenge: db.prepare<[string], { public_key: string; challenge: string }>('SELECT public_key, challenge FROM challenges WHERE id = ?'),
    useChallenge: db.prepare('DELETE FROM challenges WHERE id = ?'),
    device: db.prepare<[string], { id: string; subject: string }>('SELECT id, subject FROM devices WHERE public_key = ?'),
    enroll: db.prepare('INSERT INTO devices (id, public_key, subject) VALUES (?, ?, ?)'),
    insertSession: db.prepare(
      'INSERT INTO sessions (id, subject, device_id, access_digest, refresh_digest, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    insertAudit: db.prepare('INSERT INTO audit (at, type, subject, session_id, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?)'),
  };
  let head = '0'.repeat(64);
  // Group commit: the writes of one turn of the event loop in one transaction.
  let queue: { fn: () => unknown; done: (v: unknown) => void }[] = [];
  const flush = db.transaction((batch: typeof queue) => batch.map((w) => w.fn()));
  const write = <T>(fn: () => T): Promise<T> =>
    new Promise((resolve) => {
      queue.push({ fn, done: resolve as (v: unknown) => void });
      if (queue.length === 1) {
        setImmediate(() => {
          const batch = queue;
          queue = [];
          const values = flush(batch);
          for (const [i, w] of batch.entries()) w.done(values[i]);
        });
      }
    });
  return {
    putChallenge: (id, c, expiresAt) => write(() => s.insertChallenge.run(id, c.publicKey, c.challenge, expiresAt)).then(() => undefined),
    getChallenge: (id) => {
      const row = s.challenge.get(id);
      return row === undefined ? undefined : { publicKey: row.public_key, challenge: row.challenge };
    },
    signIn: (challengeId, publicKey, accessDigest, refreshDigest) =>
      write(() => {
        if (s.useChallenge.run(challengeId).changes !== 1) return false;
        let device = s.device.get(publicKey);
        if (device === undefined) {
          // The bench's devices, enrolled on first sight (a real server enrolls them beforehand).
          device = { id: `dev_${publicKey.slice(0, 26)}`, subject: `sub_${publicKey.slice(0, 26)}` };
          s.enroll.run(device.id, publicKey, device.subject);
        }
        const now = Date.now();
        const sessionId = `ses_${randomBytes(13).toString('hex')}`;
        s.insertSession.run(sessionId, device.subject, device.id, accessDigest, refreshDigest, now);
        const hash = createHash('sha256').update(`${head}|${now}|session.created|${device.subject}|${sessionId}`).digest('hex');
        s.insertAudit.run(now, 'session.created', device.subject, sessionId, head, hash);
        head = hash;
        return true;
      }),
    close: () => {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function inPostgres(schema: string): Keeping {
  const pool = ceilingPool(
    'FLOOR_PG_URL',
    schema,
    'usage: FLOOR_PG_URL=<postgres url> login-floor-server.ts postgres <schema (lowercase identifier)>',
  );
  const ready = pool.query(`
    CREATE SCHEMA IF NOT EXISTS ${schema};
    SET search_path = ${schema};
    CREATE TABLE devices (id TEXT PRIMARY KEY, public_key TEXT NOT NULL UNIQUE, subject TEXT NOT NULL);
    CREATE TABLE challenges (id TEXT PRIMARY KEY, public_key TEXT NOT NULL, challenge TEXT NOT NULL, expires_at BIGINT NOT NULL);
    CREATE TABLE sessions (id TEXT PRIMARY KEY, subject TEXT NOT NULL, device_id TEXT NOT NULL, access_digest TEXT NOT NULL,
      refresh_digest TEXT NOT NULL, created_at BIGINT NOT NULL);
    CREATE INDEX sessions_subject ON sessions (subject);
    CREATE INDEX sessions_device ON sessions (device_id);
    CREATE TABLE audit (seq BIGINT PRIMARY KEY, at BIGINT NOT NULL, type TEXT NOT NULL, subject TEXT NOT NULL,
      session_id TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL);
  `);
  const puts = new TurnBatch<{ id: string; c: Challenge; expiresAt: number }, void>(256, async (batch) => {
    await pool.query({
      name: 'floor_put',
      text: 'INSERT INTO challenges (id, public_key, challenge, expires_at) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[])',
      values: [
        batch.map((w) => w.input.id),
        batch.map((w) => w.input.c.publicKey),
        batch.map((w) => w.input.c.challenge),
        batch.map((w) => w.input.expiresAt),
      ],
    });
    for (const w of batch) w.resolve();
  });
  type Taken = Challenge & { device: { id: string; subject: string } | null };
  // Used up and waiting for their signature's verdict (a bad signature's stays: the bench sends none).
  const taken = new Map<string, Taken>();
  const takes = new TurnBatch<string, Taken | undefined>(256, async (batch) => {
    const { rows } = await pool.query<{ id: string; public_key: string; challenge: string; d_id: string | null; d_subject: string | null }>(
      {
        name: 'floor_take',
        text: `WITH used AS (DELETE FROM challenges WHERE id = ANY($1::text[]) AND expires_at > $2 RETURNING id, public_key, challenge)
             SELECT used.*, d.id AS d_id, d.subject AS d_subject FROM used LEFT JOIN devices d ON d.public_key = used.public_key`,
        values: [batch.map((w) => w.input), Date.now()],
      },
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const w of batch) {
      const r = byId.get(w.input);
      byId.delete(w.input);
      w.resolve(
        r === undefined
          ? undefined
          : {
              publicKey: r.public_key,
              challenge: r.challenge,
              device: r.d_id === null ? null : { id: r.d_id, subject: r.d_subject as string },
            },
      );
    }
  });
  let head = '0'.repeat(64);
  let seq = 0;
  type NewSession = { sessionId: string; device: { id: string; subject: string }; accessDigest: string; refreshDigest: string };
  const sessions = new TurnBatch<NewSession, boolean>(256, async (batch) => {
    const now = Date.now();
    const audit = batch.map((w) => {
      const prev = head;
      head = createHash('sha256').update(`${prev}|${now}|session.created|${w.input.device.subject}|${w.input.sessionId}`).digest('hex');
      return { seq: ++seq, prev, hash: head };
    });
    await pool.query({
      name: 'floor_sessions',
      text: `WITH s AS (
               INSERT INTO sessions (id, subject, device_id, access_digest, refresh_digest, created_at)
               SELECT *, $6::bigint FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
             )
             INSERT INTO audit (seq, at, type, subject, session_id, prev_hash, hash)
             SELECT a.seq, $6, 'session.created', a.subject, a.session_id, a.prev_hash, a.hash
               FROM unnest($7::bigint[], $2::text[], $1::text[], $8::text[], $9::text[]) AS a (seq, subject, session_id, prev_hash, hash)`,
      values: [
        batch.map((w) => w.input.sessionId),
        batch.map((w) => w.input.device.subject),
        batch.map((w) => w.input.device.id),
        batch.map((w) => w.input.accessDigest),
        batch.map((w) => w.input.refreshDigest),
        now,
        audit.map((a) => a.seq),
        audit.map((a) => a.prev),
        audit.map((a) => a.hash),
      ],
    });
    for (const w of batch) w.resolve(true);
  });
  return {
    putChallenge: async (id, c, expiresAt) => {
      await ready;
      await puts.add({ id, c, expiresAt });
    },
    getChallenge: async (id) => {
      const t = await takes.add(id);
      if (t !== undefined) taken.set(id, t);
      return t;
    },
    signIn: async (challengeId, publicKey, accessDigest, refreshDigest) => {
      const t = taken.get(challengeId);
      taken.delete(challengeId);
      if (t === undefined) return false;
      let device = t.device;
      if (device === null) {
        // The bench's devices, enrolled on first sight (a real server enrolls them beforehand).
        device = { id: `dev_${publicKey.slice(0, 26)}`, subject: `sub_${publicKey.slice(0, 26)}` };
        await pool.query('INSERT INTO devices (id, public_key, subject) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [
          device.id,
          publicKey,
          device.subject,
        ]);
      }
      return sessions.add({ sessionId: `ses_${randomBytes(13).toString('hex')}`, device, accessDigest, refreshDigest });
    },
    close: async () => {
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
      await pool.end();
    },
  };
}

const keeping = process.argv[2] === 'sqlite' ? inSqlite() : process.argv[2] === 'postgres' ? inPostgres(process.argv[3] ?? '') : inMemory();
const app = Fastify({ logger: false });
app.post('/v1/auth/challenges', async (req, reply) => {
  const { public_key } = req.body as { public_key: string };
  const id = `chl_${randomBytes(16).toString('hex').slice(0, 26)}`;
  const expiresAt = Date.now() + 60_000;
  const challenge = `svc-auth-v1 challenge prj_floor management ${id} ${randomBytes(16).toString('hex')} ${Math.floor(expiresAt / 1000)}`;
  await keeping.putChallenge(id, { publicKey: public_key, challenge }, expiresAt);
  reply.code(201);
  return { challenge_id: id, challenge, expires_at: new Date(expiresAt).toISOString() };
});
app.post('/v1/auth/sessions', async (req, reply) => {
  const { challenge_id, signature } = req.body as { challenge_id: string; signature: string };
  const c = await keeping.getChallenge(challenge_id);
  const access = token();
  const refresh = token();
  if (
    c === undefined ||
    !verify(null, Buffer.from(c.challenge, 'utf8'), keyOf(c.publicKey), Buffer.from(signature, 'hex')) ||
    !(await keeping.signIn(challenge_id, c.publicKey, digest(access), digest(refresh)))
  ) {
    reply.code(401);
    return { type: 'about:blank', title: 'invalid_signature' };
  }
  return { access_token: access, refresh_token: refresh, token_type: 'Bearer', expires_in: 900 };
});
const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`login floor listening on ${address}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(
    signal,
    () =>
      void app.close().then(async () => {
        await keeping.close();
        process.exit(0);
      }),
  );
}

// Issue #31 goal 4: disabling a user with 1,000 sessions takes effect on every node at the next
// request. Two installed `svc serve` processes share one store (a PostgreSQL schema; then one
// SQLite control database). The user signs in 20 times through both gateways (real challenges
// signed by its device key); 980 more sessions are copies of one of those rows with their own
// ids and token digests, written straight into the store (1,000 sign-ins take minutes on a busy
// 2-core machine). Both gateways answer requests with sessions of both kinds (so the SQLite
// store's bearer cache holds them in each process), then the user is disabled on node A, and the
// very next request with each of many sessions, on node B and on node A, is 401 invalid_token:
// no waiting, no retry. The time the disable took is reported.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { digestToken, pairingProofString } from '@svc/core';
import Database from 'better-sqlite3';
import pg from 'pg';
import { cleanEnv, enrolledProject, initProject, type StartedProcess, svcOk, tempDir } from '../helpers.js';
import { keygenInProcess as keygen } from '../in-process.js';
import { callJson, type ServedUrls, serveAll, signWith } from '../support/serve-all.js';
import { createSchemas, loginOverHttp, PG_URL, writePostgresProject } from '../support/store-projects.js';

/** How many sessions the user holds when it is disabled. */
const SESSIONS = 1_000;
/** Real sign-ins, alternating between the two gateways; the other sessions are copies of the first. */
const SIGN_INS = 20;

/** Copies of session `template` with new ids and token digests, in the store: `count` new sessions' access tokens. */
type CloneSessions = (template: string, count: number) => Promise<string[]>;

/** `count` new sessions' ids and token digests, with their access tokens (the contract's format: prefix, selector, secret). */
function mintSessions(count: number): { ids: string[]; access: string[]; accessDigests: string[]; refreshDigests: string[] } {
  const out = { ids: [] as string[], access: [] as string[], accessDigests: [] as string[], refreshDigests: [] as string[] };
  for (let i = 0; i < count; i++) {
    // A valid ULID body: "SEEDS" and 21 digits (Crockford base32 has them all).
    const selector = `SEEDS${i.toString().padStart(21, '0')}`;
    const access = `svca_${selector}${randomBytes(32).toString('base64url')}`;
    out.ids.push(`ses_${selector}`);
    out.access.push(access);
    out.accessDigests.push(digestToken(access));
    out.refreshDigests.push(digestToken(`svcr_${selector}${randomBytes(32).toString('base64url')}`));
  }
  return out;
}

/** The columns of a copy: the template's, but its own id and token digests. */
const copiedColumn = (c: string, id: string, access: string, refresh: string) =>
  c === 'id' ? id : c === 'access_digest' ? access : c === 'refresh_digest' ? refresh : `t.${c}`;

/** {@link CloneSessions} on the PostgreSQL schema `schema`: one INSERT ... SELECT over arrays. */
function pgClone(schema: () => string): CloneSessions {
  return async (template, count) => {
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    try {
      const columns = (
        await client.query<{ column_name: string }>(
          "SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'sessions' ORDER BY ordinal_position",
          [schema()],
        )
      ).rows.map((r) => r.column_name);
      const minted = mintSessions(count);
      const inserted = await client.query(
        `INSERT INTO ${schema()}.sessions (${columns.join(', ')})
         SELECT ${columns.map((c) => copiedColumn(c, 'v.id', 'v.a', 'v.r')).join(', ')}
         FROM ${schema()}.sessions t, unnest($2::text[], $3::text[], $4::text[]) AS v(id, a, r) WHERE t.id = $1`,
        [template, minted.ids, minted.accessDigests, minted.refreshDigests],
      );
      assert.equal(inserted.rowCount, count);
      return minted.access;
    } finally {
      await client.end();
    }
  };
}

/** {@link CloneSessions} on the SQLite control database `file`: one transaction of prepared inserts, by another connection. */
function sqliteClone(file: () => string): CloneSessions {
  return async (template, count) => {
    const db = new Database(file());
    try {
      db.pragma('busy_timeout = 10000');
      const columns = db
        .prepare<[], { name: string }>('PRAGMA table_info(sessions)')
        .all()
        .map((c) => c.name);
      const insert = db.prepare<[string, string, string, string]>(
        `INSERT INTO sessions (${columns.join(', ')})
         SELECT ${columns.map((c) => copiedColumn(c, '?', '?', '?')).join(', ')} FROM sessions t WHERE t.id = ?`,
      );
      const minted = mintSessions(count);
      // The placeholders in column order: id, access_digest, refresh_digest, then the template.
      const order = columns.filter((c) => c === 'id' || c === 'access_digest' || c === 'refresh_digest');
      db.transaction(() => {
        for (let i = 0; i < count; i++) {
          const value = { id: minted.ids[i], access_digest: minted.accessDigests[i], refresh_digest: minted.refreshDigests[i] };
          const [x, y, z] = order.map((c) => value[c as keyof typeof value] as string) as [string, string, string];
          assert.equal(insert.run(x, y, z, template).changes, 1);
        }
      })();
      return minted.access;
    } finally {
      db.close();
    }
  };
}

/** Pairs a new application device with `keyFile` through node `urls` (prepared by the admin); its subject. */
async function pairApplicationDevice(urls: ServedUrls, adminToken: string, keyFile: string, publicKey: string): Promise<string> {
  const prepared = await callJson(`${urls.node}/edge/0-alpha/pairing/prepare`, 'POST', adminToken, {
    realm: 'application',
    public_key: publicKey,
  });
  assert.equal(prepared.status, 201, JSON.stringify(prepared.body));
  const nodeId = (await callJson(`${urls.node}/.well-known/edge`, 'GET')).body.node_id as string;
  const complete = await callJson(`${urls.node}/edge/0-alpha/pairing/complete`, 'POST', undefined, {
    intent_id: prepared.body.intent_id,
    code: prepared.body.code,
    public_key: publicKey,
    signature: signWith(keyFile, pairingProofString({ nodeId, intentId: prepared.body.intent_id, publicKey })),
  });
  assert.equal(complete.status, 201, JSON.stringify(complete.body));
  return complete.body.device.subject as string;
}

/** One application-realm sign-in at a gateway (challenge, signature, session): its access token. */
async function appSignIn(app: string, keyFile: string, publicKey: string): Promise<{ session: string; access: string }> {
  const c = await callJson(`${app}/.svc/auth/v1/challenges`, 'POST', undefined, { public_key: publicKey });
  assert.equal(c.status, 201, JSON.stringify(c.body));
  const s = await callJson(`${app}/.svc/auth/v1/sessions`, 'POST', undefined, {
    challenge_id: c.body.challenge_id,
    signature: signWith(keyFile, c.body.challenge),
  });
  assert.equal(s.status, 201, JSON.stringify(s.body));
  return { session: s.body.session_id as string, access: s.body.access_token as string };
}

/**
 * The property on two nodes of one store (`nodes` started, an administrator signed in on node A,
 * `clone` copying sessions in that store), as a test's body.
 */
function disableReachesEveryNode(
  nodes: () => readonly [ServedUrls, ServedUrls],
  adminToken: () => string,
  dir: () => string,
  env: NodeJS.ProcessEnv,
  clone: CloneSessions,
) {
  return async (t: { diagnostic(message: string): void }) => {
    const [a, b] = nodes();
    const keyFile = join(dir(), 'app.pem');
    const publicKey = await keygen(keyFile, { env });
    const subject = await pairApplicationDevice(a, adminToken(), keyFile, publicKey);
    const signedIn: { session: string; access: string }[] = [];
    for (let i = 0; i < SIGN_INS; i++) signedIn.push(await appSignIn(i % 2 === 0 ? a.app : b.app, keyFile, publicKey));
    const copies = await clone((signedIn[0] as { session: string }).session, SESSIONS - SIGN_INS);
    const tokens = [...signedIn.map((s) => s.access), ...copies];
    assert.equal(new Set(tokens).size, SESSIONS, 'a thousand distinct sessions');

    // Both gateways answer with sessions issued on either node: each process has read (and, on
    // SQLite, cached) them. Past authentication, no upstream is attached: 404.
    const probe = tokens.filter((_, i) => i < SIGN_INS || i % 50 === 0 || i % 50 === 31);
    for (const node of [a, b]) {
      for (const token of probe) {
        const r = await callJson(`${node.app}/dashboard`, 'GET', token);
        assert.equal(r.status, 404, `accepted before the disable: ${JSON.stringify(r.body)}`);
      }
    }

    const t0 = performance.now();
    const disabled = await callJson(`${a.management}/v1/auth/users/${subject}/disable`, 'POST', adminToken(), {});
    const took = performance.now() - t0;
    assert.equal(disabled.status, 200, JSON.stringify(disabled.body));
    assert.equal(disabled.body.user.status, 'disabled');
    assert.equal(disabled.body.revoked_sessions, SESSIONS);
    t.diagnostic(`disabling a user with ${SESSIONS} sessions took ${took.toFixed(0)} ms (POST .../disable on node A)`);

    // The very next request with each probed session (and sessions never used on a gateway), node B first.
    const unused = tokens.filter((_, i) => i % 50 === 25);
    for (const [name, node] of [
      ['B', b],
      ['A', a],
    ] as const) {
      for (const token of [...probe, ...unused]) {
        const r = await callJson(`${node.app}/dashboard`, 'GET', token);
        assert.equal(r.status, 401, `node ${name}, the very next request after the disable`);
        assert.equal(r.body.code, 'invalid_token');
      }
    }
    const me = await callJson(`${b.app}/.svc/auth/v1/me`, 'GET', tokens[SESSIONS - 1]);
    assert.equal(me.status, 401, "node B's /.svc/auth/v1/me");
  };
}

describe('disabling a user with 1,000 sessions on two svc serve nodes of one PostgreSQL store', () => {
  const tmp = tempDir('svc-disable-nodes-pg-');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json') });
  const schemas = createSchemas();
  const nodes: StartedProcess<ServedUrls>[] = [];
  const schema = schemas.fresh();
  let adminToken = '';

  before(async () => {
    await writePostgresProject(tmp.dir, { schema, env });
    const p = await enrolledProject(tmp.dir, { env });
    for (let i = 0; i < 2; i++) nodes.push(await serveAll(p.dir, env));
    adminToken = (await loginOverHttp((nodes[0] as StartedProcess<ServedUrls>).ready.management, p.keyFile, p.publicKey)).access_token;
  });
  after(async () => {
    for (const n of nodes) await n.stop('SIGKILL');
    try {
      await schemas.dispose();
    } finally {
      tmp.cleanup();
    }
  });

  test(
    'each of its sessions is refused (401 invalid_token) at the very next request on node B and on node A',
    disableReachesEveryNode(
      () => nodes.map((n) => n.ready) as [ServedUrls, ServedUrls],
      () => adminToken,
      () => tmp.dir,
      env,
      pgClone(() => schema),
    ),
  );
});

describe('disabling a user with 1,000 sessions on two svc serve processes of one SQLite control database', () => {
  const tmp = tempDir('svc-disable-nodes-sqlite-');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json') });
  const nodes: StartedProcess<ServedUrls>[] = [];
  let adminToken = '';
  let controlDb = '';

  before(async () => {
    const dir = join(tmp.dir, 'project');
    const init = await initProject(dir, { env });
    controlDb = init.control_db;
    const keyFile = join(tmp.dir, 'admin.pem');
    const publicKey = await keygen(keyFile, { env });
    await svcOk(['auth', 'enroll', init.bootstrap_token, publicKey, dir], { env });
    const p = { dir, keyFile, publicKey };
    for (let i = 0; i < 2; i++) nodes.push(await serveAll(p.dir, env));
    adminToken = (await loginOverHttp((nodes[0] as StartedProcess<ServedUrls>).ready.management, p.keyFile, p.publicKey)).access_token;
  });
  after(async () => {
    for (const n of nodes) await n.stop('SIGKILL');
    tmp.cleanup();
  });

  test(
    'each of its sessions is refused (401 invalid_token) at the very next request in the other process, whose bearer cache held them',
    disableReachesEveryNode(
      () => nodes.map((n) => n.ready) as [ServedUrls, ServedUrls],
      () => adminToken,
      () => tmp.dir,
      env,
      sqliteClone(() => controlDb),
    ),
  );
});

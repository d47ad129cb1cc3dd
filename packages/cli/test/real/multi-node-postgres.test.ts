import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cleanEnv, enrolledProject, problemCode, type ServerProcess, startServer, svcOk, tempDir } from '../helpers.js';
import {
  auditEvents,
  createSchemas,
  dpopProofFor,
  loginOverHttp,
  me,
  refresh,
  revoke,
  type TokenPair,
  writePostgresProject,
} from '../support/store-projects.js';

/**
 * A project whose control state is one fresh PostgreSQL schema, an enrolled admin, and two
 * `svc auth serve` processes ("nodes") on it. Servers and schemas go in `after`.
 */
function twoNodeCluster(authConfig: string) {
  const tmp = tempDir('svc-multi-node-');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json') });
  const schemas = createSchemas();
  const servers: ServerProcess[] = [];
  const c = {
    env,
    dir: '',
    keyFile: '',
    publicKey: '',
    a: '',
    b: '',
    /** A new session signed in on `url`. */
    login: (url: string): Promise<TokenPair> => loginOverHttp(url, c.keyFile, c.publicKey),
  };
  before(async () => {
    await writePostgresProject(tmp.dir, { schema: schemas.fresh(), authConfig, env });
    const p = await enrolledProject(tmp.dir, { env });
    Object.assign(c, { dir: p.dir, keyFile: p.keyFile, publicKey: p.publicKey });
    for (const key of ['a', 'b'] as const) {
      const s = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', p.dir], { env });
      servers.push(s);
      c[key] = s.url;
    }
    assert.notEqual(c.a, c.b);
  });
  after(async () => {
    for (const s of servers) await s.stop('SIGKILL');
    try {
      await schemas.dispose();
    } finally {
      tmp.cleanup();
    }
  });
  return c;
}

async function assertInvalidToken(url: string, accessToken: string, what: string): Promise<void> {
  const res = await me(url, accessToken);
  assert.equal(res.status, 401, what);
  assert.equal(await problemCode(res), 'invalid_token', what);
}

describe('two svc auth serve nodes on one PostgreSQL store', () => {
  // A wide grace interval: the concurrent refreshes below must all land inside it.
  const c = twoNodeCluster(':auth/refresh-reuse-grace-seconds 120');

  test('a session issued by node A is accepted by node B', async () => {
    const pair = await c.login(c.a);
    const onB = await me(c.b, pair.access_token);
    assert.equal(onB.status, 200);
    const principal = (await onB.json()) as { session: string; realm: string };
    assert.equal(principal.session, pair.session_id);
    assert.equal(principal.realm, 'management');
    assert.equal((await me(c.a, pair.access_token)).status, 200);
  });

  test('a logout on node A is refused on the very next request to node B (invalid_token)', async () => {
    const pair = await c.login(c.a);
    assert.equal((await me(c.b, pair.access_token)).status, 200);
    const out = await revoke(c.a, pair.access_token);
    assert.equal(out.status, 200);
    assert.deepEqual(await out.json(), { session_id: pair.session_id, revoked: true });
    await assertInvalidToken(c.b, pair.access_token, 'node B after the logout on A');
    const r = await refresh(c.b, pair.refresh_token);
    assert.equal(r.status, 401);
    assert.equal(await problemCode(r), 'invalid_refresh_token');
  });

  test('an admin revocation of a session on node B is refused at once on node A', async () => {
    const victim = await c.login(c.a);
    const admin = await c.login(c.b);
    assert.equal((await me(c.a, victim.access_token)).status, 200);
    const res = await revoke(c.b, admin.access_token, victim.session_id);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { session_id: victim.session_id, revoked: true });
    await assertInvalidToken(c.a, victim.access_token, 'node A after the revocation on B');
    const r = await refresh(c.a, victim.refresh_token);
    assert.equal(r.status, 401);
    assert.equal(await problemCode(r), 'invalid_refresh_token');
    assert.equal((await me(c.a, admin.access_token)).status, 200, "the admin's own session is unaffected");
  });

  test('50 concurrent refreshes of one refresh token spread across both nodes all get the one live pair', async () => {
    const first = await c.login(c.a);
    const responses = await Promise.all(Array.from({ length: 50 }, (_, i) => refresh(i % 2 === 0 ? c.a : c.b, first.refresh_token)));
    const pairs: TokenPair[] = [];
    for (const res of responses) {
      assert.ok(res.status < 500, `no 5xx under contention (got ${res.status})`);
      if (res.status === 200) pairs.push((await res.json()) as TokenPair);
      else await res.body?.cancel();
    }
    // Inside the grace interval every presentation of the immediately previous token is answered
    // with the pair its rotation issued: all 50 callers hold the same, one live pair.
    assert.equal(pairs.length, 50, 'every presentation inside the grace interval got a pair');
    assert.ok(
      pairs.every((p) => p.session_id === first.session_id),
      'every pair belongs to the one session',
    );
    assert.equal(new Set(pairs.map((p) => p.refresh_token)).size, 1, 'never two live pairs');
    const live = pairs[0] as TokenPair;
    for (const url of [c.a, c.b]) {
      assert.equal((await me(url, live.access_token)).status, 200);
      assert.equal((await me(url, first.access_token)).status, 401);
    }
    // The live pair is a whole pair: its refresh token rotates, on the other node too.
    const next = await refresh(c.b, live.refresh_token);
    assert.equal(next.status, 200);
    assert.equal((await me(c.a, ((await next.json()) as TokenPair).access_token)).status, 200);
  });

  test('audit verify passes after the logouts, revocations and concurrent rotations on both nodes', async () => {
    const r = await svcOk(['auth', 'audit', 'verify', c.dir], { env: c.env });
    assert.match(r.stdout, /^audit chain ok: \d+ events/);
    const types = (await auditEvents(c.dir, c.env)).map((e) => e.type);
    assert.ok(types.includes('session.rotated_in_grace'), 'the concurrent presentations were answered in grace');
    assert.equal(types.filter((t) => t === 'session.refresh_reused').length, 0, 'no reuse was detected inside the grace interval');
  });
});

describe('failed sign-ins spread over two nodes on one PostgreSQL store share one budget', () => {
  const c = twoNodeCluster('');

  test('30 bad sign-ins alternating between the nodes use up the budget: the next is 429 rate_limited on both', async () => {
    const bad = (url: string, i: number) =>
      fetch(`${url}/v1/auth/sessions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ challenge_id: `chl_01M81B5H80VQ6PF8VXZGD2${String(i).padStart(4, '0')}`, signature: 'ab'.repeat(64) }),
      });
    for (let i = 0; i < 30; i++) {
      const r = await bad(i % 2 === 0 ? c.a : c.b, i);
      assert.equal(await problemCode(r), 'invalid_challenge', `attempt ${i + 1}`);
    }
    for (const url of [c.a, c.b]) {
      const r = await bad(url, 99);
      assert.equal(r.status, 429, url === c.a ? 'node A' : 'node B');
      assert.equal(await problemCode(r), 'rate_limited');
      assert.ok(Number(r.headers.get('retry-after')) >= 1);
    }
  });

  test('two-node loopback lockout: with the shared budget spent by bad sign-ins, the administrator still signs in and refreshes on both nodes', async () => {
    const bad = (url: string, i: number) =>
      fetch(`${url}/v1/auth/sessions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ challenge_id: `chl_01M81B5H80VQ6PF8VXZGD3${String(i).padStart(4, '0')}`, signature: 'ab'.repeat(64) }),
      });
    for (let i = 0; i < 35; i++) await (await bad(i % 2 === 0 ? c.a : c.b, i)).arrayBuffer();
    assert.equal(await problemCode(await bad(c.b, 99)), 'rate_limited', 'the flood is bounded on the shared budget');
    for (const url of [c.a, c.b]) {
      const pair = await c.login(url);
      assert.equal(pair.realm, 'management', url === c.a ? 'node A' : 'node B');
      const rotated = await refresh(url === c.a ? c.b : c.a, pair.refresh_token);
      assert.equal(rotated.status, 200, 'a valid current refresh token rotates on the other node too');
    }
  });
});

describe('refresh-token reuse detected on one node revokes the session on both (grace 0)', () => {
  const c = twoNodeCluster(':auth/refresh-reuse-grace-seconds 0');

  test('a retired refresh token presented on node B is refresh_token_reused and the session dies on both nodes', async () => {
    const first = await c.login(c.a);
    const rotated = await refresh(c.a, first.refresh_token);
    assert.equal(rotated.status, 200);
    const current = (await rotated.json()) as TokenPair;
    assert.equal((await me(c.b, current.access_token)).status, 200);

    const reused = await refresh(c.b, first.refresh_token);
    assert.equal(reused.status, 401);
    assert.equal(await problemCode(reused), 'refresh_token_reused');

    await assertInvalidToken(c.a, current.access_token, 'the current access token on A');
    await assertInvalidToken(c.b, current.access_token, 'the current access token on B');
    for (const url of [c.a, c.b]) {
      const r = await refresh(url, current.refresh_token);
      assert.equal(r.status, 401);
      assert.equal(await problemCode(r), 'invalid_refresh_token', 'the current refresh token died with the session');
    }
    // Presenting the reused token again does not record a second reuse.
    const again = await refresh(c.a, first.refresh_token);
    assert.equal(again.status, 401);
    await again.body?.cancel();

    const reuseEvents = (await auditEvents(c.dir, c.env)).filter(
      (e) => e.type === 'session.refresh_reused' && e.session_id === first.session_id,
    );
    assert.equal(reuseEvents.length, 1, 'the audit log records the reuse once');
  });

  test('audit verify passes after the reuse detection', async () => {
    const r = await svcOk(['auth', 'audit', 'verify', c.dir], { env: c.env });
    assert.match(r.stdout, /^audit chain ok: \d+ events/);
  });
});

/**
 * `POST /v1/auth/refresh` to `nodeUrl` as if the client had reached `asUrl` (its `Host`): two
 * nodes behind one load-balanced address see the same `htu`.
 */
function refreshVia(nodeUrl: string, asUrl: string, refreshToken: string, proof: string): Promise<{ status: number; code: string }> {
  const body = JSON.stringify({ refresh_token: refreshToken });
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${nodeUrl}/v1/auth/refresh`,
      {
        method: 'POST',
        headers: { host: new URL(asUrl).host, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), dpop: proof },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          text += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, code: (JSON.parse(text) as { code?: string }).code ?? '' }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('DPoP-bound refresh tokens on two nodes sharing one PostgreSQL store (the default :refresh)', () => {
  const c = twoNodeCluster('');

  test('replayed proof (same jti) on the second node sharing PostgreSQL: 401 invalid_dpop_proof', async () => {
    const first = await c.login(c.a);
    const htu = `${c.a}/v1/auth/refresh`;
    const proof = dpopProofFor(c.keyFile, 'POST', htu);
    const onA = await refreshVia(c.a, c.a, first.refresh_token, proof);
    assert.equal(onA.status, 200, 'the proof is good once');
    const current = await c.login(c.a);
    const replayed = await refreshVia(c.b, c.a, current.refresh_token, proof);
    assert.deepEqual(replayed, { status: 401, code: 'invalid_dpop_proof' }, 'node B remembers the jti node A accepted');
    const fresh = await refreshVia(c.b, c.a, current.refresh_token, dpopProofFor(c.keyFile, 'POST', htu));
    assert.equal(fresh.status, 200, 'a fresh proof for the same URL is accepted on node B');
  });

  test('copied refresh token used without the key on node B: 401, and the session lives on both nodes', async () => {
    const pair = await c.login(c.a);
    const stolen = await refresh(c.b, pair.refresh_token, null);
    assert.equal(stolen.status, 401);
    assert.equal(await problemCode(stolen), 'invalid_dpop_proof');
    assert.equal((await me(c.a, pair.access_token)).status, 200, 'the access token still works as a bearer on A');
    assert.equal((await me(c.b, pair.access_token)).status, 200, 'and on B');
    const owner = await refresh(c.b, pair.refresh_token);
    assert.equal(owner.status, 200, 'the holder of the key still refreshes');
  });
});

// Keys of the cluster, not the node (#28 part 3): two `svc serve` nodes, each with its own
// control directory (its own node key), on one PostgreSQL store, in upstream mode. The assertion
// key set lives in the store, sealed under the key-encryption key both nodes are given: both
// serve the same JWK Set, an assertion node B signs verifies against node A's JWK Set, a rotation
// started on node A is published by node B before any node signs with it, and B then signs with
// it. Attacks: what a copy of the database holds reveals no private key; a sealed key with one bit
// flipped is refused, never used.
import assert from 'node:assert/strict';
import { createPublicKey, randomBytes, verify } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { openAssertionKeySet, parseKeyEncryptionKey } from '@svc/core';
import pg from 'pg';
import { cleanEnv, enrolledProject, keygen, type StartedProcess, svc, svcOk, tempDir, withTimeout } from '../helpers.js';
import { currentCredentials } from '../support/credentials-file.js';
import { pairComplete, type ServedUrls, serveAll } from '../support/serve-all.js';
import { createSchemas, PG_URL, writePostgresProject } from '../support/store-projects.js';

// biome-ignore lint/suspicious/noExplicitAny: JSON answers are inspected field by field
type Json = any;
type Jwks = { keys: { kid: string; x: string }[] };

const KEK = randomBytes(32).toString('base64');

/** Polls `check` every 100 ms until it returns a value, for at most `ms`; fails naming `what`. */
async function eventually<T>(what: string, check: () => Promise<T | null>, ms = 15_000): Promise<T> {
  return withTimeout(
    (async () => {
      for (;;) {
        const v = await check();
        if (v !== null) return v;
        await new Promise((r) => setTimeout(r, 100));
      }
    })(),
    what,
    ms,
  );
}

const headerOf = (jws: string) => JSON.parse(Buffer.from(jws.split('.')[0] as string, 'base64url').toString()) as { kid: string };
const claimsOf = (jws: string) => JSON.parse(Buffer.from(jws.split('.')[1] as string, 'base64url').toString()) as { iss: string };

/** Whether `jws` verifies (EdDSA) against a key of `jwks` with its `kid`. */
function verifiesAgainst(jws: string, jwks: Jwks): boolean {
  const key = jwks.keys.find((k) => k.kid === headerOf(jws).kid);
  if (key === undefined) return false;
  const [h, p, s] = jws.split('.') as [string, string, string];
  const publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: key.x }, format: 'jwk' });
  return verify(null, Buffer.from(`${h}.${p}`), publicKey, Buffer.from(s, 'base64url'));
}

describe('two svc serve nodes on one PostgreSQL store share the assertion key set (keys of the cluster)', () => {
  const tmp = tempDir('svc-cluster-keys-');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json'), SVC_TEST_KEK: KEK });
  const deviceCreds = join(tmp.dir, 'device', 'creds.json');
  const deviceEnv = cleanEnv({ HOME: join(tmp.dir, 'device'), SVC_CREDENTIALS: deviceCreds });
  const schemas = createSchemas();
  const schema = schemas.fresh();
  const nodes: StartedProcess<ServedUrls>[] = [];
  let upstream: Server;
  let dir = '';
  let appToken = '';
  let a: ServedUrls;
  let b: ServedUrls;
  const nodeEnv = (name: string) => ({ ...env, SVC_CONTROL_DIR: join(tmp.dir, `control-${name}`) });

  /** The Svc-Assertion the gateway at `app` attached to a request (the upstream echoes it). */
  async function assertionVia(app: string): Promise<string> {
    const res = await fetch(`${app}/whoami`, { headers: { authorization: `Bearer ${appToken}` } });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { assertion: string }).assertion;
  }
  const jwksOf = async (app: string): Promise<Jwks> => (await (await fetch(`${app}/.svc/jwks.json`)).json()) as Jwks;
  const nodeIdOf = async (node: string): Promise<string> => ((await (await fetch(`${node}/.well-known/edge`)).json()) as Json).node_id;

  async function withDb<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  }
  const storedRow = () =>
    withDb(
      async (c) => (await c.query(`SELECT version, key_set FROM ${schema}.assertion_keys`)).rows[0] as { version: string; key_set: string },
    );
  const writeKeySet = (keySet: string) =>
    withDb((c) => c.query(`UPDATE ${schema}.assertion_keys SET key_set = $1, version = version + 1`, [keySet]));

  before(async () => {
    upstream = createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ assertion: req.headers['svc-assertion'] ?? null }));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const port = (upstream.address() as AddressInfo).port;
    await writePostgresProject(tmp.dir, { schema, env });
    const p = await enrolledProject(tmp.dir, { env });
    dir = p.dir;
    const edn = join(dir, 'project.edn');
    writeFileSync(
      edn,
      readFileSync(edn, 'utf8').replace(
        /^\{/,
        `{:svc/app-upstream "http://127.0.0.1:${port}"\n :svc/key-encryption-key #svc/secret "env:SVC_TEST_KEK"\n `,
      ),
    );
    for (const name of ['a', 'b']) nodes.push(await serveAll(dir, nodeEnv(name)));
    [a, b] = nodes.map((n) => n.ready) as [ServedUrls, ServedUrls];
    assert.notEqual(await nodeIdOf(a.node), await nodeIdOf(b.node), 'two nodes, two node keys');

    // An application device paired through node A, completed and signed in on node B.
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', a.management], { env });
    mkdirSync(join(tmp.dir, 'device'), { recursive: true });
    const keyFile = join(tmp.dir, 'device', 'app.pem');
    const pub = await keygen(keyFile, { env: deviceEnv });
    const prepared = JSON.parse(
      (
        await svcOk(['auth', 'pair', '--node-url', a.node, '--realm', 'application', '--device-key', pub, '--name', 'app', '--json'], {
          env,
        })
      ).stdout,
    );
    const nodeB = await nodeIdOf(b.node);
    await pairComplete({ nodeUrl: b.node, nodeId: nodeB, prepared, keyFile, env: deviceEnv });
    await svcOk(['auth', 'login', '--realm', 'application', '--url', b.app, '--key', keyFile], { env: deviceEnv });
    appToken = currentCredentials(deviceCreds).access_token as string;
  });

  after(async () => {
    for (const n of nodes) await n.stop('SIGKILL');
    await new Promise((r) => upstream?.close(r));
    try {
      await schemas.dispose();
    } finally {
      tmp.cleanup();
    }
  });

  test("both nodes serve the same JWK Set, and an assertion node B signs verifies against node A's", async () => {
    const [onA, onB] = [await jwksOf(a.app), await jwksOf(b.app)];
    assert.equal(onA.keys.length, 1);
    assert.deepEqual(onB, onA);
    const fromB = await assertionVia(b.app);
    assert.equal(claimsOf(fromB).iss, await nodeIdOf(b.node), 'node B signed it, as its own issuer');
    assert.ok(verifiesAgainst(fromB, onA), "node B's assertion verifies with node A's JWK Set");
    assert.ok(verifiesAgainst(await assertionVia(a.app), onB));
  });

  test('a rotation started on node A is published by node B before use; B switches at the stored time and signs with the new key', async () => {
    const oldKid = headerOf(await assertionVia(b.app)).kid;
    const rotated = JSON.parse((await svcOk(['app', 'rotate-key', dir, '--json'], { env: nodeEnv('a') })).stdout) as { kid: string };
    assert.notEqual(rotated.kid, oldKid);
    const onB = await eventually('node B to publish the key rotated on node A', async () => {
      const jwks = await jwksOf(b.app);
      return jwks.keys.some((k) => k.kid === rotated.kid) ? jwks : null;
    });
    assert.deepEqual(onB.keys.map((k) => k.kid).sort(), [oldKid, rotated.kid].sort());
    assert.equal(headerOf(await assertionVia(b.app)).kid, oldKid, 'published, but not yet signing');
    assert.equal(headerOf(await assertionVia(a.app)).kid, oldKid);

    // Time passes: the stored schedule says the new key signs 2 s from now (what the 600 s of
    // pre-publication come to). Only times change; the sealed private halves are left as they are.
    const row = await storedRow();
    const set = JSON.parse(row.key_set) as { version: 1; keys: Json[] };
    const switchAt = new Date(Date.now() + 2000).toISOString();
    for (const k of set.keys) {
      if (k.kid === rotated.kid) k.signs_from = switchAt;
      if (k.kid === oldKid) {
        k.signs_until = switchAt;
        k.published_until = new Date(Date.now() + 300_000).toISOString();
      }
    }
    await writeKeySet(JSON.stringify(set));
    for (const [name, node] of [
      ['B', b],
      ['A', a],
    ] as const) {
      const fresh = await eventually(`node ${name} to sign with the rotated key`, async () => {
        const jws = await assertionVia(node.app);
        return headerOf(jws).kid === rotated.kid ? jws : null;
      });
      assert.ok(verifiesAgainst(fresh, await jwksOf(a.app)), `node ${name}'s new assertion verifies against node A's JWK Set`);
      assert.ok(verifiesAgainst(fresh, await jwksOf(b.app)));
    }
    const trail = (await svcOk(['auth', 'audit', dir, '--json'], { env: nodeEnv('a') })).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; data: Json });
    assert.deepEqual(
      trail.filter((e) => e.type === 'app.assertion_keys_created').map((e) => e.data.source),
      ['generated'],
      'the set was created once, by whichever node started first',
    );
    assert.deepEqual(
      trail.filter((e) => e.type === 'app.assertion_key_rotated').map((e) => [e.data.kid, e.data.previous_kid]),
      [[rotated.kid, oldKid]],
    );
  });

  test('attack: a copy of the PostgreSQL database holds no private key (sealed under a key the database never sees)', async () => {
    const row = await storedRow();
    const { set } = openAssertionKeySet(row.key_set, [parseKeyEncryptionKey(KEK)], { requireSealed: true });
    const secrets = set.keys.flatMap((k) => (k.d === null ? [] : [k.d]));
    assert.ok(secrets.length > 0, 'the set has private keys to look for');
    const dump = await withDb(async (c) => {
      const tables = (await c.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, [schema])).rows;
      let text = '';
      for (const t of tables) {
        const rows = await c.query(`SELECT row_to_json(x)::text AS j FROM ${schema}."${t.table_name as string}" x`);
        for (const r of rows.rows) text += `${r.j as string}\n`;
      }
      return text;
    });
    assert.ok(dump.includes(set.keys[0]?.x ?? '-'), 'the dump is real: it holds the public keys');
    for (const d of secrets) {
      const raw = Buffer.from(d, 'base64url');
      for (const form of [d, raw.toString('base64'), raw.toString('hex')]) assert.ok(!dump.includes(form), 'a private key in the dump');
    }
    assert.ok(!dump.includes(KEK) && !dump.includes(Buffer.from(KEK, 'base64').toString('hex')), 'the KEK in the dump');
  });

  test('attack: a sealed key with one bit flipped in the database is refused (the nodes keep the last good set; a command says why), never used', async () => {
    const before = await storedRow();
    const goodKid = headerOf(await assertionVia(b.app)).kid;
    const set = JSON.parse(before.key_set) as { keys: { kid: string; d: string | null }[] };
    const target = set.keys.find((k) => k.kid === goodKid);
    const sealed = target?.d;
    assert.ok(target !== undefined && typeof sealed === 'string' && sealed.startsWith('sealed.v1.'));
    const parts = sealed.split('.');
    const body = Buffer.from(parts[4] as string, 'base64url');
    body[5] = (body[5] as number) ^ 0x10;
    parts[4] = body.toString('base64url');
    target.d = parts.join('.');
    await writeKeySet(JSON.stringify(set));
    try {
      const r = await svc(['app', 'rotate-key', dir, '--immediate'], { env: nodeEnv('a') });
      assert.equal(r.code, 1);
      assert.match(
        r.stderr,
        /does not open under the key-encryption key \S+: the stored key was altered or moved; no assertion was signed with it/,
      );
      assert.equal((await storedRow()).version, String(Number(before.version) + 1), 'the refused rotation wrote nothing');
      await eventually('node B to report the altered key set', async () =>
        /assertion key set reload failed/.test(nodes[1]?.stderr() ?? '') ? true : null,
      );
      const stillGood = await assertionVia(b.app);
      assert.equal(headerOf(stillGood).kid, goodKid, 'node B signs with the last good set');
      assert.ok(verifiesAgainst(stillGood, await jwksOf(a.app)));
    } finally {
      await writeKeySet(before.key_set);
    }
  });
});

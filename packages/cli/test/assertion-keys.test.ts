import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  type AssertionKeySetJson,
  type AuthDeps,
  firstAssertionKeySet,
  makePrincipal,
  openAssertionKeySet,
  parseKeyEncryptionKey,
} from '@svc/core';
import { ASSERTION_KEY_OVERLAP_SECONDS, ASSERTION_KEY_PREPUBLISH_SECONDS } from '@svc/core/settings';
import { createFakeClock, createMemoryStore, type MemoryStore, makeDeps } from '@svc/store-testkit';
import {
  type AssertionKeyProject,
  assertionKeyCustody,
  assertionKeysFile,
  gatewayAssertionSigner,
  rotateProjectAssertionKeys,
} from '../../runtime/src/assertion-keys.js';
import { cleanEnv, tempDir } from './helpers.js';
// In process: `svc app rotate-key` is an offline command on the embedded store.
import { initProjectInProcess as initProject, svcInProcess as svc, svcOkInProcess as svcOk } from './in-process.js';

const principal = makePrincipal({
  subject: 'dev_alice',
  realm: 'application',
  session: 'ses_alice',
  device: 'dev_alice',
  claims: { amr: ['device_key'], auth_time: '2026-11-23T11:59:00.000Z', exp: '2026-12-23T11:59:00.000Z' },
});
const REQ = { method: 'GET', protocol: 'http', host: 'app.example', url: '/' };
const app = { upstream: 'http://127.0.0.1:3000', audience: null };
const kidOf = (token: string) => (JSON.parse(Buffer.from(token.split('.')[0] as string, 'base64url').toString()) as { kid: string }).kid;
const quiet = { info() {}, warn() {}, error() {} };
const kekText = () => randomBytes(32).toString('base64');

/** A node of a project on a shared store (PostgreSQL-like: sealed keys required) or on the embedded one. */
function projectOf(
  controlDir: string,
  opts: { readonly shared: boolean; readonly kek?: string | null; readonly previous?: string | null },
): { project: AssertionKeyProject; env: NodeJS.ProcessEnv } {
  const env: NodeJS.ProcessEnv = {};
  if (opts.kek !== undefined && opts.kek !== null) env.TEST_KEK = opts.kek;
  if (opts.previous !== undefined && opts.previous !== null) env.TEST_KEK_PREVIOUS = opts.previous;
  const project: AssertionKeyProject = {
    controlDir,
    controlDb: join(controlDir, 'control.db'),
    file: join(controlDir, '..', '..', 'project.edn'),
    config: {
      store: {
        alias: 'store',
        package: opts.shared ? 'svc-store-postgres' : 'svc-store-sqlite',
        module: null,
        activate: [],
        config: new Map(),
      },
      keyEncryption: {
        current: env.TEST_KEK === undefined ? null : { source: 'env', name: 'TEST_KEK' },
        previous: env.TEST_KEK_PREVIOUS === undefined ? null : { source: 'env', name: 'TEST_KEK_PREVIOUS' },
      },
    },
  } as AssertionKeyProject;
  return { project, env };
}

/** Two nodes sharing one memory store and one clock. */
function cluster() {
  const clock = createFakeClock(Date.parse('2026-11-23T12:00:00.000Z'));
  const store = createMemoryStore();
  const a = makeDeps(store, clock);
  const b = makeDeps(store.openPeer(), clock);
  return { clock, store, a, b };
}

async function storedEvents(deps: AuthDeps, type: string) {
  return (await deps.store.listAuditEvents({ afterSeq: 0, limit: 1000 })).filter((e) => e.type === type);
}

describe("the cluster's assertion key set, in the control store", () => {
  const tmp = tempDir();
  after(() => tmp.cleanup());
  let n = 0;
  const dir = () => join(tmp.dir, `node-${++n}`, '.svc', 'control');

  test('the first start creates the set in the store (audited); a second node serves the same JWK Set and signs with the same key', async () => {
    const { a, b } = cluster();
    const kek = kekText();
    const nodeA = projectOf(dir(), { shared: true, kek });
    const nodeB = projectOf(dir(), { shared: true, kek });
    const signerA = await gatewayAssertionSigner(nodeA.project, a, { app, issuer: 'NODE-A', log: quiet, env: nodeA.env });
    const signerB = await gatewayAssertionSigner(nodeB.project, b, { app, issuer: 'NODE-B', log: quiet, env: nodeB.env });
    try {
      assert.equal(signerA.jwks().keys.length, 1);
      assert.deepEqual(signerB.jwks(), signerA.jwks());
      assert.equal(kidOf(signerB.sign(principal, REQ)), signerA.jwks().keys[0]?.kid);
      const created = await storedEvents(a, 'app.assertion_keys_created');
      assert.equal(created.length, 1, 'created once, by the first node');
      assert.equal(created[0]?.data.source, 'generated');
      assert.equal(existsSync(assertionKeysFile(nodeA.project)), false, 'no key file is written');
    } finally {
      signerA.close();
      signerB.close();
    }
  });

  test('a rotation saved by one node is published by the other before any node signs with it, and used after the switch', async () => {
    const { a, b, clock } = cluster();
    const kek = kekText();
    const nodeA = projectOf(dir(), { shared: true, kek });
    const nodeB = projectOf(dir(), { shared: true, kek });
    const signerB = await gatewayAssertionSigner(nodeB.project, b, { app, issuer: 'NODE-B', log: quiet, env: nodeB.env });
    try {
      const oldKid = kidOf(signerB.sign(principal, REQ));
      clock.advance(1000);
      const r = await rotateProjectAssertionKeys(nodeA.project, a, quiet, { immediate: false, env: nodeA.env });
      assert.equal(r.outcome, 'rotated');
      const nextKid = r.outcome === 'rotated' ? r.next.kid : '';
      await signerB.keys.refresh(); // what B's timer does every second
      assert.deepEqual(
        signerB
          .jwks()
          .keys.map((k) => k.kid)
          .sort(),
        [oldKid, nextKid].sort(),
        'B publishes the next key at once',
      );
      assert.equal(kidOf(signerB.sign(principal, REQ)), oldKid, 'B does not sign with it before the switch');
      clock.advance(ASSERTION_KEY_PREPUBLISH_SECONDS * 1000 - 1);
      assert.equal(kidOf(signerB.sign(principal, REQ)), oldKid);
      clock.advance(1);
      assert.equal(kidOf(signerB.sign(principal, REQ)), nextKid, 'B signs with the next key from the stored switch time');
      clock.advance(ASSERTION_KEY_OVERLAP_SECONDS * 1000);
      assert.deepEqual(
        signerB.jwks().keys.map((k) => k.kid),
        [nextKid],
      );
      const rotated = await storedEvents(a, 'app.assertion_key_rotated');
      assert.deepEqual(
        rotated.map((e) => [e.data.kid, e.data.previous_kid]),
        [[nextKid, oldKid]],
      );
    } finally {
      signerB.close();
    }
  });

  test('an existing assertion-keys.json is imported once (its keys keep verifying), audited, and removed', async () => {
    const { a, b, clock } = cluster();
    const kek = kekText();
    const nodeA = projectOf(dir(), { shared: true, kek });
    const legacy = firstAssertionKeySet(freshPair(), clock.now() - 86_400_000);
    mkdirSync(nodeA.project.controlDir, { recursive: true, mode: 0o700 });
    writeFileSync(assertionKeysFile(nodeA.project), JSON.stringify(legacy), { mode: 0o600 });
    const logged: object[] = [];
    const log = { ...quiet, info: (o: object) => logged.push(o) };
    const signer = await gatewayAssertionSigner(nodeA.project, a, { app, issuer: 'NODE-A', log, env: nodeA.env });
    signer.close();
    assert.equal(kidOf(signer.sign(principal, REQ)), legacy.keys[0]?.kid, 'the imported key signs');
    assert.equal(existsSync(assertionKeysFile(nodeA.project)), false, 'the file is removed once the store holds the set');
    assert.ok(logged.some((o) => (o as { event?: string }).event === 'gateway.assertion_keys_imported'));
    const created = await storedEvents(a, 'app.assertion_keys_created');
    assert.deepEqual(
      created.map((e) => e.data.source),
      ['imported'],
    );
    // Another node that still has a (stale) file of its own: the cluster's set wins, its file goes.
    const nodeB = projectOf(dir(), { shared: true, kek });
    const stale: AssertionKeySetJson = firstAssertionKeySet(freshPair(), clock.now());
    mkdirSync(nodeB.project.controlDir, { recursive: true, mode: 0o700 });
    writeFileSync(assertionKeysFile(nodeB.project), JSON.stringify(stale), { mode: 0o600 });
    const signerB = await gatewayAssertionSigner(nodeB.project, b, { app, issuer: 'NODE-B', log: quiet, env: nodeB.env });
    signerB.close();
    assert.deepEqual(signerB.jwks(), signer.jwks());
    assert.equal((await storedEvents(a, 'app.assertion_keys_created')).length, 1, 'imported once');
    assert.equal(existsSync(assertionKeysFile(nodeB.project)), false);
  });

  test('a stored key whose sealed private half had one bit flipped is refused at start, with a clear error, and never signs', async () => {
    const { a, b } = cluster();
    const kek = kekText();
    const node = projectOf(dir(), { shared: true, kek });
    (await gatewayAssertionSigner(node.project, a, { app, issuer: 'NODE-A', log: quiet, env: node.env })).close();
    const stored = await a.store.getAssertionKeys();
    assert.ok(stored !== null);
    const tampered = flipOneBitOfSealedKey(stored.keySet);
    await a.store.saveAssertionKeys({ expectedVersion: stored.version, keySet: tampered, now: a.clock.now() }, []);
    const other = projectOf(dir(), { shared: true, kek });
    await assert.rejects(
      gatewayAssertionSigner(other.project, b, { app, issuer: 'NODE-B', log: quiet, env: other.env }),
      /does not open under the key-encryption key \S+: the stored key was altered or moved; no assertion was signed with it/,
    );
  });

  test('a tampered set met by a running node is not taken: it keeps signing with the last good set and reports why', async () => {
    const { a, b } = cluster();
    const kek = kekText();
    const node = projectOf(dir(), { shared: true, kek });
    const errors: object[] = [];
    const signer = await gatewayAssertionSigner(node.project, a, {
      app,
      issuer: 'NODE-A',
      log: { ...quiet, error: (o: object) => errors.push(o) },
      env: node.env,
    });
    try {
      const good = kidOf(signer.sign(principal, REQ));
      const r = await rotateProjectAssertionKeys(node.project, b, quiet, { immediate: true, env: node.env });
      assert.equal(r.outcome, 'rotated');
      const stored = await a.store.getAssertionKeys();
      assert.ok(stored !== null);
      await a.store.saveAssertionKeys(
        { expectedVersion: stored.version, keySet: flipOneBitOfSealedKey(stored.keySet), now: a.clock.now() },
        [],
      );
      await signer.keys.refresh();
      assert.equal(kidOf(signer.sign(principal, REQ)), good, 'the last good set still signs');
      assert.equal(errors.length, 1);
    } finally {
      signer.close();
    }
  });

  test('a sealed private half moved onto another key does not open (the kid is its additional data)', async () => {
    const { a, clock } = cluster();
    const kek = kekText();
    const node = projectOf(dir(), { shared: true, kek });
    await rotateProjectAssertionKeys(node.project, a, quiet, { immediate: false, env: node.env });
    clock.advance(1000);
    await rotateProjectAssertionKeys(node.project, a, quiet, { immediate: false, env: node.env });
    const stored = await a.store.getAssertionKeys();
    const set = JSON.parse(stored?.keySet ?? '') as { keys: { d: string | null }[] };
    const [first, second] = set.keys;
    assert.ok(first?.d && second?.d);
    [first.d, second.d] = [second.d, first.d];
    assert.throws(
      () => openAssertionKeySet(JSON.stringify(set), [parseKeyEncryptionKey(kek)], { requireSealed: true }),
      /does not open under the key-encryption key/,
    );
  });

  test('a node given another key-encryption key refuses to start, naming both key ids (never the keys)', async () => {
    const { a, b } = cluster();
    const right = kekText();
    const wrong = kekText();
    const nodeA = projectOf(dir(), { shared: true, kek: right });
    (await gatewayAssertionSigner(nodeA.project, a, { app, issuer: 'NODE-A', log: quiet, env: nodeA.env })).close();
    const nodeB = projectOf(dir(), { shared: true, kek: wrong });
    const error = await gatewayAssertionSigner(nodeB.project, b, { app, issuer: 'NODE-B', log: quiet, env: nodeB.env }).then(
      () => null,
      (e: Error) => e,
    );
    assert.ok(error !== null);
    const rightId = parseKeyEncryptionKey(right).id;
    const wrongId = parseKeyEncryptionKey(wrong).id;
    assert.match(error.message, new RegExp(`sealed under the key-encryption key ${rightId}; this node has ${wrongId}`));
    assert.ok(!error.message.includes(right) && !error.message.includes(wrong));
  });

  test('a shared store without :svc/key-encryption-key, or with one that is not 32 bytes, is a clear configuration error', () => {
    const none = projectOf(dir(), { shared: true });
    assert.throws(() => assertionKeyCustody(none.project, none.env), /does not set; set it to #svc\/secret "env:NAME"/);
    const short = projectOf(dir(), { shared: true, kek: 'c2hvcnQ=' });
    assert.throws(
      () => assertionKeyCustody(short.project, short.env),
      (e: Error) => {
        assert.match(e.message, /^:svc\/key-encryption-key \(env:TEST_KEK\): a key-encryption key is 32 random bytes/);
        assert.ok(!e.message.includes('c2hvcnQ='), 'the secret is never quoted');
        return true;
      },
    );
    const unset = projectOf(dir(), { shared: true, kek: 'x' });
    assert.throws(() => assertionKeyCustody(unset.project, {}), /the secret reference env:TEST_KEK is not set/);
  });

  test('on the embedded store the keys may stay in the clear; given a KEK later, the first start seals them (audited)', async () => {
    const { a, b } = cluster();
    const plain = projectOf(dir(), { shared: false });
    (await gatewayAssertionSigner(plain.project, a, { app, issuer: 'NODE-A', log: quiet, env: plain.env })).close();
    const before = await a.store.getAssertionKeys();
    assert.ok(before !== null);
    const clearSet = JSON.parse(before.keySet) as AssertionKeySetJson;
    assert.ok(clearSet.keys[0]?.d !== null && before.keySet.includes(clearSet.keys[0]?.d ?? '-'), 'in the clear');
    const sealed = projectOf(dir(), { shared: false, kek: kekText() });
    const signer = await gatewayAssertionSigner(sealed.project, b, { app, issuer: 'NODE-A', log: quiet, env: sealed.env });
    signer.close();
    const after = await a.store.getAssertionKeys();
    assert.ok(after !== null && !after.keySet.includes(clearSet.keys[0]?.d ?? '-'), 'sealed now');
    assert.equal(kidOf(signer.sign(principal, REQ)), clearSet.keys[0]?.kid, 'the same key signs');
    assert.deepEqual(
      (await storedEvents(a, 'app.assertion_keys_resealed')).map((e) => e.data.was_clear),
      [true],
    );
  });

  test('KEK rotation: with the new key and the previous one, the first start seals the set again under the new one', async () => {
    const { a, b } = cluster();
    const oldKek = kekText();
    const newKek = kekText();
    const before = projectOf(dir(), { shared: true, kek: oldKek });
    (await gatewayAssertionSigner(before.project, a, { app, issuer: 'NODE-A', log: quiet, env: before.env })).close();
    const during = projectOf(dir(), { shared: true, kek: newKek, previous: oldKek });
    (await gatewayAssertionSigner(during.project, b, { app, issuer: 'NODE-B', log: quiet, env: during.env })).close();
    assert.equal((await storedEvents(a, 'app.assertion_keys_resealed')).length, 1);
    const afterwards = projectOf(dir(), { shared: true, kek: newKek });
    const signer = await gatewayAssertionSigner(afterwards.project, a, { app, issuer: 'NODE-A', log: quiet, env: afterwards.env });
    signer.close();
    assert.equal(signer.jwks().keys.length, 1, 'the new KEK alone opens the set');
    const onlyOld = projectOf(dir(), { shared: true, kek: oldKek });
    await assert.rejects(
      gatewayAssertionSigner(onlyOld.project, a, { app, issuer: 'NODE-A', log: quiet, env: onlyOld.env }),
      /sealed under/,
    );
  });

  test("htu follows Host: the gateway's signer binds htu to :svc/app-public-origin whatever Host the caller named", async () => {
    const { a } = cluster();
    const node = projectOf(dir(), { shared: false });
    const signer = await gatewayAssertionSigner(node.project, a, {
      app: { ...app, publicOrigin: 'https://app.example.com' },
      issuer: 'NODE-A',
      log: quiet,
      env: node.env,
    });
    signer.close();
    for (const host of ['app.example.com', 'internal-alias.lan:8443', '10.0.0.5']) {
      const token = signer.sign(principal, { method: 'GET', protocol: 'http', host, url: '/orders/7?page=2' });
      const claims = JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString()) as { htu: string };
      assert.equal(claims.htu, 'https://app.example.com/orders/7', host);
    }
  });

  test('without an upstream there is no assertion to sign, and nothing is stored', async () => {
    const { a, store } = cluster();
    const node = projectOf(dir(), { shared: false });
    await assert.rejects(
      gatewayAssertionSigner(node.project, a, { app: { upstream: null, audience: null }, issuer: 'N', log: quiet, env: node.env }),
      /upstream mode/,
    );
    assert.equal(await (store as MemoryStore).getAssertionKeys(), null);
  });
});

function freshPair() {
  const jwk = generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });
  return { x: jwk.x as string, d: jwk.d as string };
}

/** The stored set with one bit of the first sealed private half's ciphertext flipped (what an attacker with write access to the database could do). */
function flipOneBitOfSealedKey(keySet: string): string {
  const set = JSON.parse(keySet) as { keys: { d: string | null }[] };
  const key = set.keys.find((k) => typeof k.d === 'string' && k.d.startsWith('sealed.v1.'));
  assert.ok(key?.d, 'a sealed key to tamper with');
  const parts = key.d.split('.');
  const body = Buffer.from(parts[4] as string, 'base64url');
  body[3] = (body[3] as number) ^ 0x01;
  parts[4] = body.toString('base64url');
  key.d = parts.join('.');
  return JSON.stringify(set);
}

describe('svc app rotate-key', () => {
  const tmp = tempDir();
  after(() => tmp.cleanup());

  test('rotates with pre-publication and overlap in the control store, refuses a second rotation while one is pending, and --immediate withdraws the old keys', async () => {
    const env = cleanEnv({ HOME: tmp.dir });
    const dir = join(tmp.dir, 'project');
    await initProject(dir, { env });
    const file = join(dir, '.svc', 'control', 'assertion-keys.json');
    type Rotated = { kid: string; signs_from: string; previous: { kid: string; signs_until: string; published_until: string } | null };
    // No key yet (the gateway never started): the first key, signing at once.
    const created = JSON.parse((await svcOk(['app', 'rotate-key', dir, '--json'], { env })).stdout) as Rotated;
    assert.equal(created.previous, null);
    assert.ok(Date.parse(created.signs_from) <= Date.now());
    assert.equal(existsSync(file), false, 'the key set is in the control store, not a file');
    const first = JSON.parse((await svcOk(['app', 'rotate-key', dir, '--json'], { env })).stdout) as Rotated;
    assert.equal(first.previous?.kid, created.kid);
    assert.equal(first.previous?.signs_until, first.signs_from);
    assert.equal(Date.parse(first.previous?.published_until ?? '') - Date.parse(first.signs_from), ASSERTION_KEY_OVERLAP_SECONDS * 1000);
    assert.ok(Date.parse(first.signs_from) > Date.now() + (ASSERTION_KEY_PREPUBLISH_SECONDS - 60) * 1000);

    const again = await svc(['app', 'rotate-key', dir], { env });
    assert.equal(again.code, 1);
    assert.match(again.stderr, /a rotation is already under way: key \S+ signs from/);

    const leaked = JSON.parse((await svcOk(['app', 'rotate-key', dir, '--immediate', '--json'], { env })).stdout) as Rotated;
    // The key that was signing when it leaked (the pending one never signed) is the one withdrawn and recorded.
    assert.equal(leaked.previous?.kid, created.kid);
    assert.equal(leaked.previous?.signs_until, leaked.signs_from);
    assert.equal(leaked.previous?.published_until, leaked.signs_from);

    const trail = (await svcOk(['auth', 'audit', dir, '--json'], { env })).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; data: Record<string, unknown> })
      .filter((e) => e.type === 'app.assertion_key_rotated');
    assert.deepEqual(
      trail.map((e) => [e.data.kid, e.data.previous_kid, e.data.immediate]),
      [
        [created.kid, null, false],
        [first.kid, created.kid, false],
        [leaked.kid, created.kid, true],
      ],
    );
    assert.match((await svcOk(['auth', 'audit', 'verify', dir], { env })).stdout, /^audit chain ok/);
  });
});

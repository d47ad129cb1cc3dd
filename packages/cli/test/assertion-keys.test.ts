import assert from 'node:assert/strict';
import { chmodSync, existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { type AssertionKeySetJson, makePrincipal } from '@svc/core';
import { ASSERTION_KEY_OVERLAP_SECONDS, ASSERTION_KEY_PREPUBLISH_SECONDS } from '@svc/core/settings';
import { assertionKeysFile, gatewayAssertionSigner, readAssertionKeys, rotateAssertionKeys } from '../../runtime/src/assertion-keys.js';
import { cleanEnv, tempDir } from './helpers.js';
// In process: the key set and `svc auth assertion-keys rotate` are files and offline commands.
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

describe('the assertion key set in the control directory', () => {
  const tmp = tempDir();
  after(() => tmp.cleanup());

  test('the first start of the gateway creates the key set, owner-only, and later starts reuse it', () => {
    const project = { controlDir: join(tmp.dir, 'first', '.svc', 'control') };
    const logged: object[] = [];
    const log = { info: (o: object) => logged.push(o), error: (o: object) => logged.push(o) };
    const clock = { now: Date.now };
    const signer = gatewayAssertionSigner(project, { app, issuer: 'NODE-A', clock, log });
    const file = assertionKeysFile(project);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(project.controlDir).mode & 0o777, 0o700);
    assert.deepEqual(logged, [{ event: 'gateway.assertion_key_created', file }]);
    const [key] = signer.jwks().keys;
    assert.equal(kidOf(signer.sign(principal, REQ)), key?.kid);
    const again = gatewayAssertionSigner(project, { app, issuer: 'NODE-A', clock, log });
    assert.equal(logged.length, 1, 'not created twice');
    assert.deepEqual(again.jwks(), signer.jwks());
  });

  test("htu follows Host: the gateway's signer binds htu to :svc/app-public-origin whatever Host the caller named", () => {
    const project = { controlDir: join(tmp.dir, 'public-origin', '.svc', 'control') };
    const log = { info() {}, error() {} };
    const signer = gatewayAssertionSigner(project, {
      app: { ...app, publicOrigin: 'https://app.example.com' },
      issuer: 'NODE-A',
      clock: { now: Date.now },
      log,
    });
    for (const host of ['app.example.com', 'internal-alias.lan:8443', '10.0.0.5']) {
      const token = signer.sign(principal, { method: 'GET', protocol: 'http', host, url: '/orders/7?page=2' });
      const claims = JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString()) as { htu: string };
      assert.equal(claims.htu, 'https://app.example.com/orders/7', host);
    }
  });

  test('without an upstream there is no assertion to sign', () => {
    const project = { controlDir: join(tmp.dir, 'module-mode') };
    const log = { info() {}, error() {} };
    assert.throws(
      () => gatewayAssertionSigner(project, { app: { upstream: null, audience: null }, issuer: 'N', clock: { now: Date.now }, log }),
      /upstream mode/,
    );
    assert.equal(existsSync(assertionKeysFile(project)), false);
  });

  test('a key set readable by others is refused', () => {
    const project = { controlDir: join(tmp.dir, 'modes') };
    rotateAssertionKeys(project, Date.now(), { immediate: false });
    chmodSync(assertionKeysFile(project), 0o644);
    assert.throws(() => readAssertionKeys(assertionKeysFile(project)), /lets others read it/);
  });

  test('a running gateway follows a rotation without a restart: next key published at once, signing at the switch', () => {
    const project = { controlDir: join(tmp.dir, 'live') };
    const t0 = Date.parse('2026-11-23T12:00:00.000Z');
    const clock = { t: t0, m: 0, now: () => clock.t, monotonic: () => clock.m };
    const signer = gatewayAssertionSigner(project, { app, issuer: 'NODE-A', clock, log: { info() {}, error() {} } });
    const oldKid = kidOf(signer.sign(principal, REQ));
    const r = rotateAssertionKeys(project, t0 + 1000, { immediate: false });
    assert.equal(r.outcome, 'rotated');
    const nextKid = r.outcome === 'rotated' ? r.next.kid : '';
    clock.t = t0 + 1000;
    clock.m += 1000; // the file is looked at again at most once a second
    assert.deepEqual(
      signer
        .jwks()
        .keys.map((k) => k.kid)
        .sort(),
      [oldKid, nextKid].sort(),
    );
    assert.equal(kidOf(signer.sign(principal, REQ)), oldKid);
    clock.t = t0 + 1000 + ASSERTION_KEY_PREPUBLISH_SECONDS * 1000;
    assert.equal(kidOf(signer.sign(principal, REQ)), nextKid);
    clock.t += ASSERTION_KEY_OVERLAP_SECONDS * 1000;
    assert.deepEqual(
      signer.jwks().keys.map((k) => k.kid),
      [nextKid],
    );
  });
});

describe('svc app rotate-key', () => {
  const tmp = tempDir();
  after(() => tmp.cleanup());

  test('rotates with pre-publication and overlap, refuses a second rotation while one is pending, and --immediate withdraws the old keys', async () => {
    const env = cleanEnv({ HOME: tmp.dir });
    const dir = join(tmp.dir, 'project');
    await initProject(dir, { env });
    const file = join(dir, '.svc', 'control', 'assertion-keys.json');
    type Rotated = { kid: string; signs_from: string; previous: { kid: string; signs_until: string; published_until: string } | null };
    // No key yet (the gateway never started): the first key, signing at once.
    const created = JSON.parse((await svcOk(['app', 'rotate-key', dir, '--json'], { env })).stdout) as Rotated;
    assert.equal(created.previous, null);
    assert.ok(Date.parse(created.signs_from) <= Date.now());
    assert.equal(statSync(file).mode & 0o777, 0o600);
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
    const set = JSON.parse(readFileSync(file, 'utf8')) as AssertionKeySetJson;
    const live = set.keys.filter((k) => k.published_until === null || Date.parse(k.published_until) > Date.now());
    assert.deepEqual(
      live.map((k) => k.kid),
      [leaked.kid],
    );
    assert.ok(
      set.keys.every((k) => k.kid === leaked.kid || k.d === null),
      'no withdrawn key keeps its private half',
    );

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

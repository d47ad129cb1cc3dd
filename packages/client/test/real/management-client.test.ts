import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  ApiError,
  ApiUnreachableError,
  createCredentialStore,
  createManagementClient,
  credentialsFromTokenPair,
  generateDeviceKey,
  login,
  openManagementSession,
} from '../../src/index.js';
import { REPO_ROOT } from '../repo.js';

const SVC = join(REPO_ROOT, 'node_modules/.bin/svc');

function env(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_') && k !== 'NODE_OPTIONS'));
}

async function rejectsWithCode(p: Promise<unknown>, code: string, status: number): Promise<void> {
  await assert.rejects(p, (error: unknown) => error instanceof ApiError && error.code === code && error.status === status);
}

describe('the management client against a real svc auth serve', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-client-api-'));
  let child: ChildProcess | undefined;
  let baseUrl = '';
  let bootstrapToken = '';

  before(async () => {
    const init = JSON.parse(
      execFileSync(process.execPath, [SVC, 'auth', 'init', join(dir, 'p'), '--json'], { env: env(), encoding: 'utf8' }),
    );
    bootstrapToken = init.bootstrap_token;
    const server = spawn(process.execPath, [SVC, 'auth', 'serve', '--listen', '127.0.0.1:0', join(dir, 'p')], {
      env: env(),
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    child = server;
    baseUrl = await new Promise<string>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error('server did not start')), 90_000);
      server.stdout?.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        const m = /listening on (http:\/\/\S+)/.exec(out);
        if (m !== null) {
          clearTimeout(timer);
          resolve(m[1] as string);
        }
      });
      server.on('exit', (code) => reject(new Error(`server exited ${code}`)));
    });
  });
  after(() => {
    child?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  test('enroll, login, me, refresh, sessions, devices, audit and revoke work with typed results', async () => {
    const api = createManagementClient({ baseUrl: `${baseUrl}/` });
    assert.equal((await api.health()).status, 'ok');
    const { key } = generateDeviceKey();
    await rejectsWithCode(
      api.enroll({ bootstrap_token: `svcb_${'x'.repeat(43)}`, public_key: key.publicKeyHex }),
      'invalid_bootstrap_token',
      401,
    );
    const { device } = await api.enroll({ bootstrap_token: bootstrapToken, public_key: key.publicKeyHex, name: 'sdk' });
    assert.equal(device.public_key, key.publicKeyHex);
    await rejectsWithCode(api.enroll({ bootstrap_token: bootstrapToken, public_key: key.publicKeyHex }), 'bootstrap_token_used', 401);

    const pair = await login(api, key);
    assert.equal(pair.token_type, 'Bearer');
    const me = await api.me(pair.access_token);
    assert.equal(me.device, device.id);
    assert.equal(me.session, pair.session_id);

    const next = await api.refresh(pair.refresh_token, key);
    await rejectsWithCode(api.me(pair.access_token), 'invalid_token', 401);
    assert.equal((await api.sessions(next.access_token)).sessions.length, 1);
    assert.equal((await api.devices(next.access_token)).devices[0]?.id, device.id);
    const page = await api.audit(next.access_token, { limit: 2 });
    assert.equal(page.events.length, 2);
    assert.equal(page.events[0]?.seq, 1);
    const rest = await api.audit(next.access_token, { after: page.next_after ?? 0 });
    assert.ok(rest.events.every((e) => e.seq > 2));

    assert.deepEqual(await api.revoke(next.access_token), { session_id: pair.session_id, revoked: true });
    await rejectsWithCode(api.me(next.access_token), 'invalid_token', 401);
    await rejectsWithCode(api.refresh(next.refresh_token, key), 'invalid_refresh_token', 401);
  });

  test('an older retired refresh token is refresh_token_reused and revokes the session', async () => {
    const api = createManagementClient({ baseUrl });
    const { key } = generateDeviceKey();
    // A second admin needs a recovery token.
    const boot = JSON.parse(
      execFileSync(process.execPath, [SVC, 'auth', 'init', join(dir, 'p'), '--json', '--recover'], { env: env(), encoding: 'utf8' }),
    ).bootstrap_token;
    await api.enroll({ bootstrap_token: boot, public_key: key.publicKeyHex });
    const p0 = await login(api, key);
    const p1 = await api.refresh(p0.refresh_token, key);
    const p2 = await api.refresh(p1.refresh_token, key);
    await rejectsWithCode(api.refresh(p0.refresh_token, key), 'refresh_token_reused', 401);
    await rejectsWithCode(api.me(p2.access_token), 'invalid_token', 401);
  });

  test('a session refreshes once and retries when its access token is refused, saving the new pair', async () => {
    const api = createManagementClient({ baseUrl });
    const { key } = generateDeviceKey();
    const boot = JSON.parse(
      execFileSync(process.execPath, [SVC, 'auth', 'init', join(dir, 'p'), '--json', '--recover'], { env: env(), encoding: 'utf8' }),
    ).bootstrap_token;
    await api.enroll({ bootstrap_token: boot, public_key: key.publicKeyHex });
    const pair = await login(api, key);
    const path = join(dir, 'creds.json');
    const store = createCredentialStore(path);
    store.save({ ...credentialsFromTokenPair(baseUrl, pair, Date.now()), access_token: `svca_${'0'.repeat(26)}${'Z'.repeat(43)}` });
    const session = openManagementSession({ store, key });
    const me = await session.withAccessToken((t) => session.client.me(t));
    assert.equal(me.session, pair.session_id);
    const saved = store.load();
    assert.ok(saved);
    assert.notEqual(saved.refresh_token, pair.refresh_token);
    await session.logout();
    assert.equal(store.load(), null);
    await rejectsWithCode(api.me(saved.access_token), 'invalid_token', 401);
  });

  test('a saved session signs its DPoP proofs with the key file saved at login; without the key its bound refresh token is refused', async () => {
    const api = createManagementClient({ baseUrl });
    const { key, pem } = generateDeviceKey();
    const boot = JSON.parse(
      execFileSync(process.execPath, [SVC, 'auth', 'init', join(dir, 'p'), '--json', '--recover'], { env: env(), encoding: 'utf8' }),
    ).bootstrap_token;
    await api.enroll({ bootstrap_token: boot, public_key: key.publicKeyHex });
    const keyPath = join(dir, 'bound.pem');
    writeFileSync(keyPath, pem, { mode: 0o600 });
    const pair = await login(api, key);
    await rejectsWithCode(api.refresh(pair.refresh_token), 'invalid_dpop_proof', 401);
    const store = createCredentialStore(join(dir, 'bound-creds.json'));
    store.save(credentialsFromTokenPair(baseUrl, pair, Date.now(), key.publicKeyHex, keyPath));
    const rotated = await openManagementSession({ store }).refresh();
    assert.equal(rotated.session_id, pair.session_id);
    assert.equal(rotated.key_path, keyPath, 'the key file stays saved with the rotated pair');
    assert.notEqual(rotated.refresh_token, pair.refresh_token);
  });

  test('with dpopNonces the client puts the latest DPoP-Nonce in its proofs, and the server accepts them', async () => {
    const sent: string[] = [];
    const recording: typeof fetch = async (input, init) => {
      const dpop = new Headers(init?.headers).get('dpop');
      if (dpop !== null) sent.push(dpop);
      return fetch(input, init);
    };
    const api = createManagementClient({ baseUrl, fetch: recording, dpopNonces: true });
    const { key } = generateDeviceKey();
    const boot = JSON.parse(
      execFileSync(process.execPath, [SVC, 'auth', 'init', join(dir, 'p'), '--json', '--recover'], { env: env(), encoding: 'utf8' }),
    ).bootstrap_token;
    await api.enroll({ bootstrap_token: boot, public_key: key.publicKeyHex });
    const p0 = await login(api, key);
    const p1 = await api.refresh(p0.refresh_token, key);
    await api.refresh(p1.refresh_token, key);
    const claims = sent.map((p) => JSON.parse(Buffer.from(p.split('.')[1] as string, 'base64url').toString('utf8')));
    assert.equal(claims.length, 2);
    assert.equal(claims[0].nonce, undefined, 'no nonce known before the first DPoP answer');
    assert.match(claims[1].nonce, /^[A-Za-z0-9_-]{32}$/, 'the second proof carries the server nonce');
  });

  test('a session with nothing saved is a TypeError; an unreachable server is ApiUnreachableError', async () => {
    const path = join(dir, 'none.json');
    assert.throws(() => openManagementSession({ store: createCredentialStore(path) }), TypeError);
    writeFileSync(path, '{}');
    await assert.rejects(createManagementClient({ baseUrl: 'http://127.0.0.1:1' }).health(), ApiUnreachableError);
  });
});

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pairingProofString } from '@svc/core';
import { cleanEnv, enrolledProject, type StartedProcess, svc, svcOk, tempDir } from '../helpers.js';
import { keygenInProcess as keygen, svcOkInProcess } from '../in-process.js';
import { currentCredentials } from '../support/credentials-file.js';
import { callJson, type ServedUrls, serveAll, signWith } from '../support/serve-all.js';
import { createSchemas, loginOverHttp, writePostgresProject } from '../support/store-projects.js';

// biome-ignore lint/suspicious/noExplicitAny: CLI and API JSON is inspected field by field
type Json = any;

/** Pairs `keyFile` as an application device of `subject` (or a new subject) over HTTP; the completion's answer. */
async function pairOverHttp(
  urls: ServedUrls,
  adminToken: string,
  keyFile: string,
  publicKey: string,
  subject?: string,
  realm: 'application' | 'management' = 'application',
): Promise<{ status: number; body: Json; retry: () => Promise<{ status: number; body: Json }> }> {
  const prepared = await callJson(`${urls.node}/edge/0-alpha/pairing/prepare`, 'POST', adminToken, {
    realm,
    public_key: publicKey,
    ...(subject === undefined ? {} : { subject }),
  });
  assert.equal(prepared.status, 201, JSON.stringify(prepared.body));
  const nodeId = (await callJson(`${urls.node}/.well-known/edge`, 'GET')).body.node_id as string;
  const complete = () =>
    callJson(`${urls.node}/edge/0-alpha/pairing/complete`, 'POST', undefined, {
      intent_id: prepared.body.intent_id,
      code: prepared.body.code,
      public_key: publicKey,
      signature: signWith(keyFile, pairingProofString({ nodeId, intentId: prepared.body.intent_id, publicKey })),
    });
  return { ...(await complete()), retry: complete };
}

/** Challenge, signature, session at a gateway: an application-realm sign-in over HTTP. */
async function appSignIn(app: string, keyFile: string, publicKey: string): Promise<{ status: number; body: Json }> {
  const c = await callJson(`${app}/.svc/auth/v1/challenges`, 'POST', undefined, { public_key: publicKey });
  assert.equal(c.status, 201);
  return callJson(`${app}/.svc/auth/v1/sessions`, 'POST', undefined, {
    challenge_id: c.body.challenge_id,
    signature: signWith(keyFile, c.body.challenge),
  });
}

describe('disabling a user, through the installed svc and svc serve on SQLite', () => {
  const tmp = tempDir('svc-user-lifecycle-');
  const adminEnv = cleanEnv({ HOME: join(tmp.dir, 'admin-home'), SVC_CREDENTIALS: join(tmp.dir, 'admin-home', 'credentials.json') });
  const appCreds = join(tmp.dir, 'device-home', 'credentials.json');
  const deviceEnv = cleanEnv({ HOME: join(tmp.dir, 'device-home'), SVC_CREDENTIALS: appCreds });
  let server: StartedProcess<ServedUrls>;
  let adminToken: string;

  before(async () => {
    const p = await enrolledProject(tmp.dir, { env: adminEnv });
    server = await serveAll(p.dir, adminEnv);
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.ready.management], { env: adminEnv });
    adminToken = currentCredentials(join(tmp.dir, 'admin-home', 'credentials.json')).access_token;
  });
  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test("a disabled user's stolen access token is refused at once; its device cannot sign in, nor be paired again; enabling restores sign-in, not the session", async () => {
    const keyFile = join(tmp.dir, 'app.pem');
    const publicKey = await keygen(keyFile, { env: deviceEnv });
    const paired = await pairOverHttp(server.ready, adminToken, keyFile, publicKey);
    assert.equal(paired.status, 201, JSON.stringify(paired.body));
    const login = ['auth', 'login', '--realm', 'application', '--url', server.ready.app, '--key', keyFile];
    await svcOk(login, { env: deviceEnv });
    const stolen = currentCredentials(appCreds).access_token as string;
    const subject = JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env: deviceEnv })).stdout).subject as string;
    assert.equal((await callJson(`${server.ready.app}/dashboard`, 'GET', stolen)).status, 404, 'past authentication (nothing attached)');
    // Another device key, to be paired to the same user while it is disabled.
    const secondKey = join(tmp.dir, 'second.pem');
    const secondPublic = await keygen(secondKey, { env: deviceEnv });

    const disabled = JSON.parse((await svcOk(['auth', 'users', 'disable', subject, '--json'], { env: adminEnv })).stdout);
    assert.equal(disabled.user.status, 'disabled');
    assert.equal(disabled.revoked_sessions, 1);

    const refused = await callJson(`${server.ready.app}/dashboard`, 'GET', stolen);
    assert.equal(refused.status, 401, 'the very next request with the old access token');
    assert.equal(refused.body.code, 'invalid_token');
    assert.equal((await callJson(`${server.ready.app}/.svc/auth/v1/me`, 'GET', stolen)).status, 401);
    const whoami = await svc(['auth', 'whoami'], { env: deviceEnv });
    assert.equal(whoami.code, 1, 'the saved session cannot be refreshed either');
    assert.match(whoami.stderr, /invalid_refresh_token/);

    const again = await svc(login, { env: deviceEnv });
    assert.equal(again.code, 1);
    assert.match(again.stderr, /\(user_disabled\)/);
    assert.match(again.stderr, /svc auth users enable/);
    const signIn = await appSignIn(server.ready.app, keyFile, publicKey);
    assert.equal(signIn.status, 403);
    assert.equal(signIn.body.code, 'user_disabled');

    const pairing = await pairOverHttp(server.ready, adminToken, secondKey, secondPublic, subject);
    assert.equal(pairing.status, 403, JSON.stringify(pairing.body));
    assert.equal(pairing.body.code, 'user_disabled');

    const shown = JSON.parse((await svcOkInProcess(['auth', 'users', 'show', subject, '--json'], { env: adminEnv })).stdout);
    assert.equal(shown.user.status, 'disabled');
    const enabled = JSON.parse((await svcOk(['auth', 'users', 'enable', subject, '--json'], { env: adminEnv })).stdout);
    assert.equal(enabled.user.status, 'active');
    assert.equal((await callJson(`${server.ready.app}/dashboard`, 'GET', stolen)).status, 401, 'the revoked session stays revoked');
    await svcOk(login, { env: deviceEnv });
    const back = JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env: deviceEnv })).stdout);
    assert.equal(back.subject, subject, 'sign-in works again');
    const later = await pairing.retry();
    assert.equal(later.status, 201, `the intent stayed live while the user was disabled: ${JSON.stringify(later.body)}`);
    assert.equal(later.body.device.subject, subject);

    const audit = (await svcOk(['auth', 'audit', '--json'], { env: adminEnv })).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Json);
    const mine = audit.filter((e) => e.subject === subject).map((e) => e.type as string);
    assert.ok(mine.includes('user.disabled') && mine.includes('user.enabled'), mine.join(' '));
    assert.doesNotMatch(JSON.stringify(audit), /svc[abr]_[A-Za-z0-9]/, 'no token in the audit trail');
  });

  test("a disabled administrator's CLI session is refused at once; the remaining administrator is then the last and cannot disable or remove itself", async () => {
    const secondHome = join(tmp.dir, 'second-admin-home');
    const secondCreds = join(secondHome, 'credentials.json');
    const secondEnv = cleanEnv({ HOME: secondHome, SVC_CREDENTIALS: secondCreds });
    const keyFile = join(tmp.dir, 'second-admin.pem');
    const publicKey = await keygen(keyFile, { env: secondEnv });
    const paired = await pairOverHttp(server.ready, adminToken, keyFile, publicKey, undefined, 'management');
    assert.equal(paired.status, 201, JSON.stringify(paired.body));
    await svcOk(['auth', 'login', '--key', keyFile, '--url', server.ready.management], { env: secondEnv });
    const second = JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env: secondEnv })).stdout).subject as string;
    const stolen = currentCredentials(secondCreds).access_token as string;
    await svcOk(['auth', 'users', '--realm', 'management'], { env: secondEnv });

    const disabled = JSON.parse((await svcOk(['auth', 'users', 'disable', second, '--json'], { env: adminEnv })).stdout);
    assert.equal(disabled.revoked_sessions, 1);
    const me = await callJson(`${server.ready.management}/v1/auth/me`, 'GET', stolen);
    assert.equal(me.status, 401, 'the very next request with its access token');
    assert.equal(me.body.code, 'invalid_token');
    const listing = await svc(['auth', 'users'], { env: secondEnv });
    assert.equal(listing.code, 1);
    assert.match(listing.stderr, /invalid_refresh_token/);
    const relogin = await svc(['auth', 'login', '--key', keyFile, '--url', server.ready.management], { env: secondEnv });
    assert.equal(relogin.code, 1);
    assert.match(relogin.stderr, /\(user_disabled\)/);

    const first = JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env: adminEnv })).stdout).subject as string;
    for (const action of ['disable', 'remove']) {
      const r = await svc(['auth', 'users', action, first], { env: adminEnv });
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /\(last_management_user\)/);
    }
    const removed = JSON.parse((await svcOk(['auth', 'users', 'remove', second, '--json'], { env: adminEnv })).stdout);
    assert.equal(removed.removed_devices, 1);
    assert.equal((await svc(['auth', 'whoami'], { env: adminEnv })).code, 0, 'the remaining administrator is still signed in');
  });
});

describe('disabling a user on a two-node PostgreSQL cluster (two svc serve processes)', () => {
  const tmp = tempDir('svc-user-lifecycle-pg-');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json') });
  const schemas = createSchemas();
  const nodes: StartedProcess<ServedUrls>[] = [];
  let keyFile: string;
  let publicKey: string;

  before(async () => {
    await writePostgresProject(tmp.dir, { schema: schemas.fresh(), env });
    const p = await enrolledProject(tmp.dir, { env });
    keyFile = p.keyFile;
    publicKey = p.publicKey;
    for (let i = 0; i < 2; i++) nodes.push(await serveAll(p.dir, env));
  });
  after(async () => {
    for (const n of nodes) await n.stop('SIGKILL');
    try {
      await schemas.dispose();
    } finally {
      tmp.cleanup();
    }
  });

  test("a disabled user's stolen access tokens are refused on every node at once, whichever node issued them", async () => {
    const [a, b] = nodes.map((n) => n.ready) as [ServedUrls, ServedUrls];
    const admin = await loginOverHttp(a.management, keyFile, publicKey);
    const appKey = join(tmp.dir, 'app.pem');
    const appPublic = await keygen(appKey, { env });
    const paired = await pairOverHttp(a, admin.access_token, appKey, appPublic);
    assert.equal(paired.status, 201, JSON.stringify(paired.body));
    const subject = paired.body.device.subject as string;
    // A session on each node's gateway, each accepted by both.
    const onA = await appSignIn(a.app, appKey, appPublic);
    const onB = await appSignIn(b.app, appKey, appPublic);
    assert.equal(onA.status, 201);
    assert.equal(onB.status, 201);
    for (const node of [a, b]) {
      for (const pair of [onA.body, onB.body]) {
        assert.equal((await callJson(`${node.app}/.svc/auth/v1/me`, 'GET', pair.access_token)).status, 200, 'accepted before the disable');
      }
    }

    const disabled = await callJson(`${a.management}/v1/auth/users/${subject}/disable`, 'POST', admin.access_token, {});
    assert.equal(disabled.status, 200, JSON.stringify(disabled.body));
    assert.equal(disabled.body.revoked_sessions, 2);

    for (const [name, node] of [
      ['A', a],
      ['B', b],
    ] as const) {
      for (const pair of [onA.body, onB.body]) {
        const r = await callJson(`${node.app}/dashboard`, 'GET', pair.access_token);
        assert.equal(r.status, 401, `node ${name}, the very next request with ${pair.session_id}`);
        assert.equal(r.body.code, 'invalid_token');
      }
    }
    const onBAgain = await appSignIn(b.app, appKey, appPublic);
    assert.equal(onBAgain.status, 403, 'node B refuses the sign-in too');
    assert.equal(onBAgain.body.code, 'user_disabled');

    // Node B's management API sees the disable and enables the user; node A then signs it in.
    const adminOnB = await loginOverHttp(b.management, keyFile, publicKey);
    const user = await callJson(`${b.management}/v1/auth/users/${subject}`, 'GET', adminOnB.access_token);
    assert.equal(user.body.user.status, 'disabled');
    assert.equal((await callJson(`${b.management}/v1/auth/users/${subject}/enable`, 'POST', adminOnB.access_token, {})).status, 200);
    assert.equal((await appSignIn(a.app, appKey, appPublic)).status, 201);
  });

  test('the last administrator cannot be disabled through either node (409 last_management_user)', async () => {
    const [a, b] = nodes.map((n) => n.ready) as [ServedUrls, ServedUrls];
    for (const node of [a, b]) {
      const admin = await loginOverHttp(node.management, keyFile, publicKey);
      const self = (await callJson(`${node.management}/v1/auth/me`, 'GET', admin.access_token)).body.subject as string;
      const r = await callJson(`${node.management}/v1/auth/users/${self}/disable`, 'POST', admin.access_token, {});
      assert.equal(r.status, 409);
      assert.equal(r.body.code, 'last_management_user');
    }
  });
});

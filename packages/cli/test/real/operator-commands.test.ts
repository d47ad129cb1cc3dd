import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cleanEnv, type ServerProcess, startServer, tempDir } from '../helpers.js';
// The service is the installed `svc`, spawned; the operator's commands, whose process boundary
// is not the subject here, run in process (svcInProcess).
import {
  enrolledProjectInProcess as enrolledProject,
  initProjectInProcess as initProject,
  keygenInProcess as keygen,
  svcInProcess as svc,
  svcOkInProcess as svcOk,
} from '../in-process.js';
import { currentCredentials } from '../support/credentials-file.js';

describe('operator commands on the project (offline, while the server runs)', () => {
  const tmp = tempDir();
  const creds = join(tmp.dir, 'creds.json');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: creds });
  let server: ServerProcess | undefined;
  let p: Awaited<ReturnType<typeof enrolledProject>>;

  before(async () => {
    p = await enrolledProject(tmp.dir, { env });
    server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', p.dir], { env });
  });
  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('sessions revoke by the operator takes effect immediately in the running server, audited as revoked_by_admin', async () => {
    assert.ok(server);
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.url], { env });
    const saved = currentCredentials(creds);
    const listed = JSON.parse((await svcOk(['auth', 'sessions', p.dir, '--json'], { env })).stdout).sessions;
    assert.deepEqual(
      listed.map((s: { id: string }) => s.id),
      [saved.session_id],
    );
    // The server has just checked this token (and keeps the session in its bearer cache).
    const before = await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `Bearer ${saved.access_token}` } });
    assert.equal(before.status, 200);
    await svcOk(['auth', 'sessions', 'revoke', saved.session_id, p.dir], { env });
    const me = await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `Bearer ${saved.access_token}` } });
    assert.equal(me.status, 401);
    assert.equal(JSON.parse((await svcOk(['auth', 'sessions', p.dir, '--json'], { env })).stdout).sessions.length, 0);
    const last = JSON.parse((await svcOk(['auth', 'audit', p.dir, '--json'], { env })).stdout.trim().split('\n').at(-1) ?? '{}');
    assert.equal(last.type, 'session.revoked');
    assert.equal(last.data.reason, 'revoked_by_admin');
    assert.equal(last.data.by_subject, 'operator-cli');
    // The device's whoami now fails: the refresh token died with the session.
    assert.equal((await svc(['auth', 'whoami'], { env })).code, 1);
    // logout of an ended session just forgets it.
    await svcOk(['auth', 'logout'], { env });
  });

  test('devices remove refuses the last management device and removes one of two, revoking its sessions', async () => {
    const alone = await svc(['auth', 'devices', 'remove', p.deviceId, p.dir], { env });
    assert.equal(alone.code, 1);
    assert.match(alone.stderr, /\(invalid_request\)/);

    const boot = await initProject(p.dir, { env, recover: true });
    const secondKey = join(tmp.dir, 'second.pem');
    const second = JSON.parse(
      (await svcOk(['auth', 'enroll', boot.bootstrap_token, await keygen(secondKey, { env }), p.dir, '--json'], { env })).stdout,
    ).device;
    assert.ok(server);
    await svcOk(['auth', 'login', '--key', secondKey, '--url', server.url], { env });
    const saved = currentCredentials(creds);
    const listed = JSON.parse((await svcOk(['auth', 'devices', p.dir, '--json', '--realm', 'management'], { env })).stdout).devices;
    assert.equal(listed.length, 2);

    const before = await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `Bearer ${saved.access_token}` } });
    assert.equal(before.status, 200, 'the server has checked (and cached) the session before the removal');
    const removed = JSON.parse((await svcOk(['auth', 'devices', 'remove', second.id, p.dir, '--json'], { env })).stdout);
    assert.equal(removed.revoked_sessions, 1);
    const me = await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `Bearer ${saved.access_token}` } });
    assert.equal(me.status, 401);
    // A removed key can no longer sign in.
    const login = await svc(['auth', 'login', '--key', secondKey, '--url', server.url], { env });
    assert.equal(login.code, 1);
    assert.match(login.stderr, /\(invalid_signature\)/);
    const unknown = await svc(['auth', 'devices', 'remove', second.id, p.dir], { env });
    assert.match(unknown.stderr, /\(not_found\)/);
  });

  test('login against a URL where nothing listens fails with exit 1 and one line', async () => {
    const r = await svc(['auth', 'login', '--key', p.keyFile, '--url', 'http://127.0.0.1:1'], { env });
    assert.equal(r.code, 1);
    assert.equal(r.stderr.trim().split('\n').length, 1);
  });
});

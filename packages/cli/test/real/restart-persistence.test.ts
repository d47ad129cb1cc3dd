import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cleanEnv, type ServerProcess, startServer, tempDir } from '../helpers.js';
// The service is the installed `svc`, spawned; the operator's commands, whose process boundary
// is not the subject here, run in process (svcInProcess).
import { enrolledProjectInProcess as enrolledProject, svcOkInProcess as svcOk } from '../in-process.js';
import { currentCredentials } from '../support/credentials-file.js';
import { dpopProofFor } from '../support/store-projects.js';

async function me(url: string, token: string): Promise<number> {
  return (await fetch(`${url}/v1/auth/me`, { headers: { authorization: `Bearer ${token}` } })).status;
}

async function auditLength(dir: string, env: NodeJS.ProcessEnv): Promise<number> {
  return (await svcOk(['auth', 'audit', dir, '--json'], { env })).stdout.trim().split('\n').length;
}

describe('restart persistence', () => {
  const tmp = tempDir();
  const creds = join(tmp.dir, 'creds.json');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: creds });
  const servers: ServerProcess[] = [];
  const serve = async (dir: string) => {
    const s = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', dir], { env });
    servers.push(s);
    return s;
  };

  after(async () => {
    for (const s of servers) await s.stop('SIGKILL');
    tmp.cleanup();
  });

  test('sessions, revocations and audit events survive a graceful restart and a kill -9 after acknowledged writes', async () => {
    const { dir, keyFile } = await enrolledProject(tmp.dir, { env });
    let server = await serve(dir);

    // A session that stays, and one that is revoked.
    await svcOk(['auth', 'login', '--key', keyFile, '--url', server.url], { env });
    const revoked = currentCredentials(creds);
    await svcOk(['auth', 'logout'], { env });
    await svcOk(['auth', 'login', '--key', keyFile, '--url', server.url], { env });
    await svcOk(['auth', 'refresh'], { env });
    const live = currentCredentials(creds);
    const eventsBefore = await auditLength(dir, env);

    assert.equal(await server.stop('SIGTERM'), 0, 'graceful shutdown exits 0');
    server = await serve(dir);
    assert.equal(await me(server.url, live.access_token), 200);
    assert.equal(await me(server.url, revoked.access_token), 401);
    assert.equal(await auditLength(dir, env), eventsBefore);

    // Acknowledged writes, then kill -9: none is lost.
    const r = await fetch(`${server.url}/v1/auth/refresh`, {
      method: 'POST',
      // The session is bound to the device key (DPoP, the default): the refresh carries its proof.
      headers: { 'content-type': 'application/json', dpop: dpopProofFor(keyFile, 'POST', `${server.url}/v1/auth/refresh`) },
      body: JSON.stringify({ refresh_token: live.refresh_token }),
    });
    assert.equal(r.status, 200);
    const rotated = (await r.json()) as { access_token: string; refresh_token: string };
    await svcOk(['auth', 'login', '--key', keyFile, '--url', server.url], { env });
    const second = currentCredentials(creds);
    const revoke = await fetch(`${server.url}/v1/auth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${second.access_token}` },
      body: '{}',
    });
    assert.equal(revoke.status, 200);
    const eventsAcked = await auditLength(dir, env);
    assert.equal(eventsAcked, eventsBefore + 3, 'rotation, session, revocation');

    await server.stop('SIGKILL');
    server = await serve(dir);
    assert.equal(await me(server.url, rotated.access_token), 200, 'the rotated pair is live after kill -9');
    assert.equal(await me(server.url, live.access_token), 401, 'the pair retired before kill -9 stays retired');
    assert.equal(await me(server.url, second.access_token), 401, 'the revocation survived kill -9');
    assert.equal(await auditLength(dir, env), eventsAcked);
    const verify = await svcOk(['auth', 'audit', 'verify', dir], { env });
    assert.match(verify.stdout, /^audit chain ok: \d+ events/);
  });
});

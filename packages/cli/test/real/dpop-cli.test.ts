import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cleanEnv, problemCode, type ServerProcess, startServer, tempDir } from '../helpers.js';
// The service is the installed `svc`, spawned; the operator's commands, whose process boundary
// is not the subject here, run in process (svcInProcess).
import { enrolledProjectInProcess as enrolledProject, svcOkInProcess as svcOk } from '../in-process.js';
import { currentCredentials } from '../support/credentials-file.js';

// The CLI works unchanged for its user in every `:auth/sender-constraint` mode: it signs DPoP
// proofs with the device key it signed in with (RFC 9449), whatever the server asks for.

for (const mode of ['required', 'refresh', 'off'] as const) {
  describe(`svc auth login, whoami, refresh, sessions and logout under :auth/sender-constraint :${mode}`, () => {
    const tmp = tempDir(`svc-dpop-${mode}-`);
    const creds = join(tmp.dir, 'creds.json');
    const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: creds });
    let server: ServerProcess | undefined;
    after(async () => {
      await server?.stop('SIGKILL');
      tmp.cleanup();
    });

    test('every command succeeds, and a copied token without the key is refused where the mode binds it', async () => {
      const p = await enrolledProject(tmp.dir, { env });
      const edn = join(p.dir, 'project.edn');
      writeFileSync(edn, readFileSync(edn, 'utf8').replace(':auth/store :store', `:auth/store :store :auth/sender-constraint :${mode}`));
      server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', p.dir], { env });
      await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.url], { env });
      const saved = currentCredentials(creds);
      assert.equal(saved.token_type, mode === 'required' ? 'DPoP' : undefined);
      assert.equal(saved.key_path, p.keyFile, 'the key file (not the key) is saved');
      assert.equal(JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env })).stdout).session, saved.session_id);
      await svcOk(['auth', 'refresh'], { env });
      const rotated = currentCredentials(creds);
      assert.notEqual(rotated.refresh_token, saved.refresh_token);
      assert.equal(JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env })).stdout).session, saved.session_id);
      await svcOk(['auth', 'sessions'], { env });

      const bearer = await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `Bearer ${rotated.access_token}` } });
      assert.equal(bearer.status, mode === 'required' ? 401 : 200, 'the copied access token as a bearer');
      if (mode === 'required') assert.match(bearer.headers.get('www-authenticate') ?? '', /^DPoP /);
      else await bearer.body?.cancel();
      const stolen = await fetch(`${server.url}/v1/auth/refresh`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ refresh_token: rotated.refresh_token }),
      });
      if (mode === 'off') {
        assert.equal(stolen.status, 200, 'under :off a refresh token is a bearer token');
        await stolen.body?.cancel();
      } else {
        assert.equal(stolen.status, 401);
        assert.equal(await problemCode(stolen), 'invalid_dpop_proof');
        await svcOk(['auth', 'logout'], { env });
      }
    });
  });
}

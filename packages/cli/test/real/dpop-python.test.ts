import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cleanEnv, enrolledProject, type ServerProcess, startServer, tempDir } from '../helpers.js';

// Any language can speak DPoP (RFC 9449): a Python client with `cryptography` and PyJWT only
// (Debian's interpreter: `python3` on PATH may be another one without python3-jwt) signs in,
// uses and refreshes its session with proofs by its device key, against a real `svc auth serve`.
const PYTHON = '/usr/bin/python3';
const CLIENT = fileURLToPath(new URL('../support/dpop_client.py', import.meta.url));

for (const mode of ['refresh', 'required'] as const) {
  describe(`a Python DPoP client under :auth/sender-constraint :${mode}`, () => {
    const tmp = tempDir(`svc-dpop-py-${mode}-`);
    const env = cleanEnv({ HOME: tmp.dir });
    let server: ServerProcess | undefined;
    after(async () => {
      await server?.stop('SIGKILL');
      tmp.cleanup();
    });

    test('signs in, calls /me and refreshes with proofs; a refresh without a proof and a replayed proof are refused', async () => {
      const check = spawnSync(PYTHON, ['-c', 'import jwt, cryptography']);
      assert.equal(check.status, 0, `${PYTHON} needs python3-jwt and python3-cryptography: ${check.stderr}`);
      const p = await enrolledProject(tmp.dir, { env });
      const edn = join(p.dir, 'project.edn');
      writeFileSync(edn, readFileSync(edn, 'utf8').replace(':auth/store :store', `:auth/store :store :auth/sender-constraint :${mode}`));
      server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', p.dir], { env });
      const run = spawnSync(PYTHON, [CLIENT, server.url, p.keyFile], { encoding: 'utf8', timeout: 30_000 });
      assert.equal(run.status, 0, `the Python client failed (or ran out of its 30 s): ${run.stderr}`);
      assert.deepEqual(JSON.parse(run.stdout), {
        signin: 201,
        token_type: mode === 'required' ? 'DPoP' : 'Bearer',
        me: 200,
        session_matches: true,
        refresh_without_proof: 'invalid_dpop_proof',
        refresh: 200,
        replayed_proof: 'invalid_dpop_proof',
        me_after_refresh: 200,
      });
    });
  });
}

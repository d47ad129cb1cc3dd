import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cleanEnv, enrolledProject, type ServerProcess, startServer, svcOk, tempDir } from '../helpers.js';
import { currentCredentials } from '../support/credentials-file.js';

function contains(haystack: Buffer, needle: string): boolean {
  return haystack.includes(Buffer.from(needle, 'utf8'));
}

describe('secret hygiene', () => {
  const tmp = tempDir();
  const creds = join(tmp.dir, 'creds.json');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: creds, SVC_LOG_LEVEL: 'debug' });
  let server: ServerProcess | undefined;

  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('no issued access, refresh or bootstrap token appears in the db, -wal, -shm files or the server logs', async () => {
    const { dir, keyFile, bootstrapToken } = await enrolledProject(tmp.dir, { env });
    server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', dir], { env });
    const tokens = [bootstrapToken];
    await svcOk(['auth', 'login', '--key', keyFile, '--url', server.url], { env });
    const first = currentCredentials(creds);
    tokens.push(first.access_token, first.refresh_token);
    await svcOk(['auth', 'whoami'], { env });
    await svcOk(['auth', 'refresh'], { env });
    const second = currentCredentials(creds);
    tokens.push(second.access_token, second.refresh_token);
    // A refused presentation of a retired token must not be logged either.
    await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `Bearer ${first.access_token}` } });
    await fetch(`${server.url}/v1/auth/refresh`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ refresh_token: `svcr_${'0'.repeat(26)}${'x'.repeat(43)}` }),
    });
    // Read the side files while the server still holds them open.
    const db = join(dir, '.svc', 'control', 'control.db');
    const files = ['', '-wal', '-shm'].map((s) => {
      try {
        return readFileSync(db + s);
      } catch {
        return Buffer.alloc(0);
      }
    });
    await svcOk(['auth', 'logout'], { env });
    assert.equal(await server.stop('SIGTERM'), 0);
    const logs = Buffer.from(server.stderr(), 'utf8');
    assert.ok(logs.length > 0, 'the server logged something');
    files.push(readFileSync(db));
    for (const token of tokens) {
      assert.match(token, /^svc[bar]_/);
      for (const f of files) assert.equal(contains(f, token), false, 'a token is in a database file');
      assert.equal(contains(logs, token), false, 'a token is in the server log');
      // Nor its base64url body on its own.
      assert.equal(contains(logs, token.slice(5)), false, 'a token body is in the server log');
    }
  });
});

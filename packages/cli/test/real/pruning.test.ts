import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { cleanEnv, enrolledProject, startServer, tempDir } from '../helpers.js';
import { loginOverHttp, refresh, revoke } from '../support/store-projects.js';

const tmp = tempDir();
after(() => tmp.cleanup());

function retiredCount(dir: string): number {
  const db = new Database(join(dir, '.svc', 'control', 'control.db'), { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM retired_refresh_tokens').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

test('a running service prunes the retired refresh tokens of ended sessions and keeps those of live ones', async () => {
  const { dir, keyFile, publicKey } = await enrolledProject(tmp.dir);
  const env = cleanEnv();
  let server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', dir], { env });
  // Two sessions, each rotated twice: each retires one digest for good.
  const rotateTwice = async () => {
    const pair = await loginOverHttp(server.url, keyFile, publicKey);
    const first = (await (await refresh(server.url, pair.refresh_token)).json()) as { refresh_token: string };
    const second = (await (await refresh(server.url, first.refresh_token)).json()) as { access_token: string; session_id: string };
    return second;
  };
  await rotateTwice();
  const ended = await rotateTwice();
  assert.equal((await revoke(server.url, ended.access_token)).status, 200);
  assert.equal(retiredCount(dir), 2);
  await server.stop();

  server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', dir], { env });
  try {
    // Pruning runs right after start; give it a moment on a loaded machine.
    for (let i = 0; i < 100 && retiredCount(dir) !== 1; i++) await sleep(100);
    assert.equal(retiredCount(dir), 1, 'only the ended session lost its retired digest');
  } finally {
    await server.stop();
  }
});

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type PrivatePostgres, startPrivatePostgres } from '../../../store-postgres/test/private-postgres.js';
import { cleanEnv, enrolledProject, type ServerProcess, startServer, tempDir, waitUntil } from '../helpers.js';
import { loginOverHttp, me, refresh, type TokenPair, writePostgresProject } from '../support/store-projects.js';

/**
 * Real `svc auth serve` processes ("nodes") on a private PostgreSQL server that this file
 * starts, restarts and freezes itself: the faults of issue 10, replayed end to end.
 */
describe('svc nodes under PostgreSQL faults (a private server, started and stopped by this file)', () => {
  const tmp = tempDir('svc-pg-faults-');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json') });
  let pg: PrivatePostgres;
  let project: { dir: string; keyFile: string; publicKey: string };
  const servers: ServerProcess[] = [];
  before(async () => {
    pg = await startPrivatePostgres();
    await writePostgresProject(tmp.dir, { schema: 'svc_faults', env, url: pg.url });
    project = await enrolledProject(tmp.dir, { env });
    for (let i = 0; i < 2; i++) servers.push(await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', project.dir], { env }));
  });
  after(async () => {
    for (const s of servers) await s.stop('SIGKILL');
    try {
      await pg?.dispose();
    } finally {
      tmp.cleanup();
    }
  });

  test('a PostgreSQL restart under load (16 concurrent clients) crashes no node: failures are 503 store_unavailable, then service resumes', async (t) => {
    const statuses = new Map<string, number>();
    const count = (key: string) => statuses.set(key, (statuses.get(key) ?? 0) + 1);
    let running = true;
    let ok = 0;
    // 16 clients over both nodes, each signing in once, then refreshing and checking its token.
    const client = async (i: number) => {
      const url = servers[i % servers.length]?.url as string;
      let pair: TokenPair | undefined;
      while (running) {
        try {
          if (pair === undefined) {
            pair = await loginOverHttp(url, project.keyFile, project.publicKey);
            continue;
          }
          const r = await refresh(url, pair.refresh_token);
          const body = (await r.json()) as TokenPair & { code?: string };
          if (r.status === 200) {
            pair = body;
            const check = await me(url, pair.access_token);
            if (check.status === 200) ok++;
            else count(`me ${check.status} ${((await check.json()) as { code?: string }).code}`);
            await check.body?.cancel().catch(() => undefined);
          } else {
            count(`refresh ${r.status} ${body.code}`);
            // A refresh refused during the outage may have rotated before it failed: sign in again.
            pair = undefined;
          }
        } catch (err) {
          // The sign-in helper throws on a non-201; anything else is a dead node (connection refused).
          const m = /^(challenge|session): (\d+) .*"code":"([a-z_]+)"/s.exec(String((err as Error).message));
          count(m === null ? `error ${String(err)}` : `sign-in ${m[2]} ${m[3]}`);
          pair = undefined;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    };
    const clients = Array.from({ length: 16 }, (_, i) => client(i));
    await waitUntil('50 successful refreshes before the restart', () => ok >= 50);
    await pg.restart();
    const before = ok;
    await waitUntil('50 successful refreshes after the restart', () => ok >= before + 50);
    running = false;
    await Promise.all(clients);
    t.diagnostic(`refusals during the restart: ${JSON.stringify([...statuses])}; ok before ${before}, after ${ok}`);
    for (const s of servers) assert.equal(s.child.exitCode, null, `a node died: ${s.stderr().slice(-2000)}`);
    const unexpected = [...statuses.keys()].filter((k) => !/ 503 store_unavailable$/.test(k));
    assert.deepEqual(unexpected, [], 'every refusal during the restart is 503 store_unavailable');
    for (const s of servers) assert.equal((await fetch(`${s.url}/health`)).status, 200);
  });

  test('a frozen PostgreSQL (SIGSTOP) makes requests and health answer 503 instead of hanging, and the nodes recover on SIGCONT', async () => {
    const url = servers[0]?.url as string;
    const pair = await loginOverHttp(url, project.keyFile, project.publicKey);
    pg.freeze();
    try {
      const [health, check, renewed] = await Promise.all([
        fetch(`${url}/health`),
        me(url, pair.access_token),
        refresh(url, pair.refresh_token),
      ]);
      assert.equal(health.status, 503);
      const h = (await health.json()) as { code: string; health: string; reason: string };
      assert.equal(h.code, 'store_unavailable');
      assert.equal(h.health, 'degraded');
      assert.equal(h.reason, 'timeout');
      for (const r of [check, renewed]) {
        assert.equal(r.status, 503);
        assert.equal(((await r.json()) as { code: string }).code, 'store_unavailable');
        assert.match(r.headers.get('retry-after') ?? '', /^\d+$/);
      }
    } finally {
      pg.thaw();
    }
    await waitUntil('the node to answer /health with 200 after SIGCONT', async () => (await fetch(`${url}/health`)).status === 200, {
      everyMs: 100,
    });
    assert.equal((await me(url, (await loginOverHttp(url, project.keyFile, project.publicKey)).access_token)).status, 200);
    assert.equal(servers[0]?.child.exitCode, null);
  });
});

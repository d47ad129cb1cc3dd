// The console's Status page lists the applications behind the gateway (#29): each route of
// :svc/app-routes with its public paths, requirement and audience, and each upstream's health
// (a TCP connect bounded to 1 s, cached 5 s): one upstream running, one whose port nothing
// listens on. Real Chromium, through svc serve and svc auth console.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startEchoUpstream, type Upstream } from '../../../server/test/support/upstream-harness.js';
import { cleanEnv, enrolledProject, freePort, type StartedProcess, svcOk, tempDir } from '../helpers.js';
import { checkPage, launchBrowser } from '../repo.js';
import { type ServedUrls, serveAll } from '../support/serve-all.js';

type Browser = Awaited<ReturnType<typeof launchBrowser>>;

describe('the console Status page shows the routes and their upstreams health', () => {
  const tmp = tempDir('svc-console-routes-');
  const adminEnv = cleanEnv({ HOME: join(tmp.dir, 'admin-home'), SVC_CREDENTIALS: join(tmp.dir, 'admin-home', 'credentials.json') });
  let server: StartedProcess<ServedUrls>;
  let browser: Browser;
  let grafana: Upstream;
  let downPort: number;

  before(async () => {
    grafana = await startEchoUpstream();
    downPort = await freePort();
    const p = await enrolledProject(tmp.dir, { env: adminEnv });
    const edn = join(p.dir, 'project.edn');
    writeFileSync(
      edn,
      readFileSync(edn, 'utf8').replace(
        /^\{/,
        `{:svc/app-routes [{:from "https://grafana.example.com" :to "${grafana.url.origin}"
                    :public ["/api/health"] :require {:groups ["ops"]}}
                   {:from "https://tools.example.com/wiki/*" :to "http://127.0.0.1:${downPort}"
                    :require {:email-domains ["example.com"]} :audience "wiki"}]
 `,
      ),
    );
    server = await serveAll(p.dir, adminEnv);
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.ready.management], { env: adminEnv });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await server?.stop('SIGKILL');
    await grafana?.close();
    tmp.cleanup();
  });

  test('each route: from, to, public paths, requirement, audience, and its upstream reachable or not', async () => {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    const { url } = JSON.parse((await svcOk(['auth', 'console', '--json'], { env: adminEnv })).stdout);
    await page.goto(url);
    await page.click('nav >> text=Status');
    const started = Date.now();
    await page.waitForSelector('h2:has-text("Applications behind the gateway")', { timeout: 10_000 });
    assert.ok(Date.now() - started < 10_000, 'the page is not held up by the unreachable upstream');
    const rows = await page.$$eval('h2:has-text("Applications") + .table-wrap tbody tr', (trs) =>
      trs.map((tr) => Array.from(tr.querySelectorAll('td'), (td: { textContent: string | null }) => (td.textContent ?? '').trim())),
    );
    assert.equal(rows.length, 2, JSON.stringify(rows));
    const [g, w] = rows as [string[], string[]];
    assert.deepEqual(g.slice(0, 5), [
      'https://grafana.example.com',
      grafana.url.origin,
      '/api/health',
      'a member of ops',
      grafana.url.origin,
    ]);
    assert.match(g[5] ?? '', /^reachable \(\d+ ms\)$/);
    assert.deepEqual(w.slice(0, 5), [
      'https://tools.example.com/wiki/*',
      `http://127.0.0.1:${downPort}`,
      'none',
      'an email at example.com, verified',
      'wiki',
    ]);
    assert.match(w[5] ?? '', /^unreachable: ECONNREFUSED$/);
    await checkPage(page, 'console-status-routes');
  });
});

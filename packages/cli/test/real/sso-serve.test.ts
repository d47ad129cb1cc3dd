// One sign-in across route hosts (`:svc/app-auth-origin`, #28 part 2) as an operator sets it up:
// `svc serve` with `:svc/app-routes` on three host names that share no parent domain (localhost,
// app.b.test, wiki.c.test, the last two mapped to the gateway on loopback in Chromium), the
// bundled passkey provider at the auth origin. A real
// Chromium with a virtual authenticator signs up once, reaches the other two hosts signed in
// without a sign-in page, logs out on one, and is signed out on all three.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cleanEnv, freePort, initProject, type StartedProcess, startUntilReady, svcOk, tempDir } from '../helpers.js';
import { launchBrowser, pageWithAuthenticator, REPO_ROOT } from '../repo.js';

const APP_READY = /svc app: application gateway listening on (https?:\/\/\S+)\n/;
// The auth origin is localhost (a secure context over plain HTTP, as WebAuthn needs, and the passkey
// provider's one plain-HTTP origin); its port is the gateway's, so it is set once that is known.
let AUTH = 'http://localhost';
const APP = 'http://app.b.test';
const WIKI = 'http://wiki.c.test';

/** The application behind every route: answers with the identity headers it received. */
async function echoApp(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const seen = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k.startsWith('svc-') && k !== 'svc-assertion'));
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ host: req.headers.host, path: req.url, ...seen, cookie: req.headers.cookie ?? null }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('one sign-in, every route host: svc serve with :svc/app-routes and :svc/app-auth-origin, in Chromium', () => {
  const tmp = tempDir('svc-sso-serve-');
  const dir = join(tmp.dir, 'demo');
  let app: Awaited<ReturnType<typeof echoApp>>;
  let served: StartedProcess<string>;
  let port: number;

  before(async () => {
    await initProject(dir);
    app = await echoApp();
    const sums = readFileSync(join(REPO_ROOT, 'packages/runtime/addons/SHA256SUMS'), 'utf8');
    const digest = /^([0-9a-f]{64}) {2}svc-provider-webauthn-/m.exec(sums)?.[1];
    assert.ok(digest, 'the build bundles the WebAuthn provider');
    const publisher = readFileSync(join(REPO_ROOT, 'keys/svc-publisher.pub'), 'utf8').trim();
    const file = join(dir, 'project.edn');
    writeFileSync(file, readFileSync(file, 'utf8').replace(/^\{/, `{:svc/trusted-publishers {"svc" "${publisher}"}\n `));
    await svcOk(['package', 'install', '@svc/provider-webauthn', '--sha256', digest, dir]);
    port = await freePort();
    AUTH = `http://localhost:${port}`;
    const edn = readFileSync(file, 'utf8')
      .replace(
        /^\{/,
        `{:svc/app-routes [{:from "${AUTH}" :to "${app.url}"} {:from "${APP}" :to "${app.url}"} {:from "${WIKI}" :to "${app.url}"}]
 :svc/app-auth-origin "${AUTH}"
 `,
      )
      .replace(
        ':svc/modules  {',
        `:svc/modules {:passkeys {:package "@svc/provider-webauthn" :activate [:svc/auth-provider]
                           :config {:webauthn/rp-id "localhost" :webauthn/rp-name "Demo"
                                    :webauthn/origins ["${AUTH}"] :provider/jit true}}
                `,
      );
    assert.ok(edn.includes(':passkeys') && edn.includes(':svc/app-auth-origin'), edn);
    writeFileSync(file, edn);
    served = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', `127.0.0.1:${port}`, dir],
      (out) => APP_READY.exec(out)?.[1] ?? null,
      { env: cleanEnv() },
    );
  });
  after(async () => {
    await served?.stop();
    await app?.close();
    tmp.cleanup();
  });

  test('sign up once at the auth origin, the other hosts are signed in without a sign-in page, one logout signs out all three', async () => {
    // Every *.test name on port 80 is the gateway on loopback.
    const browser = await launchBrowser([`--host-resolver-rules=MAP *.test:80 127.0.0.1:${port}`]);
    try {
      const { page } = await pageWithAuthenticator(browser);
      const navigations: string[] = [];
      page.on('request', (r) => {
        if (r.isNavigationRequest()) navigations.push(r.url());
      });
      await page.goto(`${APP}/whoami`);
      assert.equal(new URL(page.url()).origin, AUTH, `sent to the auth origin: ${navigations.join(' ')}`);
      assert.equal(new URL(page.url()).pathname, '/.svc/auth/v1/login');
      await page.fill('#display-name', 'Ada');
      await page.click('button[data-intent="signup"]');
      await page.waitForURL(`${APP}/whoami`, { timeout: 30_000 });
      const first = JSON.parse((await page.textContent('body')) ?? '') as Record<string, string | null>;
      assert.match(first['svc-subject'] ?? '', /^sub_/);
      assert.equal(first.cookie, null, "the gateway's cookies never reach the application");

      navigations.length = 0;
      await page.goto(`${WIKI}/pages`);
      await page.waitForURL(`${WIKI}/pages`, { timeout: 30_000 });
      const wiki = JSON.parse((await page.textContent('body')) ?? '') as Record<string, string | null>;
      assert.equal(wiki['svc-subject'], first['svc-subject'], 'the same person on wiki.c.test');
      assert.notEqual(wiki['svc-session'], first['svc-session'], 'with a session of its own');
      assert.ok(!navigations.some((u) => new URL(u).pathname === '/.svc/auth/v1/login'), `no sign-in page: ${navigations.join(' ')}`);

      await page.goto(`${AUTH}/home`);
      const home = JSON.parse((await page.textContent('body')) ?? '') as Record<string, string | null>;
      assert.equal(home['svc-subject'], first['svc-subject'], 'signed in at the auth origin too');

      await page.goto(`${WIKI}/pages`);
      const out = await page.evaluate(async () => (await fetch('/.svc/auth/v1/logout', { method: 'POST' })).status);
      assert.equal(out, 200);
      for (const origin of [APP, WIKI, AUTH]) {
        await page.goto(`${origin}/after`);
        assert.equal(new URL(page.url()).origin, AUTH, `${origin} signed out: ${page.url()}`);
        assert.equal(new URL(page.url()).pathname, '/.svc/auth/v1/login', `${origin} signed out`);
      }
    } finally {
      await browser.close();
    }
  });
});

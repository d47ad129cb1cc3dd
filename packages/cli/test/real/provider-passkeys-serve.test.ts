// Passkeys end to end, as an operator sets them up and a user signs in: the bundled, signed
// WebAuthn provider installed with `svc package install` by name and digest, trusted through
// the repository's publisher key, activated in project.edn, and `svc serve` in front of an
// application. A real Chromium with a virtual authenticator opens the application, is sent to
// the gateway's sign-in page, creates a passkey, reaches the application with its principal,
// signs out, and signs in again with the same passkey.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cleanEnv, freePort, initProject, keygen, type StartedProcess, startUntilReady, svc, svcOk, tempDir } from '../helpers.js';
import { launchBrowser, pageWithAuthenticator, REPO_ROOT } from '../repo.js';

const ROOT = REPO_ROOT;
const APP_READY = /svc app: application gateway listening on (https?:\/\/\S+)\n/;

/** The application behind the gateway: answers with the identity headers it received. */
async function echoApp(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const seen = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k.startsWith('svc-') && k !== 'svc-assertion'));
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ path: req.url, ...seen, cookie: req.headers.cookie ?? null }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('passkeys through svc serve: the signed, bundled WebAuthn provider, confined, in a real Chromium', () => {
  const tmp = tempDir('svc-passkeys-serve-');
  const dir = join(tmp.dir, 'demo');
  let app: Awaited<ReturnType<typeof echoApp>>;
  let served: StartedProcess<string>;
  let gateway: string;
  // The operator's own home: `svc auth login` saves the management session there.
  const adminEnv = cleanEnv({ HOME: join(tmp.dir, 'admin-home'), SVC_CREDENTIALS: join(tmp.dir, 'admin-home', 'credentials.json') });
  const adminKey = join(tmp.dir, 'admin.pem');

  before(async () => {
    const init = await initProject(dir);
    await svcOk(['auth', 'enroll', init.bootstrap_token, await keygen(adminKey), dir]);
    app = await echoApp();
    const sums = readFileSync(join(ROOT, 'packages/runtime/addons/SHA256SUMS'), 'utf8');
    const digest = /^([0-9a-f]{64}) {2}svc-provider-webauthn-/m.exec(sums)?.[1];
    assert.ok(digest, 'the build bundles the WebAuthn provider');
    // Trust the repository's publisher key, then install by name and digest, as docs/providers.md says.
    const publisher = readFileSync(join(ROOT, 'keys/svc-publisher.pub'), 'utf8').trim();
    const file = join(dir, 'project.edn');
    writeFileSync(file, readFileSync(file, 'utf8').replace(/^\{/, `{:svc/trusted-publishers {"svc" "${publisher}"}\n `));
    await svcOk(['package', 'install', '@svc/provider-webauthn', '--sha256', digest, dir]);
    const port = await freePort();
    gateway = `http://localhost:${port}`;
    const edn = readFileSync(file, 'utf8')
      .replace(/^\{/, `{:svc/app-upstream "${app.url}"\n :svc/app-require {"/hardware/*" {:amr ["hwk"]}}\n `)
      .replace(
        ':svc/modules  {',
        `:svc/modules {:passkeys {:package "@svc/provider-webauthn" :activate [:svc/auth-provider]
                           :config {:webauthn/rp-id "localhost" :webauthn/rp-name "Demo"
                                    :webauthn/origins ["${gateway}"]
                                    :provider/jit true :provider/jit-status :disabled}}
                `,
      );
    assert.ok(edn.includes(':passkeys'), edn);
    writeFileSync(file, edn);
    served = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', `127.0.0.1:${port}`, dir],
      (out) => APP_READY.exec(out)?.[1] ?? null,
      { env: cleanEnv() },
    );
    const management = /svc auth: management API listening on (http:\/\/\S+)/.exec(served.stdout())?.[1];
    assert.ok(management, served.stdout());
    await svcOk(['auth', 'login', '--key', adminKey, '--url', management], { env: adminEnv });
  });
  after(async () => {
    await served?.stop();
    await app?.close();
    tmp.cleanup();
  });

  test('create a passkey, reach the application as its subject, sign out, sign in again with the same passkey', async () => {
    const browser = await launchBrowser();
    try {
      const { page } = await pageWithAuthenticator(browser);
      // No session: the browser is sent to the sign-in page, the application sees nothing.
      await page.goto(`${gateway}/whoami`);
      assert.match(new URL(page.url()).pathname, /^\/\.svc\/auth\/v1\/login/);
      // Sign-up asks for the name the new user will be known by (any script).
      await page.fill('#display-name', 'Zoë Ångström 山田');
      if (process.env.SVC_SCREENSHOTS) await page.screenshot({ path: join(process.env.SVC_SCREENSHOTS, 'login-signup-name.png') });
      await page.click('button[data-intent="signup"]');
      // Sign-up by invitation (the README's setting): the new user waits for an operator.
      await page.locator('#status', { hasText: /administrator must approve/ }).waitFor({ timeout: 15_000 });
      const pending = JSON.parse(
        (await svcOk(['auth', 'users', '--status', 'disabled', '--realm', 'application', '--json'], { env: adminEnv })).stdout,
      ) as {
        users: { subject: string; name: string | null }[];
      };
      const waiting = pending.users.find((u) => u.name === 'Zoë Ångström 山田');
      assert.ok(waiting, `the new user waits, disabled, with the name typed: ${JSON.stringify(pending)}`);
      await svcOk(['auth', 'users', 'enable', waiting.subject], { env: adminEnv });
      // Approved: the same passkey now signs in.
      await page.click('button[data-intent="signin"]');
      await page.waitForURL(`${gateway}/whoami`);
      const first = JSON.parse((await page.textContent('body')) ?? '') as Record<string, string | null>;
      assert.equal(decodeURIComponent(first['svc-name'] ?? ''), 'Zoë Ångström 山田', 'the upstream receives the name typed at sign-up');
      assert.equal(first['svc-realm'], 'application');
      assert.match(first['svc-subject'] ?? '', /^sub_/);
      assert.match(first['svc-device'] ?? '', /^lnk_/, 'the session was made from the passkey link');
      assert.equal(first.cookie, null, "the gateway's session cookies never reach the application");
      // The bundled package, signed by the project key, is trusted to say hwk: a passkey-only path lets it in.
      await page.goto(`${gateway}/hardware/keys`);
      assert.equal((JSON.parse((await page.textContent('body')) ?? '') as { path?: string }).path, '/hardware/keys');

      // The operator sees the link, labelled with the person's name (not the provider module), and the user's name.
      const links = await svcOk(['auth', 'links', dir, '--json']);
      assert.ok(links.stdout.includes(first['svc-device'] as string));
      const table = (await svcOk(['auth', 'links', dir])).stdout;
      const row = table.split('\n').find((l) => l.includes(first['svc-device'] as string)) ?? '';
      assert.match(row, /Zoë Ångström 山田/, table);
      const user = JSON.parse((await svcOk(['auth', 'users', 'show', first['svc-subject'] as string, '--json'], { env: adminEnv })).stdout);
      assert.equal(user.user?.name ?? user.name, 'Zoë Ångström 山田');

      // Sign out: the session ends; the application is out of reach again.
      const out = await page.evaluate(async () => {
        const res = await fetch('/.svc/auth/v1/logout', { method: 'POST' });
        return { status: res.status, body: (await res.json()) as { revoked?: boolean; session_id?: string } };
      });
      assert.equal(out.status, 200);
      assert.deepEqual(out.body, { session_id: first['svc-session'], revoked: true });
      await page.goto(`${gateway}/whoami`);
      assert.match(new URL(page.url()).pathname, /^\/\.svc\/auth\/v1\/login/);

      // Sign in again with the same passkey: the same subject, a new session.
      await page.click('button[data-intent="signin"]');
      await page.waitForURL(`${gateway}/whoami`);
      const second = JSON.parse((await page.textContent('body')) ?? '') as Record<string, string | null>;
      assert.equal(second['svc-subject'], first['svc-subject']);
      assert.equal(second['svc-device'], first['svc-device']);
      assert.notEqual(second['svc-session'], first['svc-session']);
    } finally {
      await browser.close();
    }
  });

  test("an admin's link intent: the invited user types the code on the sign-in page, creates a passkey, and is that subject; the code works once", async () => {
    const node = /svc node: node surface listening on (http:\/\/\S+)/.exec(served.stdout())?.[1] as string;
    const prepared = await svcOk(
      ['auth', 'pair', '--provider', 'passkeys', '--realm', 'application', '--node-url', node, '--app-url', gateway, '--json'],
      { env: adminEnv },
    );
    const intent = JSON.parse(prepared.stdout) as { intent_id: string; code: string; subject: string; sign_in_url: string };
    assert.equal(intent.sign_in_url, `${gateway}/.svc/auth/v1/login?pairing=${intent.intent_id}`);
    assert.ok(!intent.sign_in_url.includes(intent.code), 'the code never goes in the link');
    // The human form names the provider and prints the link.
    const human = await svc(
      ['auth', 'pair', '--provider', 'passkeys', '--realm', 'application', '--node-url', node, '--app-url', gateway],
      {
        env: adminEnv,
      },
    );
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^link intent prepared on /);
    assert.match(human.stdout, /provider: passkeys/);
    assert.match(human.stdout, /\/\.svc\/auth\/v1\/login\?pairing=int_/);

    const browser = await launchBrowser();
    try {
      const { page } = await pageWithAuthenticator(browser);
      await page.goto(`${intent.sign_in_url}&return=${encodeURIComponent('/whoami')}`);
      await page.fill('#pairing-code', intent.code);
      await page.click('button[data-intent="link"]');
      await page.waitForURL(`${gateway}/whoami`);
      const seen = JSON.parse((await page.textContent('body')) ?? '') as Record<string, string | null>;
      assert.equal(seen['svc-subject'], intent.subject, 'signed in as the subject the admin invited');
      assert.match(seen['svc-device'] ?? '', /^lnk_/);
      const links = JSON.parse((await svcOk(['auth', 'links', dir, '--subject', intent.subject, '--json'])).stdout) as {
        links: { id: string }[];
      };
      assert.deepEqual(
        links.links.map((l) => l.id),
        [seen['svc-device']],
      );

      // Another browser with the same code: refused, and no second passkey is linked.
      const other = await pageWithAuthenticator(browser);
      await other.page.goto(intent.sign_in_url);
      await other.page.fill('#pairing-code', intent.code);
      await other.page.click('button[data-intent="link"]');
      // A locator, not waitForFunction with a string: that string is eval'd in the page, which its
      // CSP (script-src with a nonce, no unsafe-eval) refuses once the page has its own document.
      await other.page.locator('#status', { hasText: /\S/ }).waitFor({ state: 'attached', timeout: 30_000 });
      assert.match((await other.page.textContent('#status')) ?? '', /^Sign-in failed: /);
      assert.match(new URL(other.page.url()).pathname, /^\/\.svc\/auth\/v1\/login/);
      const after = JSON.parse((await svcOk(['auth', 'links', dir, '--subject', intent.subject, '--json'])).stdout) as { links: unknown[] };
      assert.equal(after.links.length, 1);
    } finally {
      await browser.close();
    }
  });

  test('discovery on the node surface lists the provider as data, and no route of its own', async () => {
    const node = /svc node: node surface listening on (http:\/\/\S+)/.exec(served.stdout())?.[1];
    assert.ok(node, served.stdout());
    const discovery = (await (await fetch(`${node}/.well-known/edge`)).json()) as { providers?: unknown; routes?: unknown };
    assert.deepEqual(discovery.providers, [
      { name: 'ed25519', kind: 'device-key' },
      { name: 'passkeys', kind: 'webauthn' },
    ]);
    assert.ok(!JSON.stringify(discovery.routes ?? discovery).includes('passkeys/'), 'no provider route is advertised');
  });
});

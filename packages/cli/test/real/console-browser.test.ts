import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pairingProofString } from '@svc/core';
import { cleanEnv, enrolledProject, freePort, keygen, type StartedProcess, svcOk, tempDir } from '../helpers.js';
import { checkPage, launchBrowser, pageWithAuthenticator, REPO_ROOT } from '../repo.js';
import { callJson, type ServedUrls, serveAll, signWith } from '../support/serve-all.js';

type Browser = Awaited<ReturnType<typeof launchBrowser>>;
type Page = Awaited<ReturnType<Browser['newPage']>>;

describe('the management console in Chromium, through svc serve and svc auth console', () => {
  const tmp = tempDir('svc-console-browser-');
  const adminEnv = cleanEnv({ HOME: join(tmp.dir, 'admin-home'), SVC_CREDENTIALS: join(tmp.dir, 'admin-home', 'credentials.json') });
  let server: StartedProcess<ServedUrls>;
  let browser: Browser;
  let page: Page;
  let adminKey: string;
  // The gateway's origin: fixed, since the passkey provider names the origins it accepts.
  let gateway: string;
  const checkpoints = join(tmp.dir, 'checkpoints.jsonl');

  /** The bundled, signed passkey provider installed and activated as docs/providers.md says, for link intents. */
  async function installPasskeys(dir: string, origin: string): Promise<void> {
    const digest = /^([0-9a-f]{64}) {2}svc-provider-webauthn-/m.exec(
      readFileSync(join(REPO_ROOT, 'packages/runtime/addons/SHA256SUMS'), 'utf8'),
    )?.[1];
    assert.ok(digest, 'the build bundles the WebAuthn provider');
    const publisher = readFileSync(join(REPO_ROOT, 'keys/svc-publisher.pub'), 'utf8').trim();
    const file = join(dir, 'project.edn');
    writeFileSync(file, readFileSync(file, 'utf8').replace(/^\{/, `{:svc/trusted-publishers {"svc" "${publisher}"}\n `));
    await svcOk(['package', 'install', '@svc/provider-webauthn', '--sha256', digest, dir], { env: adminEnv });
    const edn = readFileSync(file, 'utf8').replace(
      ':svc/modules  {',
      `:svc/modules {:passkeys {:package "@svc/provider-webauthn" :activate [:svc/auth-provider]
                           :config {:webauthn/rp-id "localhost" :webauthn/rp-name "Demo" :webauthn/origins ["${origin}"]}}
                `,
    );
    assert.ok(edn.includes(':passkeys'), edn);
    writeFileSync(file, edn);
  }

  const consoleUrl = async (): Promise<{ url: string; expires_in: number }> =>
    JSON.parse((await svcOk(['auth', 'console', '--json'], { env: adminEnv })).stdout);

  before(async () => {
    const p = await enrolledProject(tmp.dir, { env: adminEnv });
    adminKey = p.keyFile;
    const port = await freePort();
    gateway = `http://localhost:${port}`;
    await installPasskeys(p.dir, gateway);
    // The service exports signed checkpoints of the audit head to a file outside the control directory.
    server = await serveAll(p.dir, { ...adminEnv, SVC_AUDIT_CHECKPOINT_FILE: checkpoints }, { appListen: `127.0.0.1:${port}` });
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.ready.management], { env: adminEnv });
    browser = await launchBrowser();
    page = await (await browser.newContext({ viewport: { width: 1100, height: 800 } })).newPage();
  });
  after(async () => {
    await browser?.close();
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('sign in by the one-time URL (a second use and a use after 60 s refused), disable a user whose old token is then refused, follow the audit live while a sign-in happens', async () => {
    // Minted first: it is used once the rest has given it more than 60 s.
    const late = await consoleUrl();
    const lateMintedAt = Date.now();
    assert.equal(late.expires_in, 60);

    const text = (await svcOk(['auth', 'console'], { env: adminEnv })).stdout;
    assert.match(text, /works once/);
    const printed = /^(http:\/\/127\.0\.0\.1:\d+\/console\/login\?code=\S+)$/m.exec(text)?.[1];
    assert.ok(printed !== undefined, text);
    assert.ok(printed.startsWith(server.ready.management), 'a loopback URL of this management listener');

    // No cookie yet: the hint page.
    await page.goto(`${server.ready.management}/console/users`);
    assert.match((await page.textContent('main')) ?? '', /svc auth console/);
    await checkPage(page, 'console-signin');

    const first = await consoleUrl();
    const response = await page.goto(first.url);
    assert.equal(response?.status(), 200);
    assert.equal(new URL(page.url()).pathname, '/console/users');
    assert.match((await page.textContent('header')) ?? '', /Signed in as/);

    // A second use, even from another browser, is refused.
    const other = await (await browser.newContext()).newPage();
    const reused = await other.goto(first.url);
    assert.equal(reused?.status(), 400);
    assert.match((await other.textContent('h1')) ?? '', /cannot be used/);
    await checkPage(other, 'console-link-used');
    await other.context().close();

    // Pairing from the console: an application device; the code is shown once.
    const deviceKey = join(tmp.dir, 'app.pem');
    const devicePublic = await keygen(deviceKey, { env: adminEnv });
    await page.click('nav >> text=Pairing');
    await checkPage(page, 'console-pairing');
    await page.fill('#d-key', devicePublic);
    await page.fill('#d-name', 'Build agent');
    await page.click('text=Prepare device code');
    await checkPage(page, 'console-pairing-code');
    const code = ((await page.textContent('.code-big')) ?? '').trim();
    const intentId = ((await page.textContent('.facts dd code')) ?? '').trim();
    assert.match(code, /^[0-9A-Z]{4}-[0-9A-Z]{4}$/);
    const nodeId = (await callJson(`${server.ready.node}/.well-known/edge`, 'GET')).body.node_id as string;
    const completed = await callJson(`${server.ready.node}/edge/0-alpha/pairing/complete`, 'POST', undefined, {
      intent_id: intentId,
      code,
      public_key: devicePublic,
      signature: signWith(deviceKey, pairingProofString({ nodeId, intentId, publicKey: devicePublic })),
    });
    assert.equal(completed.status, 201, JSON.stringify(completed.body));
    const subject = completed.body.device.subject as string;
    const challenge = await callJson(`${server.ready.app}/.svc/auth/v1/challenges`, 'POST', undefined, { public_key: devicePublic });
    const signedIn = await callJson(`${server.ready.app}/.svc/auth/v1/sessions`, 'POST', undefined, {
      challenge_id: challenge.body.challenge_id,
      signature: signWith(deviceKey, challenge.body.challenge),
    });
    assert.equal(signedIn.status, 201);
    const oldToken = signedIn.body.access_token as string;
    assert.equal((await callJson(`${server.ready.app}/.svc/auth/v1/me`, 'GET', oldToken)).status, 200);

    // Users: the list, the user's page, give them a name, then disable them.
    await page.click('nav >> text=Users');
    await page.fill('#f-text', subject);
    await page.click('button:has-text("Filter")');
    await page.click(`a[href="/console/users/${subject}"]`);
    await page.fill('#e-name', 'Build Agent');
    await page.fill('#e-groups', 'ci, builders');
    await page.click('button:has-text("Save")');
    assert.match((await page.textContent('[role=status]')) ?? '', /saved/);
    await page.click('button:has-text("Disable user")');
    assert.match((await page.textContent('[role=status]')) ?? '', /disabled/);
    await checkPage(page, 'console-user');
    const refused = await callJson(`${server.ready.app}/.svc/auth/v1/me`, 'GET', oldToken);
    assert.equal(refused.status, 401, 'the next request with the old token');
    assert.equal(refused.body.code, 'invalid_token');
    await page.click('nav >> text=Users');
    await checkPage(page, 'console-users');

    // Recovery of a lost passkey: enable the user again, prepare a link intent for them on their
    // page; they type the code on the gateway's sign-in page and create a new passkey.
    await page.click(`a[href="/console/users/${subject}"]`);
    await page.click('button:has-text("Enable user")');
    assert.match((await page.textContent('[role=status]')) ?? '', /enabled/);
    await page.selectOption('#u-provider', 'passkeys');
    await page.click('button:has-text("Prepare link code")');
    assert.match((await page.textContent('h1')) ?? '', /Pairing code ready/);
    const linkCode = ((await page.textContent('.code-big')) ?? '').trim();
    const linkIntent = ((await page.textContent('.facts dd code')) ?? '').trim();
    assert.match(linkCode, /^[0-9A-Z]{4}-[0-9A-Z]{4}$/);
    assert.match((await page.textContent('main')) ?? '', new RegExp(`/\\.svc/auth/v1/login\\?pairing=${linkIntent}`));
    await checkPage(page, 'console-pairing-link-code');
    const holder = await pageWithAuthenticator(browser);
    await holder.page.goto(`${gateway}/.svc/auth/v1/login?pairing=${linkIntent}`);
    await holder.page.fill('#pairing-code', linkCode);
    await holder.page.click('button[data-intent="link"]');
    await holder.page.waitForURL((u) => !u.pathname.startsWith('/.svc/auth/v1/login'), { timeout: 30_000 });
    await holder.context.close();
    await page.goto(`${server.ready.management}/console/users/${subject}`);
    const linkRow = page.locator('tr', { hasText: 'passkeys' });
    assert.equal(await linkRow.count(), 1, 'the new passkey is linked to that user');
    // The linked sign-in, removed from the console.
    await linkRow.locator('button:has-text("Remove")').click();
    assert.match((await page.textContent('[role=status]')) ?? '', /linked sign-in is removed/);
    assert.equal(await page.locator('tr', { hasText: 'passkeys' }).count(), 0);

    // Groups: every group with its members and where it comes from.
    await page.click('nav >> text=Groups');
    const builders = page.locator('tr', { hasText: 'builders' });
    assert.match((await builders.textContent()) ?? '', /Build Agent/);
    assert.match((await builders.textContent()) ?? '', /operator/);
    await checkPage(page, 'console-groups');

    // Add a user, then remove them: the removal is confirmed on a page of its own.
    await page.click('nav >> text=Users');
    await page.click('summary:has-text("Add a user")');
    await page.fill('#n-name', 'Temp Contractor');
    await page.click('button:has-text("Add user")');
    assert.match((await page.textContent('[role=status]')) ?? '', /added/);
    await page.click('text=Remove user…');
    assert.match((await page.textContent('main')) ?? '', /cannot be undone/);
    await checkPage(page, 'console-user-remove');
    await page.click('button:has-text("Remove Temp Contractor")');
    assert.match((await page.textContent('[role=status]')) ?? '', /user is removed/);

    // The audit trail, followed live while the administrator signs in again from the CLI.
    await page.click('nav >> text=Audit trail');
    await page.click('#follow');
    await page.waitForSelector('#live-status:has-text("Following")', { timeout: 10_000 });
    await svcOk(['auth', 'login', '--key', adminKey, '--url', server.ready.management], { env: adminEnv });
    await page.waitForSelector('tr.fresh:has-text("session.created")', { timeout: 15_000 });
    assert.equal(new URL(page.url()).pathname, '/console/audit', 'no reload');
    await checkPage(page, 'console-audit');
    await page.click('text=Verify the chain and checkpoints');
    assert.match((await page.textContent('#chain-verdict')) ?? '', /hash chain is intact/);
    // The checkpoint the service signed when it started, verified against the node key and the chain.
    assert.match((await page.textContent('#checkpoints-verdict')) ?? '', /exported checkpoints? verif(y|ies) against the node key history/);
    assert.ok(readFileSync(checkpoints, 'utf8').trim().split('\n').length >= 1);
    await checkPage(page, 'console-audit-verify');

    await page.click('nav >> text=Sessions & devices');
    await checkPage(page, 'console-sessions');
    await page.click('nav >> text=Status');
    await checkPage(page, 'console-status');

    // The link minted first, used after its 60 s: refused.
    const wait = lateMintedAt + 61_000 - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const stale = await (await browser.newContext()).newPage();
    const lateUse = await stale.goto(late.url);
    assert.equal(lateUse?.status(), 400, 'a link used after 60 s');
    await stale.context().close();

    // Sign out: the console asks for a new link.
    await page.click('header >> text=Sign out');
    assert.match((await page.textContent('h1')) ?? '', /Signed out/);
    await page.goto(`${server.ready.management}/console/users`);
    assert.match((await page.textContent('h1')) ?? '', /Sign in to the console/);
  });
});

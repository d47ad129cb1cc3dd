// End to end: the real headless Chromium signs in at a real OpenID Provider (oidc-provider on
// 127.0.0.1) through a harness playing the service (begin, a cookie-keyed single-use flow,
// finish), and every attack below is refused by the provider, not by the harness.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { parseEdn } from '@svc/cli';
import type { ProviderJson } from '@svc/core';
import { createOidcProvider, OidcRefusal } from '../../src/index.js';
import { launchBrowser } from '../repo.js';
import { type CapturedCallback, type Harness, startHarness } from '../support/harness.js';
import { claimsOf, startIdp, type TestIdp } from '../support/idp.js';
import { startKeySwappingProxy } from '../support/key-swapping-proxy.js';
import { startMixUpIssuer } from '../support/mix-up-issuer.js';
import { providerConfigOf } from '../support/module-config.js';

type Browser = Awaited<ReturnType<typeof launchBrowser>>;
type Page = Awaited<ReturnType<Browser['newPage']>>;

const provider = createOidcProvider();
let browser: Browser;
let harness: Harness;
let idp: TestIdp;

function configOf(i: { issuer: string; clientId: string; clientSecret: string }, extra: Record<string, ProviderJson> = {}): ProviderJson {
  return { 'oidc/issuer': i.issuer, 'oidc/client-id': i.clientId, 'oidc/client-secret': i.clientSecret, ...extra };
}

before(async () => {
  browser = await launchBrowser();
  harness = await startHarness(provider, null);
  idp = await startIdp({ redirectUris: [harness.callbackUrl] });
});

after(async () => {
  await browser?.close();
  await harness?.close();
  await idp?.close();
});

/** Runs `fn` with a page in a fresh browser context (its own cookies), closed whatever happens. */
async function withPage<T>(fn: (page: Page) => Promise<T>): Promise<T> {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(10_000);
    return await fn(page);
  } finally {
    await context.close();
  }
}

/** From the harness's /start through the IdP's login and consent pages, as a person would. */
async function signInAtIdp(page: Page, sub: string): Promise<void> {
  await page.goto(harness.startUrl);
  await page.fill('input[name=login]', sub);
  await page.fill('input[name=password]', 'any password');
  await page.click('button[type=submit]');
  await page.click('button:has-text("Continue")');
  await page.waitForURL((u) => u.origin === harness.origin && u.pathname === '/callback');
}

/** Signs in with the harness in capture mode: the callback's query and the flow state, nothing finished. */
async function captureCallback(config: ProviderJson, sub: string): Promise<CapturedCallback> {
  harness.mode = 'capture';
  harness.config = config;
  harness.captured.length = 0;
  try {
    await withPage((page) => signInAtIdp(page, sub));
  } finally {
    harness.mode = 'finish';
  }
  const captured = harness.captured[0];
  assert.ok(captured !== undefined, 'the harness saw no callback');
  return captured;
}

async function refusal(p: Promise<unknown>): Promise<OidcRefusal> {
  try {
    await p;
  } catch (error) {
    assert.ok(error instanceof OidcRefusal, `expected an OidcRefusal, got ${String(error)}`);
    return error;
  }
  assert.fail('the provider accepted it');
}

test('a user signs in at the real OpenID Provider in the browser: PKCE S256, state and nonce sent; the identity is the issuer, sub and claims', async () => {
  harness.config = configOf(idp);
  const identity = await withPage(async (page) => {
    const authorizeUrls: URL[] = [];
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.origin === idp.issuer && u.pathname === '/auth') authorizeUrls.push(u);
    });
    await signInAtIdp(page, 'ada');
    const auth = authorizeUrls[0];
    assert.ok(auth !== undefined);
    assert.equal(auth.searchParams.get('code_challenge_method'), 'S256');
    assert.match(auth.searchParams.get('code_challenge') ?? '', /^[A-Za-z0-9_-]{43}$/);
    assert.ok((auth.searchParams.get('state') ?? '').length >= 20);
    assert.ok((auth.searchParams.get('nonce') ?? '').length >= 20);
    assert.equal(auth.searchParams.get('redirect_uri'), harness.callbackUrl);
    assert.equal(auth.searchParams.get('scope'), 'openid email profile');
    assert.equal(auth.searchParams.get('client_secret'), null);
    return JSON.parse((await page.textContent('#identity', { timeout: 2000 })) ?? 'null') as unknown;
  });
  assert.deepEqual(identity, { issuer: idp.issuer, subject: 'ada', claims: claimsOf('ada') });
  assert.equal(harness.pendingFlows(), 0);
});

test('email and name come from the ID token when it has them, from userinfo (same sub) only when it does not', async () => {
  const config = configOf(idp);
  const before = idp.userinfoRequests();
  const viaUserinfo = await captureCallback(config, 'ui-user');
  const a = await provider.finish(harness.ctx, config, {
    state: viaUserinfo.state,
    request: { query: viaUserinfo.query, body: null },
    credential: null,
  });
  assert.deepEqual(a.identity.claims, claimsOf('ui-user'));
  assert.equal(idp.userinfoRequests(), before + 1);
  const rich = await startIdp({ redirectUris: [harness.callbackUrl], claimsInIdToken: true });
  try {
    const richConfig = configOf(rich);
    const viaIdToken = await captureCallback(richConfig, 'id-user');
    const b = await provider.finish(harness.ctx, richConfig, {
      state: viaIdToken.state,
      request: { query: viaIdToken.query, body: null },
      credential: null,
    });
    assert.deepEqual(b.identity, { issuer: rich.issuer, subject: 'id-user', claims: claimsOf('id-user') });
    assert.equal(rich.userinfoRequests(), 0);
  } finally {
    await rich.close();
  }
});

test('a tampered state on the callback is refused, and the flow it burned cannot be finished after', async () => {
  harness.config = configOf(idp);
  harness.captured.length = 0;
  await withPage(async (page) => {
    // The attacker holds the redirect before it reaches the service, and changes its state.
    harness.mode = 'hold';
    try {
      await signInAtIdp(page, 'mallory-victim');
    } finally {
      harness.mode = 'finish';
    }
    const held = harness.captured[0];
    assert.ok(held !== undefined && held.query.state !== undefined);
    const state = held.query.state;
    const tampered = { ...held.query, state: `${state.slice(0, -1)}${state.endsWith('A') ? 'B' : 'A'}` };
    await page.goto(`${harness.callbackUrl}?${new URLSearchParams(tampered)}`);
    assert.match((await page.textContent('#refused')) ?? '', /^response_refused: .*unexpected "state" response parameter value/);
    await page.goto(`${harness.callbackUrl}?${new URLSearchParams(held.query)}`);
    assert.match((await page.textContent('#refused')) ?? '', /^no_flow/);
  });
});

test('a replayed authorization code is refused: the IdP refuses the used code, and the flow is single use', async () => {
  const config = configOf(idp);
  const { query, state } = await captureCallback(config, 'grace');
  const first = await provider.finish(harness.ctx, config, { state, request: { query, body: null }, credential: null });
  assert.equal(first.identity.subject, 'grace');
  const replay = await refusal(provider.finish(harness.ctx, config, { state, request: { query, body: null }, credential: null }));
  assert.equal(replay.code, 'code_refused');
  assert.match(replay.message, /invalid_grant/);
  // The browser replaying the callback finds no flow: the service's state is single use.
  await withPage(async (page) => {
    await page.goto(`${harness.callbackUrl}?${new URLSearchParams(query)}`);
    assert.match((await page.textContent('#refused')) ?? '', /^no_flow/);
  });
});

test('an intercepted code without the flow’s PKCE verifier is refused by the IdP', async () => {
  const config = configOf(idp);
  const { query, state } = await captureCallback(config, 'eve-target');
  const attackerState = { ...(state as Record<string, ProviderJson>), codeVerifier: 'x'.repeat(64) };
  const refused = await refusal(
    provider.finish(harness.ctx, config, { state: attackerState, request: { query, body: null }, credential: null }),
  );
  assert.equal(refused.code, 'code_refused');
  assert.match(refused.message, /invalid_grant/);
});

test('an ID token whose nonce is not the flow’s (an injected token) is refused', async () => {
  const config = configOf(idp);
  const { query, state } = await captureCallback(config, 'nonce-victim');
  const otherFlow = { ...(state as Record<string, ProviderJson>), nonce: 'a-nonce-of-another-flow-0123456789' };
  const refused = await refusal(
    provider.finish(harness.ctx, config, { state: otherFlow, request: { query, body: null }, credential: null }),
  );
  assert.equal(refused.code, 'response_refused');
  assert.match(refused.message, /unexpected ID Token "nonce" claim value/);
});

test('mix-up: a code from another OpenID Provider is refused, by the iss callback parameter or its absence', async () => {
  const other = await startIdp({ redirectUris: [harness.callbackUrl] });
  try {
    // The victim began a flow at the configured IdP; the attacker completes one at the other.
    const victimConfig = configOf(idp);
    const victim = await provider.begin(harness.ctx, victimConfig);
    const victimState = (victim.state as { state: string }).state;
    const { query } = await captureCallback(configOf(other), 'attacker');
    assert.equal(query.iss, other.issuer);
    const spliced = { code: query.code ?? '', state: victimState };
    const withIss = await refusal(
      provider.finish(harness.ctx, victimConfig, {
        state: victim.state,
        request: { query: { ...spliced, iss: other.issuer }, body: null },
        credential: null,
      }),
    );
    assert.equal(withIss.code, 'response_refused');
    assert.match(withIss.message, /unexpected "iss" \(issuer\) response parameter value/);
    // Stripping `iss` does not help: the configured IdP advertises RFC 9207, so its absence is refused.
    const withoutIss = await refusal(
      provider.finish(harness.ctx, victimConfig, { state: victim.state, request: { query: spliced, body: null }, credential: null }),
    );
    assert.equal(withoutIss.code, 'response_refused');
    assert.match(withoutIss.message, /response parameter "iss" \(issuer\) missing/);
  } finally {
    await other.close();
  }
});

test('mix-up: ID tokens signed by an issuer other than the configured one are refused', async () => {
  const fake = await startMixUpIssuer(idp.issuer);
  try {
    const config = configOf({ ...idp, issuer: fake.issuer });
    const { query, state } = await captureCallback(config, 'ada');
    // With the real IdP's `iss` on the callback, the parameter gives it away...
    const byParam = await refusal(provider.finish(harness.ctx, config, { state, request: { query, body: null }, credential: null }));
    assert.match(byParam.message, /unexpected "iss" \(issuer\) response parameter value/);
    // ...and without it, the ID token's own `iss` does (the code is still unused: the first try stopped before the token endpoint).
    const { iss: _stripped, ...noIss } = query;
    const byToken = await refusal(provider.finish(harness.ctx, config, { state, request: { query: noIss, body: null }, credential: null }));
    assert.equal(byToken.code, 'response_refused');
    assert.match(byToken.message, /unexpected JWT "iss" \(issuer\) claim value/);
  } finally {
    await fake.close();
  }
});

test('an ID token whose signature does not verify against the issuer’s keys is refused', async () => {
  const proxy = await startKeySwappingProxy('/jwks');
  const behind = await startIdp({ redirectUris: [harness.callbackUrl], issuer: proxy.origin });
  proxy.targetPort = behind.port;
  try {
    const config = configOf(behind);
    const { query, state } = await captureCallback(config, 'sig-victim');
    const refused = await refusal(provider.finish(harness.ctx, config, { state, request: { query, body: null }, credential: null }));
    assert.equal(refused.code, 'response_refused');
    assert.match(refused.message, /signature/i);
  } finally {
    await behind.close();
    await proxy.close();
  }
});

test('an issuer whose discovery document names another issuer is refused at begin, and health says down without the secret', async () => {
  const elsewhere = await startIdp({ redirectUris: [harness.callbackUrl], host: 'localhost' });
  try {
    // Reached at 127.0.0.1, it says it is `http://localhost:<port>`: not the issuer configured.
    const config = configOf({ ...elsewhere, issuer: elsewhere.issuer.replace('localhost', '127.0.0.1') });
    const refused = await refusal(provider.begin(harness.ctx, config));
    assert.equal(refused.code, 'discovery_failed');
    assert.match(refused.message, /discovered metadata issuer does not match the expected issuer/);
    const health = await provider.health(config);
    assert.equal(health.status, 'down');
    assert.ok(health.detail !== undefined && !health.detail.includes(elsewhere.clientSecret));
  } finally {
    await elsewhere.close();
  }
});

test('the user cancelling at the IdP (error=access_denied) is a clear refusal', async () => {
  harness.config = configOf(idp);
  await withPage(async (page) => {
    await page.goto(harness.startUrl);
    await page.click('text=[ Cancel ]');
    await page.waitForURL((u) => u.origin === harness.origin && u.pathname === '/callback');
    assert.equal(new URL(page.url()).searchParams.get('error'), 'access_denied');
    assert.equal(await page.textContent('#refused'), 'provider_error: the OpenID Provider refused the sign-in: access_denied');
  });
});

test('health is ok while the issuer’s discovery answers, and down with the reason when it does not', async () => {
  assert.deepEqual(await provider.health(configOf(idp)), { status: 'ok' });
  const gone = await startIdp({ redirectUris: [harness.callbackUrl] });
  const config = configOf(gone);
  await gone.close();
  const health = await provider.health(config);
  assert.equal(health.status, 'down');
  assert.match(health.detail ?? '', /^discovery of http:\/\/127\.0\.0\.1:\d+ failed: .*ECONNREFUSED/);
  assert.ok(!(health.detail ?? '').includes(gone.clientSecret));
});

test('discovery is fetched once per issuer for many logins; a health check does not evict it', async () => {
  const fresh = createOidcProvider();
  const own = await startIdp({ redirectUris: [harness.callbackUrl] });
  try {
    const config = configOf(own);
    const first = await fresh.begin(harness.ctx, config);
    await fresh.begin(harness.ctx, config);
    assert.equal(own.discoveryRequests(), 1);
    assert.deepEqual(await fresh.health(config), { status: 'ok' });
    assert.equal(own.discoveryRequests(), 2);
    const again = await fresh.begin(harness.ctx, config);
    assert.equal(own.discoveryRequests(), 2);
    // Each flow has its own state, nonce and PKCE verifier.
    const a = first.state as Record<string, string>;
    const b = again.state as Record<string, string>;
    for (const k of ['state', 'nonce', 'codeVerifier']) assert.notEqual(a[k], b[k]);
  } finally {
    await own.close();
  }
});

/** The documented module (docs/providers.md section 6), with the issuer and client of a test IdP. */
function moduleEdn(i: TestIdp, secretRef: string, extra = ''): string {
  return `{:oidc/issuer "${i.issuer}" :oidc/client-id "${i.clientId}" :oidc/client-secret #svc/secret "${secretRef}" :oidc/scopes ["openid" "email" "profile"] :provider/realms ["application"]${extra}}`;
}

test('the client secret from #svc/secret "env:OIDC_CLIENT_SECRET", resolved by the service’s helper, signs in (client_secret_basic); a wrong one is refused by the IdP', async () => {
  const config = providerConfigOf(parseEdn(moduleEdn(idp, 'env:OIDC_CLIENT_SECRET'), 'project.edn').value, {
    OIDC_CLIENT_SECRET: idp.clientSecret,
  });
  assert.deepEqual(provider.validateConfig(config), []);
  const { query, state } = await captureCallback(config, 'env-user');
  const wrong = providerConfigOf(parseEdn(moduleEdn(idp, 'env:OIDC_CLIENT_SECRET'), 'project.edn').value, {
    OIDC_CLIENT_SECRET: 'not-the-secret',
  });
  const refused = await refusal(provider.finish(harness.ctx, wrong, { state, request: { query, body: null }, credential: null }));
  assert.equal(refused.code, 'code_refused');
  assert.match(refused.message, /invalid_client/);
  const { identity } = await provider.finish(harness.ctx, config, { state, request: { query, body: null }, credential: null });
  assert.equal(identity.subject, 'env-user');
});

test('the client secret from a #svc/secret file signs in (client_secret_post)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-oidc-'));
  const postIdp = await startIdp({ redirectUris: [harness.callbackUrl], tokenEndpointAuth: 'client_secret_post' });
  try {
    const file = join(dir, 'oidc-client-secret');
    writeFileSync(file, `${postIdp.clientSecret}\n`, { mode: 0o600 });
    const edn = moduleEdn(postIdp, `file:${file}`, ' :oidc/token-endpoint-auth "client_secret_post"');
    const config = providerConfigOf(parseEdn(edn, 'project.edn').value, {});
    assert.deepEqual(provider.validateConfig(config), []);
    const { query, state } = await captureCallback(config, 'file-user');
    const { identity } = await provider.finish(harness.ctx, config, { state, request: { query, body: null }, credential: null });
    assert.deepEqual(identity, { issuer: postIdp.issuer, subject: 'file-user', claims: claimsOf('file-user') });
  } finally {
    await postIdp.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

// Who the caller is, as the application gateway hands it on (#27 part 4): Svc-Email, Svc-Name,
// Svc-Groups and the assertion's email/email_verified/name/groups, from the user's attributes read
// with the session; and :svc/app-require's :groups and :email-domains (part 5), refused 403
// insufficient_claims (problem+json), or a plain HTML page for a browser. Fast tier: memory
// store, inject. The same through `svc serve` to a Python upstream: real/gateway-identity-python.test.ts.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { verifySvcAssertion } from '@svc/assertion';
import { type AssertionKeySetJson, firstAssertionKeySet, updateUser } from '@svc/core';
import { INSUFFICIENT_SCOPE_CHALLENGE } from '../src/gateway/app.js';
import { type AssertionSigner, createAssertionSigner, type GatewayAttach, svcIdentityHeaders } from '../src/index.js';
import { browserRequest } from './support/browser-http.js';
import {
  applicationUser,
  type GatewayHarness,
  gatewayApi,
  requirement,
  startGatewayHarness,
  testPolicy,
} from './support/gateway-harness.js';
import type { Pair } from './support/harness.js';
import { plainCookies } from './support/session-cookie-suite.js';

const AUD = 'http://127.0.0.1:3000';
const keySet = (): AssertionKeySetJson => {
  const jwk = generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });
  return firstAssertionKeySet({ x: jwk.x as string, d: jwk.d as string }, Date.now() - 3600_000);
};

/**
 * An application that answers what upstream mode would send it: the headers of core's rule
 * (`svcIdentityHeaders`, the very function upstream mode uses) for the request's principal, and
 * the principal itself (as module mode gets it).
 */
function identityEcho(signer: AssertionSigner): GatewayAttach {
  const headersFor = svcIdentityHeaders(signer);
  return async (app) => {
    app.all('/*', async (req) => ({ sent: headersFor(req, req.principal), principal: req.principal }));
  };
}

const POLICY = testPolicy({
  requirements: [
    requirement('/ops/*', { groups: ['ops', 'admins'] }),
    requirement('/staff/*', { emailDomains: ['example.com', 'xn--bcher-kva.example'] }),
    requirement('/both/*', { groups: ['ops'], emailDomains: ['example.com'] }),
  ],
});

describe('who the caller is reaches the application, and :groups / :email-domains guard paths', () => {
  let h: GatewayHarness;
  let signer: AssertionSigner;
  let set: AssertionKeySetJson;
  let user: { pair: Pair };
  let subject: string;
  const actor = { via: 'cli', subject: null, session: null } as const;
  /** Sets the user's attributes as an operator would (core's updateUser: checked, audited). */
  const setUser = (attributes: Record<string, unknown>) => updateUser(h.deps, { subject, attributes, actor, source: 'operator' });
  const get = (path: string) => gatewayApi(h, 'GET', path, { token: user.pair.access_token });

  before(async () => {
    set = keySet();
    signer = createAssertionSigner({ keys: () => set, issuer: 'NODE-A', audience: AUD, clock: { now: Date.now } });
    h = await startGatewayHarness({ socket: false, store: 'memory', policy: POLICY, attach: identityEcho(signer) });
    user = await applicationUser(h);
    const me = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: user.pair.access_token });
    assert.equal(me.status, 200, me.text);
    subject = me.body.subject;
  });
  after(() => h?.close());

  const verify = (token: string, path: string) =>
    verifySvcAssertion(token, {
      jwks: signer.jwks() as never,
      audience: AUD,
      request: { method: 'GET', url: new URL(path, h.gatewayBase) },
    });

  test('unknown attributes: no Svc-Email, Svc-Name or Svc-Groups, no claims, never an empty value', async () => {
    await setUser({ name: null, email: null, groups: [] });
    const r = await get('/app/x');
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(Object.keys(r.body.sent).sort(), ['svc-assertion', 'svc-device', 'svc-realm', 'svc-session', 'svc-subject']);
    for (const k of ['email', 'email_verified', 'name', 'groups']) assert.equal(k in r.body.principal.claims, false, k);
    const who = await verify(r.body.sent['svc-assertion'], '/app/x');
    assert.equal(who.subject, subject);
    for (const k of ['email', 'emailVerified', 'name', 'groups']) assert.equal(k in who, false, k);
  });

  test('known attributes: the headers, the assertion and the principal all say the same, from the session lookup', async () => {
    await setUser({ name: '  Zoë Ångström 山田 ', email: 'zoe@Bücher.example', email_verified: true, groups: ['ops', 'admins'] });
    const r = await get('/app/x');
    assert.equal(r.status, 200, r.text);
    const sent = r.body.sent;
    assert.equal(sent['svc-email'], 'zoe@xn--bcher-kva.example', 'ASCII: the domain in its A-label form');
    assert.equal(decodeURIComponent(sent['svc-name']), 'Zoë Ångström 山田', 'percent-encoded UTF-8, NFC, trimmed');
    assert.match(sent['svc-name'], /^[\x21-\x7e]+$/, 'Svc-Name is plain ASCII on the wire');
    assert.equal(sent['svc-groups'], 'admins,ops', 'comma-separated, sorted');
    const who = await verify(sent['svc-assertion'], '/app/x');
    assert.deepEqual(
      { email: who.email, emailVerified: who.emailVerified, name: who.name, groups: who.groups },
      { email: 'zoe@xn--bcher-kva.example', emailVerified: true, name: 'Zoë Ångström 山田', groups: ['admins', 'ops'] },
    );
    const claims = r.body.principal.claims;
    assert.deepEqual(
      { email: claims.email, email_verified: claims.email_verified, name: claims.name, groups: claims.groups },
      { email: 'zoe@xn--bcher-kva.example', email_verified: true, name: 'Zoë Ångström 山田', groups: ['admins', 'ops'] },
    );
  });

  test('forged Svc-Email, Svc-Name and Svc-Groups are replaced by the real ones, or dropped when the attribute is unknown', async () => {
    const forged = { 'svc-email': 'boss@example.com', svc_name: 'The%20Boss', 'SVC-GROUPS': 'admins,root' };
    await setUser({ name: 'Ada', email: null, groups: [] });
    const r = await gatewayApi(h, 'GET', '/app/x', { token: user.pair.access_token, headers: forged });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.sent['svc-name'], 'Ada');
    assert.equal('svc-email' in r.body.sent || 'svc-groups' in r.body.sent, false);
    assert.deepEqual([r.body.principal.claims.email, r.body.principal.claims.groups], [undefined, undefined]);
    const refused = await gatewayApi(h, 'GET', '/ops/x', { token: user.pair.access_token, headers: forged });
    assert.equal(refused.status, 403, 'a forged Svc-Groups never satisfies :groups');
  });

  test(':groups: a member of any listed group passes; a member of none is 403 insufficient_claims', async () => {
    await setUser({ groups: ['admins'] });
    assert.equal((await get('/ops/deploy')).status, 200);
    await setUser({ groups: ['dev', 'ops'] });
    assert.equal((await get('/ops')).status, 200, 'the bare prefix too');
    await setUser({ groups: ['dev'] });
    const r = await get('/ops/deploy');
    assert.equal(r.status, 403);
    assert.equal(r.body.code, 'insufficient_claims');
    assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/);
    assert.equal(r.headers.get('www-authenticate'), INSUFFICIENT_SCOPE_CHALLENGE);
    assert.match(r.body.detail, /ops, admins/);
    await setUser({ groups: [] });
    assert.equal((await get('/OPS/deploy')).status, 403, 'in no group at all, in any letter case of the path');
  });

  test(':email-domains: a verified email at a listed domain passes; unverified, elsewhere or none is refused', async () => {
    await setUser({ email: 'ada@example.com', email_verified: true });
    assert.equal((await get('/staff/x')).status, 200);
    await setUser({ email: 'zoe@bücher.example', email_verified: true });
    assert.equal((await get('/staff/x')).status, 200, 'an internationalised domain, as configured in its A-label form');
    await setUser({ email: 'ada@example.com', email_verified: false });
    const unverified = await get('/staff/x');
    assert.equal(unverified.status, 403, 'an unverified email never satisfies it');
    assert.equal(unverified.body.code, 'insufficient_claims');
    assert.match(unverified.body.detail, /verified email/);
    await setUser({ email: 'ada@example.org', email_verified: true });
    assert.equal((await get('/staff/x')).status, 403);
    await setUser({ email: 'ada@mail.example.com', email_verified: true });
    assert.equal((await get('/staff/x')).status, 403, 'a subdomain is not the domain');
    await setUser({ email: null });
    assert.equal((await get('/staff/x')).status, 403);
  });

  test('combined keys: every key given must hold', async () => {
    await setUser({ email: 'ada@example.com', email_verified: true, groups: ['ops'] });
    assert.equal((await get('/both/x')).status, 200);
    await setUser({ groups: ['admins'] });
    assert.equal((await get('/both/x')).status, 403, 'the email alone is not enough');
    await setUser({ groups: ['ops'], email_verified: false });
    assert.equal((await get('/both/x')).status, 403, 'the group alone is not enough');
  });

  test('an attribute change reaches the very next request (read with the session, no cache)', async () => {
    await setUser({ groups: ['ops'] });
    assert.equal((await get('/ops/x')).status, 200);
    await setUser({ groups: ['dev'] });
    assert.equal((await get('/ops/x')).status, 403);
  });

  describe('a browser refused by a requirement gets a page saying who it is and what the path needs', () => {
    const html = (path: string) => browserRequest(h, 'GET', path, { cookies: plainCookies(user.pair), headers: { accept: 'text/html' } });

    test('the page names the user, the groups the path needs, and offers to sign out; a bearer client keeps problem+json', async () => {
      await setUser({ name: 'Ada Lovelace', email: 'ada@example.com', email_verified: true, groups: ['dev'] });
      const r = await html('/ops/deploy');
      assert.equal(r.status, 403);
      assert.match(r.headers.get('content-type') ?? '', /^text\/html; charset=utf-8/);
      assert.match(r.text, /Signed in as <span class="who">Ada Lovelace \(ada@example\.com\)<\/span>/);
      assert.match(r.text, /<li>a member of ops or admins<\/li>/);
      assert.match(
        r.text,
        /<form method="post" action="\/\.svc\/auth\/v1\/logout" class="inline"><button type="submit" class="button primary">Sign out and use another account/,
      );
      const csp = r.headers.get('content-security-policy') ?? '';
      assert.match(csp, /default-src 'none'/);
      assert.match(csp, /form-action 'self'/);
      assert.doesNotMatch(csp, /script-src/, 'no script on the page');
      const nonce = /style-src 'nonce-([^']+)'/.exec(csp)?.[1];
      assert.ok(nonce !== undefined && r.text.includes(`<style nonce="${nonce}">`));
      assert.equal(r.headers.get('www-authenticate'), INSUFFICIENT_SCOPE_CHALLENGE);
      const api = await gatewayApi(h, 'GET', '/ops/deploy', { token: user.pair.access_token, headers: { accept: 'text/html' } });
      assert.equal(api.body.code, 'insufficient_claims', 'a bearer client gets problem+json whatever it accepts');
      const json = await browserRequest(h, 'GET', '/ops/deploy', { cookies: plainCookies(user.pair) });
      assert.equal(json.body.code, 'insufficient_claims', 'a cookie client that does not ask for HTML too');
    });

    test('an unverified email: the page says the email must be verified, and that this one is not', async () => {
      await setUser({ name: null, email: 'zoe@bücher.example', email_verified: false, groups: [] });
      const r = await html('/staff/x');
      assert.equal(r.status, 403);
      assert.match(r.text, /Signed in as <span class="who">zoe@bücher\.example \(not verified\)<\/span>/);
      assert.match(r.text, /<li>an email at example\.com or bücher\.example, verified<\/li>/);
    });

    test('combined keys are all listed; without a name or email the subject is shown', async () => {
      await setUser({ name: null, email: null, groups: [] });
      const r = await html('/both/x');
      assert.match(r.text, new RegExp(`Signed in as <span class="who">${subject}</span>`));
      assert.match(r.text, /This page needs all of:/);
      assert.match(r.text, /<li>a member of ops<\/li>\n?<li>an email at example\.com, verified<\/li>/);
    });

    test('HTML in a name is shown as text, never markup (stored XSS through the display name)', async () => {
      const evil = '<script>alert(1)</script><img src=x onerror="alert(2)"> & \'Bob\'';
      await setUser({ name: evil, email: null, groups: [] });
      const r = await html('/ops/x');
      assert.equal(r.status, 403);
      assert.ok(!r.text.includes('<script>alert'), 'no script element from the name');
      assert.ok(!r.text.includes('<img'), 'no element from the name');
      assert.ok(
        r.text.includes('&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;alert(2)&quot;&gt; &amp; &#39;Bob&#39;'),
        r.text,
      );
      assert.equal((r.text.match(/<script|<img/g) ?? []).length, 0);
    });
  });
});

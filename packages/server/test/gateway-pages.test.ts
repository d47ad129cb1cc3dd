// The gateway's pages for browsers (fast tier, inject): every refusal a browser meets is a page
// with the refusal's status, in the house layout, escaped, with a strict CSP and no internal
// text; every other client keeps problem+json. Provider labels, never aliases. Step-up: a
// browser whose sign-in is too old is sent to sign in again; an API client keeps the 403.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { browserRequest } from './support/browser-http.js';
import {
  applicationUser,
  echoAttach,
  type GatewayHarness,
  requirement,
  startGatewayHarness,
  testPolicy,
} from './support/gateway-harness.js';
import { plainCookies } from './support/session-cookie-suite.js';
import { testRedirectProvider, testWebauthnProvider } from './support/test-provider.js';

const HTML = { accept: 'text/html,application/xhtml+xml' };

describe('refusal pages for browsers, problem+json for everyone else', () => {
  let h: GatewayHarness;
  const sso = testRedirectProvider({ name: 'corp', jit: true });
  const labelledSso = { ...sso, policy: { ...sso.policy, label: 'Acme <SSO> & "Co"' } };
  before(async () => {
    h = await startGatewayHarness({
      socket: false,
      store: 'memory',
      attach: echoAttach,
      policy: testPolicy({
        requirements: [
          requirement('/admin/*', { maxAuthAgeSeconds: 300 }),
          requirement('/ops/*', { groups: ['ops'], maxAuthAgeSeconds: 300 }),
          requirement('/keys/*', { amr: ['hwk'] }),
        ],
      }),
      gateway: {
        providers: [labelledSso, testWebauthnProvider()],
        brand: { name: 'Acme <script>alert(1)</script>', accent: '#0f766e', logo: null },
      },
    });
  });
  after(() => h.close());

  /** The CSP of a page: nothing from elsewhere, its style by nonce, script only where it says. */
  function assertPage(r: { status: number; headers: Headers; text: string }, status: number, script = false): void {
    assert.equal(r.status, status, r.text.slice(0, 300));
    assert.match(r.headers.get('content-type') ?? '', /^text\/html; charset=utf-8/);
    assert.equal(r.headers.get('cache-control'), 'no-store');
    const csp = r.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /style-src 'nonce-[^']+'/);
    assert.equal(/script-src/.test(csp), script, csp);
    assert.doesNotMatch(csp, /unsafe-inline|https?:/);
    assert.ok(!r.text.includes('<script>alert(1)'), 'the brand name is escaped');
    assert.ok(r.text.includes('Acme &lt;script&gt;alert(1)&lt;/script&gt;'));
  }

  test('an unknown /.svc/ route: a 404 page for a browser; problem+json without text/html, or with a bearer', async () => {
    const page = await browserRequest(h, 'GET', '/.svc/auth/v1/nowhere', { headers: HTML });
    assertPage(page, 404);
    assert.match(page.text, /<h1>Page not found<\/h1>/);
    assert.match(page.text, /<code>not_found<\/code>/);
    assert.doesNotMatch(page.text, /no such route/, 'not the detail');
    const json = await browserRequest(h, 'GET', '/.svc/auth/v1/nowhere', { headers: { accept: 'application/json' } });
    assert.equal(json.status, 404);
    assert.equal(json.body.code, 'not_found');
    const bearer = await browserRequest(h, 'GET', '/.svc/auth/v1/nowhere', { headers: { ...HTML, authorization: 'Bearer x' } });
    assert.match(bearer.headers.get('content-type') ?? '', /^application\/problem\+json/);
  });

  test('a malformed link: a 400 page without the detail meant for developers', async () => {
    const r = await browserRequest(h, 'GET', '/.svc/auth/v1/login?pairing=%3Cb%3E', { headers: HTML });
    assertPage(r, 400);
    assert.match(r.text, /<h1>This request could not be understood<\/h1>/);
    assert.doesNotMatch(r.text, /pairing must be|<b>/);
  });

  test('a provider refusal at its callback (a navigation): the page says it in words and keeps the status', async () => {
    const r = await browserRequest(h, 'GET', '/.svc/auth/v1/providers/corp/callback?code=x', { headers: HTML });
    assertPage(r, 400);
    assert.match(r.text, /<h1>Sign-in expired<\/h1>/);
    assert.match(r.text, /<code>invalid_flow<\/code>/);
  });

  test('the sign-in page names providers by their label, escaped, never by their alias', async () => {
    const r = await browserRequest(h, 'GET', '/.svc/auth/v1/login', { headers: HTML });
    assertPage(r, 200, true);
    assert.ok(r.text.includes('Sign in with Acme &lt;SSO&gt; &amp; &quot;Co&quot;</a>'));
    assert.ok(r.text.includes('>Sign in with a passkey</button>'));
    const visible = r.text.replace(/<script[\s\S]*<\/script>/, '').replace(/<[^>]+>/g, ' ');
    assert.doesNotMatch(visible, /\bcorp\b|\(passkey\)/, 'no alias in the text people read');
  });

  test('step-up: a browser whose sign-in is older than the path allows goes to sign in again and comes back; an API client keeps 403', async () => {
    const user = await applicationUser(h);
    const cookies = plainCookies(user.pair);
    const fresh = await browserRequest(h, 'GET', '/admin/panel', { cookies, headers: HTML });
    assert.equal(fresh.status, 200);
    h.clock.advance(301_000);
    const stale = await browserRequest(h, 'GET', '/admin/panel?tab=2', { cookies, headers: HTML });
    assert.equal(stale.status, 302);
    assert.equal(stale.headers.get('location'), '/.svc/auth/v1/login?return=%2Fadmin%2Fpanel%3Ftab%3D2&step-up=recent');
    const page = await browserRequest(h, 'GET', stale.headers.get('location') ?? '', { headers: HTML });
    assert.match(page.text, /<h1>Sign in again<\/h1>/);
    assert.match(page.text, /This page needs a recent sign-in/);
    assert.doesNotMatch(page.text, /data-intent="signup"/, 'signing in again is never a sign-up');
    const api = await browserRequest(h, 'GET', '/admin/panel', { headers: { authorization: `Bearer ${user.pair.access_token}`, ...HTML } });
    assert.equal(api.status, 403);
    assert.equal(api.body.code, 'insufficient_claims');
    // A POST is never redirected (it would lose its body): the 403 page.
    const post = await browserRequest(h, 'POST', '/admin/panel', { cookies, headers: { ...HTML, origin: h.gatewayBase } });
    assert.equal(post.status, 403);
    // Another sign-in would not add the group the path needs: the 403 page, not a step-up.
    const group = await browserRequest(h, 'GET', '/ops/x', { cookies, headers: HTML });
    assertPage(group, 403);
    assert.match(group.text, /a member of ops/);
    assert.match(group.text, /a sign-in in the last 5 minutes/);
  });

  test('step-up by method: only the providers that can satisfy the path are offered', async () => {
    const user = await applicationUser(h);
    const r = await browserRequest(h, 'GET', '/keys/x', { cookies: plainCookies(user.pair), headers: HTML });
    assert.equal(r.status, 302);
    assert.match(r.headers.get('location') ?? '', /step-up=method$/);
    const page = await browserRequest(h, 'GET', r.headers.get('location') ?? '', { headers: HTML });
    assert.match(page.text, /needs a sign-in with a passkey/);
    assert.ok(page.text.includes('data-provider="passkey"'));
    assert.ok(!page.text.includes('data-provider="corp"'), 'the identity provider cannot give a passkey sign-in');
  });
});

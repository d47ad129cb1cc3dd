import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createFailureLimiter } from '../src/http/failure-limiter.js';
import { browserRequest, cookiesSet } from './support/browser-http.js';
import {
  applicationUser,
  echoAttach,
  type GatewayHarness,
  gatewayApi,
  startGateway,
  startGatewayHarness,
} from './support/gateway-harness.js';
import { startNodeHarness } from './support/node-harness.js';
import { type TestProvider, testJsonProvider, testRedirectProvider } from './support/test-provider.js';

const FLOW = 'svc-flow';

/** GET begin: the flow cookie it set and where it sends the browser (the test "identity provider" goes straight to the callback). */
async function beginRedirect(h: GatewayHarness, name: string, query = ''): Promise<{ flow: string; location: string }> {
  const r = await browserRequest(h, 'GET', `/.svc/auth/v1/providers/${name}/begin${query}`);
  assert.equal(r.status, 302, r.text);
  const flow = cookiesSet(r.setCookies)[FLOW] ?? '';
  assert.ok(flow.startsWith('flw_'), JSON.stringify(r.setCookies));
  return { flow, location: r.headers.get('location') ?? '' };
}

/** The callback path of a provider redirect location (the gateway's own URL). */
function callbackPath(h: GatewayHarness, location: string): string {
  assert.ok(location.startsWith(`${h.gatewayBase}/.svc/auth/v1/providers/`), location);
  return location.slice(h.gatewayBase.length);
}

describe('a redirect ceremony (OIDC-like) through the gateway', () => {
  let h: GatewayHarness;
  let provider: TestProvider;
  before(async () => {
    provider = testRedirectProvider({ subject: 'carol', jit: true });
    h = await startGatewayHarness({ attach: echoAttach, gateway: { providers: [provider] } });
  });
  after(() => h.close());

  test('begin sets the flow cookie (HttpOnly, SameSite=Lax) and redirects; the provider gets the origin and callback URL', async () => {
    const r = await browserRequest(h, 'GET', '/.svc/auth/v1/providers/testidp/begin?return=%2Fapp%2Fhome');
    assert.equal(r.status, 302);
    assert.equal(r.setCookies.length, 1);
    assert.match(r.setCookies[0] as string, /^svc-flow=flw_[^;]+; Path=\/; Max-Age=600; HttpOnly; SameSite=Lax$/);
    const ctx = provider.begun.at(-1);
    assert.equal(ctx?.origin, h.gatewayBase);
    assert.equal(ctx?.callbackUrl, `${h.gatewayBase}/.svc/auth/v1/providers/testidp/callback`);
    assert.equal(ctx?.intent, 'signin');
  });

  test('the callback ends in the same session and token pair: cookies set, flow cookie spent, 303 to the return path', async () => {
    const { flow, location } = await beginRedirect(h, 'testidp', '?return=%2Fapp%2Forders%3Fid%3D7');
    const r = await browserRequest(h, 'GET', callbackPath(h, location), { cookies: { [FLOW]: flow } });
    assert.equal(r.status, 303, r.text);
    assert.equal(r.headers.get('location'), '/app/orders?id=7');
    const set = cookiesSet(r.setCookies);
    assert.equal(set[FLOW], '', 'the flow cookie is cleared');
    assert.match(set['svc-access'] ?? '', /^svca_/);
    assert.match(set['svc-refresh'] ?? '', /^svcr_/);
    const me = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: set['svc-access'] as string });
    assert.equal(me.status, 200, 'an ordinary session: the access token works as a bearer too');
    assert.deepEqual(me.body.claims.amr, ['fed']);
    const page = await browserRequest(h, 'GET', '/app/orders', { cookies: { 'svc-access': set['svc-access'] as string } });
    assert.equal(page.status, 200);
    assert.equal(page.body.principal.subject, me.body.subject);
  });

  test('the flow is bound to the browser that began it: a callback without its flow cookie is refused and signs nobody in', async () => {
    const { location } = await beginRedirect(h, 'testidp');
    const r = await browserRequest(h, 'GET', callbackPath(h, location));
    assert.equal(r.status, 400);
    assert.equal(r.body.code, 'invalid_flow');
    assert.deepEqual(
      Object.keys(cookiesSet(r.setCookies)).filter((k) => k !== FLOW),
      [],
    );
  });

  test("another browser's flow cookie does not finish this ceremony (the code is bound to the flow's state)", async () => {
    const mine = await beginRedirect(h, 'testidp');
    const theirs = await beginRedirect(h, 'testidp');
    const r = await browserRequest(h, 'GET', callbackPath(h, mine.location), { cookies: { [FLOW]: theirs.flow } });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_credential');
    assert.equal(cookiesSet(r.setCookies)['svc-access'], undefined);
  });

  test('a replayed callback is refused: the flow is single use', async () => {
    const { flow, location } = await beginRedirect(h, 'testidp');
    assert.equal((await browserRequest(h, 'GET', callbackPath(h, location), { cookies: { [FLOW]: flow } })).status, 303);
    const again = await browserRequest(h, 'GET', callbackPath(h, location), { cookies: { [FLOW]: flow } });
    assert.equal(again.status, 400);
    assert.equal(again.body.code, 'invalid_flow');
  });

  test('an off-site return path given to begin is never followed: the callback goes to /', async () => {
    const { flow, location } = await beginRedirect(h, 'testidp', `?return=${encodeURIComponent('//evil.example/x')}`);
    const r = await browserRequest(h, 'GET', callbackPath(h, location), { cookies: { [FLOW]: flow } });
    assert.equal(r.status, 303);
    assert.equal(r.headers.get('location'), '/');
  });

  test('a tampered return path in the flow cookie is checked again at the callback', async () => {
    const { flow, location } = await beginRedirect(h, 'testidp');
    const forged = `${flow.split('.')[0]}.${Buffer.from('//evil.example').toString('base64url')}`;
    const r = await browserRequest(h, 'GET', callbackPath(h, location), { cookies: { [FLOW]: forged } });
    assert.equal(r.status, 303);
    assert.equal(r.headers.get('location'), '/');
  });

  test('POST begin for a redirect provider answers {"redirect"}; link cannot start from a GET', async () => {
    const r = await browserRequest(h, 'POST', '/.svc/auth/v1/providers/testidp/begin', {
      headers: { origin: h.gatewayBase, 'content-type': 'application/json' },
      body: JSON.stringify({ intent: 'signin', return: '/app' }),
    });
    assert.equal(r.status, 200, r.text);
    assert.match(r.body.redirect, /\/callback\?code=/);
    const link = await browserRequest(h, 'GET', '/.svc/auth/v1/providers/testidp/begin?intent=link');
    assert.equal(link.status, 400);
    assert.deepEqual(link.setCookies, []);
  });

  test('link: a signed-in bearer user links the provider identity, then signs in through it as the same subject', async () => {
    const linker = testRedirectProvider({ name: 'linkidp', subject: 'dave', jit: false });
    const g = await startGatewayHarness({ attach: echoAttach, gateway: { providers: [linker] } });
    try {
      const user = await applicationUser(g);
      const me = await gatewayApi(g, 'GET', '/.svc/auth/v1/me', { token: user.pair.access_token });
      // Without jit and without a link, a sign-in is refused.
      const early = await beginRedirect(g, 'linkidp');
      const refused = await browserRequest(g, 'GET', callbackPath(g, early.location), { cookies: { [FLOW]: early.flow } });
      assert.equal(refused.status, 401, refused.text);
      const begun = await browserRequest(g, 'POST', '/.svc/auth/v1/providers/linkidp/begin', {
        headers: { authorization: `Bearer ${user.pair.access_token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ intent: 'link' }),
      });
      assert.equal(begun.status, 200, begun.text);
      const flow = cookiesSet(begun.setCookies)[FLOW] as string;
      const linked = await browserRequest(g, 'GET', callbackPath(g, begun.body.redirect), {
        cookies: { [FLOW]: flow },
        headers: { authorization: `Bearer ${user.pair.access_token}` },
      });
      assert.equal(linked.status, 303, linked.text);
      assert.equal(cookiesSet(linked.setCookies)['svc-access'], undefined, 'a link is not a sign-in');
      const signin = await beginRedirect(g, 'linkidp');
      const done = await browserRequest(g, 'GET', callbackPath(g, signin.location), { cookies: { [FLOW]: signin.flow } });
      assert.equal(done.status, 303, done.text);
      const them = await gatewayApi(g, 'GET', '/.svc/auth/v1/me', { token: cookiesSet(done.setCookies)['svc-access'] as string });
      assert.equal(them.body.subject, me.body.subject);
    } finally {
      await g.close();
    }
  });
});

describe('a JSON ceremony (as a passkey runs it from the page)', () => {
  let h: GatewayHarness;
  before(async () => {
    h = await startGatewayHarness({ attach: echoAttach, gateway: { providers: [testJsonProvider({ subject: 'erin' })] } });
  });
  after(() => h.close());

  test('begin answers the provider JSON; finish sets the cookies and answers the redirect, never a token', async () => {
    const begun = await browserRequest(h, 'POST', '/.svc/auth/v1/providers/testjson/begin', {
      headers: { origin: h.gatewayBase, 'content-type': 'application/json' },
      body: JSON.stringify({ intent: 'signin', return: '/app/after' }),
    });
    assert.equal(begun.status, 200, begun.text);
    assert.equal(typeof begun.body.challenge, 'string');
    const flow = cookiesSet(begun.setCookies)[FLOW] as string;
    const done = await browserRequest(h, 'POST', '/.svc/auth/v1/providers/testjson/finish', {
      cookies: { [FLOW]: flow },
      headers: { origin: h.gatewayBase, 'content-type': 'application/json' },
      body: JSON.stringify({ challenge: begun.body.challenge }),
    });
    assert.equal(done.status, 200, done.text);
    assert.equal(done.body.outcome, 'session');
    assert.equal(done.body.redirect, '/app/after');
    assert.doesNotMatch(done.text, /svca_|svcr_/, 'the tokens stay in the HttpOnly cookies');
    const set = cookiesSet(done.setCookies);
    assert.match(set['svc-access'] ?? '', /^svca_/);
    assert.equal((await browserRequest(h, 'GET', '/app/x', { cookies: { 'svc-access': set['svc-access'] as string } })).status, 200);
  });

  test('a finish with the wrong proof signs nobody in, and the flow is spent', async () => {
    const begun = await browserRequest(h, 'POST', '/.svc/auth/v1/providers/testjson/begin', {
      headers: { origin: h.gatewayBase, 'content-type': 'application/json' },
      body: JSON.stringify({ intent: 'signin' }),
    });
    const flow = cookiesSet(begun.setCookies)[FLOW] as string;
    const finish = (challenge: string) =>
      browserRequest(h, 'POST', '/.svc/auth/v1/providers/testjson/finish', {
        cookies: { [FLOW]: flow },
        headers: { origin: h.gatewayBase, 'content-type': 'application/json' },
        body: JSON.stringify({ challenge }),
      });
    const wrong = await finish('not-the-challenge');
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body.code, 'invalid_credential');
    assert.equal(cookiesSet(wrong.setCookies)['svc-access'], undefined);
    const right = await finish(begun.body.challenge);
    assert.equal(right.status, 400, 'single use');
  });
});

describe('failed provider proofs are budgeted', () => {
  test('a client that keeps failing callbacks gets 429 rate_limited before the provider is asked again', async () => {
    const provider = testRedirectProvider({ name: 'budgetidp' });
    const h = await startNodeHarness();
    try {
      const limiter = createFailureLimiter({ clock: h.deps.clock, store: h.deps.store, maxFailures: 3, scope: 'app-signin-test' });
      const g = await startGateway(h, { attach: echoAttach, providers: [provider], limiter });
      const gw = { gatewayBase: g.base } as GatewayHarness;
      try {
        const statuses: number[] = [];
        for (let i = 0; i < 5; i++) {
          const { flow, location } = await beginRedirect(gw, 'budgetidp');
          const wrong = callbackPath(gw, location).replace(/code=[^&]+/, 'code=wrong');
          statuses.push((await browserRequest(gw, 'GET', wrong, { cookies: { [FLOW]: flow } })).status);
        }
        assert.deepEqual(statuses, [401, 401, 401, 429, 429]);
        assert.equal(provider.finished(), 0);
      } finally {
        await g.app.close();
      }
    } finally {
      await h.close();
    }
  });
});

describe('begun ceremonies are budgeted', () => {
  test('a client that only begins ceremonies is stopped (429 rate_limited) after 20 unanswered flows; finishing gives a slot back', async () => {
    const h = await startGatewayHarness({ attach: echoAttach, gateway: { providers: [testRedirectProvider({ name: 'floodidp' })] } });
    try {
      const begun: { flow: string; location: string }[] = [];
      for (let i = 0; i < 20; i++) begun.push(await beginRedirect(h, 'floodidp'));
      const over = await browserRequest(h, 'GET', '/.svc/auth/v1/providers/floodidp/begin');
      assert.equal(over.status, 429);
      assert.equal(over.body.code, 'rate_limited');
      const first = begun[0] as { flow: string; location: string };
      assert.equal((await browserRequest(h, 'GET', callbackPath(h, first.location), { cookies: { [FLOW]: first.flow } })).status, 303);
      assert.equal((await browserRequest(h, 'GET', '/.svc/auth/v1/providers/floodidp/begin')).status, 302);
    } finally {
      await h.close();
    }
  });
});

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
import { newDeviceKey } from './support/harness.js';
import { adminToken, completion, nodeApi, prepare, startNodeHarness } from './support/node-harness.js';
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
    h = await startGatewayHarness({ socket: false, store: 'memory', attach: echoAttach, gateway: { providers: [provider] } });
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

  test('signing in again (a step-up) in a browser holding a live session ends that session: no copy of its tokens outlives it', async () => {
    const first = await beginRedirect(h, 'testidp');
    const one = cookiesSet(
      (await browserRequest(h, 'GET', callbackPath(h, first.location), { cookies: { [FLOW]: first.flow } })).setCookies,
    );
    const oldAccess = one['svc-access'] as string;
    const before = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: oldAccess });
    assert.equal(before.status, 200);
    const second = await beginRedirect(h, 'testidp');
    const r = await browserRequest(h, 'GET', callbackPath(h, second.location), {
      cookies: { [FLOW]: second.flow, 'svc-access': oldAccess, 'svc-refresh': one['svc-refresh'] as string },
    });
    assert.equal(r.status, 303, r.text);
    const two = cookiesSet(r.setCookies);
    const now = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: two['svc-access'] as string });
    assert.equal(now.status, 200, 'the new session works');
    assert.notEqual(now.body.session, before.body.session);
    const stale = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: oldAccess });
    assert.equal(stale.status, 401, 'the replaced session is over');
    assert.equal(stale.body.code, 'invalid_token');
    const refreshed = await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', { body: { refresh_token: one['svc-refresh'] } });
    assert.equal(refreshed.status, 401, 'its refresh token is refused too');
    const events = await h.deps.store.listAuditEvents({ afterSeq: 0, limit: 10_000 });
    const ended = events.find((e) => e.type === 'session.revoked' && e.sessionId === before.body.session);
    assert.equal(ended?.data.reason, 'replaced');
    assert.equal(ended?.data.replaced_by, now.body.session);
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
    const g = await startGatewayHarness({ socket: false, store: 'memory', attach: echoAttach, gateway: { providers: [linker] } });
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
    h = await startGatewayHarness({
      socket: false,
      store: 'memory',
      attach: echoAttach,
      gateway: { providers: [testJsonProvider({ subject: 'erin' })] },
    });
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
    const h = await startNodeHarness({ socket: false, store: 'memory' });
    try {
      const limiter = createFailureLimiter({ clock: h.deps.clock, store: h.deps.store, maxFailures: 3, scope: 'app-signin-test' });
      const g = await startGateway(h, { socket: false, attach: echoAttach, providers: [provider], limiter });
      const gw = { gatewayBase: g.base, gateway: g.app, injected: g.injected } as GatewayHarness;
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
    const h = await startGatewayHarness({
      socket: false,
      store: 'memory',
      attach: echoAttach,
      gateway: { providers: [testRedirectProvider({ name: 'floodidp' })] },
    });
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

describe('a link intent (svc auth pair --provider): its code stands in for a signed-in principal, once', () => {
  let h: GatewayHarness;
  let idp: TestProvider;
  let other: TestProvider;
  let admin: string;
  before(async () => {
    idp = testRedirectProvider({ name: 'corp', subject: 'erin', jit: false });
    other = testRedirectProvider({ name: 'other', subject: 'frank', issuer: 'https://other.test', jit: false });
    h = await startGatewayHarness({
      socket: false,
      store: 'memory',
      attach: echoAttach,
      providerPackages: [idp, other],
      gateway: { providers: [idp, other] },
    });
    admin = await adminToken(h);
  });
  after(() => h.close());

  /** Prepares a link intent over the node surface, as `svc auth pair --provider` does. */
  async function prepareLink(body: Record<string, unknown>) {
    const r = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/prepare', { token: admin, body: { realm: 'application', ...body } });
    assert.equal(r.status, 201, r.text);
    return r.body as { intent_id: string; code: string; subject: string; provider: string; public_key: null };
  }

  /** POST begin with the intent and a code, from the gateway's own origin (the sign-in page's script). */
  function beginWith(provider: string, intentId: string, code: string) {
    return browserRequest(h, 'POST', `/.svc/auth/v1/providers/${provider}/begin`, {
      headers: { origin: h.gatewayBase, 'content-type': 'application/json' },
      body: JSON.stringify({ intent: 'link', pairing_intent_id: intentId, pairing_code: code, return: '/app' }),
    });
  }

  async function events(type: string) {
    return (await h.store.listAuditEvents({ afterSeq: 0, limit: 100_000 })).filter((e) => e.type === type);
  }

  test('the holder of the code links the credential to the intent subject and is signed in as that subject; the intent is then used up', async () => {
    const user = await applicationUser(h);
    const me = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: user.pair.access_token });
    const intent = await prepareLink({ provider: 'corp', subject: me.body.subject });
    assert.equal(intent.provider, 'corp');
    assert.equal(intent.public_key, null);
    assert.equal(intent.subject, me.body.subject);
    // No cookie, no bearer: the code alone authorises the link. Case and dashes do not matter.
    const begun = await beginWith('corp', intent.intent_id, intent.code.toLowerCase().replace('-', ''));
    assert.equal(begun.status, 200, begun.text);
    const flow = cookiesSet(begun.setCookies)[FLOW] as string;
    const done = await browserRequest(h, 'GET', callbackPath(h, begun.body.redirect), { cookies: { [FLOW]: flow } });
    assert.equal(done.status, 303, done.text);
    assert.equal(done.headers.get('location'), '/app');
    const access = cookiesSet(done.setCookies)['svc-access'] as string;
    const them = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: access });
    assert.equal(them.status, 200);
    assert.equal(them.body.subject, me.body.subject);
    assert.match(them.body.device, /^lnk_/);
    const created = (await events('link.created')).at(-1);
    assert.equal(created?.data.via, 'pairing');
    assert.equal(created?.data.intent_id, intent.intent_id);
    assert.equal(created?.subject, me.body.subject);
    // Replaying the same code: the intent is used up.
    const again = await beginWith('corp', intent.intent_id, intent.code);
    assert.equal(again.status, 401);
    assert.equal(again.body.code, 'invalid_pairing_intent');
    // And from now on the linked identity signs in as that subject.
    const signin = await beginRedirect(h, 'corp');
    const back = await browserRequest(h, 'GET', callbackPath(h, signin.location), { cookies: { [FLOW]: signin.flow } });
    assert.equal(back.status, 303, back.text);
    const later = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: cookiesSet(back.setCookies)['svc-access'] as string });
    assert.equal(later.body.subject, me.body.subject);
  });

  test('guessing the code: each wrong code is counted and audited, the fifth burns the intent, and the right code is then refused', async () => {
    const intent = await prepareLink({ provider: 'other' });
    const wrong = intent.code.endsWith('Z') ? `${intent.code.slice(0, -1)}Y` : `${intent.code.slice(0, -1)}Z`;
    const before = (await events('pairing.failed')).length;
    for (let i = 0; i < 5; i++) {
      const r = await beginWith('other', intent.intent_id, wrong);
      assert.equal(r.status, 401, r.text);
      assert.equal(r.body.code, 'invalid_pairing_code');
      assert.equal(r.setCookies.length, 0, 'no flow is begun');
    }
    assert.equal((await events('pairing.failed')).length, before + 4);
    assert.equal((await events('pairing.burned')).at(-1)?.data.intent_id, intent.intent_id);
    const right = await beginWith('other', intent.intent_id, intent.code);
    assert.equal(right.status, 401);
    assert.equal(right.body.code, 'invalid_pairing_intent');
  });

  test('an intent prepared for one provider cannot be completed with another: the right code counts as a wrong one', async () => {
    const intent = await prepareLink({ provider: 'corp' });
    const r = await beginWith('other', intent.intent_id, intent.code);
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_pairing_code');
    assert.equal((await h.store.getPairingIntent(intent.intent_id))?.failures, 1);
  });

  test("a device pairing's code cannot link a credential, and a link intent's code cannot enroll a device", async () => {
    const device = await prepare(h, admin, { realm: 'application' });
    const asLink = await beginWith('corp', device.intent_id, device.code);
    assert.equal(asLink.status, 401);
    assert.equal(asLink.body.code, 'invalid_pairing_code');
    const link = await prepareLink({ provider: 'corp' });
    const key = newDeviceKey();
    const asDevice = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', {
      body: completion(h, { intent_id: link.intent_id, code: link.code }, key),
    });
    assert.equal(asDevice.status, 401);
    assert.equal(asDevice.body.code, 'invalid_pairing_code');
  });

  test('a management-realm link intent cannot be completed at the application gateway', async () => {
    const r = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/prepare', {
      token: admin,
      body: { realm: 'management', provider: 'corp' },
    });
    // This node's corp provider serves only the application realm: refused at prepare already.
    assert.equal(r.status, 400, r.text);
    assert.equal(r.body.code, 'invalid_request');
  });

  test('prepare needs a management bearer, a provider this node runs, and not both a key and a provider', async () => {
    const anon = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/prepare', { body: { realm: 'application', provider: 'corp' } });
    assert.equal(anon.status, 401);
    const user = await applicationUser(h);
    const asApp = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/prepare', {
      token: user.pair.access_token,
      body: { realm: 'application', provider: 'corp' },
    });
    assert.equal(asApp.status, 401);
    assert.equal(asApp.body.code, 'invalid_token');
    for (const body of [
      { realm: 'application', provider: 'nope' },
      { realm: 'application', provider: 'ed25519' },
      { realm: 'application', provider: 'corp', public_key: newDeviceKey().publicKeyHex },
      { realm: 'application' },
    ]) {
      const r = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/prepare', { token: admin, body });
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.body.code, 'invalid_request');
    }
  });

  test('an expired link intent is refused at begin', async () => {
    const intent = await prepareLink({ provider: 'corp', ttl_seconds: 60 });
    h.clock.advance(61_000);
    const r = await beginWith('corp', intent.intent_id, intent.code);
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_pairing_intent');
  });

  test('the sign-in page for an intent asks for the code, offers every provider as a link, and never shows the code in the URL', async () => {
    const intent = await prepareLink({ provider: 'corp' });
    const r = await browserRequest(h, 'GET', `/.svc/auth/v1/login?pairing=${intent.intent_id}`);
    assert.equal(r.status, 200);
    assert.match(r.text, /<input type="text" id="pairing-code"/);
    assert.match(r.text, new RegExp(`data-pairing="${intent.intent_id}"`));
    assert.match(r.text, /data-provider="corp" data-intent="link"/);
    assert.doesNotMatch(r.text, new RegExp(intent.code));
    const bad = await browserRequest(h, 'GET', '/.svc/auth/v1/login?pairing=%22%3E%3Cscript%3E');
    assert.equal(bad.status, 400);
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ProviderJson } from '@svc/core';
import { createFailureLimiter } from '../src/http/failure-limiter.js';
import { browserRequest, cookiesSet } from './support/browser-http.js';
import { echoAttach, type GatewayHarness, gatewayApi, startGateway, startGatewayHarness } from './support/gateway-harness.js';
import { startNodeHarness } from './support/node-harness.js';
import { type TestProvider, testJsonProvider, testRedirectProvider, testWebauthnProvider } from './support/test-provider.js';

// The gateway's side of provider users (#27): the sign-in page asks a new passkey user's name,
// the finish route reads it (the service's own field, never handed to the provider), and a
// refused sign-in that is a browser's navigation gets a page, not JSON.

const FLOW = 'svc-flow';
const JSON_HEADERS = (h: GatewayHarness) => ({ origin: h.gatewayBase, 'content-type': 'application/json' });

/** A JSON provider that records each finishing request's body, as the provider saw it. */
function recording(provider: TestProvider): TestProvider & { readonly bodies: ProviderJson[] } {
  const bodies: ProviderJson[] = [];
  return {
    ...provider,
    bodies,
    async finish(ctx, input) {
      bodies.push(input.request.body);
      return provider.finish(ctx, input);
    },
  };
}

async function jsonCeremony(h: GatewayHarness, name: string, intent: string, finishBody: (begun: { challenge: string }) => unknown) {
  const begun = await browserRequest(h, 'POST', `/.svc/auth/v1/providers/${name}/begin`, {
    headers: JSON_HEADERS(h),
    body: JSON.stringify({ intent }),
  });
  assert.equal(begun.status, 200, begun.text);
  const flow = cookiesSet(begun.setCookies)[FLOW] as string;
  return browserRequest(h, 'POST', `/.svc/auth/v1/providers/${name}/finish`, {
    cookies: { [FLOW]: flow },
    headers: JSON_HEADERS(h),
    body: JSON.stringify(finishBody(begun.body)),
  });
}

describe('the sign-in page asks a new passkey user for their name', () => {
  test('with passkey sign-up on, the page has a name field beside "Create a passkey"; without it, none', async () => {
    for (const jit of [true, false]) {
      const passkey = testWebauthnProvider();
      const provider = jit ? passkey : { ...passkey, policy: { ...passkey.policy, jit: { enabled: false, emailDomains: [] } } };
      const h = await startGatewayHarness({ socket: false, store: 'memory', attach: echoAttach, gateway: { providers: [provider] } });
      try {
        const page = await browserRequest(h, 'GET', '/.svc/auth/v1/login');
        assert.equal(page.status, 200);
        assert.equal(/<input type="text" id="display-name" name="display_name" autocomplete="name" maxlength="128"/.test(page.text), jit);
        assert.equal(page.text.includes('data-intent="signup"'), jit);
        assert.ok(page.text.includes('data-intent="signin"'));
      } finally {
        await h.close();
      }
    }
  });
});

describe('a sign-up with a display name', () => {
  let h: GatewayHarness;
  let provider: ReturnType<typeof recording>;
  before(async () => {
    provider = recording(testJsonProvider({ subject: 'cred-zoe', claims: {} }));
    h = await startGatewayHarness({ socket: false, store: 'memory', attach: echoAttach, gateway: { providers: [provider] } });
  });
  after(() => h.close());

  test('the name becomes the new user’s (source self) and the principal’s; the provider never sees the field', async () => {
    const done = await jsonCeremony(h, 'testjson', 'signup', (b) => ({ challenge: b.challenge, display_name: 'Zoë Ångström' }));
    assert.equal(done.status, 200, done.text);
    assert.deepEqual(provider.bodies.at(-1), { challenge: (provider.bodies.at(-1) as { challenge: string }).challenge });
    const access = cookiesSet(done.setCookies)['svc-access'] as string;
    const me = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: access });
    assert.equal(me.body.claims.name, 'Zoë Ångström');
    const user = await h.deps.store.getUser(me.body.subject);
    assert.equal(user?.nameSource, 'self');
  });

  test('a display name with a bidirectional override is refused 400 invalid_request, and nobody is created', async () => {
    const before = (await h.deps.store.listUsers({ realm: 'application', limit: 100 })).length;
    const done = await jsonCeremony(h, 'testjson', 'signup', (b) => ({ challenge: b.challenge, display_name: 'Eve\u202eevil' }));
    assert.equal(done.status, 400, done.text);
    assert.equal(done.body.code, 'invalid_request');
    assert.equal((await h.deps.store.listUsers({ realm: 'application', limit: 100 })).length, before);
  });
});

describe('a refused provider sign-in in a browser', () => {
  let h: GatewayHarness;
  before(async () => {
    const invitation = testRedirectProvider({
      subject: 'dana',
      claims: { email: 'dana@example.com', email_verified: true, name: 'Dana' },
      policy: { jit: { enabled: true, emailDomains: [], status: 'disabled' } },
    });
    h = await startGatewayHarness({ socket: false, store: 'memory', attach: echoAttach, gateway: { providers: [invitation] } });
  });
  after(() => h.close());

  async function callback(accept: string) {
    const begun = await browserRequest(h, 'GET', '/.svc/auth/v1/providers/testidp/begin', { headers: { accept } });
    assert.equal(begun.status, 302, begun.text);
    const flow = cookiesSet(begun.setCookies)[FLOW] as string;
    const location = begun.headers.get('location') ?? '';
    return browserRequest(h, 'GET', location.slice(h.gatewayBase.length), { cookies: { [FLOW]: flow }, headers: { accept } });
  }

  test('sign-up by invitation: the first sign-in creates the disabled user and the browser gets a 403 page saying an administrator must approve', async () => {
    const r = await callback('text/html,application/xhtml+xml,*/*;q=0.8');
    assert.equal(r.status, 403);
    assert.match(r.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(r.text, /An administrator must approve/);
    assert.match(r.text, /<code>user_disabled<\/code>/);
    assert.match(r.headers.get('content-security-policy') ?? '', /default-src 'none'/);
    assert.equal(r.headers.get('cache-control'), 'no-store');
    assert.doesNotMatch(r.text, /<script/);
    assert.deepEqual(
      Object.keys(cookiesSet(r.setCookies)).filter((k) => k !== FLOW),
      [],
      'no session cookie',
    );
    const [user] = await h.deps.store.listUsers({ realm: 'application', email: 'dana@example.com', limit: 2 });
    assert.equal(user?.status, 'disabled');
    assert.equal(user?.name, 'Dana');
  });

  test('a client that is not a browser gets the same refusal as problem+json', async () => {
    const r = await callback('application/json');
    assert.equal(r.status, 403);
    assert.equal(r.body.code, 'user_disabled');
  });
});

describe('refusal pages do not hide failed proofs from the budget', () => {
  test('a browser that keeps failing callbacks gets the page for each 401, then 429, and the provider is not asked again', async () => {
    const provider = testRedirectProvider({ name: 'budgetidp' });
    const h = await startNodeHarness({ socket: false, store: 'memory' });
    try {
      const limiter = createFailureLimiter({ clock: h.deps.clock, store: h.deps.store, maxFailures: 3, scope: 'app-signin-test' });
      const g = await startGateway(h, { socket: false, attach: echoAttach, providers: [provider], limiter });
      const gw = { gatewayBase: g.base, gateway: g.app, injected: g.injected } as GatewayHarness;
      const html = { accept: 'text/html' };
      try {
        const answers: string[] = [];
        for (let i = 0; i < 5; i++) {
          const begun = await browserRequest(gw, 'GET', '/.svc/auth/v1/providers/budgetidp/begin', { headers: html });
          const flow = cookiesSet(begun.setCookies)[FLOW] as string;
          const wrong = (begun.headers.get('location') ?? '').slice(gw.gatewayBase.length).replace(/code=[^&]+/, 'code=wrong');
          const r = await browserRequest(gw, 'GET', wrong, { cookies: { [FLOW]: flow }, headers: html });
          answers.push(`${r.status} ${/<code>([a-z_]+)<\/code>/.exec(r.text)?.[1] ?? r.body?.code}`);
        }
        assert.deepEqual(answers, [
          '401 invalid_credential',
          '401 invalid_credential',
          '401 invalid_credential',
          '429 rate_limited',
          '429 rate_limited',
        ]);
        assert.equal(provider.finished(), 0);
      } finally {
        await g.app.close();
      }
    } finally {
      await h.close();
    }
  });
});

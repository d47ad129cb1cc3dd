import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { AuthError } from '@svc/core';
import Fastify, { type FastifyInstance } from 'fastify';
import { createChallengeBudget } from '../../src/http/challenge-budget.js';
import { failureCounting } from '../../src/http/failure-counting.js';
import { clientAddressKey, createFailureLimiter, type FailureLimiter } from '../../src/http/failure-limiter.js';
import { hardenSurface } from '../../src/http/harden.js';
import { serverOptions } from '../../src/http/server-options.js';
import { signInRoutes } from '../../src/http/sign-in-routes.js';
import { until, within } from '../support/bounded.js';
import { admin, api, createFakeClock, signIn } from '../support/harness.js';
import { adminToken, completion, type NodeHarness, nodeApi, prepare, startNodeHarness } from '../support/node-harness.js';

/** A gate a handler waits on, and a signal that the handler got there. */
function gate() {
  let open: () => void = () => {};
  let entered: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  const reached = new Promise<void>((resolve) => {
    entered = resolve;
  });
  return { opened, open, reached, entered };
}

async function listening(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return `http://127.0.0.1:${address.port}`;
}

/** A surface with one counted scope (`/attempt` fails as a proof after `g`, `/invalid` refuses its input, `/free` counts nothing) and a route outside it. */
async function countedApp(limiter: FailureLimiter, g: ReturnType<typeof gate>): Promise<FastifyInstance> {
  const app = Fastify(serverOptions(false));
  hardenSurface(app, { loopbackOnly: true });
  await app.register(async (scope) => {
    await scope.register(failureCounting, { limiter });
    const attemptKeys = () => ['credential'];
    scope.post('/attempt', { config: { attemptKeys } }, async () => {
      g.entered();
      await g.opened;
      throw new AuthError('invalid_token', 'wrong credential');
    });
    scope.post('/invalid', { config: { attemptKeys } }, async () => {
      throw new AuthError('invalid_request', 'malformed credential');
    });
    scope.get('/free', async () => ({ ok: true }));
  });
  app.get('/outside', async () => ({ ok: true }));
  return app;
}

describe('failure counting plugin', () => {
  test('a 401 counts against the route keys; a refusal of the input gives its slot back; the rest of the app is untouched', async () => {
    const clock = createFakeClock();
    const limiter = createFailureLimiter({ clock, maxFailures: 2 });
    const g = gate();
    g.open();
    const app = await countedApp(limiter, g);
    try {
      const base = await listening(app);
      const post = async (path: string) => {
        const r = await fetch(base + path, { method: 'POST' });
        return { status: r.status, code: ((await r.json()) as { code: string }).code, retryAfter: r.headers.get('retry-after') };
      };
      for (let i = 0; i < 5; i++) assert.equal((await post('/invalid')).code, 'invalid_request', `input refusal ${i + 1}`);
      assert.equal(limiter.check(['credential']), null, 'refusals of the input are not failed proofs');
      assert.equal((await post('/attempt')).code, 'invalid_token');
      assert.equal((await post('/attempt')).code, 'invalid_token');
      const refused = await post('/attempt');
      assert.equal(refused.status, 429);
      assert.equal(refused.code, 'rate_limited');
      assert.equal(refused.retryAfter, '60');
      assert.equal((await post('/invalid')).code, 'rate_limited', 'every counted route of the scope shares the budget');
      assert.equal((await fetch(`${base}/free`)).status, 200, 'a route of the scope without attemptKeys is not limited');
      assert.equal((await fetch(`${base}/outside`)).status, 200, 'a route outside the scope is not limited');
      clock.advance(60_000);
      assert.equal((await post('/attempt')).code, 'invalid_token', 'the window ended');
    } finally {
      await app.close();
    }
  });

  test('a client that disconnects mid-attempt frees nothing: the attempt runs on, and counts when it fails', async () => {
    const limiter = createFailureLimiter({ clock: createFakeClock(), maxFailures: 1 });
    const g = gate();
    const app = await countedApp(limiter, g);
    try {
      const port = Number(new URL(await listening(app)).port);
      const socket = connect(port, '127.0.0.1', () =>
        socket.write('POST /attempt HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n'),
      );
      socket.on('error', () => {});
      await within(g.reached, 10_000, 'the attempt to reach its handler');
      const closed = new Promise((resolve) => socket.once('close', resolve));
      socket.destroy();
      await within(closed, 10_000, 'the client socket to close');
      // The budget (1) is held by the running attempt: the next one runs uncounted.
      assert.equal((await limiter.reserve(['credential'])).counted, false);
      g.open();
      await until(() => limiter.check(['credential']) !== null, 5_000, 'the abandoned attempt to fail and be counted');
      assert.equal(limiter.check(['credential'])?.code, 'rate_limited', 'the abandoned attempt failed and was counted');
      assert.equal(limiter.check([clientAddressKey('127.0.0.1')]), null, 'only the route keys were charged');
    } finally {
      await app.close();
    }
  });
});

describe('the sign-in plugin serves any realm', () => {
  let h: NodeHarness;
  let gateway: FastifyInstance;
  let base: string;
  before(async () => {
    h = await startNodeHarness();
    // Mounted as the application gateway will mount it: its own prefix, the application realm.
    gateway = Fastify(serverOptions(false));
    hardenSurface(gateway, { loopbackOnly: false });
    await gateway.register(signInRoutes, {
      prefix: '/.svc/auth/v1',
      realm: 'application',
      deps: h.deps,
      limiter: createFailureLimiter({ clock: h.clock, scope: 'app-signin' }),
      challenges: createChallengeBudget({ clock: h.clock }),
      guardProblems: [],
    });
    base = await listening(gateway);
  });
  after(async () => {
    await gateway.close();
    await h.close();
  });

  test('an application device signs in and refreshes in the application realm; the management API refuses it', async () => {
    const intent = await prepare(h, await adminToken(h), { realm: 'application' });
    const paired = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, intent.key) });
    assert.equal(paired.status, 201);

    const challenge = await api({ ...h, base }, 'POST', '/.svc/auth/v1/challenges', { body: { public_key: intent.key.publicKeyHex } });
    assert.equal(challenge.status, 201);
    const session = await api({ ...h, base }, 'POST', '/.svc/auth/v1/sessions', {
      body: { challenge_id: challenge.body.challenge_id, signature: intent.key.signHex(challenge.body.challenge) },
    });
    assert.equal(session.status, 201);
    assert.equal(session.body.realm, 'application');
    const refreshed = await api({ ...h, base }, 'POST', '/.svc/auth/v1/refresh', { body: { refresh_token: session.body.refresh_token } });
    assert.equal(refreshed.status, 200);
    assert.equal(refreshed.body.realm, 'application');

    await assert.rejects(signIn(h, intent.key), /sign-in failed|challenge failed/);
    const crossRealm = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: refreshed.body.refresh_token } });
    assert.equal(crossRealm.status, 401);
  });

  test('a management device cannot sign in to the application realm', async () => {
    const { key } = await admin(h);
    const challenge = await api({ ...h, base }, 'POST', '/.svc/auth/v1/challenges', { body: { public_key: key.publicKeyHex } });
    const session = await api({ ...h, base }, 'POST', '/.svc/auth/v1/sessions', {
      body: { challenge_id: challenge.body.challenge_id, signature: key.signHex(challenge.body.challenge) },
    });
    assert.equal(session.status, 401);
    assert.equal(session.body.code, 'invalid_signature');
  });
});

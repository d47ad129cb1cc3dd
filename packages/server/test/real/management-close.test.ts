import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Store } from '@svc/core/store';
import { admin, api, startHarness } from '../support/harness.js';

// The timeout is the property, not a performance figure: without draining, the keep-alive
// connection of the in-flight request would hold app.close() for Fastify's 72 s keep-alive.
test('graceful close: app.close() lets an in-flight request finish, then closes without waiting out keep-alive', {
  timeout: 40_000,
}, async () => {
  let pause = false;
  let entered!: () => void;
  const inside = new Promise<void>((resolve) => {
    entered = resolve;
  });
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const h = await startHarness({
    wrapStore: (store) =>
      new Proxy(store, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver);
          if (typeof value !== 'function') return value;
          if (prop !== 'findSessionByAccessDigest') return value.bind(target);
          return async (...args: unknown[]) => {
            if (pause) {
              entered();
              await gate;
            }
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      }) as Store,
  });
  const { pair } = await admin(h);
  pause = true;
  const inFlight = api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
  await inside;
  let closed = false;
  const closing = h.app.close().then(() => {
    closed = true;
  });
  // Let the close start while the request is held in the store.
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(closed, false);
  release();
  const r = await inFlight;
  assert.equal(r.status, 200);
  assert.equal(r.body.session, pair.session_id);
  await closing;
  assert.equal(closed, true);
  await h.close();
});

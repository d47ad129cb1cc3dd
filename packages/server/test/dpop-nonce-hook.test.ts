import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Store } from '@svc/core/store';
import { createMemoryStore } from '@svc/store-testkit';
import Fastify from 'fastify';
import { installDpopNonces } from '../src/http/dpop-nonce.js';
import { createFakeClock } from './support/harness.js';

// The DPoP nonce hook is a callback hook that waits for the nonce only on requests with a proof.
// What the rest of such an answer throws must still reach Fastify's error path, as it did when the
// hook was async: a throw inside the hook's own promise callbacks would go unhandled and end the
// process (found by the outside review of the change, 2026-11-29).
async function appWith(store: Store) {
  const app = Fastify({ logger: false });
  installDpopNonces(app, { store, clock: createFakeClock() });
  app.get('/ok', async () => ({ ok: true }));
  // A header value Node refuses when it writes the head (ERR_INVALID_CHAR): thrown after every onSend hook.
  app.get('/refused-header', async (_req, reply) => {
    reply.header('x-name', 'Zo\u00eb\u0100');
    return { ok: true };
  });
  await app.ready();
  return app;
}

describe('the DPoP nonce hook', () => {
  test('a-header-node-refuses-in-an-answer-to-a-dpop-request-is-a-500-not-a-crash', async () => {
    const app = await appWith(createMemoryStore());
    let unhandled: unknown = null;
    const record = (reason: unknown) => {
      unhandled = reason;
    };
    process.on('unhandledRejection', record);
    try {
      for (const headers of [{}, { dpop: 'any proof' }]) {
        const r = await app.inject({ method: 'GET', url: '/refused-header', headers });
        assert.equal(r.statusCode, 500, `with ${JSON.stringify(headers)}: ${r.body}`);
      }
      // A rejection nobody handled is reported after the turn it happened in.
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(unhandled, null, `an unhandled rejection: ${String(unhandled)}`);
    } finally {
      process.off('unhandledRejection', record);
      await app.close();
    }
  });

  test('an answer to a request with a proof carries a nonce; one without carries none', async () => {
    const app = await appWith(createMemoryStore());
    try {
      const asked = await app.inject({ method: 'GET', url: '/ok', headers: { dpop: 'any proof' } });
      assert.equal(asked.statusCode, 200);
      assert.match(String(asked.headers['dpop-nonce']), /^[A-Za-z0-9_-]{32}$/);
      const plain = await app.inject({ method: 'GET', url: '/ok' });
      assert.equal(plain.statusCode, 200);
      assert.equal(plain.headers['dpop-nonce'], undefined);
    } finally {
      await app.close();
    }
  });

  test('a failing store: the answer still goes, without a nonce', async () => {
    const store = createMemoryStore();
    const failing = new Proxy(store, {
      get: (target, name, receiver) =>
        name === 'useDpopProof' ? () => Promise.reject(new Error('the store is failing')) : Reflect.get(target, name, receiver),
    });
    const app = await appWith(failing);
    try {
      const r = await app.inject({ method: 'GET', url: '/ok', headers: { dpop: 'any proof' } });
      assert.equal(r.statusCode, 200);
      assert.equal(r.headers['dpop-nonce'], undefined);
      assert.deepEqual(r.json(), { ok: true });
    } finally {
      await app.close();
    }
  });
});

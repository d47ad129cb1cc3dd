import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Store } from '@svc/core/store';
import { ed25519KeyProvider, type NodeProvider } from '../src/index.js';
import { breakablePing, type NodeHarness, nodeApi, startNodeHarness } from './support/node-harness.js';

describe('node surface: health', () => {
  let h: NodeHarness;
  let setBroken: (broken: boolean) => void = () => undefined;
  let providerFails = false;
  const flaky: NodeProvider = {
    name: 'webauthn-test',
    kind: 'webauthn',
    builtin: false,
    version: '0.0.1',
    check: () => (providerFails ? Promise.reject(new Error('metadata unavailable')) : Promise.resolve()),
  };
  before(async () => {
    h = await startNodeHarness({
      socket: false,
      store: 'memory',
      providers: [ed25519KeyProvider, flaky],
      wrapStore: (store: Store) => {
        const b = breakablePing(store);
        setBroken = b.setBroken;
        return b.store;
      },
    });
  });
  after(() => h.close());

  test('health is public: 200 with status ok, each provider ok and the store reachable', async () => {
    const r = await nodeApi(h, 'GET', '/edge/0-alpha/health');
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, {
      status: 'ok',
      node_id: h.identity.nodeId,
      checked_at: '2026-11-22T10:00:00.000Z',
      store: { status: 'ok' },
      providers: [
        { name: 'ed25519', kind: 'device-key', status: 'ok' },
        { name: 'webauthn-test', kind: 'webauthn', status: 'ok' },
      ],
    });
  });

  test('an unreachable store makes health 503 with the same body shape and status degraded', async () => {
    setBroken(true);
    try {
      const r = await nodeApi(h, 'GET', '/edge/0-alpha/health');
      assert.equal(r.status, 503);
      assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(r.headers.get('cache-control'), 'no-store');
      assert.equal(r.body.status, 'degraded');
      assert.deepEqual(r.body.store, { status: 'failed' });
      assert.ok(r.body.providers.every((p: { status: string }) => p.status === 'ok'));
      assert.doesNotMatch(r.text, /unreachable/, 'the reason goes to the log only');
    } finally {
      setBroken(false);
    }
    assert.equal((await nodeApi(h, 'GET', '/edge/0-alpha/health')).status, 200);
  });

  test('a failing provider makes health 503 degraded and names the provider', async () => {
    providerFails = true;
    try {
      const r = await nodeApi(h, 'GET', '/edge/0-alpha/health');
      assert.equal(r.status, 503);
      assert.equal(r.body.status, 'degraded');
      assert.deepEqual(r.body.store, { status: 'ok' });
      assert.deepEqual(
        r.body.providers.map((p: { name: string; status: string }) => [p.name, p.status]),
        [
          ['ed25519', 'ok'],
          ['webauthn-test', 'failed'],
        ],
      );
    } finally {
      providerFails = false;
    }
  });

  test('the built-in Ed25519 provider passes its known-answer test', async () => {
    await assert.doesNotReject(ed25519KeyProvider.check());
  });
});

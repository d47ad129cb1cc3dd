import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { auditShippingAfter, type NodeHealthFacts, nodeHealthVerdict } from '@svc/core';
import type { Store } from '@svc/core/store';
import { buildMetricsApp, createServiceMetrics, ed25519KeyProvider, type NodeProvider } from '../src/index.js';

/** The built-in device-key provider, whose known-answer test fails (a broken crypto build). */
const failingDeviceKey: NodeProvider = Object.freeze({
  ...ed25519KeyProvider,
  async check() {
    throw new Error('the Ed25519 known-answer test failed');
  },
});

/** `/readyz` of a metrics listener over a node in the state `facts` describes. */
async function readyz(facts: NodeHealthFacts): Promise<{ status: number; body: Record<string, unknown> }> {
  const store = {
    ping: async () => {
      if (facts.store.status !== 'ok') throw new Error('the store does not answer');
    },
  } as unknown as Store;
  const shipping =
    facts.audit_shipping === undefined
      ? null
      : auditShippingAfter(
          ['file'],
          facts.audit_shipping.status === 'ok' ? null : Object.assign(new Error('x'), { code: 'audit_ship_stalled' }),
        );
  const providers = facts.providers.map((p) => (p.status === 'ok' ? ed25519KeyProvider : failingDeviceKey));
  const app = await buildMetricsApp({
    metrics: createServiceMetrics({ store: { auditHead: async () => null } }),
    store,
    auditShipping: () => shipping,
    providers,
    exposed: false,
    logger: false,
  });
  try {
    const r = await app.inject({ method: 'GET', url: '/readyz', headers: { host: '127.0.0.1' } });
    return { status: r.statusCode, body: r.json() };
  } finally {
    await app.close();
  }
}

const deviceKey = (status: 'ok' | 'failed') => ({ name: 'ed25519', kind: 'device-key', status });

describe('/readyz applies the one rule of what makes a node unhealthy (core nodeHealthVerdict)', () => {
  test('readyz-ignores-failed-device-key-provider: /readyz answers 503 naming the built-in key provider when its check fails, as the HEALTHCHECK does', async () => {
    const r = await readyz({ store: { status: 'ok' }, providers: [deviceKey('failed')] });
    assert.equal(r.status, 503, 'a node that cannot verify device signatures is not ready');
    assert.deepEqual(r.body, { status: 'not_ready', providers: [{ name: 'ed25519', kind: 'device-key', status: 'failed' }] });
  });

  const cases: readonly NodeHealthFacts[] = [
    { store: { status: 'ok' }, providers: [deviceKey('ok')] },
    { store: { status: 'ok' }, audit_shipping: { status: 'ok' }, providers: [deviceKey('ok')] },
    { store: { status: 'failed' }, providers: [deviceKey('ok')] },
    { store: { status: 'ok' }, audit_shipping: { status: 'failed' }, providers: [deviceKey('ok')] },
    { store: { status: 'ok' }, providers: [deviceKey('failed')] },
    { store: { status: 'failed' }, audit_shipping: { status: 'failed' }, providers: [deviceKey('failed')] },
  ];
  for (const facts of cases) {
    test(`/readyz is 200 exactly when the rule says healthy: ${JSON.stringify(facts)}`, async () => {
      const verdict = nodeHealthVerdict(facts);
      const r = await readyz(facts);
      assert.equal(r.status, verdict.healthy ? 200 : 503, `the rule says ${JSON.stringify(verdict)}`);
      if (facts.store.status !== 'ok') assert.equal(r.body.code, 'store_unavailable');
    });
  }
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nodeHealthVerdict } from '../src/index.js';

const ok = { status: 'ok' } as const;
const failed = { status: 'failed' } as const;
const ed25519 = (status: 'ok' | 'failed') => ({ name: 'ed25519', kind: 'device-key', status });

test("the node's own parts decide: the store, audit shipping, a device-key provider", () => {
  assert.deepEqual(nodeHealthVerdict({ store: ok, providers: [ed25519('ok')] }), { healthy: true, failed: [], outside: [] });
  assert.deepEqual(nodeHealthVerdict({ store: failed, providers: [ed25519('ok')] }).failed, ['store']);
  assert.deepEqual(nodeHealthVerdict({ store: ok, audit_shipping: failed, providers: [] }).failed, ['audit_shipping']);
  assert.deepEqual(nodeHealthVerdict({ store: ok, providers: [ed25519('failed')] }), {
    healthy: false,
    failed: ['provider ed25519'],
    outside: [],
  });
});

test('a failed provider package is an outside outage: reported, never unhealthy on its own', () => {
  const idpDown = { name: 'corp-sso', kind: 'oidc', status: 'failed' } as const;
  assert.deepEqual(nodeHealthVerdict({ store: ok, audit_shipping: ok, providers: [ed25519('ok'), idpDown] }), {
    healthy: true,
    failed: [],
    outside: ['corp-sso'],
  });
  assert.equal(nodeHealthVerdict({ store: failed, providers: [idpDown] }).healthy, false);
});

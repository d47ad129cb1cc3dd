import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type AuditShippingHealth, auditShippingAfter, defineFailureCodes } from '@svc/core';
import type { Store } from '@svc/core/store';
import type { FastifyInstance } from 'fastify';
import { buildMetricsApp, createServiceMetrics } from '../src/index.js';
import { breakablePing, type NodeHarness, nodeApi, startNodeHarness } from './support/node-harness.js';

// The errors below stand in for the audit-shipping classes of the program that ships (the
// CLI), which this test does not load; core recognises a failure code once its package has
// registered it, so register the two the stand-ins carry, as that package does when it loads.
defineFailureCodes({
  audit_ship_stalled: { raisedBy: 'ShipStall (stand-in)', exit: 1, meaning: 'the chain no longer continues the sinks’ cursor' },
  audit_sink_refused: { raisedBy: 'AuditSinkError (stand-in)', exit: 1, meaning: 'the audit sink file is unsafe' },
});

// What the running service's audit shipping reports, switched by each test.
let shipping: AuditShippingHealth | null = null;
const stalled = (code: string) => auditShippingAfter(['file', 'stdout'], Object.assign(new Error('stalled'), { code }));

describe('a stalled audit shipping in node health', () => {
  let h: NodeHarness;
  before(async () => {
    h = await startNodeHarness({ socket: false, store: 'memory', auditShipping: () => shipping });
  });
  after(() => h.close());

  test('without sinks health has no audit_shipping; shipping that delivers is ok', async () => {
    shipping = null;
    const none = await nodeApi(h, 'GET', '/edge/0-alpha/health');
    assert.equal(none.status, 200);
    assert.equal('audit_shipping' in none.body, false);
    shipping = auditShippingAfter(['file'], null);
    const ok = await nodeApi(h, 'GET', '/edge/0-alpha/health');
    assert.equal(ok.status, 200);
    assert.deepEqual(ok.body.audit_shipping, { status: 'ok' });
  });

  test('a stall makes health 503 degraded with the code, the store still ok; it recovers with shipping', async () => {
    shipping = stalled('audit_sink_refused');
    const r = await nodeApi(h, 'GET', '/edge/0-alpha/health');
    assert.equal(r.status, 503);
    assert.equal(r.body.status, 'degraded');
    assert.deepEqual(r.body.store, { status: 'ok' });
    assert.deepEqual(r.body.audit_shipping, { status: 'failed', code: 'audit_sink_refused' });
    shipping = auditShippingAfter(['file', 'stdout'], null);
    assert.equal((await nodeApi(h, 'GET', '/edge/0-alpha/health')).status, 200);
  });
});

describe('a stalled audit shipping in /readyz and the metrics', () => {
  let app: FastifyInstance;
  let setBroken: (broken: boolean) => void = () => undefined;
  const metrics = createServiceMetrics({ store: { auditHead: async () => null }, auditShipping: () => shipping });
  before(async () => {
    const store = breakablePing({ ping: async () => undefined } as unknown as Store);
    setBroken = store.setBroken;
    app = await buildMetricsApp({ metrics, store: store.store, auditShipping: () => shipping, exposed: false, logger: false });
  });
  after(() => app.close());
  const readyz = () => app.inject({ method: 'GET', url: '/readyz', headers: { host: '127.0.0.1' } });
  const scrape = async () => metrics.registry.metrics();

  test('ready while shipping delivers; 503 not_ready naming the code while it is stalled; ready again after', async () => {
    shipping = auditShippingAfter(['file'], null);
    assert.equal((await readyz()).statusCode, 200);
    shipping = stalled('audit_ship_stalled');
    const r = await readyz();
    assert.equal(r.statusCode, 503);
    assert.deepEqual(r.json(), { status: 'not_ready', audit_shipping: { status: 'failed', code: 'audit_ship_stalled' } });
    shipping = auditShippingAfter(['file'], null);
    assert.deepEqual((await readyz()).json(), { status: 'ready' });
  });

  test('an unreachable store is still store_unavailable, whatever shipping says', async () => {
    shipping = stalled('audit_ship_stalled');
    setBroken(true);
    try {
      const r = await readyz();
      assert.equal(r.statusCode, 503);
      assert.equal(r.json().code, 'store_unavailable');
    } finally {
      setBroken(false);
    }
  });

  test('the stall gauge per sink and the error code of the stall; absent without sinks', async () => {
    shipping = stalled('audit_ship_failed');
    let text = await scrape();
    assert.match(text, /^svc_audit_shipping_stalled\{sink="file"\} 1$/m);
    assert.match(text, /^svc_audit_shipping_stalled\{sink="stdout"\} 1$/m);
    assert.match(text, /^svc_audit_shipping_error\{sink="file",code="audit_ship_failed"\} 1$/m);
    shipping = auditShippingAfter(['file', 'stdout'], null);
    text = await scrape();
    assert.match(text, /^svc_audit_shipping_stalled\{sink="file"\} 0$/m);
    assert.doesNotMatch(text, /^svc_audit_shipping_error\{/m);
    shipping = null;
    assert.doesNotMatch(await scrape(), /^svc_audit_shipping_stalled\{/m);
  });
});

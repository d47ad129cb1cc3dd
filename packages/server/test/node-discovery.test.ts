import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CLUSTER_ID_PATTERN, clusterIdOf, isValidNodeId, nodeIdOf } from '@svc/core';
import { NODE_ROUTES } from '../src/node/routes.js';
import { adminToken, type NodeHarness, nodeApi, startNodeHarness } from './support/node-harness.js';

const SIX_ROUTES = [
  { method: 'GET', path: '/.well-known/edge', auth: 'public' },
  { method: 'GET', path: '/edge/0-alpha/health', auth: 'public' },
  { method: 'GET', path: '/edge/0-alpha/status', auth: 'management_bearer' },
  { method: 'POST', path: '/edge/0-alpha/diagnostics', auth: 'management_bearer' },
  { method: 'POST', path: '/edge/0-alpha/pairing/prepare', auth: 'management_bearer' },
  { method: 'POST', path: '/edge/0-alpha/pairing/complete', auth: 'pairing_code_and_signature' },
];

describe('node surface: discovery', () => {
  let h: NodeHarness;
  before(async () => {
    h = await startNodeHarness({ socket: false, store: 'memory' });
  });
  after(() => h.close());

  test('discovery is public and names the node id, its public key and the api version', async () => {
    const r = await nodeApi(h, 'GET', '/.well-known/edge');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
    assert.deepEqual(Object.keys(r.body).sort(), [
      'alg',
      'api_version',
      'cluster_id',
      'node_id',
      'previous_keys',
      'providers',
      'public_key',
      'routes',
      'valid_from',
    ]);
    assert.deepEqual(r.body.providers, [{ name: 'ed25519', kind: 'device-key' }], 'the providers, as data');
    assert.deepEqual(r.body.previous_keys, [], 'a node that never rotated its key lists no previous keys');
    assert.equal(r.body.api_version, '0-alpha');
    assert.equal(r.body.alg, 'Ed25519');
    assert.match(r.body.public_key, /^[0-9a-f]{64}$/);
    assert.equal(r.body.public_key, h.identity.publicKeyHex);
    assert.equal(r.body.node_id, h.identity.nodeId);
    assert.ok(isValidNodeId(r.body.node_id));
    assert.equal(r.body.node_id, nodeIdOf(r.body.public_key), 'the id is derived from the advertised key');
    assert.equal(r.body.cluster_id, clusterIdOf(h.deps.projectId), 'the cluster is named by the project every node serves');
    assert.match(r.body.cluster_id, CLUSTER_ID_PATTERN);
  });

  test('discovery advertises exactly the six routes of the contract, and those are exactly the routes installed', async () => {
    const r = await nodeApi(h, 'GET', '/.well-known/edge');
    assert.deepEqual(r.body.routes, SIX_ROUTES);
    assert.deepEqual(NODE_ROUTES, SIX_ROUTES);
    const printed = h.node.printRoutes({ commonPrefix: false });
    for (const route of SIX_ROUTES) assert.ok(h.node.hasRoute({ method: route.method, url: route.path }), `${route.method} ${route.path}`);
    assert.doesNotMatch(printed, /kernel|semantic/i);
  });

  test('every path under /edge/0-alpha/ other than the advertised ones is 404 not_found, whatever the method or token', async () => {
    const token = await adminToken(h);
    const paths = [
      '/edge/0-alpha/',
      '/edge/0-alpha',
      '/edge/0-alpha/kernels',
      '/edge/0-alpha/semantic/ops',
      '/edge/0-alpha/ops/summarize',
      '/edge/0-alpha/pairing',
      '/edge/0-alpha/pairing/cancel',
      '/edge/0-alpha/health/deep',
      '/edge/0-alpha/status/..%2fhealth',
      '/edge/1/health',
      '/.well-known/edge/extra',
      '/health',
      '/v1/auth/me',
    ];
    for (const path of paths) {
      for (const method of ['GET', 'POST']) {
        const r = await nodeApi(h, method, path, { token, ...(method === 'POST' ? { body: {} } : {}) });
        assert.equal(r.status, 404, `${method} ${path}`);
        assert.equal(r.body.code, 'not_found', `${method} ${path}`);
        assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/);
      }
    }
  });

  test('a known route with another method is 405 method_not_allowed with Allow', async () => {
    const r = await nodeApi(h, 'POST', '/.well-known/edge', { body: {} });
    assert.equal(r.status, 405);
    assert.equal(r.body.code, 'method_not_allowed');
    assert.match(r.headers.get('allow') ?? '', /GET/);
    const get = await nodeApi(h, 'GET', '/edge/0-alpha/diagnostics');
    assert.equal(get.body.code, 'method_not_allowed');
  });
});

describe('node surface: shared hardening', () => {
  let h: NodeHarness;
  before(async () => {
    h = await startNodeHarness({ socket: false, store: 'memory' });
  });
  after(() => h.close());

  test('every response carries Cache-Control: no-store, successes and refusals alike', async () => {
    const token = await adminToken(h);
    const replies = [
      await nodeApi(h, 'GET', '/.well-known/edge'),
      await nodeApi(h, 'GET', '/edge/0-alpha/health'),
      await nodeApi(h, 'GET', '/edge/0-alpha/status', { token }),
      await nodeApi(h, 'GET', '/edge/0-alpha/status'),
      await nodeApi(h, 'POST', '/edge/0-alpha/diagnostics', { token, body: { nonce: 'nonce-0001' } }),
      await nodeApi(h, 'POST', '/edge/0-alpha/pairing/prepare', { token, body: { realm: 'application' } }),
      await nodeApi(h, 'GET', '/nope'),
    ];
    for (const r of replies) {
      assert.equal(r.headers.get('cache-control'), 'no-store', `${r.status} ${r.text.slice(0, 80)}`);
      assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
    }
  });
});

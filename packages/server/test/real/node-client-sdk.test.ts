import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  ApiError,
  checkedNodeId,
  createNodeClient,
  generateDeviceKey,
  type NodeClient,
  NodeIdentityError,
  NodeUnreachableError,
  pairDevice,
  verifyDiagnostics,
} from '@svc/client';
import { nodeIdOf } from '@svc/core';
import { type Store, StoreUnavailableError } from '@svc/core/store';
import { newDeviceKey } from '../support/harness.js';
import { adminToken, type NodeHarness, startNodeHarness } from '../support/node-harness.js';

describe('the client SDK against the node surface', () => {
  let h: NodeHarness;
  let node: NodeClient;
  let token: string;
  before(async () => {
    h = await startNodeHarness();
    node = createNodeClient({ baseUrl: `${h.nodeBase}/` });
    token = await adminToken(h);
  });
  after(() => h.close());

  test('discovery, health and status come back typed', async () => {
    const d = await node.discovery();
    assert.equal(d.node_id, h.identity.nodeId);
    assert.equal(checkedNodeId(d), h.identity.nodeId);
    assert.equal((await node.health()).status, 'ok');
    const s = await node.status(token);
    assert.equal(s.store_addon?.verified, true);
  });

  test('signed diagnostics verify with verifyDiagnostics; a tampered payload, another nonce or another pinned key do not', async () => {
    const signed = await node.diagnostics(token, 'sdk-nonce-1');
    assert.equal(verifyDiagnostics(signed, { nonce: 'sdk-nonce-1', publicKeyHex: h.identity.publicKeyHex }), true);
    assert.equal(verifyDiagnostics(signed, { nonce: 'sdk-nonce-2' }), false);
    assert.equal(verifyDiagnostics(signed, { nonce: 'sdk-nonce-1', publicKeyHex: newDeviceKey().publicKeyHex }), false);
    const tampered = { ...signed, payload: { ...signed.payload, generated_at: '2000-01-01T00:00:00.000Z' } };
    assert.equal(verifyDiagnostics(tampered, { nonce: 'sdk-nonce-1' }), false);
  });

  test('pairDevice checks the node, signs the proof and completes; errors carry the contract code', async () => {
    const { key } = generateDeviceKey();
    const intent = await node.preparePairing(token, { realm: 'application', public_key: key.publicKeyHex, name: 'sdk device' });
    const { device, nodeId } = await pairDevice(node, key, {
      intentId: intent.intent_id,
      code: intent.code,
      expectedNodeId: intent.node_id,
    });
    assert.equal(nodeId, h.identity.nodeId);
    assert.equal(device.realm, 'application');
    assert.equal(device.public_key, key.publicKeyHex);
    await assert.rejects(
      pairDevice(node, key, { intentId: intent.intent_id, code: intent.code }),
      (e: unknown) => e instanceof ApiError && e.code === 'invalid_pairing_intent' && e.status === 401,
    );
    await assert.rejects(node.status('svca_nope'), (e: unknown) => e instanceof ApiError && e.code === 'invalid_token');
  });

  test('a node whose id does not check out, is not derived from its key, or is not the expected one is refused before anything is sent', async () => {
    const d = await node.discovery();
    const other = newDeviceKey().publicKeyHex;
    assert.throws(
      () => checkedNodeId({ ...d, node_id: `${d.node_id.slice(0, -1)}${d.node_id.endsWith('0') ? '1' : '0'}` }),
      NodeIdentityError,
    );
    assert.throws(() => checkedNodeId({ ...d, public_key: other }), NodeIdentityError);
    assert.throws(() => checkedNodeId(d, nodeIdOf(other)), NodeIdentityError);
    assert.throws(() => checkedNodeId(d, 'not-a-node-id'), TypeError);
    let completions = 0;
    const forged = createNodeClient({
      baseUrl: h.nodeBase,
      fetch: async (input, init) => {
        const url = String(input);
        if (url.endsWith('/pairing/complete')) completions++;
        if (url.endsWith('/.well-known/edge')) return new Response(JSON.stringify({ ...d, public_key: other }), { status: 200 });
        return fetch(input, init);
      },
    });
    await assert.rejects(pairDevice(forged, generateDeviceKey().key, { intentId: 'int_x', code: 'AAAA-AAAA' }), NodeIdentityError);
    assert.equal(completions, 0);
  });

  test('an unreachable node is a NodeUnreachableError naming the node surface', async () => {
    const down = createNodeClient({ baseUrl: 'http://127.0.0.1:1' });
    await assert.rejects(down.discovery(), (e: unknown) => e instanceof NodeUnreachableError && /node surface/.test(e.message));
  });
});

describe('the client SDK reads every field of a degraded health report', () => {
  let h: NodeHarness;
  before(async () => {
    h = await startNodeHarness({
      wrapStore: (store: Store) =>
        new Proxy(store, {
          get(target, prop, receiver) {
            if (prop === 'ping') return () => Promise.reject(new StoreUnavailableError('locked'));
            const value = Reflect.get(target, prop, receiver);
            return typeof value === 'function' ? value.bind(target) : value;
          },
        }),
    });
  });
  after(() => h.close());

  test("a failed store's reason reaches the SDK's typed report (a field the response schema once dropped)", async () => {
    const report = await createNodeClient({ baseUrl: h.nodeBase }).health();
    assert.equal(report.status, 'degraded');
    assert.deepEqual(report.store, { status: 'failed', reason: 'locked' });
    const reason: 'connection' | 'timeout' | 'locked' | 'disk_full' | 'io_error' | undefined = report.store.reason;
    assert.equal(reason, 'locked');
  });
});

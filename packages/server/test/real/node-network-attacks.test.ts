import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { newDeviceKey } from '../support/harness.js';
import { testNetworkAddress } from '../support/network-address.js';
import { adminToken, type NodeHarness, nodeApi, startNodeHarness } from '../support/node-harness.js';

// Made on a dummy interface when the machine has none (as root); under CI a missing one fails.
const { address: NET, skip: needsNetwork } = testNetworkAddress();

/** A request with node:http to `host:port`, with a forged Host if asked. */
function send(
  host: string,
  port: number,
  opts: { method?: string; path: string; headers?: Record<string, string>; body?: string },
  // biome-ignore lint/suspicious/noExplicitAny: test bodies are inspected field by field
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host, port, method: opts.method ?? 'GET', path: opts.path, headers: opts.headers ?? {}, agent: false },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => {
          const text = Buffer.concat(parts).toString('utf8');
          let body: unknown = null;
          try {
            body = JSON.parse(text);
          } catch {
            body = null;
          }
          resolve({ status: res.statusCode ?? 0, body });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

function portOf(h: NodeHarness): number {
  return Number(new URL(h.nodeBase).port);
}

describe('node surface bound to every interface', { skip: needsNetwork }, () => {
  let h: NodeHarness;
  before(async () => {
    h = await startNodeHarness({ nodeHost: '0.0.0.0', nodeUrlHost: NET });
  });
  after(() => h.close());

  test('a captured management token replayed from a network peer cannot prepare a pairing (403 management_bearer_not_loopback)', async () => {
    const token = await adminToken(h);
    const prepared = async () => (await h.deps.store.stats(h.clock.now())).events['pairing.prepared'] ?? 0;
    const before = await prepared();
    const r = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/prepare', {
      token,
      body: { realm: 'management', public_key: 'ab'.repeat(32) },
    });
    assert.equal(r.status, 403);
    assert.equal(r.body.code, 'management_bearer_not_loopback');
    assert.equal(await prepared(), before, 'no intent was prepared');
  });

  test('a captured management token replayed from a network peer reads neither status nor diagnostics', async () => {
    const token = await adminToken(h);
    const status = await nodeApi(h, 'GET', '/edge/0-alpha/status', { token });
    assert.equal(status.status, 403);
    assert.equal(status.body.code, 'management_bearer_not_loopback');
    const diag = await nodeApi(h, 'POST', '/edge/0-alpha/diagnostics', { token, body: { nonce: 'n0nce-0123456789' } });
    assert.equal(diag.status, 403);
    assert.equal(diag.body.code, 'management_bearer_not_loopback');
  });

  test('a management token that crossed the network is treated as disclosed: its session is revoked at once', async () => {
    const token = await adminToken(h);
    const r = await nodeApi(h, 'GET', '/edge/0-alpha/status', { token });
    assert.equal(r.body.code, 'management_bearer_not_loopback');
    const again = await send('127.0.0.1', portOf(h), { path: '/edge/0-alpha/status', headers: { authorization: `Bearer ${token}` } });
    assert.equal(again.status, 401);
    assert.equal(again.body.code, 'invalid_token');
  });

  test('the same token from a loopback peer prepares a pairing', async () => {
    const token = await adminToken(h);
    const r = await send('127.0.0.1', portOf(h), {
      method: 'POST',
      path: '/edge/0-alpha/pairing/prepare',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ realm: 'management', public_key: newDeviceKey().publicKeyHex }),
    });
    assert.equal(r.status, 201);
  });
});

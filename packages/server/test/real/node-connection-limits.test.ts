import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, test } from 'node:test';
import { MANAGEMENT_CONNECTION_LIMITS, NODE_CONNECTION_LIMITS } from '../../src/http/connection-limits.js';
import { api } from '../support/harness.js';
import { type NodeHarness, startNodeHarness } from '../support/node-harness.js';

/**
 * Opens `count` idle sockets to the node surface, from `peers` loopback addresses in turn
 * (127.0.0.2, 127.0.0.3, ...: every 127/8 address is this machine), and resolves once the
 * server has either taken or dropped each of them.
 */
async function flood(h: NodeHarness, count: number, peers: number): Promise<Socket[]> {
  const server = h.node.server;
  let seen = 0;
  let done: () => void = () => {};
  const allSeen = new Promise<void>((resolve) => {
    done = resolve;
  });
  const onSeen = () => {
    if (++seen === count) done();
  };
  server.on('connection', onSeen);
  server.on('drop', onSeen);
  const port = Number(new URL(h.nodeBase).port);
  const sockets: Socket[] = [];
  for (let i = 0; i < count; i++) {
    const s = connect({ host: '127.0.0.1', port, localAddress: `127.0.0.${2 + (i % peers)}` });
    s.on('error', () => {});
    sockets.push(s);
  }
  await allSeen;
  server.off('connection', onSeen);
  server.off('drop', onSeen);
  return sockets;
}

function openConnections(h: NodeHarness): Promise<number> {
  return new Promise((resolve, reject) => h.node.server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
}

describe('connection caps: one listener cannot starve the other', () => {
  let h: NodeHarness | undefined;
  let sockets: Socket[] = [];
  afterEach(async () => {
    for (const s of sockets) s.destroy();
    sockets = [];
    await h?.close();
    h = undefined;
  });

  test('450 idle sockets to the node surface do not starve the management API: the node keeps at most its cap and /health answers', async () => {
    h = await startNodeHarness();
    sockets = await flood(h, 450, 15);
    assert.ok((await openConnections(h)) <= NODE_CONNECTION_LIMITS.maxConnections, 'the node surface keeps at most its cap');
    const r = await api(h, 'GET', '/health');
    assert.equal(r.status, 200);
    assert.equal(r.body.status, 'ok');
    assert.ok(NODE_CONNECTION_LIMITS.maxConnections + MANAGEMENT_CONNECTION_LIMITS.maxConnections < 1024, 'both fit a default fd limit');
  });

  test('one peer holding 100 idle sockets gets at most its per-peer share of the node surface', async () => {
    h = await startNodeHarness();
    sockets = await flood(h, 100, 1);
    assert.ok((await openConnections(h)) <= NODE_CONNECTION_LIMITS.maxConnectionsPerPeer);
  });
});

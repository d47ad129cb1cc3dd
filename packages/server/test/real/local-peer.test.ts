import assert from 'node:assert/strict';
import { connect, createServer, type Socket } from 'node:net';
import { describe, test } from 'node:test';
import { sourceKey } from '../../src/http/local-peer.js';
import { within } from '../support/bounded.js';

/** The server side of one loopback connection to `host`, from this process. */
async function acceptedFrom(host: string): Promise<{ socket: Socket; close(): Promise<void> }> {
  const server = createServer();
  const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const client = connect(address.port, host);
  const socket = await within(accepted, 10_000, `the server side of a connection to ${host}`);
  return {
    socket,
    async close() {
      client.destroy();
      socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('the source of a loopback peer is its local account', () => {
  for (const host of ['127.0.0.1', '::1']) {
    test(`over ${host}, the kernel's record of the peer socket names this process's uid`, async (t) => {
      if (process.platform !== 'linux') {
        t.skip('the local account is read from /proc/net on Linux only');
        return;
      }
      let conn: Awaited<ReturnType<typeof acceptedFrom>>;
      try {
        conn = await acceptedFrom(host);
      } catch {
        t.skip(`no ${host} on this machine`);
        return;
      }
      try {
        assert.equal(await sourceKey(conn.socket.remoteAddress as string, conn.socket), `addr:loopback|uid:${process.getuid?.()}`);
      } finally {
        await conn.close();
      }
    });
  }

  test('on a dual-stack [::] listener, an IPv4 loopback peer (seen as ::ffff:127.0.0.1) is still told by its local account', async (t) => {
    if (process.platform !== 'linux') {
      t.skip('the local account is read from /proc/net on Linux only');
      return;
    }
    const server = createServer();
    const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
    try {
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '::', resolve));
    } catch {
      t.skip('no dual-stack [::] on this machine');
      return;
    }
    const client = connect((server.address() as { port: number }).port, '127.0.0.1');
    const socket = await within(accepted, 10_000, 'the server side of a connection from 127.0.0.1 to [::]');
    try {
      assert.equal(socket.remoteAddress, '::ffff:127.0.0.1');
      assert.equal(await sourceKey(socket.remoteAddress as string, socket), `addr:loopback|uid:${process.getuid?.()}`);
    } finally {
      client.destroy();
      socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  test('a burst of new loopback connections, looked up at once (they share table reads), each gets its own account', async (t) => {
    if (process.platform !== 'linux') {
      t.skip('the local account is read from /proc/net on Linux only');
      return;
    }
    const server = createServer();
    const sockets: Socket[] = [];
    const clients: Socket[] = [];
    const count = 24;
    const all = new Promise<void>((resolve) =>
      server.on('connection', (socket) => {
        sockets.push(socket);
        if (sockets.length === count) resolve();
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as { port: number }).port;
      for (let i = 0; i < count; i++) clients.push(connect(port, '127.0.0.1'));
      await within(all, 10_000, `the server side of ${count} connections`);
      // In two waves: the second joins the read queued behind the first one's.
      const first = sockets.slice(0, count / 2).map((s) => sourceKey(s.remoteAddress as string, s));
      await new Promise<void>((resolve) => setImmediate(resolve));
      const second = sockets.slice(count / 2).map((s) => sourceKey(s.remoteAddress as string, s));
      const keys = await within(Promise.all([...first, ...second]), 10_000, 'every lookup of the burst');
      assert.deepEqual(
        keys,
        Array.from({ length: count }, () => `addr:loopback|uid:${process.getuid?.()}`),
      );
    } finally {
      for (const c of clients) c.destroy();
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  test('a client behind a proxy (its address is not the socket peer) keeps its address unit', async () => {
    const conn = await acceptedFrom('127.0.0.1');
    try {
      assert.equal(await sourceKey('203.0.113.9', conn.socket), 'addr:203.0.113.9');
      assert.equal(await sourceKey('127.0.0.9', conn.socket), 'addr:loopback', 'a forwarded loopback address is not this peer');
    } finally {
      await conn.close();
    }
  });
});

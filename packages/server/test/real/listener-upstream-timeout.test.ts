import assert from 'node:assert/strict';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_UPSTREAM_TIMEOUTS } from '../../src/gateway/upstream.js';
import { within } from '../support/bounded.js';
import { rawText } from '../support/raw-http.js';
import { type ProxyGateway, startProxyGateway } from '../support/upstream-harness.js';

/** An upstream that accepts every connection, reads what it is sent, and never answers. */
async function startSilentUpstream(): Promise<{ url: URL; accepted: () => number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createServer((s) => {
    accepted++;
    sockets.add(s);
    s.resume();
    s.on('error', () => {});
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: new URL(`http://127.0.0.1:${port}`),
    accepted: () => accepted,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('a slow upstream, with the default timeouts', () => {
  let up: Awaited<ReturnType<typeof startSilentUpstream>>;
  let gw: ProxyGateway;
  before(async () => {
    up = await startSilentUpstream();
    // The defaults: no timeouts passed, as `svc serve` runs it.
    gw = await startProxyGateway(up.url);
  });
  after(async () => {
    await gw.close();
    await up.close();
  });

  test('slow-upstream: an upstream that accepts and never answers gets the caller 504 upstream_timeout (problem+json), not a reset', async () => {
    const bound = DEFAULT_UPSTREAM_TIMEOUTS.connectMs + DEFAULT_UPSTREAM_TIMEOUTS.responseMs + 25_000;
    const [a, b] = await within(
      Promise.all([
        rawText(gw.port, 'GET /public/never HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'),
        rawText(gw.port, `GET /app/never HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${gw.bearer}\r\n\r\n`),
      ]),
      bound,
      'the answers of two requests to an upstream that never answers',
    );
    assert.equal(up.accepted() >= 1, true, 'the upstream accepted the requests');
    for (const r of [a, b]) {
      assert.equal(r.status, 504, r.text);
      assert.match(r.headers['content-type'] ?? '', /^application\/problem\+json/);
      assert.equal(r.body.code, 'upstream_timeout');
    }
  });
});

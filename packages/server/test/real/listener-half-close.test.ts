import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { within } from '../support/bounded.js';
import { newDeviceKey, startHarness } from '../support/harness.js';
import { rawText } from '../support/raw-http.js';
import { type ProxyGateway, startEchoUpstream, startProxyGateway, type Upstream } from '../support/upstream-harness.js';

/**
 * `rawText` writes the request and reads until the server closes; `halfClose` sends the FIN
 * right after the request, as `curl --http1.1 ... < /dev/null | ...` pipelines or a client that
 * is done sending do: the request is complete, the client still reads.
 */
function requestThenFin(port: number, request: string) {
  return rawText(port, request, { halfClose: true });
}

describe('a request followed by a half-close is answered', () => {
  let up: Upstream;
  let gw: ProxyGateway;
  before(async () => {
    up = await startEchoUpstream();
    gw = await startProxyGateway(up.url);
  });
  after(async () => {
    await gw.close();
    await up.close();
  });

  test('half-close-after-request: 6 GETs each followed by FIN are all answered 200, and each ran upstream once', async () => {
    const before = up.requests.length;
    const answers = await within(
      Promise.all(
        Array.from({ length: 6 }, (_, i) => requestThenFin(gw.port, `GET /public/slow?ms=200&n=${i} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`)),
      ),
      20_000,
      'the answers to 6 half-closed GETs',
    );
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200, 200, 200, 200, 200],
      'every half-closed request is answered',
    );
    for (const [i, a] of answers.entries()) assert.equal(a.body.url, `/public/slow?ms=200&n=${i}`);
    assert.equal(up.requests.length - before, 6, 'each ran upstream exactly once');
  });

  test('half-close-after-request on the management API: a challenge request followed by FIN gets its 201', async () => {
    const h = await startHarness();
    try {
      const body = JSON.stringify({ public_key: newDeviceKey().publicKeyHex });
      const r = await within(
        requestThenFin(
          h.port,
          `POST /v1/auth/challenges HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
        ),
        10_000,
        'the answer to a half-closed challenge request',
      );
      assert.equal(r.status, 201, r.text);
      assert.equal(typeof r.body.challenge_id, 'string');
    } finally {
      await h.close();
    }
  });
});

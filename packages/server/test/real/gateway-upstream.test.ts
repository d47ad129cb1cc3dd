// Upstream mode of the application gateway, against a real upstream (a node:http echo on
// 127.0.0.1): what reaches the application, what reaches the caller, and what the gateway says
// when the application is down or slow.
import assert from 'node:assert/strict';
import { createServer as createNetServer, type Server as NetServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type AuthDeps, revokeSession } from '@svc/core';
import { within } from '../support/bounded.js';
import { raw } from '../support/harness.js';
import {
  type EchoBody,
  type ProxyGateway,
  startEchoUpstream,
  startProxyGateway,
  startStandInProxyGateway,
  type Upstream,
} from '../support/upstream-harness.js';

/** How many times `name` occurs in a raw header list. */
function occurrences(rawHeaders: readonly string[], name: string): number {
  let n = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]?.toLowerCase() === name) n++;
  return n;
}

describe('gateway upstream mode', () => {
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

  test('method, path, query and body reach the upstream as sent, in any content type', async () => {
    const cases: { method: string; type?: string; body?: Buffer | string }[] = [
      { method: 'GET' },
      { method: 'DELETE' },
      { method: 'OPTIONS' },
      { method: 'POST', type: 'text/plain; charset=latin1', body: 'hello upstream' },
      { method: 'PUT', type: 'application/octet-stream', body: Buffer.from([0, 1, 2, 255, 254]) },
      { method: 'PATCH', type: 'application/x-www-form-urlencoded', body: 'a=1&b=%20' },
      { method: 'QUERY', type: 'application/sql', body: 'select 1' },
    ];
    for (const c of cases) {
      const res = await fetch(`${gw.base}/api/items/42?x=1&y=a%20b&x=2`, {
        method: c.method,
        headers: { authorization: gw.bearer, ...(c.type === undefined ? {} : { 'content-type': c.type }) },
        ...(c.body === undefined ? {} : { body: c.body }),
      });
      assert.equal(res.status, 200, c.method);
      const echo = (await res.json()) as EchoBody;
      assert.equal(echo.method, c.method);
      assert.equal(echo.url, '/api/items/42?x=1&y=a%20b&x=2');
      if (c.body !== undefined) {
        assert.equal(echo.bytes, Buffer.byteLength(c.body), c.method);
        assert.equal(echo.headers['content-type'], c.type);
      } else {
        assert.equal(echo.bytes, 0);
      }
    }
    const root = await fetch(`${gw.base}/`, { headers: { authorization: gw.bearer } });
    assert.equal(((await root.json()) as EchoBody).url, '/');
    const head = await fetch(`${gw.base}/x`, { method: 'HEAD', headers: { authorization: gw.bearer } });
    assert.equal(head.status, 200);
  });

  test("the upstream gets the real principal's identity headers, and not the caller's bearer", async () => {
    const res = await fetch(`${gw.base}/me`, { headers: { authorization: gw.bearer } });
    assert.equal(res.status, 200);
    const echo = (await res.json()) as EchoBody;
    assert.equal(echo.headers['svc-subject'], gw.principal.subject);
    assert.equal(echo.headers['svc-session'], gw.principal.session);
    assert.equal(echo.headers['svc-device'], gw.principal.device);
    assert.equal(echo.headers['svc-realm'], 'application');
    assert.equal(echo.headers['svc-assertion'], `test-assertion-for-${gw.principal.subject}`);
    assert.equal(echo.headers.authorization, undefined);
  });

  test("a JSON body is relayed byte for byte: the gateway's JSON parser and 64 KiB limit never touch a proxied body", async () => {
    for (const body of ['{"__proto__":{"admin":true}}', '{not json', `{"big":"${'x'.repeat(1024 * 1024)}"}`]) {
      const res = await fetch(`${gw.base}/json`, {
        method: 'POST',
        headers: { authorization: gw.bearer, 'content-type': 'application/json' },
        body,
      });
      assert.equal(res.status, 200);
      const echo = (await res.json()) as EchoBody;
      assert.equal(echo.body, body);
    }
  });

  test('a chunked upload is relayed as a stream, its body intact', async () => {
    const res = await raw(gw, {
      method: 'POST',
      path: '/chunked',
      headers: { authorization: gw.bearer, 'content-type': 'text/plain' },
      chunks: ['one,', 'two,', 'three'],
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.body, 'one,two,three');
  });

  test('an upload sent with Expect: 100-continue is relayed (the gateway answers the 100 itself)', async () => {
    const res = await raw(gw, {
      method: 'POST',
      path: '/expect',
      headers: { authorization: gw.bearer, 'content-type': 'text/plain', expect: '100-continue', 'content-length': 5 },
      body: 'hello',
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.body, 'hello');
    assert.equal(res.body.headers.expect, undefined);
  });

  test('a GET with a body reaches the upstream without it, and without a Content-Length announcing it', async () => {
    // (keep-alive: with `Connection: close`, Node's parser refuses the body of a GET outright.)
    const res = await raw(gw, {
      method: 'GET',
      path: '/get-with-body',
      headers: { authorization: gw.bearer, connection: 'keep-alive', 'content-length': 7 },
      body: 'ignored',
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.bytes, 0);
    assert.equal(res.body.headers['content-length'], undefined);
  });

  test('hop-by-hop request headers, and every header the Connection header names, never reach the upstream', async () => {
    const res = await raw(gw, {
      method: 'POST',
      path: '/hop-request',
      headers: {
        authorization: gw.bearer,
        connection: 'keep-alive, X-Conn-Private, x_conn_underscored',
        'keep-alive': 'timeout=99',
        'proxy-connection': 'keep-alive',
        te: 'trailers',
        trailer: 'x-checksum',
        upgrade: 'h2c',
        'x-conn-private': 'for the first hop only',
        'x-conn-underscored': 'named with an underscore',
        'x-end-to-end': 'kept',
        'content-type': 'text/plain',
      },
      chunks: ['chunked ', 'body'],
    });
    assert.equal(res.status, 200);
    const echo = res.body as EchoBody;
    for (const name of ['keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'x-conn-private', 'x-conn-underscored']) {
      assert.equal(echo.headers[name], undefined, `${name} reached the upstream`);
    }
    assert.notEqual(echo.headers['keep-alive'], 'timeout=99');
    assert.ok(!/x-conn-private/i.test(String(echo.headers.connection ?? '')), 'the Connection list reached the upstream');
    assert.equal(echo.headers['x-end-to-end'], 'kept');
    assert.equal(echo.body, 'chunked body');
  });

  test('hop-by-hop response headers, and every header the upstream Connection names, never reach the caller', async () => {
    const res = await raw(gw, { path: '/hop', headers: { authorization: gw.bearer } });
    assert.equal(res.status, 200);
    assert.equal(res.text, 'hop');
    assert.equal(res.headers['x-upstream-private'], undefined);
    assert.equal(res.headers['proxy-connection'], undefined);
    assert.equal(res.headers.trailer, undefined);
    assert.equal(res.headers.upgrade, undefined);
    assert.notEqual(res.headers['keep-alive'], 'timeout=77', "the upstream's Keep-Alive reached the caller");
    assert.ok(!/x-upstream-private/i.test(String(res.headers.connection ?? '')));
    assert.equal(res.headers['x-end-to-end'], 'kept');
  });

  test('identity header forgery: a caller-sent Svc-* header of the name the gateway sets never reaches the upstream, by the attach alone (without the gateway strip)', async (t) => {
    const gw = await startStandInProxyGateway(up.url);
    t.after(() => gw.close());
    const res = await raw(gw, {
      path: '/whoami',
      headers: {
        authorization: gw.bearer,
        'Svc-Subject': 'sub_mallory',
        SVC_SUBJECT: 'sub_mallory_underscore',
        'svc-assertion': 'forged.assertion.value',
        // Naming it in Connection does not make the gateway drop its own.
        connection: 'svc-session',
        'svc-session': 'ses_forged',
      },
    });
    assert.equal(res.status, 200);
    const echo = res.body as EchoBody;
    assert.equal(echo.headers['svc-subject'], 'sub_alice');
    assert.equal(echo.headers['svc-assertion'], 'test-assertion-for-sub_alice');
    assert.equal(echo.headers['svc-session'], 'ses_sub_alice');
    assert.equal(echo.headers.svc_subject, undefined);
    for (const name of ['svc-subject', 'svc-assertion', 'svc-session', 'svc-realm', 'svc-device']) {
      assert.equal(occurrences(echo.rawHeaders, name), 1, name);
    }
    assert.ok(!echo.rawHeaders.some((v) => /mallory|forged/.test(v)), `a forged value reached the upstream: ${echo.rawHeaders}`);
    assert.equal(echo.headers.authorization, undefined, 'the bearer reached the upstream');
  });

  test('forwarding header forgery: X-Forwarded-*, Forwarded and X-Real-IP are made by the gateway, never relayed as sent', async () => {
    const res = await raw(gw, {
      path: '/forwarded',
      headers: {
        authorization: gw.bearer,
        'x-forwarded-for': '203.0.113.66',
        'x-forwarded-host': 'evil.example',
        'x-forwarded-proto': 'https',
        'x-forwarded-port': '443',
        forwarded: 'for=203.0.113.68;proto=https',
        'x-real-ip': '203.0.113.69',
      },
    });
    assert.equal(res.status, 200);
    const echo = res.body as EchoBody;
    assert.equal(echo.headers['x-forwarded-for'], '127.0.0.1');
    assert.equal(echo.headers['x-forwarded-proto'], 'http');
    assert.equal(echo.headers['x-forwarded-host'], `127.0.0.1:${gw.port}`);
    assert.equal(echo.headers.forwarded, undefined);
    assert.equal(echo.headers['x-real-ip'], undefined);
    assert.equal(echo.headers['x-forwarded-port'], undefined);
    assert.equal(echo.headers.x_forwarded_for, undefined);
    assert.ok(!echo.rawHeaders.some((v) => v.includes('203.0.113') || v.includes('evil')), `${echo.rawHeaders}`);
    assert.equal(echo.headers.host, up.url.host, 'the upstream gets its own Host');
  });

  test('forwarding header forgery with other separators (X_Forwarded_For, X.Real.IP): never relayed, by the attach alone', async (t) => {
    const gw = await startStandInProxyGateway(up.url);
    t.after(() => gw.close());
    const res = await raw(gw, {
      path: '/forwarded',
      headers: { authorization: gw.bearer, X_Forwarded_For: '203.0.113.67', 'X.Real.IP': '203.0.113.68', X_FORWARDED_HOST: 'evil.example' },
    });
    assert.equal(res.status, 200);
    const echo = res.body as EchoBody;
    assert.equal(echo.headers['x-forwarded-for'], '127.0.0.1');
    assert.ok(!echo.rawHeaders.some((v) => v.includes('203.0.113') || v.includes('evil')), `${echo.rawHeaders}`);
  });

  test('an unauthenticated request is refused 401 and never reaches the upstream', async () => {
    const before = up.requests.length;
    const res = await fetch(`${gw.base}/private`, { method: 'POST', body: 'x', headers: { 'content-type': 'text/plain' } });
    assert.equal(res.status, 401);
    assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
    assert.equal(((await res.json()) as { code: string }).code, 'invalid_token');
    assert.equal(up.requests.length, before);
  });

  test('a public path is proxied with no identity headers', async () => {
    const res = await fetch(`${gw.base}/public/page`);
    assert.equal(res.status, 200);
    const echo = (await res.json()) as EchoBody;
    assert.equal(echo.headers['svc-subject'], undefined);
    assert.equal(echo.headers['svc-assertion'], undefined);
  });

  test("the upstream's answer goes back as it is: status, headers, body; never the gateway API's CSP default-src 'none'", async () => {
    const missing = await fetch(`${gw.base}/status?code=404`, { headers: { authorization: gw.bearer } });
    assert.equal(missing.status, 404);
    assert.equal(await missing.text(), 'as asked');
    assert.equal(missing.headers.get('retry-after'), '0');
    assert.equal(missing.headers.get('content-security-policy'), null);
    const page = await fetch(`${gw.base}/csp`, { headers: { authorization: gw.bearer } });
    assert.equal(page.headers.get('content-type'), 'text/html');
    assert.equal(page.headers.get('content-security-policy'), "default-src 'self'");
    const refused = await fetch(`${gw.base}/csp`);
    assert.equal(refused.status, 401);
    assert.equal(
      refused.headers.get('content-security-policy'),
      "default-src 'none'; frame-ancestors 'none'",
      "the gateway's own answers keep it",
    );
  });

  test("an upstream's 503 to a GET is relayed once, never retried by the gateway", async () => {
    const before = up.requests.length;
    const res = await fetch(`${gw.base}/status?code=503`, { headers: { authorization: gw.bearer } });
    assert.equal(res.status, 503);
    assert.equal(up.requests.length, before + 1);
  });

  test('TRACE is refused 405 and never reaches the upstream (it would echo the identity headers back)', async () => {
    const before = up.requests.length;
    const res = await raw(gw, { method: 'TRACE', path: '/anything', headers: { authorization: gw.bearer } });
    assert.equal(res.status, 405);
    assert.equal(res.body.code, 'method_not_allowed');
    assert.equal(up.requests.length, before);
  });
});

describe('gateway upstream mode and revocation', () => {
  test('a revoked session is refused 401 on its next proxied request, which never reaches the upstream', async () => {
    const up = await startEchoUpstream();
    const gw = await startProxyGateway(up.url);
    try {
      assert.equal((await fetch(`${gw.base}/before`, { headers: { authorization: gw.bearer } })).status, 200);
      await revokeSession(gw.deps as AuthDeps, { principal: gw.principal });
      const seen = up.requests.length;
      const res = await fetch(`${gw.base}/after`, { headers: { authorization: gw.bearer } });
      assert.equal(res.status, 401);
      assert.equal(up.requests.length, seen);
    } finally {
      await gw.close();
      await up.close();
    }
  });
});

describe('gateway upstream mode behind a trusted proxy', () => {
  test('X-Forwarded-* carry what trustProxy made Fastify believe, as one fresh value each', async () => {
    const up = await startEchoUpstream();
    const gw = await startProxyGateway(up.url, { trustedProxies: ['127.0.0.1'] });
    try {
      const res = await raw(gw, {
        path: '/behind-proxy',
        headers: {
          authorization: gw.bearer,
          'x-forwarded-for': '198.51.100.1, 203.0.113.7',
          'x-forwarded-proto': 'https',
          'x-forwarded-host': 'app.example',
        },
      });
      assert.equal(res.status, 200);
      const echo = res.body as EchoBody;
      assert.equal(echo.headers['x-forwarded-for'], '203.0.113.7');
      assert.equal(echo.headers['x-forwarded-proto'], 'https');
      assert.equal(echo.headers['x-forwarded-host'], 'app.example');
      assert.equal(occurrences(echo.rawHeaders, 'x-forwarded-for'), 1);
    } finally {
      await gw.close();
      await up.close();
    }
  });
});

describe('gateway upstream mode, when the upstream fails', () => {
  test('an upstream that refuses connections is 502 upstream_unavailable (problem+json)', async () => {
    const closed = await startEchoUpstream();
    const url = closed.url;
    await closed.close();
    const gw = await startProxyGateway(url);
    try {
      const res = await fetch(`${gw.base}/x`, {
        method: 'POST',
        headers: { authorization: gw.bearer, 'content-type': 'text/plain' },
        body: 'b',
      });
      assert.equal(res.status, 502);
      assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
      const problem = (await res.json()) as { code: string; detail: string };
      assert.equal(problem.code, 'upstream_unavailable');
      assert.ok(!problem.detail.includes('127.0.0.1'), 'the upstream address leaked');
    } finally {
      await gw.close();
    }
  });

  test('an upstream that does not answer HTTP is 502 upstream_unavailable', async () => {
    const garbage: NetServer = createNetServer((s) => s.end('this is not HTTP\r\n\r\n'));
    await new Promise<void>((resolve) => garbage.listen(0, '127.0.0.1', resolve));
    const port = (garbage.address() as { port: number }).port;
    const gw = await startProxyGateway(new URL(`http://127.0.0.1:${port}`));
    try {
      const res = await fetch(`${gw.base}/x`, { headers: { authorization: gw.bearer } });
      assert.equal(res.status, 502);
      assert.equal(((await res.json()) as { code: string }).code, 'upstream_unavailable');
    } finally {
      await gw.close();
      garbage.close();
    }
  });

  test('an upstream slower than the response timeout is 504 upstream_timeout (problem+json)', async () => {
    const up = await startEchoUpstream();
    const gw = await startProxyGateway(up.url, { timeouts: { connectMs: 1_000, responseMs: 300, idleMs: 300 } });
    try {
      // The upstream never answers (10 min): a 504 at all proves the gateway did not wait it
      // out, with no clock in the test; the bound only keeps a regression from hanging the run.
      const res = await within(
        fetch(`${gw.base}/slow?ms=600000`, { headers: { authorization: gw.bearer } }),
        20_000,
        'the 504 of a gateway whose upstream never answers (response timeout 300 ms)',
      );
      assert.equal(res.status, 504);
      assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
      assert.equal(((await res.json()) as { code: string }).code, 'upstream_timeout');
    } finally {
      await gw.close();
      await up.close();
    }
  });

  test('an upstream that stalls in the middle of its body has the connection cut after the idle timeout', async () => {
    const up = await startEchoUpstream();
    const gw = await startProxyGateway(up.url, { timeouts: { connectMs: 1_000, responseMs: 1_000, idleMs: 300 } });
    try {
      const res = await fetch(`${gw.base}/stall`, { headers: { authorization: gw.bearer } });
      assert.equal(res.status, 200);
      await assert.rejects(res.text());
    } finally {
      await gw.close();
      await up.close();
    }
  });
});

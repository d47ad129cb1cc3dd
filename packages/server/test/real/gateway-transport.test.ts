import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { GatewayAttach } from '../../src/index.js';
import { createServiceMetrics } from '../../src/index.js';
import { applicationUser, type GatewayHarness, gatewayApi, startGateway, startGatewayHarness } from '../support/gateway-harness.js';
import { loopbackCertificate } from '../support/loopback-cert.js';
import { scratch } from '../support/node-harness.js';
import { rawRequest } from '../support/raw-http.js';

/** An attach that says what the gateway made of the client's address and protocol. */
const whoAmI: GatewayAttach = async (app) => {
  app.get('/*', async (req) => ({ ip: req.ip, protocol: req.protocol, host: req.host }));
};

describe('trusted proxies', () => {
  let h: GatewayHarness;
  before(async () => {
    h = await startGatewayHarness({ attach: whoAmI });
  });
  after(() => h.close());

  const forwarded: [string, string][] = [
    ['X-Forwarded-For', '203.0.113.9'],
    ['X-Forwarded-Proto', 'https'],
  ];

  test('with no trusted proxy, X-Forwarded-For and X-Forwarded-Proto are never believed', async () => {
    const r = await rawRequest(h.gatewayPort, { target: '/healthz', headers: forwarded });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.ip, '127.0.0.1');
    assert.equal(r.body.protocol, 'http');
  });

  test('from a trusted proxy address they are; from another address they are not', async () => {
    const trusted = await startGateway(h, { attach: whoAmI, trustedProxies: ['127.0.0.0/8'] });
    const elsewhere = await startGateway(h, { attach: whoAmI, trustedProxies: ['10.0.0.0/8', '::1'] });
    try {
      const r = await rawRequest(trusted.port, { target: '/healthz', headers: forwarded });
      assert.equal(r.body.ip, '203.0.113.9');
      assert.equal(r.body.protocol, 'https');
      const other = await rawRequest(elsewhere.port, { target: '/healthz', headers: forwarded });
      assert.equal(other.body.ip, '127.0.0.1');
      assert.equal(other.body.protocol, 'http');
    } finally {
      await trusted.app.close();
      await elsewhere.app.close();
    }
  });

  test('a reverse proxy on loopback that names the public host passes the DNS-rebinding guard only when trusted', async () => {
    const trusted = await startGateway(h, { attach: whoAmI, trustedProxies: ['127.0.0.1'] });
    try {
      const host: [string, string][] = [['X-Forwarded-Proto', 'https']];
      const send = (port: number) =>
        new Promise<string>((resolve, reject) => {
          const socket = connect(port, '127.0.0.1', () =>
            socket.write(
              `GET /healthz HTTP/1.1\r\nHost: app.example.com\r\n${host.map(([n, v]) => `${n}: ${v}\r\n`).join('')}Connection: close\r\n\r\n`,
            ),
          );
          let data = '';
          socket.on('data', (c) => {
            data += c.toString('utf8');
          });
          socket.on('close', () => resolve(data));
          socket.on('error', reject);
        });
      assert.match(await send(trusted.port), /^HTTP\/1\.1 200 /);
      assert.match(await send(h.gatewayPort), /^HTTP\/1\.1 403 [\s\S]*forbidden_host/);
    } finally {
      await trusted.app.close();
    }
  });

  test('a trusted proxy entry that is not an address or CIDR is refused at build', async () => {
    await assert.rejects(startGateway(h, { trustedProxies: ['proxy.example'] }), TypeError);
    await assert.rejects(startGateway(h, { trustedProxies: ['10.0.0.0/40'] }), TypeError);
  });
});

describe('built-in TLS', () => {
  test('with opts.https the gateway serves HTTPS, the same policy applies, and req.protocol is https', async () => {
    const dir = scratch();
    try {
      const { key, cert } = loopbackCertificate(dir.dir);
      const h = await startGatewayHarness({ attach: whoAmI, gateway: { https: { cert: readFileSync(cert), key: readFileSync(key) } } });
      try {
        const get = (path: string) =>
          new Promise<{ status: number; body: string }>((resolve, reject) => {
            const req = httpsRequest({ host: '127.0.0.1', port: h.gatewayPort, path, ca: readFileSync(cert), agent: false }, (res) => {
              let body = '';
              res.on('data', (c) => {
                body += c;
              });
              res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
            });
            req.on('error', reject);
            req.end();
          });
        const pub = await get('/healthz');
        assert.equal(pub.status, 200);
        assert.equal(JSON.parse(pub.body).protocol, 'https');
        assert.equal((await get('/app')).status, 401);
      } finally {
        await h.close();
      }
    } finally {
      dir.cleanup();
    }
  });
});

describe('trailers and metrics', () => {
  test('a forged identity field in the trailer section of a chunked body never reaches the application', async () => {
    const h = await startGatewayHarness({
      attach: async (app) => {
        app.post('/*', async (req) => ({ trailers: req.raw.trailers, rawTrailers: req.raw.rawTrailers }));
      },
    });
    try {
      const body = '{}';
      const request =
        'POST /public/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n' +
        `${body.length.toString(16)}\r\n${body}\r\n0\r\nSvc-Subject: sub_admin\r\nX_Forwarded_User: admin\r\nX-Checksum: 1\r\n\r\n`;
      const text = await new Promise<string>((resolve, reject) => {
        const socket = connect(h.gatewayPort, '127.0.0.1', () => socket.write(request));
        let data = '';
        socket.on('data', (c) => {
          data += c.toString('utf8');
        });
        socket.on('close', () => resolve(data));
        socket.on('error', reject);
      });
      assert.match(text, /^HTTP\/1\.1 200 /);
      const echoed = JSON.parse(text.slice(text.indexOf('{'), text.lastIndexOf('}') + 1));
      assert.deepEqual(echoed.rawTrailers, ['X-Checksum', '1']);
      assert.deepEqual(echoed.trailers, { 'x-checksum': '1' });
    } finally {
      await h.close();
    }
  });

  test("requests are counted under the surface 'application'", async () => {
    const h = await startGatewayHarness();
    try {
      const metrics = createServiceMetrics({ store: h.store });
      const g = await startGateway(h, { attach: whoAmI, metrics });
      try {
        const user = await applicationUser(h);
        assert.equal((await gatewayApi({ gatewayBase: g.base }, 'GET', '/x', { token: user.pair.access_token })).status, 200);
        assert.equal((await gatewayApi({ gatewayBase: g.base }, 'GET', '/x')).status, 401);
        const text = await metrics.registry.metrics();
        assert.match(text, /surface="application"[^\n]*status="200"/);
        assert.match(text, /surface="application",code="invalid_token"/);
        const smuggled = await rawRequest(g.port, { target: '/public/../x' });
        assert.equal(smuggled.status, 400);
        assert.match(
          await metrics.registry.metrics(),
          /surface="application",code="invalid_request"/,
          'refusals before Fastify are counted too',
        );
      } finally {
        await g.app.close();
      }
    } finally {
      await h.close();
    }
  });
});

describe('timeouts', () => {
  test('a long proxied upload is bounded by inactivity, not by a whole-request deadline (which would cut slow clients)', async () => {
    const h = await startGatewayHarness();
    try {
      const server = h.gateway.server;
      assert.equal(server.requestTimeout, 0, 'no deadline on a whole request');
      assert.equal(server.headersTimeout, 10_000, 'the head must still arrive within 10 s');
      assert.equal(server.timeout, 30_000, 'a socket silent for 30 s is still closed');
    } finally {
      await h.close();
    }
  });
});

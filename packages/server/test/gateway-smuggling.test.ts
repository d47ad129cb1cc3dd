import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { applicationUser, type GatewayHarness, startGatewayHarness, testPolicy } from './support/gateway-harness.js';
import { type RawResponse, rawRequest, rawText } from './support/raw-http.js';

function assertRefused(r: RawResponse, what: string): void {
  assert.equal(r.status, 400, `${what}: ${r.text}`);
  assert.equal(r.body?.code, 'invalid_request', what);
  assert.match(r.headers['content-type'] ?? '', /application\/problem\+json/, what);
  assert.equal(r.headers['cache-control'], 'no-store', what);
  assert.equal(r.body?.attach, undefined, `${what}: never reached the application`);
}

describe('request smuggling and ambiguous paths at the gateway', () => {
  let h: GatewayHarness;
  let token: string;
  before(async () => {
    h = await startGatewayHarness({
      attach: async (app) => {
        app.all('/*', async (req) => ({ attach: true, url: req.url }));
      },
      policy: testPolicy({ publicPaths: ['/healthz', '/public/*'] }),
    });
    token = (await applicationUser(h)).pair.access_token;
  });
  after(() => h.close());

  const head = (request: string) => rawText(h.gatewayPort, request);

  // Node 20's parser refuses these itself (checked here so a parser change cannot go unnoticed);
  // the gateway's own rule (core's framingRefusal) refuses them too.
  test('CL.CL: a duplicate Content-Length is refused', async () => {
    assertRefused(await head('POST /public/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}'), 'equal');
    assertRefused(
      await head('POST /public/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 30\r\n\r\n{}'),
      'different',
    );
  });

  test('CL.TE / TE.CL: Transfer-Encoding with Content-Length is refused', async () => {
    assertRefused(
      await head('POST /public/x HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n'),
      'TE then CL',
    );
    assertRefused(
      await head('POST /public/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'),
      'CL then TE',
    );
  });

  test('obs-fold: a header continued on the next line (a folded identity header) is refused', async () => {
    assertRefused(await head('GET /public/x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Note: a\r\n Svc-Subject: sub_admin\r\n\r\n'), 'space fold');
    assertRefused(await head('GET /public/x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Note: a\r\n\tX-Forwarded-User: admin\r\n\r\n'), 'tab fold');
  });

  // What Node 20 lets through and the gateway refuses itself.
  test('TE.TE: Transfer-Encoding other than exactly chunked (gzip, chunked) is refused', async () => {
    assertRefused(
      await head('POST /public/x HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n'),
      'gzip, chunked',
    );
  });

  test('Transfer-Encoding in an HTTP/1.0 request is refused', async () => {
    assertRefused(await head('POST /public/x HTTP/1.0\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'), 'HTTP/1.0 TE');
  });

  test('a second Content-Length spelled Content_Length (read as one by CGI/WSGI backends) is refused', async () => {
    assertRefused(await head('POST /public/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent_Length: 40\r\n\r\n{}'), 'CL_');
    assertRefused(await rawRequest(h.gatewayPort, { target: '/public/x', headers: [['Transfer_Encoding', 'chunked']] }), 'TE_');
  });

  test('a duplicate Host or Authorization is refused (which one counts would depend on the parser)', async () => {
    assertRefused(await head('GET /public/x HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: admin.internal\r\n\r\n'), 'Host twice');
    assertRefused(
      await rawRequest(h.gatewayPort, {
        target: '/app/x',
        headers: [
          ['Authorization', `Bearer ${token}`],
          ['Authorization', 'Bearer forged'],
        ],
      }),
      'Authorization twice',
    );
  });

  // Path confusion: a public-path match must be the match the application sees.
  const AMBIGUOUS: readonly (readonly [string, string])[] = [
    ['public prefix walked out of with ../', '/public/../admin'],
    ['dot segment /./', '/public/./admin'],
    ['percent-encoded dot segment %2e%2e', '/public/%2e%2e/admin'],
    ['mixed-case encoded dot segment .%2E', '/public/.%2E/admin'],
    ['double-encoded dot segment %252e', '/public/%252e%252e/admin'],
    ['Tomcat path parameter ..;/', '/public/..;/admin'],
    ['encoded slash %2f', '/public%2f..%2fadmin'],
    ['encoded backslash %5c', '/public%5c..%5cadmin'],
    ['raw backslash (IIS)', '/public\\..\\admin'],
    ['empty segment //', '//admin'],
    ['empty segment inside a public prefix', '/public//admin'],
    ['absolute-form target (Host vs URL authority)', 'http://127.0.0.1/admin'],
    ['NUL byte %00', '/public/x%00.svg'],
  ];
  for (const [attack, target] of AMBIGUOUS) {
    test(`path confusion refused, never normalised: ${attack} (${target})`, async () => {
      assertRefused(await rawRequest(h.gatewayPort, { target }), attack);
      assertRefused(
        await rawRequest(h.gatewayPort, { target, headers: [['Authorization', `Bearer ${token}`]] }),
        `${attack}, authenticated`,
      );
    });
  }

  test('a reserved path cannot be reached by path confusion either', async () => {
    assertRefused(await rawRequest(h.gatewayPort, { target: '/public/../.svc/jwks.json' }), '/.svc via ..');
  });

  test('an unambiguous path goes through as sent (percent-encoded letters are decoded for matching, not rewritten)', async () => {
    const r = await rawRequest(h.gatewayPort, { target: '/public/a%20b?x=/../y' });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.url, '/public/a%20b?x=/../y');
    const encodedPrefix = await rawRequest(h.gatewayPort, { target: '/%70ublic/x' });
    assert.equal(encodedPrefix.status, 200, 'decoded to /public/x: public for the gateway as for the application');
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  ATTACH_MODES,
  applicationUser,
  type GatewayHarness,
  requirement,
  startGatewayHarness,
  testPolicy,
} from '../support/gateway-harness.js';
import { type RawResponse, rawRequest, rawText } from '../support/raw-http.js';

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

// #24.5: a requirement on /admin/* must hold for every form of the path an upstream reads as
// /admin/...: Tomcat and Jetty drop path parameters (`/admin;x/y` is `/admin/y`), IIS and Windows
// drop a trailing dot or space of a segment, and `/admin` is the prefix itself.
for (const mode of ATTACH_MODES) {
  describe(`path parameters get past :svc/app-require (${mode.name})`, () => {
    let h: GatewayHarness;
    let token: string;
    let closeAttach: () => Promise<void> = async () => {};
    before(async () => {
      const started = await mode.start();
      closeAttach = started.close;
      h = await startGatewayHarness({
        attach: started.attach,
        policy: testPolicy({ requirements: [requirement('/admin/*', { subjects: ['sub_nobody'] })] }),
      });
      token = (await applicationUser(h)).pair.access_token;
    });
    after(async () => {
      await h?.close();
      await closeAttach();
    });

    const BYPASSES: readonly (readonly [string, string])[] = [
      ['Tomcat path parameter on the prefix', '/admin;x/y'],
      ['empty path parameter on the prefix', '/admin;/y'],
      ['percent-encoded path parameter separator', '/admin%3b/y'],
      ['mixed-case encoded separator', '/admin%3B/y'],
      ['path parameter on a segment below', '/admin/y;jsessionid=1'],
      ['trailing dot on the segment (IIS, Windows)', '/admin./x'],
      ['trailing encoded space on the segment', '/admin%20/x'],
      ['bare prefix', '/admin'],
      ['bare prefix with a trailing dot', '/admin.'],
      ['bare prefix with a format suffix (Rails, Spring suffix match)', '/admin.json'],
      ['bare prefix in another case', '/ADMIN'],
      ['fullwidth solidus that NFKC folds to /', '/admin%EF%BC%8Fx'],
      ['fullwidth letters that NFKC folds to /admin', '/%EF%BD%81dmin/x'],
    ];
    for (const [attack, target] of BYPASSES) {
      test(`a path an upstream reads as /admin/... never reaches it past the requirement: ${attack} (${target})`, async () => {
        const r = await rawRequest(h.gatewayPort, { target, headers: [['Authorization', `Bearer ${token}`]] });
        assert.ok(
          (r.status === 400 && r.body?.code === 'invalid_request') || (r.status === 403 && r.body?.code === 'insufficient_claims'),
          `${attack}: ${r.status} ${r.text}`,
        );
        assert.equal(r.body?.attach, undefined, `${attack}: reached the application`);
      });
    }

    test('paths the requirement does not cover still reach the application', async () => {
      for (const target of ['/administrator', '/adminx/y', '/other/admin', '/public/admin.json']) {
        const r = await rawRequest(h.gatewayPort, { target, headers: [['Authorization', `Bearer ${token}`]] });
        assert.equal(r.status, 200, `${target}: ${r.text}`);
      }
    });
  });
}

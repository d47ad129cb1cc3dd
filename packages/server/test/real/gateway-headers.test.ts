import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { IDENTITY_HEADER_NAMES, IDENTITY_HEADER_PREFIXES, normalizeHeaderName, updateUser } from '@svc/core';
import type { GatewayAttach } from '../../src/index.js';
import {
  ATTACH_MODES,
  applicationUser,
  type Echo,
  echoAttach,
  type GatewayHarness,
  gatewayApi,
  startGatewayHarness,
  testPolicy,
} from '../support/gateway-harness.js';
import { rawRequest } from '../support/raw-http.js';

/** The project's own identity header of {@link testPolicy}. */
const PROJECT_HEADER = 'X-Tenant';

/** One example name for every listed identity header and prefix of the contract, plus the project's own. */
const FORGED_NAMES: readonly string[] = [
  ...IDENTITY_HEADER_NAMES,
  ...IDENTITY_HEADER_PREFIXES.map((p) => (p.endsWith('-') ? `${p}subject` : p)),
  'Svc-Assertion',
  'Svc-Realm',
  // Who the caller is (#27): the application may trust these as much as Svc-Subject.
  'Svc-Email',
  'Svc-Name',
  'Svc-Groups',
  'X-Auth-Request-Email',
  'Cf-Access-Jwt-Assertion',
  'X-MS-Client-Principal-Name',
  // Other identity-aware proxies' headers (#24.9): Authelia, Grafana's auth proxy, AWS ALB,
  // Google IAP, Azure App Service, mod_auth_openidc.
  'Remote-Groups',
  'Remote-Email',
  'Remote-Name',
  'X-Webauth-User',
  'X-Webauth-Groups',
  'X-Amzn-Oidc-Data',
  'X-Amzn-Oidc-Identity',
  'X-Goog-Iap-Jwt-Assertion',
  'X-Ms-Token-Aad-Id-Token',
  'Oidc-Claim-Email',
  PROJECT_HEADER,
];

/** The attributes of the signed-in user of the table. */
const KNOWN = { name: 'Ada Lovelace', email: 'ada@example.com', email_verified: true, groups: ['analysts'] };

/** Upper, lower and mixed case, and each with `_` for `-`. */
function spellings(name: string): string[] {
  const mixed = [...name].map((c, i) => (i % 2 === 0 ? c.toUpperCase() : c.toLowerCase())).join('');
  const cases = [name, name.toUpperCase(), name.toLowerCase(), mixed];
  return [...cases, ...cases.map((n) => n.replaceAll('-', '_'))];
}

/** How the forged value is sent. */
const VALUE_SHAPES: readonly { readonly name: string; readonly values: readonly string[] }[] = [
  { name: 'one value', values: ['forged-admin'] },
  { name: 'sent twice', values: ['forged-admin', 'forged-root'] },
  { name: 'an empty value', values: [''] },
];

/** How many forged names one request carries (all of them at once would pass the listener's 16 KiB header limit). */
const NAMES_PER_REQUEST = 16;

/** The forged headers, in batches of {@link NAMES_PER_REQUEST} names: one request per batch. */
function forgedBatches(values: readonly string[]): [string, string][][] {
  const batches: [string, string][][] = [];
  for (let i = 0; i < FORGED_NAMES.length; i += NAMES_PER_REQUEST) {
    const out: [string, string][] = [];
    for (const name of FORGED_NAMES.slice(i, i + NAMES_PER_REQUEST))
      for (const spelled of spellings(name)) for (const v of values) out.push([spelled, v]);
    batches.push(out);
  }
  return batches;
}

const isForged = (name: string): boolean => {
  const n = normalizeHeaderName(name);
  return FORGED_NAMES.some((f) => normalizeHeaderName(f) === n) || IDENTITY_HEADER_PREFIXES.some((p) => n.startsWith(p));
};

/** Every forged header name the application saw, in any view of the request. */
function forgedArrivals(echo: Echo): string[] {
  const seen: string[] = [];
  for (const name of Object.keys(echo.headers)) if (isForged(name)) seen.push(`headers.${name}`);
  for (const name of Object.keys(echo.headersDistinct)) if (isForged(name)) seen.push(`headersDistinct.${name}`);
  for (let i = 0; i < echo.rawHeaders.length; i += 2)
    if (isForged(echo.rawHeaders[i] as string)) seen.push(`rawHeaders.${echo.rawHeaders[i]}`);
  for (let i = 1; i < echo.rawHeaders.length; i += 2)
    if (/forged/.test(echo.rawHeaders[i] as string)) seen.push(`value ${echo.rawHeaders[i]}`);
  // A forged Svc-Email, Svc-Name or Svc-Groups the gateway did not replace would be read back as
  // the principal by the upstream echo: no forged value may be there either.
  if (/forged/.test(JSON.stringify(echo.principal ?? null))) seen.push(`principal ${JSON.stringify(echo.principal)}`);
  return seen;
}

for (const mode of ATTACH_MODES) {
  describe(`header smuggling table (${mode.name})`, () => {
    let h: GatewayHarness;
    let token: string;
    let session: string;
    let closeAttach: () => Promise<void> = async () => {};
    before(async () => {
      const started = await mode.start();
      closeAttach = started.close;
      h = await startGatewayHarness({ attach: started.attach, policy: testPolicy() });
      const user = await applicationUser(h);
      token = user.pair.access_token;
      session = user.pair.session_id;
      // A user the gateway knows by name, email and groups: its own Svc-Email, Svc-Name and
      // Svc-Groups go with every request, and a forged one must neither stay beside them nor win.
      const me = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token });
      await updateUser(h.deps, {
        subject: me.body.subject,
        attributes: KNOWN,
        actor: { via: 'cli', subject: null, session: null },
        source: 'operator',
      });
    });
    after(async () => {
      await h?.close();
      await closeAttach();
    });

    for (const shape of VALUE_SHAPES) {
      test(`forged identity headers (${shape.name}, every case, with _) never reach the application on an authenticated path`, async () => {
        for (const forged of forgedBatches(shape.values)) {
          const r = await rawRequest(h.gatewayPort, {
            target: '/app/orders',
            headers: [['Authorization', `Bearer ${token}`], ['X-Innocent', 'kept'], ...forged],
          });
          assert.equal(r.status, 200, r.text);
          const echo = r.body as Echo;
          assert.deepEqual(forgedArrivals(echo), []);
          assert.equal(echo.headers['x-innocent'], 'kept', 'other headers pass');
          assert.equal(echo.headers.authorization, undefined, 'our bearer token is removed');
          assert.ok(!echo.rawHeaders.some((v) => v.includes(token)), 'the token is nowhere in the raw headers');
          assert.equal(echo.principal.session, session, 'the principal is the real one');
          assert.equal(echo.principal.realm, 'application');
          const { email, name, groups } = echo.principal.claims;
          assert.deepEqual(
            { email, name, groups },
            { email: KNOWN.email, name: KNOWN.name, groups: KNOWN.groups },
            'who the caller is: the real one',
          );
        }
      });

      test(`forged identity headers (${shape.name}) never reach the application on a public path`, async () => {
        for (const forged of forgedBatches(shape.values)) {
          const r = await rawRequest(h.gatewayPort, {
            target: '/public/logo.svg',
            headers: [['X-Innocent', 'kept'], ...forged],
          });
          assert.equal(r.status, 200, r.text);
          const echo = r.body as Echo;
          assert.deepEqual(forgedArrivals(echo), []);
          assert.equal(echo.headers['x-innocent'], 'kept');
          assert.equal(echo.principal, null);
        }
      });

      test(`forged identity headers (${shape.name}) on an unauthenticated path: 401, nothing reaches the application`, async () => {
        for (const forged of forgedBatches(shape.values)) {
          const r = await rawRequest(h.gatewayPort, { target: '/app/orders', headers: forged });
          assert.equal(r.status, 401);
          assert.equal(r.body.code, 'invalid_token');
          assert.equal(r.headers['www-authenticate'], 'Bearer realm="application"');
          assert.equal(r.body.attach, undefined);
        }
      });
    }

    test('a forged Svc-Subject cannot stand in for a bearer token: still 401', async () => {
      const r = await rawRequest(h.gatewayPort, {
        target: '/app/orders',
        headers: [
          ['Svc-Subject', 'sub_admin'],
          ['Svc-Realm', 'application'],
          ['X-Forwarded-User', 'admin'],
        ],
      });
      assert.equal(r.status, 401);
    });
  });
}

describe('header hygiene runs before everything', () => {
  test('an upgrade (websocket) listener added by the attach sees the request stripped; an ambiguous upgrade is refused before it', async () => {
    const seen: IncomingMessage[] = [];
    const attach: GatewayAttach = async (app) => {
      await echoAttach(app);
      // Even prepended, it runs after the hygiene: the hygiene wraps the server's emit.
      app.server.prependListener('upgrade', (req: IncomingMessage, socket) => {
        seen.push(req);
        socket.end('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
      });
    };
    const h = await startGatewayHarness({ attach });
    try {
      const exchange = (request: string) =>
        new Promise<string>((resolve, reject) => {
          const socket = connect(h.gatewayPort, '127.0.0.1', () => socket.write(request));
          let data = '';
          socket.on('data', (c) => {
            data += c.toString('utf8');
          });
          socket.on('close', () => resolve(data));
          socket.on('error', reject);
        });
      const up =
        'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n';
      const ok = await exchange(
        `GET /public/ws HTTP/1.1\r\nHost: 127.0.0.1\r\n${up}X_Forwarded_User: admin\r\nSvc-Subject: sub_admin\r\nX-Kept: 1\r\n\r\n`,
      );
      assert.match(ok, /^HTTP\/1\.1 101 /);
      assert.equal(seen.length, 1);
      const req = seen[0] as IncomingMessage;
      assert.equal(req.headers['x-kept'], '1');
      assert.deepEqual(
        req.rawHeaders.filter((_v, i) => i % 2 === 0 && isForged(req.rawHeaders[i] as string)),
        [],
      );
      assert.equal(req.headers.x_forwarded_user, undefined);
      assert.equal(req.headers['svc-subject'], undefined);

      const refused = await exchange(`GET /public/../ws HTTP/1.1\r\nHost: 127.0.0.1\r\n${up}\r\n`);
      assert.match(refused, /^HTTP\/1\.1 400 /);
      assert.match(refused, /"code":"invalid_request"/);
      assert.equal(seen.length, 1, 'the refused upgrade never reached the listener');
    } finally {
      await h.close();
    }
  });
});

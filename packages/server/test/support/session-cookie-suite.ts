import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import type { GatewayAttach } from '../../src/index.js';
import { browserRequest, cookiesSet } from './browser-http.js';
import { ATTACH_MODES, applicationUser, type GatewayHarness, type GatewayHarnessOptions, startGatewayHarness } from './gateway-harness.js';
import type { Pair } from './harness.js';
import { fixtureModule, moduleModeAttach } from './module-host.js';

/** A session's two cookies as a browser on plain HTTP sends them. */
export const plainCookies = (pair: Pair) => ({ 'svc-access': pair.access_token, 'svc-refresh': pair.refresh_token });
const ACCESS_TTL_MS = DEFAULT_AUTH_SETTINGS.accessTokenTtlSeconds * 1000;

/**
 * The session-cookie suite, once per attach mode `which` selects: the in-process mode runs
 * injected in the fast tier (gateway-browser-session.test.ts), a real upstream and module mode
 * over sockets in the real tier (real/gateway-browser-session-sockets.test.ts).
 *
 * @example
 * sessionCookieSuites((m) => m.name === 'in-process echo', { socket: false, store: 'memory' });
 */
export function sessionCookieSuites(
  which: (mode: (typeof ATTACH_MODES)[number]) => boolean,
  harness: Omit<GatewayHarnessOptions, 'attach'> = {},
): void {
  for (const mode of ATTACH_MODES.filter(which)) {
    describe(`session cookies reach the application as a principal, never as cookies (${mode.name})`, () => {
      let h: GatewayHarness;
      let close: () => Promise<void>;
      before(async () => {
        const started = await mode.start();
        close = started.close;
        h = await startGatewayHarness({ ...harness, attach: started.attach });
      });
      after(async () => {
        await h.close();
        await close();
      });
      test('an access cookie authenticates; the gateway cookies are removed and the application keeps its own', async () => {
        const user = await applicationUser(h);
        const r = await browserRequest(h, 'GET', '/app/x', {
          headers: { cookie: 'theme=dark' },
          cookies: { ...plainCookies(user.pair), 'svc-flow': 'flw_x', '__Host-svc-access': 'svca_forged', lang: 'fr' },
        });
        assert.equal(r.status, 200, r.text);
        assert.equal(r.body.principal.session, user.pair.session_id);
        assert.equal(r.body.headers.cookie, 'theme=dark; lang=fr');
        assert.doesNotMatch(JSON.stringify(r.body.rawHeaders), /svc-(access|refresh|flow)|svca_|svcr_/i);
        assert.doesNotMatch(JSON.stringify(r.body.headersDistinct ?? {}), /svca_|svcr_/);
        assert.deepEqual(r.setCookies, [], 'a live access cookie changes nothing');
      });

      test('a transparent refresh sets the new cookies on the application response', async () => {
        const user = await applicationUser(h);
        h.clock.advance(ACCESS_TTL_MS + 1000);
        const r = await browserRequest(h, 'GET', '/app/x', { cookies: plainCookies(user.pair) });
        assert.equal(r.status, 200, r.text);
        assert.equal(r.body.principal.session, user.pair.session_id);
        assert.deepEqual(Object.keys(cookiesSet(r.setCookies)).sort(), ['svc-access', 'svc-refresh']);
      });

      test('a request with only gateway cookies reaches the application with no Cookie header at all', async () => {
        const user = await applicationUser(h);
        const r = await browserRequest(h, 'GET', '/app/x', { cookies: plainCookies(user.pair) });
        assert.equal(r.status, 200);
        assert.equal(r.body.headers.cookie, undefined);
      });
    });
  }
}

/**
 * An application's Set-Cookie of a session cookie name is dropped, once per attach mode given:
 * in process (fast tier, injected) and module mode (real tier, its confined process).
 *
 * @example
 * plantedCookieSuite(['in-process'], { socket: false, store: 'memory' });
 */
export function plantedCookieSuite(
  modes: readonly ('in-process' | 'module mode')[],
  harness: Omit<GatewayHarnessOptions, 'attach'> = {},
): void {
  describe("the application cannot set the gateway's cookies", () => {
    for (const mode of modes) {
      test(`a Set-Cookie of a session cookie name from the application is dropped, its own cookies pass, a refresh still lands (${mode})`, async () => {
        const plant: GatewayAttach = async (app) => {
          app.get('/app/plant', async (_req, reply) => {
            reply.header('set-cookie', 'svc-access=svca_planted; Path=/');
            reply.header('set-cookie', '__Host-svc-refresh=svcr_planted; Path=/; Secure');
            reply.header('set-cookie', 'theme=dark; Path=/');
            return { ok: true };
          });
        };
        // Module mode: the same route from fixtures/app-modules/plant-app, in its confined process.
        const modules = mode === 'module mode' ? await moduleModeAttach([fixtureModule('plant-app')]) : null;
        const attach = modules === null ? plant : modules.attach;
        const h = await startGatewayHarness({ ...harness, attach });
        try {
          const user = await applicationUser(h);
          const live = await browserRequest(h, 'GET', '/app/plant', { cookies: plainCookies(user.pair) });
          assert.equal(live.status, 200);
          assert.deepEqual(live.setCookies, ['theme=dark; Path=/']);
          h.clock.advance(ACCESS_TTL_MS + 1000);
          const refreshed = await browserRequest(h, 'GET', '/app/plant', { cookies: plainCookies(user.pair) });
          const set = cookiesSet(refreshed.setCookies);
          assert.deepEqual(Object.keys(set).sort(), ['svc-access', 'svc-refresh', 'theme']);
          assert.notEqual(set['svc-access'], 'svca_planted');
          assert.match(set['svc-access'] ?? '', /^svca_/);
        } finally {
          await h.close();
          await modules?.close();
        }
      });
    }
  });
}

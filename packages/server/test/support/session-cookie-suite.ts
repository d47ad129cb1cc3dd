import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import { browserRequest, cookiesSet } from './browser-http.js';
import { ATTACH_MODES, applicationUser, type GatewayHarness, type GatewayHarnessOptions, startGatewayHarness } from './gateway-harness.js';
import type { Pair } from './harness.js';

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

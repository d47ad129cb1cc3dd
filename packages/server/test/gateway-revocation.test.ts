import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { AuthDeps } from '@svc/core';
import { openSqliteStore } from 'svc-store-sqlite';
import { createFailureLimiter } from '../src/http/failure-limiter.js';
import {
  applicationSignIn,
  applicationUser,
  echoAttach,
  type GatewayHarness,
  type GatewayTarget,
  gatewayApi,
  startGateway,
  startGatewayHarness,
} from './support/gateway-harness.js';
import { admin, api, newDeviceKey, type Pair } from './support/harness.js';

/** An audit event as `GET /v1/auth/audit` lists it. */
interface AuditJson {
  type: string;
  realm: string;
  session_id: string | null;
  data: Record<string, string>;
}

describe('revocation reaches the gateway at once, in this process and in another one sharing the store', () => {
  let h: GatewayHarness;
  let mgmt: Pair;
  /** A second gateway over its own connection to the same SQLite file (as another process would have). */
  let other: GatewayTarget & { close(): Promise<void> };
  before(async () => {
    h = await startGatewayHarness({ socket: false, attach: echoAttach });
    mgmt = (await admin(h)).pair;
    const store = await openSqliteStore({ file: join(h.dir, 'control.db') });
    const deps: AuthDeps = { ...h.deps, store, random: (n) => randomBytes(n) };
    const g = await startGateway({ deps }, { socket: false, attach: echoAttach });
    other = {
      gatewayBase: g.base,
      gateway: g.app,
      injected: g.injected,
      async close() {
        await g.app.close();
        await store.close();
      },
    };
  });
  after(async () => {
    await other?.close();
    await h?.close();
  });

  /** The status of a request with `token` on both gateways. */
  const both = async (token: string) => [
    (await gatewayApi(h, 'GET', '/app/x', { token })).status,
    (await gatewayApi(other, 'GET', '/app/x', { token })).status,
  ];

  test('logout (POST /.svc/auth/v1/revoke with no body)', async () => {
    const u = await applicationUser(h);
    assert.deepEqual(await both(u.pair.access_token), [200, 200]);
    const r = await gatewayApi(h, 'POST', '/.svc/auth/v1/revoke', { token: u.pair.access_token });
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { session_id: u.pair.session_id, revoked: true });
    assert.deepEqual(await both(u.pair.access_token), [401, 401]);
    const refreshed = await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', { body: { refresh_token: u.pair.refresh_token } });
    assert.equal(refreshed.status, 401, 'the refresh token ended with the session');
  });

  test('logout on the other gateway, with {}', async () => {
    const u = await applicationUser(h);
    const r = await gatewayApi(other, 'POST', '/.svc/auth/v1/revoke', { token: u.pair.access_token, body: {} });
    assert.equal(r.status, 200);
    assert.deepEqual(await both(u.pair.access_token), [401, 401]);
  });

  test('an application principal cannot revoke another session: any session_id but its own is refused', async () => {
    const u = await applicationUser(h);
    const victim = await applicationUser(h);
    for (const session_id of [victim.pair.session_id, mgmt.session_id, 'ses_01M81B5H80VQ6PF8VXZGD22NT1']) {
      const r = await gatewayApi(h, 'POST', '/.svc/auth/v1/revoke', { token: u.pair.access_token, body: { session_id } });
      assert.equal(r.status, 404, session_id);
      assert.equal(r.body.code, 'not_found');
    }
    const malformed = await gatewayApi(h, 'POST', '/.svc/auth/v1/revoke', { token: u.pair.access_token, body: { session_id: 'nope' } });
    assert.equal(malformed.status, 400);
    assert.deepEqual(await both(victim.pair.access_token), [200, 200], 'the victim is untouched');
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: mgmt.access_token })).status, 200);
    const own = await gatewayApi(h, 'POST', '/.svc/auth/v1/revoke', {
      token: u.pair.access_token,
      body: { session_id: u.pair.session_id },
    });
    assert.equal(own.status, 200, 'its own session by id is a logout');
  });

  test('revocation by an administrator on the management API', async () => {
    const u = await applicationUser(h);
    const r = await api(h, 'POST', '/v1/auth/revoke', { token: mgmt.access_token, body: { session_id: u.pair.session_id } });
    assert.equal(r.status, 200);
    assert.deepEqual(await both(u.pair.access_token), [401, 401]);
  });

  test('device removal', async () => {
    const u = await applicationUser(h);
    assert.deepEqual(await both(u.pair.access_token), [200, 200]);
    const r = await api(h, 'DELETE', `/v1/auth/devices/${u.deviceId}`, { token: mgmt.access_token });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(await both(u.pair.access_token), [401, 401]);
  });

  test('refresh-token reuse detection revokes the session', async () => {
    const u = await applicationUser(h);
    const rotated = await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', { body: { refresh_token: u.pair.refresh_token } });
    assert.equal(rotated.status, 200);
    assert.deepEqual(await both(rotated.body.access_token), [200, 200]);
    h.clock.advance((h.deps.settings.refreshReuseGraceSeconds + 1) * 1000);
    const reused = await gatewayApi(other, 'POST', '/.svc/auth/v1/refresh', {
      body: { refresh_token: u.pair.refresh_token },
    });
    assert.equal(reused.status, 401);
    assert.equal(reused.body.code, 'refresh_token_reused');
    assert.deepEqual(await both(rotated.body.access_token), [401, 401]);
  });
});

describe('application-realm sign-in over HTTP', () => {
  let h: GatewayHarness;
  let mgmt: Pair;
  before(async () => {
    h = await startGatewayHarness({ socket: false, attach: echoAttach });
    mgmt = (await admin(h)).pair;
  });
  after(() => h?.close());

  test('challenge, session, me, refresh, revoke: audited in the application realm', async () => {
    const u = await applicationUser(h);
    const me = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: u.pair.access_token });
    assert.equal(me.status, 200);
    assert.equal(me.body.realm, 'application');
    assert.equal(me.body.session, u.pair.session_id);
    assert.equal(u.pair.realm, 'application');
    const refreshed = await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', { body: { refresh_token: u.pair.refresh_token } });
    assert.equal(refreshed.status, 200);
    assert.equal(refreshed.body.realm, 'application');
    assert.equal((await gatewayApi(h, 'POST', '/.svc/auth/v1/revoke', { token: refreshed.body.access_token })).status, 200);

    const audit = await api(h, 'GET', '/v1/auth/audit?limit=1000', { token: mgmt.access_token });
    assert.equal(audit.status, 200, audit.text);
    const mine = (audit.body.events as AuditJson[]).filter((e) => e.session_id === u.pair.session_id);
    assert.deepEqual(
      mine.map((e) => [e.type, e.realm]),
      [
        ['session.created', 'application'],
        ['session.rotated', 'application'],
        ['session.revoked', 'application'],
      ],
    );
    assert.equal(mine[2]?.data.reason, 'logout');
  });

  test('a management device key cannot sign in to the application realm', async () => {
    const { key } = await admin(h);
    await assert.rejects(applicationSignIn(h, key), /invalid_signature/);
  });

  test('failed proofs are rate limited by the same code as the management API: 429 rate_limited with Retry-After', async () => {
    const g = await startGateway(h, {
      socket: false,
      attach: echoAttach,
      limiter: createFailureLimiter({ clock: h.clock, maxFailures: 3 }),
    });
    try {
      const gw = { gatewayBase: g.base, gateway: g.app, injected: g.injected };
      const key = newDeviceKey();
      const codes: string[] = [];
      for (let i = 0; i < 5; i++) {
        const c = await gatewayApi(gw, 'POST', '/.svc/auth/v1/challenges', { body: { public_key: key.publicKeyHex } });
        const s = await gatewayApi(gw, 'POST', '/.svc/auth/v1/sessions', {
          body: { challenge_id: c.body.challenge_id ?? 'chl_01M81B5H80VQ6PF8VXZGD22NT1', signature: 'ab'.repeat(64) },
        });
        codes.push(s.body.code);
        if (s.status === 429) assert.ok(Number(s.headers.get('retry-after')) > 0);
      }
      assert.deepEqual(codes.slice(0, 3), ['invalid_signature', 'invalid_signature', 'invalid_signature']);
      assert.equal(codes[3], 'rate_limited');
      const refresh = await gatewayApi(gw, 'POST', '/.svc/auth/v1/refresh', { body: { refresh_token: 'svcr_nope' } });
      assert.equal(refresh.body.code, 'rate_limited', 'sessions and refresh share the budget, as on the management API');
    } finally {
      await g.app.close();
    }
  });
});

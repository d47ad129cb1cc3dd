import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test as nodeTest } from 'node:test';
import {
  type AuthDeps,
  handoffBinding,
  mintHandoffCode,
  redeemHandoffCode,
  revokeSession,
  rotateRefreshToken,
  type TokenPairJson,
} from '@svc/core';
import { allEvents, authenticate, authenticates, enrollDevice, rejectsWithCode, seconds, settle, signIn } from '../fixtures.js';
import type { SuiteContext } from '../harness.js';
import { RACERS } from './concurrency-suite.js';

const APP = 'https://app.b.test';
const WIKI = 'https://wiki.c.test';

/** A route host's state value, as its state cookie holds it. */
function newState(): string {
  return randomBytes(32).toString('base64url');
}

/** A signed-in browser at the auth origin: its sign-in session's pair. */
async function signedIn(deps: AuthDeps): Promise<TokenPairJson> {
  const { key } = await enrollDevice(deps, 'application');
  return signIn(deps, key, 'application');
}

/** A code minted at the auth origin for `origin`, bound to `state`. */
async function mint(deps: AuthDeps, pair: TokenPairJson, origin: string, state: string): Promise<string> {
  const principal = await authenticate(deps, pair.access_token, 'application');
  return (await mintHandoffCode(deps, { principal, origin, bindingDigest: handoffBinding(state) })).code;
}

/** Handoff codes (one sign-in across route hosts) and the session family they make, through core's use cases. */
export function handoffSuite(ctx: SuiteContext): void {
  const test = (name: string, fn: Parameters<SuiteContext['world']>[0]) => nodeTest(name, () => ctx.world(fn));

  nodeTest.describe('sign-in handoff to route hosts', () => {
    test('a code redeems once at its origin for a session of that host, tied to the sign-in', async ({ deps, store }) => {
      const parent = await signedIn(deps);
      const state = newState();
      const code = await mint(deps, parent, APP, state);
      const child = await redeemHandoffCode(deps, { code, state, origin: APP, client: { address: '127.0.0.1' } });
      assert.notEqual(child.session_id, parent.session_id);
      const principal = await authenticate(deps, child.access_token, 'application');
      const parentSession = await store.getSession(parent.session_id);
      const childSession = await store.getSession(child.session_id);
      assert.equal(childSession?.parentId, parent.session_id);
      assert.equal(principal.subject, parentSession?.subject);
      assert.equal(childSession?.deviceId, parentSession?.deviceId);
      assert.equal(childSession?.expiresAt, parentSession?.expiresAt);
      const created = (await allEvents(store)).filter((e) => e.type === 'session.created' && e.sessionId === child.session_id);
      assert.equal(created.length, 1);
      assert.equal(created[0]?.data.handoff_from, parent.session_id);
      assert.equal(created[0]?.data.origin, APP);
    });

    test("a handoff is no new sign-in: the host's session keeps the sign-in's time (auth_time)", async ({ deps, clock }) => {
      const parent = await signedIn(deps);
      clock.advance(seconds(20));
      const state = newState();
      const child = await redeemHandoffCode(deps, { code: await mint(deps, parent, APP, state), state, origin: APP });
      const signedInAt = (await authenticate(deps, parent.access_token, 'application')).claims.auth_time;
      assert.equal((await authenticate(deps, child.access_token, 'application')).claims.auth_time, signedInAt);
    });

    test('code replay: a code redeemed once is refused the second time, and nothing is created', async ({ deps, store }) => {
      const parent = await signedIn(deps);
      const state = newState();
      const code = await mint(deps, parent, APP, state);
      await redeemHandoffCode(deps, { code, state, origin: APP });
      const before = (await store.listActiveSessions({ now: deps.clock.now() })).length;
      await rejectsWithCode(redeemHandoffCode(deps, { code, state, origin: APP }), 'invalid_handoff');
      assert.equal((await store.listActiveSessions({ now: deps.clock.now() })).length, before);
    });

    test('a code lives 30 s: redeemed at 29.999 s, refused at 30 s', async ({ deps, clock }) => {
      const parent = await signedIn(deps);
      const state = newState();
      const early = await mint(deps, parent, APP, state);
      const late = await mint(deps, parent, APP, state);
      clock.advance(seconds(30) - 1);
      await redeemHandoffCode(deps, { code: early, state, origin: APP });
      clock.advance(1);
      await rejectsWithCode(redeemHandoffCode(deps, { code: late, state, origin: APP }), 'invalid_handoff');
    });

    test('a code for host B presented at host C is refused and burned (it cannot be used at B after)', async ({ deps, store }) => {
      const parent = await signedIn(deps);
      const state = newState();
      const code = await mint(deps, parent, APP, state);
      await rejectsWithCode(redeemHandoffCode(deps, { code, state, origin: WIKI }), 'invalid_handoff');
      await rejectsWithCode(redeemHandoffCode(deps, { code, state, origin: APP }), 'invalid_handoff');
      const failed = (await allEvents(store)).filter((e) => e.type === 'signin.failed');
      assert.deepEqual(
        failed.map((e) => e.data.reason),
        ['handoff_wrong_origin'],
      );
    });

    test('login CSRF: a code minted for another browser state is refused in this browser', async ({ deps }) => {
      const attacker = await signedIn(deps);
      const attackerState = newState();
      const code = await mint(deps, attacker, APP, attackerState);
      await rejectsWithCode(redeemHandoffCode(deps, { code, state: newState(), origin: APP }), 'invalid_handoff');
    });

    test('a code whose sign-in session was revoked meanwhile is refused', async ({ deps }) => {
      const parent = await signedIn(deps);
      const state = newState();
      const code = await mint(deps, parent, APP, state);
      await revokeSession(deps, { principal: await authenticate(deps, parent.access_token, 'application') });
      await rejectsWithCode(redeemHandoffCode(deps, { code, state, origin: APP }), 'invalid_handoff');
    });

    test('a handed-off session cannot hand off again: only the sign-in session mints codes', async ({ deps }) => {
      const parent = await signedIn(deps);
      const state = newState();
      const child = await redeemHandoffCode(deps, { code: await mint(deps, parent, APP, state), state, origin: APP });
      const principal = await authenticate(deps, child.access_token, 'application');
      await rejectsWithCode(mintHandoffCode(deps, { principal, origin: WIKI, bindingDigest: handoffBinding(state) }), 'invalid_token');
    });

    test('one logout on any host ends the sign-in on every host, one revocation event each', async ({ deps, store }) => {
      const parent = await signedIn(deps);
      const state = newState();
      const app = await redeemHandoffCode(deps, { code: await mint(deps, parent, APP, state), state, origin: APP });
      const wiki = await redeemHandoffCode(deps, { code: await mint(deps, parent, WIKI, state), state, origin: WIKI });
      const unrelated = await signedIn(deps);
      await revokeSession(deps, { principal: await authenticate(deps, wiki.access_token, 'application') });
      for (const pair of [parent, app, wiki]) assert.equal(await authenticates(deps, pair.access_token, 'application'), false);
      assert.ok(await authenticates(deps, unrelated.access_token, 'application'));
      const revoked = (await allEvents(store)).filter((e) => e.type === 'session.revoked');
      assert.deepEqual(new Set(revoked.map((e) => e.sessionId)), new Set([parent.session_id, app.session_id, wiki.session_id]));
      assert.ok(revoked.every((e) => e.data.reason === 'logout'));
    });

    test('the store revokes a family once: the named session first, nothing written the second time', async ({ deps, store, clock }) => {
      const parent = await signedIn(deps);
      const state = newState();
      const app = await redeemHandoffCode(deps, { code: await mint(deps, parent, APP, state), state, origin: APP });
      const draft = (s: { id: string }) => ({
        id: `evt_${s.id.slice(4)}`,
        at: clock.now(),
        type: 'session.revoked' as const,
        realm: 'application' as const,
        subject: null,
        deviceId: null,
        sessionId: s.id,
        data: { reason: 'logout' },
      });
      const revoked = await store.revokeSessionFamily({ sessionId: parent.session_id, now: clock.now(), reason: 'logout' }, draft);
      assert.deepEqual(revoked, [parent.session_id, app.session_id]);
      const length = (await allEvents(store)).length;
      assert.deepEqual(await store.revokeSessionFamily({ sessionId: parent.session_id, now: clock.now(), reason: 'logout' }, draft), []);
      assert.equal((await allEvents(store)).length, length);
    });

    test('a reused refresh token of the sign-in session ends the sessions handed off from it too', async ({ deps, clock }) => {
      const parent = await signedIn(deps);
      const state = newState();
      const app = await redeemHandoffCode(deps, { code: await mint(deps, parent, APP, state), state, origin: APP });
      await rotateRefreshToken(deps, { refreshToken: parent.refresh_token, realm: 'application' });
      // Outside the grace interval: a reuse, which revokes the sign-in.
      clock.advance(seconds(deps.settings.refreshReuseGraceSeconds + 1));
      await rejectsWithCode(rotateRefreshToken(deps, { refreshToken: parent.refresh_token, realm: 'application' }), 'refresh_token_reused');
      assert.equal(await authenticates(deps, app.access_token, 'application'), false);
    });

    test(`${RACERS} concurrent redemptions of one code create exactly one session`, async (w) => {
      const parent = await signedIn(w.deps);
      const state = newState();
      const code = await mint(w.deps, parent, APP, state);
      const peer = await w.peer();
      const racers = Array.from({ length: RACERS }, (_, i) => (peer !== null && i % 2 === 1 ? w.depsFor(peer) : w.deps));
      const { values, codes } = await settle(racers.map((deps) => redeemHandoffCode(deps, { code, state, origin: APP })));
      assert.equal(values.length, 1);
      assert.deepEqual(new Set(codes), new Set(['invalid_handoff']));
      const children = (await w.store.listActiveSessions({ now: w.clock.now() })).filter((s) => s.parentId === parent.session_id);
      assert.equal(children.length, 1);
    });
  });
}

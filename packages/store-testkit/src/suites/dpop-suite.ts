import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type AuthDeps, rotateRefreshToken, thumbprintOfPublicKeyHex } from '@svc/core';
import type { Store } from '@svc/core/store';
import { type DeviceKey, dpopProof, enrollDevice, newDeviceKey, rejectsWithCode, seconds, settle, signIn } from '../fixtures.js';
import type { SuiteContext } from '../harness.js';
import { RACERS } from './concurrency-suite.js';

const HTU = 'http://127.0.0.1:9090/v1/auth/refresh';
const KEY = 'a'.repeat(64);

/** A refresh through core with a proof by `key` for this exact request (or none). */
function refreshWith(deps: AuthDeps, token: string, proof: string | undefined) {
  return rotateRefreshToken(deps, { refreshToken: token, realm: 'management', dpop: { proof, htm: 'POST', htu: HTU } });
}

function proofBy(deps: AuthDeps, key: DeviceKey, over: { htm?: string; htu?: string; jti?: string } = {}): string {
  return dpopProof(key, {
    htm: over.htm ?? 'POST',
    htu: over.htu ?? HTU,
    now: deps.clock.now(),
    ...(over.jti === undefined ? {} : { jti: over.jti }),
  });
}

/**
 * DPoP (RFC 9449): the replay cache operation, and sessions bound to the device key through
 * core's use cases under `:auth/sender-constraint :refresh`.
 */
export function dpopSuite(ctx: SuiteContext): void {
  const REFRESH = { senderConstraint: { management: 'refresh', application: 'refresh' } } as const;

  describe('DPoP replay cache (useDpopProof)', () => {
    test('a proof key is used once while its record lives, and again only after it expired', () =>
      ctx.world(async ({ store, clock }) => {
        const now = clock.now();
        assert.equal(await store.useDpopProof({ key: KEY, expiresAt: now + seconds(61), now }), true);
        assert.equal(await store.useDpopProof({ key: KEY, expiresAt: now + seconds(61), now }), false);
        assert.equal(await store.useDpopProof({ key: KEY, expiresAt: now + seconds(122), now: now + seconds(60) }), false);
        assert.equal(
          await store.useDpopProof({ key: KEY, expiresAt: now + seconds(200), now: now + seconds(61) }),
          true,
          'an expired record no longer refuses its key',
        );
        assert.equal(await store.useDpopProof({ key: 'b'.repeat(64), expiresAt: now + seconds(61), now }), true);
      }));

    test('hasDpopRecord sees a live record, on a peer connection too, and not an expired or unknown one', () =>
      ctx.world(async (w) => {
        const now = w.clock.now();
        const key = 'c'.repeat(64);
        assert.equal(await w.store.hasDpopRecord({ key, now }), false);
        assert.equal(await w.store.useDpopProof({ key, expiresAt: now + seconds(120), now }), true);
        assert.equal(await w.store.hasDpopRecord({ key, now: now + seconds(119) }), true);
        assert.equal(await w.store.hasDpopRecord({ key, now: now + seconds(120) }), false, 'expired');
        const peer = await w.peer();
        if (peer !== null) assert.equal(await peer.hasDpopRecord({ key, now }), true);
        assert.equal(await w.store.hasDpopRecord({ key: 'd'.repeat(64), now }), false);
      }));

    test(`of ${RACERS} concurrent uses of one proof key, over peer connections too, exactly one wins`, () =>
      ctx.world(async (w) => {
        const stores: Store[] = [w.store];
        const peer = await w.peer();
        if (peer !== null) stores.push(peer);
        const now = w.clock.now();
        const results = await Promise.all(
          Array.from({ length: RACERS }, (_, i) =>
            (stores[i % stores.length] as Store).useDpopProof({ key: KEY, expiresAt: now + seconds(61), now }),
          ),
        );
        assert.equal(results.filter((r) => r).length, 1);
      }));
  });

  describe('sessions bound to the device key (:auth/sender-constraint :refresh)', () => {
    test('a session signed in by a device key records the RFC 7638 thumbprint of that key', () =>
      ctx.world(async ({ deps, store }) => {
        const { key } = await enrollDevice(deps, 'management');
        const pair = await signIn(deps, key, 'management');
        assert.equal((await store.getSession(pair.session_id))?.jkt, thumbprintOfPublicKeyHex(key.publicKey));
      }, REFRESH));

    test('under :off a session is a bearer session (no jkt) and refreshes without a proof', () =>
      ctx.world(async ({ deps, store }) => {
        const { key } = await enrollDevice(deps, 'management');
        const pair = await signIn(deps, key, 'management');
        assert.equal((await store.getSession(pair.session_id))?.jkt ?? null, null);
        await refreshWith(deps, pair.refresh_token, undefined);
      }));

    test('a copied refresh token without the key neither rotates nor revokes: the holder of the key still refreshes', () =>
      ctx.world(async ({ deps, store }) => {
        const { key } = await enrollDevice(deps, 'management');
        const pair = await signIn(deps, key, 'management');
        await rejectsWithCode(refreshWith(deps, pair.refresh_token, undefined), 'invalid_dpop_proof');
        await rejectsWithCode(refreshWith(deps, pair.refresh_token, proofBy(deps, newDeviceKey())), 'invalid_dpop_proof');
        const session = await store.getSession(pair.session_id);
        assert.equal(session?.revokedAt, null);
        assert.equal(session?.generation, 0, 'nothing rotated');
        const next = await refreshWith(deps, pair.refresh_token, proofBy(deps, key));
        assert.equal(next.session_id, pair.session_id);
        assert.equal((await store.getSession(pair.session_id))?.generation, 1);
      }, REFRESH));

    test('a replayed proof (same jti) is refused, also on another connection to the same store', () =>
      ctx.world(async (w) => {
        const { key } = await enrollDevice(w.deps, 'management');
        const first = await signIn(w.deps, key, 'management');
        const proof = proofBy(w.deps, key);
        const second = await refreshWith(w.deps, first.refresh_token, proof);
        await rejectsWithCode(refreshWith(w.deps, second.refresh_token, proof), 'invalid_dpop_proof');
        const peer = await w.peer();
        if (peer !== null) await rejectsWithCode(refreshWith(w.depsFor(peer), second.refresh_token, proof), 'invalid_dpop_proof');
        await refreshWith(w.deps, second.refresh_token, proofBy(w.deps, key));
      }, REFRESH));

    test('a proof older than the window, or for another method or URL, is refused', () =>
      ctx.world(async ({ deps, clock }) => {
        const { key } = await enrollDevice(deps, 'management');
        const pair = await signIn(deps, key, 'management');
        const old = proofBy(deps, key);
        clock.advance(seconds(61));
        await rejectsWithCode(refreshWith(deps, pair.refresh_token, old), 'invalid_dpop_proof');
        await rejectsWithCode(refreshWith(deps, pair.refresh_token, proofBy(deps, key, { htm: 'GET' })), 'invalid_dpop_proof');
        await rejectsWithCode(
          refreshWith(deps, pair.refresh_token, proofBy(deps, key, { htu: 'http://127.0.0.1:9090/v1/auth/me' })),
          'invalid_dpop_proof',
        );
        await refreshWith(deps, pair.refresh_token, proofBy(deps, key));
      }, REFRESH));

    test('a proof is checked before reuse detection: a retired token without the key does not revoke the session', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { key } = await enrollDevice(deps, 'management');
        const first = await signIn(deps, key, 'management');
        await refreshWith(deps, first.refresh_token, proofBy(deps, key));
        clock.advance(seconds(deps.settings.refreshReuseGraceSeconds + 1));
        const { codes } = await settle([refreshWith(deps, first.refresh_token, undefined)]);
        assert.deepEqual(codes, ['invalid_dpop_proof']);
        assert.equal((await store.getSession(first.session_id))?.revokedAt, null);
        // With the key, the same retired token is a reuse, as ever.
        await rejectsWithCode(refreshWith(deps, first.refresh_token, proofBy(deps, key)), 'refresh_token_reused');
        assert.notEqual((await store.getSession(first.session_id))?.revokedAt, null);
      }, REFRESH));
  });
}

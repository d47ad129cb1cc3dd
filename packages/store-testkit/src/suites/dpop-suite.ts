import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { type AuthDeps, rotateRefreshToken, thumbprintOfPublicKeyHex } from '@svc/core';
import type { RotationProof, Store } from '@svc/core/store';
import {
  type DeviceKey,
  dpopProof,
  enrollDevice,
  newDeviceKey,
  rejectsWithCode,
  revokedEvent,
  rotateAtStore,
  seconds,
  settle,
  signIn,
} from '../fixtures.js';
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

/** A rotation's proof as core hands it to the store: by `key`, under a fresh replay key, live for 61 s from `now`. */
function storeProof(key: DeviceKey, now: number): RotationProof {
  return { jkt: thumbprintOfPublicKeyHex(key.publicKey), key: randomBytes(32).toString('hex'), expiresAt: now + seconds(61) };
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

  describe("a refresh's proof in the rotation's own transaction (store contract 12)", () => {
    test('a bound session without a proof by its key is proof_required: nothing rotated, nothing recorded, no event', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { key } = await enrollDevice(deps, 'management');
        const pair = await signIn(deps, key, 'management');
        const other = storeProof(newDeviceKey(), clock.now());
        const before = (await store.listAuditEvents({ afterSeq: 0, limit: 1000 })).length;
        for (const dpop of [undefined, other]) {
          const { outcome, auditCalls } = await rotateAtStore(deps, {
            refresh: pair.refresh_token,
            realm: 'management',
            graceMs: 10_000,
            ...(dpop === undefined ? {} : { dpop }),
          });
          assert.deepEqual(outcome, { kind: 'proof_required' });
          assert.equal(auditCalls, 0);
        }
        assert.equal(await store.useDpopProof({ key: other.key, expiresAt: other.expiresAt, now: clock.now() }), true, 'not recorded');
        assert.equal((await store.getSession(pair.session_id))?.generation, 0);
        assert.equal((await store.listAuditEvents({ afterSeq: 0, limit: 1000 })).length, before);
      }, REFRESH));

    test('a rotation records its proof: the same proof again is proof_replayed and changes nothing, not even for a retired token', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { key } = await enrollDevice(deps, 'management');
        const pair = await signIn(deps, key, 'management');
        const proof = storeProof(key, clock.now());
        const first = await rotateAtStore(deps, { refresh: pair.refresh_token, realm: 'management', graceMs: 0, dpop: proof });
        assert.equal(first.outcome.kind, 'rotated');
        assert.equal(await store.hasDpopRecord({ key: proof.key, now: clock.now() }), true, 'recorded with the rotation');
        // The retired token with a used proof: no reuse detected, the session stays live.
        const again = await rotateAtStore(deps, { refresh: pair.refresh_token, realm: 'management', graceMs: 0, dpop: proof });
        assert.deepEqual(again.outcome, { kind: 'proof_replayed' });
        assert.equal(again.auditCalls, 0);
        const session = await store.getSession(pair.session_id);
        assert.equal(session?.revokedAt, null);
        assert.equal(session?.generation, 1);
        // The current token with the used proof: no rotation either.
        const current = await rotateAtStore(deps, { refresh: first.next.refresh, realm: 'management', graceMs: 0, dpop: proof });
        assert.deepEqual(current.outcome, { kind: 'proof_replayed' });
        assert.equal((await store.getSession(pair.session_id))?.generation, 1);
        // Once its record expired, the same replay key is free again (core refuses a proof that old
        // before the store sees it; the store's rule is the replay cache's).
        clock.advance(seconds(62));
        const later = await rotateAtStore(deps, {
          refresh: first.next.refresh,
          realm: 'management',
          graceMs: 0,
          dpop: { ...proof, expiresAt: clock.now() + seconds(61) },
        });
        assert.equal(later.outcome.kind, 'rotated');
      }, REFRESH));

    test('a proof is recorded whatever the rotation decides: in grace, a reuse, with a revoked session, with an unknown token', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { key } = await enrollDevice(deps, 'management');
        const chain = await signIn(deps, key, 'management');
        const at = (refresh: string, graceMs: number, dpop: RotationProof) =>
          rotateAtStore(deps, { refresh, realm: 'management', graceMs, dpop });
        assert.equal((await at(chain.refresh_token, 10_000, storeProof(key, clock.now()))).outcome.kind, 'rotated');
        const inGrace = storeProof(key, clock.now());
        assert.equal((await at(chain.refresh_token, 10_000, inGrace)).outcome.kind, 'rotated_in_grace');
        assert.equal(await store.hasDpopRecord({ key: inGrace.key, now: clock.now() }), true);
        const reuse = storeProof(key, clock.now());
        assert.equal((await at(chain.refresh_token, 0, reuse)).outcome.kind, 'reused');
        assert.equal(await store.hasDpopRecord({ key: reuse.key, now: clock.now() }), true);
        const pair = await signIn(deps, key, 'management');
        const forged = await signIn(deps, key, 'management');
        const unknown = storeProof(key, clock.now());
        // A refresh token the session never had: another session's, under this session's id.
        const selector = (id: string) => id.slice('ses_'.length);
        const spliced = forged.refresh_token.replace(selector(forged.session_id), selector(pair.session_id));
        const invalid = await rotateAtStore(deps, { refresh: spliced, realm: 'management', graceMs: 0, dpop: unknown });
        assert.deepEqual(invalid.outcome, { kind: 'invalid' });
        assert.equal(await store.hasDpopRecord({ key: unknown.key, now: clock.now() }), true);
        await store.revokeSession({ sessionId: pair.session_id, now: clock.now(), reason: 'test' }, revokedEvent(deps, pair.session_id));
        const revoked = storeProof(key, clock.now());
        const refused = await rotateAtStore(deps, { refresh: pair.refresh_token, realm: 'management', graceMs: 0, dpop: revoked });
        assert.deepEqual(refused.outcome, { kind: 'invalid' });
        assert.equal(await store.hasDpopRecord({ key: revoked.key, now: clock.now() }), true);
      }, REFRESH));

    test("a bearer session's proof is not looked at and not recorded", () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { key } = await enrollDevice(deps, 'management');
        const pair = await signIn(deps, key, 'management');
        const proof = storeProof(key, clock.now());
        const { outcome } = await rotateAtStore(deps, { refresh: pair.refresh_token, realm: 'management', graceMs: 0, dpop: proof });
        assert.equal(outcome.kind, 'rotated');
        assert.equal(await store.hasDpopRecord({ key: proof.key, now: clock.now() }), false);
      }));

    test(`${RACERS} refreshes with one token and one proof at once, over peer connections too: one rotates, every other is a replay and revokes nothing`, () =>
      ctx.world(async (w) => {
        const { key } = await enrollDevice(w.deps, 'management');
        const pair = await signIn(w.deps, key, 'management');
        const peer = await w.peer();
        const depsOf = (i: number) => (peer !== null && i % 2 === 1 ? w.depsFor(peer) : w.deps);
        const proof = proofBy(w.deps, key);
        const { values, codes } = await settle(Array.from({ length: RACERS }, (_, i) => refreshWith(depsOf(i), pair.refresh_token, proof)));
        assert.equal(values.length, 1);
        assert.deepEqual(
          codes.filter((c) => c !== 'invalid_dpop_proof'),
          [],
        );
        const session = await w.store.getSession(pair.session_id);
        assert.equal(session?.revokedAt, null);
        assert.equal(session?.generation, 1);
        const events = await w.store.listAuditEvents({ afterSeq: 0, limit: 1000 });
        assert.equal(
          events.filter((e) => e.sessionId === pair.session_id && e.type.startsWith('session.r')).length,
          1,
          'one session.rotated',
        );
      }, REFRESH));

    test(`${RACERS} refreshes with one token, each with its own proof, at once: one pair, every proof recorded`, () =>
      ctx.world(async (w) => {
        const { key } = await enrollDevice(w.deps, 'management');
        const pair = await signIn(w.deps, key, 'management');
        const peer = await w.peer();
        const depsOf = (i: number) => (peer !== null && i % 2 === 1 ? w.depsFor(peer) : w.deps);
        const proofs = Array.from({ length: RACERS }, (_, i) =>
          proofBy(w.deps, key, { jti: `jti-of-racer-${String(i).padStart(8, '0')}` }),
        );
        const { values, codes } = await settle(proofs.map((p, i) => refreshWith(depsOf(i), pair.refresh_token, p)));
        assert.deepEqual(codes, []);
        assert.equal(new Set(values.map((v) => v.refresh_token)).size, 1, 'every caller holds the one live pair');
        assert.equal((await w.store.getSession(pair.session_id))?.generation, 1);
        // Every proof was used: each again is a replay.
        const next = values[0]?.refresh_token as string;
        for (const p of proofs) await rejectsWithCode(refreshWith(w.deps, next, p), 'invalid_dpop_proof');
        assert.equal((await w.store.getSession(pair.session_id))?.generation, 1);
      }, REFRESH));
  });
}

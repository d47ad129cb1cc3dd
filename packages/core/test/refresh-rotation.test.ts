import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { withinGrace } from '../src/refresh-rotation.js';
import {
  decideRetiredPresentation,
  decideRotation,
  gracePairEnded,
  openSuccessor,
  planRotation,
  type RefreshRow,
  rotationProof,
  sealSuccessor,
} from '../src/store-api.js';
import { CLOCK_SKEW_TOLERANCE_MS } from '../src/store-rules.js';
import { digestToken, mintSessionToken } from '../src/tokens.js';

const random = (n: number) => new Uint8Array(randomBytes(n));
const SESSION = 'ses_01KAQ0000000000000000000S1';
const T = Date.UTC(2026, 10, 22, 10, 0, 0, 0);
const GRACE = 10_000;
const previous = mintSessionToken('refresh', SESSION, random);
const current = mintSessionToken('refresh', SESSION, random);
const currentAccess = mintSessionToken('access', SESSION, random);
const sealed = sealSuccessor(previous, SESSION, { access: currentAccess, refresh: current }, random);

/** A session rotated once at T: `current` is live, `previous` was rotated at T, with its successor sealed. */
function row(over: Partial<RefreshRow> = {}): RefreshRow {
  return {
    id: SESSION,
    realm: 'management',
    subject: 'sub_01KAQ0000000000000000000S1',
    device_id: 'dev_01KAQ0000000000000000000S1',
    created_at: T - 60_000,
    expires_at: T + 86_400_000,
    access_expires_at: T + 900_000,
    refresh_expires_at: T + 3_600_000,
    generation: 1,
    last_rotated_at: T,
    revoked_at: null,
    revoked_reason: null,
    client_address: null,
    user_agent: null,
    amr: 'ed25519',
    refresh_digest: digestToken(current),
    prev_refresh_digest: digestToken(previous),
    prev_rotated_at: T,
    prev_successor: sealed,
    ...over,
  };
}
const at = (now: number, token: string, graceMs = GRACE) =>
  decideRotation(row(), { presentedDigest: digestToken(token), realm: 'management', now, graceMs });

describe('the refresh rule (decideRotation)', () => {
  test('the current token of a live session rotates and retires the previous one', () => {
    assert.deepEqual(at(T + 5, current), { kind: 'rotate', retire: digestToken(previous) });
  });

  test('the previous token is replayed with its sealed successor up to exactly the grace interval, reuse 1 ms later', () => {
    assert.deepEqual(at(T + GRACE, previous), { kind: 'replay', sealedSuccessor: sealed });
    assert.deepEqual(at(T + GRACE + 1, previous), { kind: 'reuse' });
  });

  test('a grace of 0 means none: the previous token is reuse even in the same millisecond', () => {
    assert.deepEqual(at(T, previous, 0), { kind: 'reuse' });
  });

  test('the clock stepped back 1 h: the previous token 12 s after its rotation is reuse, not grace', () => {
    assert.deepEqual(at(T - 3_600_000 + 12_000, previous), { kind: 'reuse' });
  });

  test('the clock stepped forward 1 h: the previous token 2 s after its rotation is reuse', () => {
    assert.deepEqual(at(T + 3_600_000 + 2_000, previous), { kind: 'reuse' });
  });

  test('a stored rotation time in the future within the skew tolerance is still grace; beyond it, fail closed', () => {
    assert.deepEqual(at(T - CLOCK_SKEW_TOLERANCE_MS, previous), { kind: 'replay', sealedSuccessor: sealed });
    assert.deepEqual(at(T - CLOCK_SKEW_TOLERANCE_MS - 1, previous), { kind: 'reuse' });
    assert.equal(withinGrace(T, T - CLOCK_SKEW_TOLERANCE_MS - 1, GRACE), false);
  });

  test('a previous token without a sealed successor (rotated before migration 5) gets no grace', () => {
    const d = decideRotation(row({ prev_successor: null }), {
      presentedDigest: digestToken(previous),
      realm: 'management',
      now: T + 1,
      graceMs: GRACE,
    });
    assert.deepEqual(d, { kind: 'reuse' });
  });

  test('an expired refresh token, a revoked or ended session, or another realm is invalid', () => {
    const input = { presentedDigest: digestToken(current), realm: 'management', now: T + 5, graceMs: GRACE };
    assert.deepEqual(decideRotation(row({ refresh_expires_at: T + 5 }), input), { kind: 'invalid' });
    assert.deepEqual(decideRotation(row({ revoked_at: T + 1 }), input), { kind: 'invalid' });
    assert.deepEqual(decideRotation(row({ expires_at: T + 5 }), input), { kind: 'invalid' });
    assert.deepEqual(decideRotation(row(), { ...input, realm: 'application' }), { kind: 'invalid' });
    assert.deepEqual(decideRotation(undefined, input), { kind: 'invalid' });
    assert.deepEqual(decideRotation(row({ revoked_at: T + 1 }), { ...input, presentedDigest: digestToken(previous) }), { kind: 'invalid' });
  });

  test('any other digest asks for the retired lookup: retired on a live session is reuse, never seen is invalid', () => {
    const other = mintSessionToken('refresh', SESSION, random);
    assert.deepEqual(at(T + 5, other), { kind: 'check_retired' });
    assert.deepEqual(decideRetiredPresentation(row(), { retired: true, now: T + 5 }), { kind: 'reuse' });
    assert.deepEqual(decideRetiredPresentation(row(), { retired: false, now: T + 5 }), { kind: 'invalid' });
    assert.deepEqual(decideRetiredPresentation(row({ revoked_at: T }), { retired: true, now: T + 5 }), { kind: 'invalid' });
  });
});

describe('the sealed successor', () => {
  test('opens with the token it was sealed for, to the exact pair', () => {
    assert.deepEqual(openSuccessor(previous, SESSION, sealed), { access: currentAccess, refresh: current });
  });

  test('does not open with another token, for another session, or once altered', () => {
    assert.equal(openSuccessor(current, SESSION, sealed), null);
    assert.equal(openSuccessor(previous, 'ses_01KAQ0000000000000000000S2', sealed), null);
    const raw = Buffer.from(sealed, 'base64url');
    raw[20] = (raw[20] as number) ^ 1;
    assert.equal(openSuccessor(previous, SESSION, raw.toString('base64url')), null);
    assert.equal(openSuccessor(previous, SESSION, ''), null);
  });

  test('holds no token in the clear', () => {
    const text = Buffer.from(sealed, 'base64url').toString('latin1');
    for (const token of [current, currentAccess]) {
      assert.equal(text.includes(token.slice(31)), false);
      assert.equal(sealed.includes(token.slice(31)), false);
    }
  });
});

describe('gracePairEnded: which sealed grace pairs a sweep erases', () => {
  test('a pair rotated before the cut-off (now - grace) goes; one at or after it, or no pair at all, stays', () => {
    assert.equal(gracePairEnded({ prev_successor: 'sealed', prev_rotated_at: 999 }, 1000), true);
    assert.equal(gracePairEnded({ prev_successor: 'sealed', prev_rotated_at: 1000 }, 1000), false);
    assert.equal(gracePairEnded({ prev_successor: 'sealed', prev_rotated_at: 5000 }, 1000), false);
    assert.equal(gracePairEnded({ prev_successor: null, prev_rotated_at: 1 }, 1000), false);
  });
});

describe('the rotation plan (planRotation): the decision with its outcome built from the locked row', () => {
  const next = { accessExpiresAt: T + 900_005, refreshExpiresAt: T + 99_000_000 };
  const input = (token: string, now = T + 5) => ({ presentedDigest: digestToken(token), realm: 'management', now, graceMs: GRACE, next });

  test('rotate: the previous digest to retire, the pair clamped to the session, and the session one generation on', () => {
    const plan = planRotation(row(), input(current));
    assert.equal(plan.kind, 'rotate');
    if (plan.kind !== 'rotate') return;
    assert.equal(plan.retire, digestToken(previous));
    assert.equal(plan.accessExpiresAt, T + 900_005);
    assert.equal(plan.refreshExpiresAt, T + 86_400_000, 'clamped to the session expiry');
    assert.equal(plan.outcome.kind, 'rotated');
    assert.equal(plan.outcome.session.generation, 2);
    assert.equal(plan.outcome.session.lastRotatedAt, T + 5);
    assert.equal(plan.outcome.session.refreshExpiresAt, T + 86_400_000);
  });

  test('replay answers the sealed successor and the session as it is; reuse answers the session revoked', () => {
    const replay = planRotation(row(), input(previous));
    assert.equal(replay.kind, 'replay');
    assert.ok(replay.kind === 'replay' && replay.outcome.sealedSuccessor === sealed && replay.outcome.session.generation === 1);
    const reuse = planRotation(row(), input(previous, T + GRACE + 1));
    assert.equal(reuse.kind, 'reuse');
    assert.ok(reuse.kind === 'reuse' && reuse.outcome.session.revokedAt === T + GRACE + 1);
    assert.equal(reuse.kind === 'reuse' && reuse.outcome.session.revokedReason, 'refresh_token_reused');
  });

  test('an older digest asks the store to look it up, then plans reuse when it was retired and invalid otherwise', () => {
    const older = mintSessionToken('refresh', SESSION, random);
    assert.deepEqual(planRotation(row(), input(older)), { kind: 'check_retired' });
    assert.equal(planRotation(row(), input(older), true).kind, 'reuse');
    assert.deepEqual(planRotation(row(), input(older), false), { kind: 'invalid' });
    assert.deepEqual(planRotation(undefined, input(current)), { kind: 'invalid' });
  });
});

describe("a refresh's DPoP proof against the session's binding (rotationProof)", () => {
  const JKT = 'NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs';
  const proof = { jkt: JKT, key: 'a'.repeat(64), expiresAt: T + 61_000 };
  const bound = row({ jkt: JKT });

  test('a bound session with a proof by its key: the proof is to be recorded', () => {
    assert.equal(rotationProof(bound, { realm: 'management', dpop: proof }), proof);
  });

  test('a bound session without a proof, or with one by another key (also one of another length), is proof_required', () => {
    assert.equal(rotationProof(bound, { realm: 'management' }), 'required');
    assert.equal(rotationProof(bound, { realm: 'management', dpop: { ...proof, jkt: `${JKT.slice(0, -1)}Y` } }), 'required');
    assert.equal(rotationProof(bound, { realm: 'management', dpop: { ...proof, jkt: JKT.slice(0, -1) } }), 'required');
    assert.equal(rotationProof(bound, { realm: 'management', dpop: { ...proof, jkt: '' } }), 'required');
  });

  test('a bearer session, a session of another realm and no session at all: nothing to record, whatever came', () => {
    assert.equal(rotationProof(row(), { realm: 'management', dpop: proof }), null);
    assert.equal(rotationProof(row({ jkt: null }), { realm: 'management' }), null);
    assert.equal(rotationProof(bound, { realm: 'application', dpop: proof }), null);
    assert.equal(rotationProof(bound, { realm: 'application' }), null);
    assert.equal(rotationProof(undefined, { realm: 'management', dpop: proof }), null);
  });
});

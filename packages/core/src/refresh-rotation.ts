import { createCipheriv, createDecipheriv, hkdfSync } from 'node:crypto';
import type { RandomBytes } from './ports.js';
import type { RotationOutcome, RotationProof } from './store.js';
import { isLive, type RotationRow, rotatedSession, toSession } from './store-rows.js';
import { CLOCK_SKEW_TOLERANCE_MS, clampPairToSession, REVOKED_REFRESH_REUSED } from './store-rules.js';
import { digestsEqual } from './tokens.js';

/** What the rotation rule decided for one presentation of a refresh token. */
export type RotationDecision =
  /** Unknown (never this session's), of another realm, expired, or its session is revoked or ended: write nothing. */
  | { readonly kind: 'invalid' }
  /**
   * The current token of a live session: the session takes the new pair, the presented token
   * becomes "previous" (rotated now, with the new pair sealed for it), and the token that was
   * previous before is retired for good (`retire`, when there was one).
   */
  | { readonly kind: 'rotate'; readonly retire: string | null }
  /**
   * The immediately previous token again, within the grace interval after its rotation: answer
   * with the SAME pair its rotation issued (sealed in the row for it), write nothing but the
   * audit event. Concurrent or retried presentations thus all end holding the one live pair.
   */
  | { readonly kind: 'replay'; readonly sealedSuccessor: string }
  /** A retired token (the previous one outside grace, or older) of a live session: revoke the session. */
  | { readonly kind: 'reuse' }
  /** Neither the current nor the previous digest: the store must look it up among the session's retired ones, then call {@link decideRetiredPresentation}. */
  | { readonly kind: 'check_retired' };

/** The session row the rotation rule reads, with the sealed successor of the previous token. */
export interface RefreshRow extends RotationRow {
  /** The pair issued when the previous token was rotated, sealed with that token ({@link sealSuccessor}); null before migration 5. */
  prev_successor: string | null;
}

/**
 * The whole refresh-token rule, pure: given the session row a store read (and locked), what to
 * do with a presentation. Both stores apply it the same way; see {@link RotationDecision}.
 *
 * - current token, session live, refresh not expired → `rotate`;
 * - previous token, session live, rotated at most `graceMs` ago (and not more than
 *   {@link CLOCK_SKEW_TOLERANCE_MS} in the future), its successor sealed → `replay`;
 * - previous token otherwise, session live → `reuse` (a grace of 0 means no grace at all; a
 *   rotation time in the future fails closed);
 * - any other digest → `check_retired`; everything else → `invalid`.
 *
 * @example
 * const d = decideRotation(row, { presentedDigest, realm: 'management', now, graceMs: 10_000 });
 */
export function decideRotation(
  row: RefreshRow | undefined,
  input: { readonly presentedDigest: string; readonly realm: string; readonly now: number; readonly graceMs: number },
): RotationDecision {
  const { presentedDigest, realm, now, graceMs } = input;
  // The realm check comes first: a token of another realm is unknown here.
  if (row === undefined || row.realm !== realm) return { kind: 'invalid' };
  if (digestsEqual(row.refresh_digest, presentedDigest)) {
    if (!isLive(row, now) || row.refresh_expires_at <= now) return { kind: 'invalid' };
    return { kind: 'rotate', retire: row.prev_refresh_digest };
  }
  if (row.prev_refresh_digest !== null && digestsEqual(row.prev_refresh_digest, presentedDigest)) {
    if (!isLive(row, now)) return { kind: 'invalid' };
    if (withinGrace(row.prev_rotated_at, now, graceMs) && row.prev_successor !== null) {
      return { kind: 'replay', sealedSuccessor: row.prev_successor };
    }
    return { kind: 'reuse' };
  }
  return { kind: 'check_retired' };
}

/**
 * The second half of {@link decideRotation}, once the store knows whether the presented digest
 * is one of the session's retired refresh tokens: a retired token of a live session is `reuse`;
 * a digest the session never had is a forgery and changes nothing (`invalid`), as is anything
 * presented for a session that is no longer live.
 *
 * @example
 * const d = decideRetiredPresentation(row, { retired: await isRetired(row.id, digest), now });
 */
export function decideRetiredPresentation(
  row: RefreshRow,
  input: { readonly retired: boolean; readonly now: number },
): { readonly kind: 'reuse' | 'invalid' } {
  return input.retired && isLive(row, input.now) ? { kind: 'reuse' } : { kind: 'invalid' };
}

/**
 * What a store does with a presentation of a refresh token: {@link decideRotation} (and
 * {@link decideRetiredPresentation}) with the outcome already built from the locked row, so a
 * store only writes what the plan says and appends `audit(plan.outcome)`. `rotate`: retire
 * `retire` (when not null) and set the new pair with the clamped expiries; `replay`: write
 * nothing; `reuse`: revoke the session (reason `refresh_reused`); `check_retired`: look the
 * presented digest up among the session's retired ones and plan again with `retired`.
 */
export type RotationPlan =
  | { readonly kind: 'invalid' }
  | { readonly kind: 'check_retired' }
  | {
      readonly kind: 'rotate';
      readonly retire: string | null;
      readonly accessExpiresAt: number;
      readonly refreshExpiresAt: number;
      readonly outcome: Extract<RotationOutcome, { kind: 'rotated' }>;
    }
  | { readonly kind: 'replay'; readonly outcome: Extract<RotationOutcome, { kind: 'rotated_in_grace' }> }
  | { readonly kind: 'reuse'; readonly outcome: Extract<RotationOutcome, { kind: 'reused' }> };

const INVALID_PLAN: RotationPlan = Object.freeze({ kind: 'invalid' });
const CHECK_RETIRED_PLAN: RotationPlan = Object.freeze({ kind: 'check_retired' });

/**
 * The plan of a rotation (see {@link RotationPlan}) for the row the store locked (undefined:
 * no such session); `retired` is whether the presented digest is among the session's retired
 * ones, given on the second call after a `check_retired` plan.
 *
 * @example
 * let plan = planRotation(row, input);
 * if (plan.kind === 'check_retired') plan = planRotation(row, input, isRetired(row.id, input.presentedDigest));
 */
export function planRotation(
  row: RefreshRow | undefined,
  input: {
    readonly presentedDigest: string;
    readonly realm: string;
    readonly now: number;
    readonly graceMs: number;
    readonly next: { readonly accessExpiresAt: number; readonly refreshExpiresAt: number };
  },
  retired?: boolean,
): RotationPlan {
  if (row === undefined) return INVALID_PLAN;
  let decision: RotationDecision = decideRotation(row, input);
  if (decision.kind === 'check_retired') {
    if (retired === undefined) return CHECK_RETIRED_PLAN;
    decision = decideRetiredPresentation(row, { retired, now: input.now });
  }
  switch (decision.kind) {
    case 'invalid':
    case 'check_retired':
      return INVALID_PLAN;
    case 'rotate': {
      const expiries = clampPairToSession(input.next, row.expires_at);
      return Object.freeze({
        kind: 'rotate',
        retire: decision.retire,
        ...expiries,
        outcome: Object.freeze({ kind: 'rotated', session: rotatedSession(row, expiries, input.now) }),
      });
    }
    case 'replay':
      return Object.freeze({
        kind: 'replay',
        outcome: Object.freeze({ kind: 'rotated_in_grace', session: toSession(row), sealedSuccessor: decision.sealedSuccessor }),
      });
    case 'reuse':
      return Object.freeze({
        kind: 'reuse',
        outcome: Object.freeze({
          kind: 'reused',
          session: toSession({ ...row, revoked_at: input.now, revoked_reason: REVOKED_REFRESH_REUSED }),
        }),
      });
  }
}

/** The outcome of a bound session's refresh without a proof by its key (see {@link rotationProof}). */
export const PROOF_REQUIRED: RotationOutcome = Object.freeze({ kind: 'proof_required' });
/** The outcome of a refresh whose proof was used before (see {@link rotationProof}). */
export const PROOF_REPLAYED: RotationOutcome = Object.freeze({ kind: 'proof_replayed' });

/**
 * What a presentation of a refresh token does with its DPoP proof, on the session row the store
 * read (the binding, `jkt`, never changes once the session exists, so any read of the row will
 * do), before {@link planRotation}:
 * - `null`: nothing to record. No such session, one of another realm (the plan says `invalid`),
 *   or a bearer session (no `jkt`): a proof that came with it is not looked at;
 * - `'required'`: the session is bound to a key and no proof by that key came (none, or one
 *   signed by another key). The store answers `proof_required` and writes nothing: a copied
 *   refresh token without the key can neither rotate the session nor end it by a reuse;
 * - the proof to record: the store records it in the DPoP replay cache in the rotation's own
 *   transaction, whatever the plan, and answers `proof_replayed` (nothing else written) when a
 *   live record of it is there already.
 *
 * @example
 * const proof = rotationProof(row, input);
 * if (proof === 'required') return PROOF_REQUIRED;
 */
export function rotationProof(
  row: { readonly realm: string; readonly jkt?: string | null } | undefined,
  input: { readonly realm: string; readonly dpop?: RotationProof | undefined },
): RotationProof | 'required' | null {
  if (row === undefined || row.realm !== input.realm || typeof row.jkt !== 'string') return null;
  const proof = input.dpop;
  return proof !== undefined && digestsEqual(proof.jkt, row.jkt) ? proof : 'required';
}

/**
 * Whether a rotation at `rotatedAt` is within `graceMs` of `now`. A stored time in the future
 * beyond {@link CLOCK_SKEW_TOLERANCE_MS} (the clock was stepped back) is never within grace.
 *
 * @example
 * withinGrace(rotatedAt, now, 10_000);
 */
export function withinGrace(rotatedAt: number | null, now: number, graceMs: number): boolean {
  if (rotatedAt === null || graceMs <= 0) return false;
  const elapsed = now - rotatedAt;
  return elapsed >= -CLOCK_SKEW_TOLERANCE_MS && elapsed <= graceMs;
}

/**
 * Whether a session row's sealed grace pair is to be erased by a sweep: its previous token was
 * rotated before `graceEndedBefore` (the sweep passes `now - grace`). Past grace that token is a
 * reuse and the pair answers nothing; kept, it would hand the live pair to whoever holds a copy
 * of the database and that retired token, without the reuse ever reaching the service. The SQL
 * stores apply `gracePairEndedSql` (`@svc/core/sql-rows`), its SQL form.
 *
 * @example
 * if (gracePairEnded(row, now - graceMs)) row.prev_successor = null;
 */
export function gracePairEnded(row: Pick<RefreshRow, 'prev_successor' | 'prev_rotated_at'>, graceEndedBefore: number): boolean {
  return row.prev_successor !== null && row.prev_rotated_at !== null && row.prev_rotated_at < graceEndedBefore;
}

const SEAL_INFO = Buffer.from('svc-auth-v1 refresh-successor', 'utf8');

function successorKey(refreshToken: string, sessionId: string): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(refreshToken, 'utf8'), Buffer.from(sessionId, 'utf8'), SEAL_INFO, 32));
}

/**
 * Seals the pair a rotation issues under a key derived (HKDF-SHA256) from the refresh token
 * that was presented, with AES-256-GCM bound to the session id. The store keeps only this
 * ciphertext (never a token): whoever presents that same token again within the grace interval
 * can be given the same pair, and a copy of the database alone opens nothing.
 *
 * @example
 * const sealed = sealSuccessor(presentedRefreshToken, sessionId, { access, refresh }, deps.random);
 */
export function sealSuccessor(
  presentedRefreshToken: string,
  sessionId: string,
  pair: { readonly access: string; readonly refresh: string },
  random: RandomBytes,
): string {
  const iv = Buffer.from(random(12));
  const cipher = createCipheriv('aes-256-gcm', successorKey(presentedRefreshToken, sessionId), iv);
  cipher.setAAD(Buffer.from(sessionId, 'utf8'));
  const body = Buffer.concat([cipher.update(`${pair.access} ${pair.refresh}`, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
}

/**
 * Opens what {@link sealSuccessor} sealed, with the same presented token; null when it does not
 * open (another token, another session, or the ciphertext was altered).
 *
 * @example
 * const pair = openSuccessor(presentedRefreshToken, sessionId, sealed); // { access, refresh } or null
 */
export function openSuccessor(
  presentedRefreshToken: string,
  sessionId: string,
  sealed: string,
): { readonly access: string; readonly refresh: string } | null {
  const raw = Buffer.from(sealed, 'base64url');
  if (raw.length < 12 + 16 + 1) return null;
  try {
    const decipher = createDecipheriv('aes-256-gcm', successorKey(presentedRefreshToken, sessionId), raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(sessionId, 'utf8'));
    decipher.setAuthTag(raw.subarray(raw.length - 16));
    const text = Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString('utf8');
    const [access, refresh, ...rest] = text.split(' ');
    if (access === undefined || refresh === undefined || rest.length > 0) return null;
    return { access, refresh };
  } catch {
    return null;
  }
}

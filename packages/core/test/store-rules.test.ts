import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  auditPage,
  clampPairToSession,
  decideBootstrapConsumption,
  decideDeviceRemoval,
  decidePairingCompletion,
  decidePairingFailure,
  isChallengeConsumable,
  isSessionActive,
  isSessionLive,
  latestTrustedTime,
  newSessionRecord,
} from '../src/store-api.js';
import { CLOCK_SKEW_TOLERANCE_MS, isAccessValid, isIntentLive } from '../src/store-rules.js';

const T = Date.UTC(2026, 10, 22, 10, 0, 0, 0);

describe('session liveness', () => {
  const session = { revokedAt: null, expiresAt: T + 1000, accessExpiresAt: T + 500, refreshExpiresAt: T + 800 };

  test('live until the instant its absolute lifetime ends, never once revoked', () => {
    assert.equal(isSessionLive(session, T), true);
    assert.equal(isSessionLive(session, T + 999), true);
    assert.equal(isSessionLive(session, T + 1000), false);
    assert.equal(isSessionLive({ ...session, revokedAt: T - 1 }, T), false);
    // A revocation dated in the future (a clock stepped back) still counts: revoked is revoked.
    assert.equal(isSessionLive({ ...session, revokedAt: T + 60_000 }, T), false);
  });

  test('an access token authenticates while it and its session are both unexpired', () => {
    assert.equal(isAccessValid(session, T + 499), true);
    assert.equal(isAccessValid(session, T + 500), false);
    assert.equal(isAccessValid({ ...session, accessExpiresAt: T + 5000 }, T + 1000), false, 'the session end bounds the access token');
    assert.equal(isAccessValid({ ...session, revokedAt: T }, T), false);
  });

  test('listed as active while its refresh token can still renew it', () => {
    assert.equal(isSessionActive(session, T + 799), true);
    assert.equal(isSessionActive(session, T + 800), false);
    assert.equal(isSessionActive({ ...session, refreshExpiresAt: T + 5000 }, T + 1000), false);
    assert.equal(isSessionActive({ ...session, revokedAt: T }, T), false);
  });

  test('no pair outlives its session', () => {
    assert.deepEqual(clampPairToSession({ accessExpiresAt: T + 10, refreshExpiresAt: T + 20 }, T + 15), {
      accessExpiresAt: T + 10,
      refreshExpiresAt: T + 15,
    });
    assert.deepEqual(clampPairToSession({ accessExpiresAt: T + 10, refreshExpiresAt: T + 20 }, T + 5), {
      accessExpiresAt: T + 5,
      refreshExpiresAt: T + 5,
    });
  });
});

describe('bootstrap token consumption', () => {
  const live = { usedAt: null, supersededAt: null, expiresAt: T + 1000 };
  const free = { now: T, keyTaken: false };

  test('a live token and a free key: consume it', () => {
    assert.deepEqual(decideBootstrapConsumption(live, free), { kind: 'consume' });
    assert.deepEqual(decideBootstrapConsumption(live, { now: T + 999, keyTaken: false }), { kind: 'consume' });
  });

  test('refusals in the contract order: unknown, used, superseded, expired, key taken', () => {
    assert.deepEqual(decideBootstrapConsumption(undefined, { now: T, keyTaken: true }), { kind: 'unknown' });
    // Used wins over everything after it, superseded afterwards included: the more useful answer.
    assert.deepEqual(decideBootstrapConsumption({ usedAt: T - 5, supersededAt: T - 1, expiresAt: T - 1 }, { now: T, keyTaken: true }), {
      kind: 'used',
    });
    assert.deepEqual(decideBootstrapConsumption({ ...live, supersededAt: T - 1, expiresAt: T - 1 }, { now: T, keyTaken: true }), {
      kind: 'unknown',
    });
    assert.deepEqual(decideBootstrapConsumption({ ...live, expiresAt: T }, { now: T, keyTaken: true }), { kind: 'expired' });
    assert.deepEqual(decideBootstrapConsumption(live, { now: T, keyTaken: true }), { kind: 'already_enrolled' });
  });

  test('expiry is exclusive at the instant, whichever way the clock jumped', () => {
    assert.deepEqual(decideBootstrapConsumption(live, { now: T + 1000, keyTaken: false }), { kind: 'expired' });
    // A clock stepped far forward expires it; stepped back, a live token stays live.
    assert.deepEqual(decideBootstrapConsumption(live, { now: T + 86_400_000, keyTaken: false }), { kind: 'expired' });
    assert.deepEqual(decideBootstrapConsumption(live, { now: T - 86_400_000, keyTaken: false }), { kind: 'consume' });
  });
});

describe('challenge consumption', () => {
  const fresh = { createdAt: T, expiresAt: T + 60_000, usedAt: null };

  test('unused and unexpired: consumable, until the instant it expires', () => {
    assert.equal(isChallengeConsumable(fresh, T), true);
    assert.equal(isChallengeConsumable(fresh, T + 59_999), true);
    assert.equal(isChallengeConsumable(fresh, T + 60_000), false);
    assert.equal(isChallengeConsumable({ ...fresh, usedAt: T }, T), false);
  });

  test('a clock stepped back beyond the skew tolerance refuses it: its age cannot be measured', () => {
    assert.equal(latestTrustedTime(T), T + CLOCK_SKEW_TOLERANCE_MS);
    assert.equal(isChallengeConsumable(fresh, T - CLOCK_SKEW_TOLERANCE_MS), true);
    assert.equal(isChallengeConsumable(fresh, T - CLOCK_SKEW_TOLERANCE_MS - 1), false);
  });
});

describe('pairing intents', () => {
  const intent = { codeDigest: 'a'.repeat(64), expiresAt: T + 1000, failures: 0, completedAt: null, burnedAt: null };

  test('live while not completed, not burned, not expired', () => {
    assert.equal(isIntentLive(intent, T + 999), true);
    assert.equal(isIntentLive(intent, T + 1000), false);
    assert.equal(isIntentLive({ ...intent, completedAt: T }, T), false);
    assert.equal(isIntentLive({ ...intent, burnedAt: T }, T), false);
  });

  test('each wrong code counts once; the one that reaches the maximum burns it', () => {
    assert.deepEqual(decidePairingFailure(intent, { now: T, maxFailures: 3 }), { failures: 1, burned: false });
    assert.deepEqual(decidePairingFailure({ ...intent, failures: 1 }, { now: T, maxFailures: 3 }), { failures: 2, burned: false });
    assert.deepEqual(decidePairingFailure({ ...intent, failures: 2 }, { now: T, maxFailures: 3 }), { failures: 3, burned: true });
  });

  test('a failure against an unknown or ended intent writes nothing', () => {
    assert.equal(decidePairingFailure(undefined, { now: T, maxFailures: 3 }), null);
    assert.equal(decidePairingFailure({ ...intent, burnedAt: T - 1 }, { now: T, maxFailures: 3 }), null);
    assert.equal(decidePairingFailure(intent, { now: T + 1000, maxFailures: 3 }), null);
  });

  test('completion: invalid (unknown, ended, wrong code) before the key check, which leaves it live', () => {
    const input = { codeDigest: intent.codeDigest, now: T, keyTaken: false };
    assert.deepEqual(decidePairingCompletion(intent, input), { kind: 'complete' });
    assert.deepEqual(decidePairingCompletion(undefined, { ...input, keyTaken: true }), { kind: 'invalid' });
    assert.deepEqual(decidePairingCompletion(intent, { ...input, codeDigest: 'b'.repeat(64), keyTaken: true }), { kind: 'invalid' });
    assert.deepEqual(decidePairingCompletion({ ...intent, completedAt: T - 1 }, { ...input, keyTaken: true }), { kind: 'invalid' });
    assert.deepEqual(decidePairingCompletion(intent, { ...input, now: T + 1000 }), { kind: 'invalid' });
    assert.deepEqual(decidePairingCompletion(intent, { ...input, keyTaken: true }), { kind: 'already_enrolled' });
  });
});

describe('device removal', () => {
  test('an unknown or removed device is not found, whatever the count', () => {
    assert.equal(decideDeviceRemoval({ active: false, activeInRealm: 0, keepLast: true }), 'not_found');
    assert.equal(decideDeviceRemoval({ active: false, activeInRealm: 5, keepLast: false }), 'not_found');
  });

  test('keepLast refuses the last active device of its realm and only that one', () => {
    assert.equal(decideDeviceRemoval({ active: true, activeInRealm: 1, keepLast: true }), 'last');
    assert.equal(decideDeviceRemoval({ active: true, activeInRealm: 2, keepLast: true }), 'remove');
    assert.equal(decideDeviceRemoval({ active: true, activeInRealm: 1, keepLast: false }), 'remove');
  });
});

describe('new sessions and audit pages', () => {
  test('a new session starts at generation 0, unrotated, unrevoked, its pair clamped to its end', () => {
    const device = { id: 'dev_1', realm: 'management' as const, subject: 'sub_1' };
    const s = newSessionRecord({
      id: 'ses_1',
      device,
      now: T,
      expiresAt: T + 100,
      pair: { accessExpiresAt: T + 50, refreshExpiresAt: T + 500 },
    });
    assert.deepEqual(s, {
      id: 'ses_1',
      realm: 'management',
      subject: 'sub_1',
      deviceId: 'dev_1',
      createdAt: T,
      expiresAt: T + 100,
      accessExpiresAt: T + 50,
      refreshExpiresAt: T + 100,
      generation: 0,
      lastRotatedAt: null,
      revokedAt: null,
      revokedReason: null,
      clientAddress: null,
      userAgent: null,
      amr: ['ed25519'],
      jkt: null,
    });
    const withClient = newSessionRecord({
      id: 'ses_2',
      device,
      now: T,
      expiresAt: T + 100,
      pair: { accessExpiresAt: T + 50, refreshExpiresAt: T + 500 },
      client: { clientAddress: '127.0.0.1', userAgent: 'curl/8.5.0' },
    });
    assert.equal(withClient.clientAddress, '127.0.0.1');
    assert.equal(withClient.userAgent, 'curl/8.5.0');
  });

  test('an audit page is whole numbers from 0, whatever the caller passed', () => {
    assert.deepEqual(auditPage({ afterSeq: 3, limit: 10 }), { afterSeq: 3, limit: 10 });
    assert.deepEqual(auditPage({ afterSeq: -3, limit: 2.9 }), { afterSeq: 0, limit: 2 });
    assert.deepEqual(auditPage({ afterSeq: Number.NaN, limit: Number.POSITIVE_INFINITY }), { afterSeq: 0, limit: Number.MAX_SAFE_INTEGER });
  });
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ERROR_CODES } from '@svc/core';
import {
  AUTH_SETTINGS,
  BOOTSTRAP_TOKEN_TTL_SECONDS,
  CAPABILITIES,
  DEFAULT_AUTH_SETTINGS,
  formatLimit,
  MAX_REQUEST_BODY_BYTES,
  PAIRING_MAX_FAILURES,
  PROJECT_KEYS,
} from '@svc/core/settings';

test('the default auth settings are the defaults of the configuration table, and each lies within its bounds', () => {
  for (const s of AUTH_SETTINGS) {
    assert.equal(DEFAULT_AUTH_SETTINGS[s.field], s.default, s.key);
    assert.ok(s.min <= s.default && s.default <= s.max, `${s.key}: ${s.default} outside ${s.min}–${s.max}`);
    assert.ok(s.key.endsWith(`-${s.unit}`), `${s.key} names its unit ${s.unit}`);
  }
  assert.equal(DEFAULT_AUTH_SETTINGS.bootstrapTokenTtlSeconds, BOOTSTRAP_TOKEN_TTL_SECONDS);
  // Sessions a device key signs in are bound to it (DPoP) by default, in both realms.
  assert.deepEqual(DEFAULT_AUTH_SETTINGS.senderConstraint, { management: 'refresh', application: 'refresh' });
  assert.equal(Object.keys(DEFAULT_AUTH_SETTINGS).length, AUTH_SETTINGS.length + 2);
  assert.ok(Object.isFrozen(DEFAULT_AUTH_SETTINGS));
});

test('the limits the spec and contract fix are the ones the table holds (15 minutes, 5 failures, 64 KiB)', () => {
  assert.equal(formatLimit(BOOTSTRAP_TOKEN_TTL_SECONDS, 'seconds'), '15 minutes');
  assert.equal(formatLimit(PAIRING_MAX_FAILURES, 'failures'), '5 failures');
  assert.equal(formatLimit(MAX_REQUEST_BODY_BYTES, 'bytes'), '64 KiB (65,536 bytes)');
});

test('a limit is said in its largest whole unit', () => {
  assert.equal(formatLimit(1, 'seconds'), '1 second');
  assert.equal(formatLimit(90, 'seconds'), '90 seconds');
  assert.equal(formatLimit(3600, 'seconds'), '1 hour');
  assert.equal(formatLimit(172_800, 'seconds'), '2 days');
  assert.equal(formatLimit(1000, 'bytes'), '1,000 bytes');
  assert.equal(formatLimit(1, 'failures'), '1 failure');
});

test('the error meanings that quote a limit quote the constant', () => {
  assert.ok(ERROR_CODES.bootstrap_token_expired.meaning.endsWith(formatLimit(BOOTSTRAP_TOKEN_TTL_SECONDS, 'seconds')));
  assert.ok(ERROR_CODES.invalid_pairing_code.meaning.endsWith(formatLimit(PAIRING_MAX_FAILURES, 'failures')));
  assert.ok(ERROR_CODES.payload_too_large.meaning.endsWith(formatLimit(MAX_REQUEST_BODY_BYTES, 'bytes')));
});

test("the table names every key once, and the contract's capabilities, every one of which this build activates", () => {
  const keys = [...PROJECT_KEYS.map((k) => k.key), ...AUTH_SETTINGS.map((s) => s.key)];
  assert.equal(new Set(keys).size, keys.length);
  assert.deepEqual(
    CAPABILITIES.map((c) => c.keyword),
    ['svc/store', 'svc/app', 'svc/auth-provider'],
  );
  assert.deepEqual(
    CAPABILITIES.filter((c) => c.refusal === null).map((c) => c.keyword),
    ['svc/store', 'svc/app', 'svc/auth-provider'],
  );
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isIdOfKind, silentLogger, verifyEd25519 } from '@svc/core';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import type { Store } from '@svc/core/store';
import { createFakeClock, FAKE_CLOCK_START, makeDeps, newDeviceKey, TEST_PROJECT_ID } from '@svc/store-testkit';

describe('createFakeClock', () => {
  test('time moves only when told, by exactly the amount asked', () => {
    const clock = createFakeClock();
    assert.equal(clock.now(), FAKE_CLOCK_START);
    assert.equal(clock.now(), FAKE_CLOCK_START);
    clock.advance(15 * 60_000 - 1);
    assert.equal(clock.now(), FAKE_CLOCK_START + 15 * 60_000 - 1);
    clock.set(42);
    assert.equal(clock.now(), 42);
    assert.equal(createFakeClock(7).now(), 7);
  });

  test('a fake clock refuses fractional, negative and backward moves', () => {
    const clock = createFakeClock(1000);
    assert.throws(() => clock.advance(-1), RangeError);
    assert.throws(() => clock.advance(0.5), RangeError);
    assert.throws(() => clock.set(Number.NaN), RangeError);
    assert.throws(() => createFakeClock(-5), RangeError);
    assert.equal(clock.now(), 1000);
  });
});

describe('makeDeps', () => {
  const store = {} as Store;

  test('deps carry the store, the clock, CSPRNG bytes, a silent log, the defaults (with bearer sessions) and a valid project id', () => {
    const clock = createFakeClock();
    const deps = makeDeps(store, clock);
    assert.equal(deps.store, store);
    assert.equal(deps.clock, clock);
    assert.equal(deps.log, silentLogger);
    // The suites present refresh tokens bare; the DPoP suite asks for :refresh itself.
    assert.deepEqual(deps.settings, { ...DEFAULT_AUTH_SETTINGS, senderConstraint: { management: 'off', application: 'off' } });
    assert.equal(deps.projectId, TEST_PROJECT_ID);
    assert.ok(isIdOfKind(deps.projectId, 'project'));
    const a = deps.random(32);
    assert.equal(a.length, 32);
    assert.notDeepEqual(a, deps.random(32));
  });

  test('settings overrides are merged over the defaults', () => {
    const deps = makeDeps(store, createFakeClock(), { settings: { refreshReuseGraceSeconds: 0 }, projectId: 'prj_x' });
    assert.equal(deps.settings.refreshReuseGraceSeconds, 0);
    assert.equal(deps.settings.accessTokenTtlSeconds, DEFAULT_AUTH_SETTINGS.accessTokenTtlSeconds);
    assert.equal(deps.projectId, 'prj_x');
  });
});

describe('newDeviceKey', () => {
  test('a device key signs so that core verifies it', () => {
    const key = newDeviceKey();
    const message = 'svc-auth-v1 challenge test';
    assert.ok(verifyEd25519(key.publicKey, Buffer.from(message), Buffer.from(key.sign(message), 'hex')));
    assert.ok(!verifyEd25519(newDeviceKey().publicKey, Buffer.from(message), Buffer.from(key.sign(message), 'hex')));
  });
});

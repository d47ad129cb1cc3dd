import assert from 'node:assert/strict';
import { generateKeyPairSync, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { AuthError, parsePublicKeyHex, publicKeyHexOf, verifyEd25519 } from '@svc/core';
import { verifyEd25519Async } from '../src/ed25519.js';

interface WycheproofGroup {
  publicKey: { pk: string };
  tests: { tcId: number; msg: string; sig: string; result: 'valid' | 'invalid'; comment: string }[];
}
const vectors = JSON.parse(readFileSync(new URL('./vectors/wycheproof-ed25519_test.json', import.meta.url), 'utf8')) as {
  testGroups: WycheproofGroup[];
};

test('the Ed25519 verifier accepts exactly the valid Wycheproof vectors', () => {
  let checked = 0;
  for (const group of vectors.testGroups) {
    for (const t of group.tests) {
      const sig = Buffer.from(t.sig, 'hex');
      const ok = sig.length === 64 && verifyEd25519(group.publicKey.pk, Buffer.from(t.msg, 'hex'), sig);
      assert.equal(ok, t.result === 'valid', `tcId ${t.tcId} (${t.comment}) expected ${t.result}`);
      checked++;
    }
  }
  assert.equal(checked, 151);
});

test('the thread-pool Ed25519 verifier accepts exactly the valid Wycheproof vectors too', async () => {
  let checked = 0;
  for (const group of vectors.testGroups) {
    for (const t of group.tests) {
      const ok = await verifyEd25519Async(group.publicKey.pk, Buffer.from(t.msg, 'hex'), Buffer.from(t.sig, 'hex'));
      assert.equal(ok, t.result === 'valid', `tcId ${t.tcId} (${t.comment}) expected ${t.result}`);
      checked++;
    }
  }
  assert.equal(checked, 151);
});

test('every Wycheproof public key parses as a valid, non-small-order point', () => {
  for (const group of vectors.testGroups) assert.equal(parsePublicKeyHex(group.publicKey.pk), group.publicKey.pk.toLowerCase());
});

test('a freshly generated key round-trips and its signature verifies', () => {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const hex = publicKeyHexOf(publicKey);
  assert.equal(parsePublicKeyHex(hex.toUpperCase()), hex);
  const msg = Buffer.from('svc-auth-v1 challenge test');
  assert.ok(verifyEd25519(hex, msg, sign(null, msg, privateKey)));
  assert.ok(!verifyEd25519(hex, Buffer.from('other'), sign(null, msg, privateKey)));
});

// Small-order encodings (the 8 torsion points and their non-canonical forms), as listed by libsodium.
const SMALL_ORDER = [
  '0100000000000000000000000000000000000000000000000000000000000000',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  '0000000000000000000000000000000000000000000000000000000000000080',
  '0000000000000000000000000000000000000000000000000000000000000000',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85',
];

test('small-order public keys are refused', () => {
  for (const hex of SMALL_ORDER) {
    assert.throws(
      () => parsePublicKeyHex(hex),
      (e: unknown) => e instanceof AuthError && e.code === 'invalid_request',
      hex,
    );
  }
});

test('encodings that are not curve points, or not canonical, are refused', () => {
  // y = p (non-canonical zero) and a y with no square root for x.
  for (const hex of [
    'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
    '0200000000000000000000000000000000000000000000000000000000000000',
  ]) {
    assert.throws(
      () => parsePublicKeyHex(hex),
      (e: unknown) => e instanceof AuthError && e.code === 'invalid_request',
      hex,
    );
  }
});

test('public keys of the wrong shape are invalid_request', () => {
  for (const bad of ['', 'zz'.repeat(32), 'ab'.repeat(31), 'ab'.repeat(33), 42, null, undefined]) {
    assert.throws(
      () => parsePublicKeyHex(bad),
      (e: unknown) => e instanceof AuthError && e.code === 'invalid_request',
    );
  }
});

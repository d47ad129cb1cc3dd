import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, test } from 'node:test';
import {
  type AssertionKeySetJson,
  assertionAudienceOf,
  assertionClaims,
  assertionHtu,
  assertionSigningKey,
  type FreshAssertionKey,
  firstAssertionKeySet,
  makePrincipal,
  parseAssertionKeySet,
  publishedAssertionKeys,
  rfc3339,
  rotateAssertionKeySet,
} from '@svc/core';
import {
  ASSERTION_KEY_OVERLAP_SECONDS,
  ASSERTION_KEY_PREPUBLISH_SECONDS,
  ASSERTION_MAX_TTL_SECONDS,
  ASSERTION_TTL_SECONDS,
} from '@svc/core/settings';
import { DEFAULT_APP_GATEWAY_CONFIG } from '../src/app-config.js';
import { assertionKeyId } from '../src/assertion-keys.js';

const fresh = (): FreshAssertionKey => {
  const jwk = generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });
  return { x: jwk.x as string, d: jwk.d as string };
};
const T0 = Date.parse('2026-11-23T12:00:00.000Z');
const S = 1000;
const kids = (set: AssertionKeySetJson, now: number) => publishedAssertionKeys(set, now).map((k) => k.kid);

function rotated(set: AssertionKeySetJson, now: number, immediate = false) {
  const r = rotateAssertionKeySet(set, fresh(), now, { immediate });
  assert.equal(r.outcome, 'rotated');
  return r as Extract<typeof r, { outcome: 'rotated' }>;
}

describe('assertion key set rules', () => {
  test('the lifetime is within the contract bound', () => {
    assert.ok(ASSERTION_TTL_SECONDS > 0 && ASSERTION_TTL_SECONDS <= ASSERTION_MAX_TTL_SECONDS);
    assert.equal(ASSERTION_MAX_TTL_SECONDS, 60);
    // What was signed last before a switch must still verify through the overlap.
    assert.ok(ASSERTION_KEY_OVERLAP_SECONDS > ASSERTION_MAX_TTL_SECONDS);
  });

  test('the kid is the RFC 7638 thumbprint (RFC 8037 appendix A.3 vector)', () => {
    assert.equal(assertionKeyId('11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo'), 'kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k');
  });

  test('a first key signs and is published from its creation', () => {
    const set = firstAssertionKeySet(fresh(), T0);
    const key = set.keys[0];
    assert.equal(assertionSigningKey(set, T0)?.kid, key?.kid);
    assert.deepEqual(kids(set, T0), [key?.kid]);
    assert.equal(assertionSigningKey(set, T0 - 1), null);
    assert.deepEqual(publishedAssertionKeys(set, T0)[0], {
      kty: 'OKP',
      crv: 'Ed25519',
      x: key?.x,
      kid: key?.kid,
      use: 'sig',
      alg: 'EdDSA',
    });
  });

  test('a rotation pre-publishes the next key: it is in the JWK Set at once and signs only after the pre-publication', () => {
    const set = firstAssertionKeySet(fresh(), T0);
    const old = set.keys[0]?.kid;
    const now = T0 + 3600 * S;
    const { set: after, next, previous } = rotated(set, now);
    assert.equal(previous?.kid, old);
    assert.deepEqual(kids(after, now), [old, next.kid]);
    const switchAt = now + ASSERTION_KEY_PREPUBLISH_SECONDS * S;
    assert.equal(assertionSigningKey(after, switchAt - 1)?.kid, old);
    assert.equal(assertionSigningKey(after, switchAt)?.kid, next.kid);
    assert.equal(next.signs_from, new Date(switchAt).toISOString());
  });

  test('the previous key stays published for the overlap after the switch, and not after it', () => {
    const set = firstAssertionKeySet(fresh(), T0);
    const old = set.keys[0]?.kid as string;
    const { set: after, next } = rotated(set, T0 + S);
    const switchAt = T0 + S + ASSERTION_KEY_PREPUBLISH_SECONDS * S;
    const overlapEnd = switchAt + ASSERTION_KEY_OVERLAP_SECONDS * S;
    assert.deepEqual(kids(after, switchAt), [old, next.kid]);
    assert.deepEqual(kids(after, overlapEnd - 1), [old, next.kid]);
    assert.deepEqual(kids(after, overlapEnd), [next.kid]);
  });

  test('a rotation while the next key waits to sign changes nothing', () => {
    const { set, next } = rotated(firstAssertionKeySet(fresh(), T0), T0 + S);
    const again = rotateAssertionKeySet(set, fresh(), T0 + 2 * S, { immediate: false });
    assert.equal(again.outcome, 'pending');
    assert.equal(again.outcome === 'pending' && again.pending.kid, next.kid);
  });

  test('an immediate rotation (leaked key) signs with the new key now and withdraws every old key now', () => {
    const { set } = rotated(firstAssertionKeySet(fresh(), T0), T0 + S);
    const now = T0 + 2 * S;
    const leaked = assertionSigningKey(set, now);
    const { set: after, next, previous } = rotated(set, now, true);
    // The rotation names the key it withdrew (the audit event records it), though it is no longer in the set.
    assert.equal(previous?.kid, leaked?.kid);
    assert.equal(previous?.signs_until, rfc3339(now));
    assert.equal(previous?.published_until, rfc3339(now));
    assert.equal(assertionSigningKey(after, now)?.kid, next.kid);
    assert.deepEqual(kids(after, now), [next.kid]);
    assert.ok(
      after.keys.every((k) => k.kid === next.kid || k.d === null),
      'no old private key is kept',
    );
  });

  test('a later rotation prunes withdrawn keys and drops the private half of keys that no longer sign', () => {
    const first = firstAssertionKeySet(fresh(), T0);
    const { set: s1, next: k1 } = rotated(first, T0 + S);
    const afterOverlap = T0 + S + (ASSERTION_KEY_PREPUBLISH_SECONDS + ASSERTION_KEY_OVERLAP_SECONDS) * S;
    const { set: s2, next: k2 } = rotated(s1, afterOverlap);
    assert.deepEqual(
      s2.keys.map((k) => k.kid),
      [k1.kid, k2.kid],
    );
    const between = T0 + S + ASSERTION_KEY_PREPUBLISH_SECONDS * S + 1;
    const { set: s3 } = rotated({ version: 1, keys: [...s1.keys] }, between, false);
    assert.equal(s3.keys.find((k) => k.kid === first.keys[0]?.kid)?.d, null);
  });

  test('the key set file is checked: a kid that is not the thumbprint of its key is refused', () => {
    const set = firstAssertionKeySet(fresh(), T0);
    assert.deepEqual(parseAssertionKeySet(JSON.parse(JSON.stringify(set))), set);
    const other = fresh();
    const forged = { version: 1, keys: [{ ...set.keys[0], x: other.x }] };
    assert.throws(() => parseAssertionKeySet(forged), /thumbprint/);
    assert.throws(() => parseAssertionKeySet({ version: 2, keys: [] }), TypeError);
    assert.throws(() => parseAssertionKeySet({ version: 1, keys: [{ ...set.keys[0], signs_from: 'soon' }] }), /signs_from/);
  });
});

describe('assertion claims and request binding', () => {
  const principal = makePrincipal({
    subject: 'dev_1',
    realm: 'application',
    session: 'ses_1',
    device: 'dev_1',
    claims: { amr: ['device_key'], auth_time: '2026-11-23T12:00:00.000Z', exp: '2026-11-24T12:00:00.000Z' },
  });

  test('the claims carry who, for whom, by whom, when and which request', () => {
    const c = assertionClaims(principal, {
      issuer: 'NODE',
      audience: 'http://127.0.0.1:3000',
      now: T0 + 999,
      jti: 'j',
      method: 'post',
      htu: 'https://app.example/x',
    });
    assert.deepEqual(c, {
      iss: 'NODE',
      aud: 'http://127.0.0.1:3000',
      sub: 'dev_1',
      sid: 'ses_1',
      dev: 'dev_1',
      realm: 'application',
      claims: principal.claims,
      iat: T0 / 1000,
      exp: T0 / 1000 + ASSERTION_TTL_SECONDS,
      jti: 'j',
      htm: 'POST',
      htu: 'https://app.example/x',
    });
    assert.equal('email' in c || 'name' in c || 'groups' in c || 'email_verified' in c, false, 'unknown: absent, never empty');
  });

  test('who the caller is, when known, is at the top level: email (A-label), email_verified, name, groups (an array)', () => {
    const known = makePrincipal({
      ...principal,
      claims: {
        ...principal.claims,
        email: 'zoe@xn--bcher-kva.example',
        email_verified: false,
        name: 'Zoë Ångström 山田',
        groups: ['admins', 'ops'],
      },
    });
    const c = assertionClaims(known, { issuer: 'N', audience: 'a', now: T0, jti: 'j', method: 'GET', htu: 'https://app.example/' });
    assert.equal(c.email, 'zoe@xn--bcher-kva.example');
    assert.equal(c.email_verified, false);
    assert.equal(c.name, 'Zoë Ångström 山田');
    assert.deepEqual(c.groups, ['admins', 'ops']);
    assert.deepEqual(c.claims, principal.claims, 'claims says how it signed in, not again who');
    const decoded = JSON.parse(JSON.stringify(c));
    assert.deepEqual([decoded.name, decoded.groups], ['Zoë Ångström 山田', ['admins', 'ops']], 'survives JSON as UTF-8');
  });

  test('htu is scheme://host/path without query or fragment, normalised', () => {
    assert.equal(assertionHtu('https', 'App.Example:443', '/orders/7?page=2'), 'https://app.example/orders/7');
    assert.equal(assertionHtu('http', 'app.example:8080', '/a/../b#f'), 'http://app.example:8080/b');
    assert.equal(assertionHtu('http', '127.0.0.1:8080', '//evil.example/x'), 'http://127.0.0.1:8080//evil.example/x');
    assert.equal(assertionHtu('http', 'app.example', 'http://other.example/p?q'), 'http://app.example/p');
    assert.equal(assertionHtu('http', '[::1]:8080', '/'), 'http://[::1]:8080/');
  });

  test('htu follows Host no more once :svc/app-public-origin is set: the public origin plus the path, without the query', () => {
    const origin = 'https://app.example.com';
    assert.equal(assertionHtu('http', '10.0.0.5:8080', '/orders/7?page=2', origin), 'https://app.example.com/orders/7');
    assert.equal(assertionHtu('https', 'evil.example', '/a/../b#f', origin), 'https://app.example.com/b');
    assert.equal(assertionHtu('http', undefined, '//evil.example/x', origin), 'https://app.example.com//evil.example/x');
    assert.equal(assertionHtu('http', 'app.example', 'http://other.example/p?q', 'HTTPS://App.Example.com:443'), `${origin}/p`);
    assert.equal(assertionHtu('http', 'app.example', '/p', null), 'http://app.example/p', 'null: the request origin');
  });

  test('a request without a usable Host cannot be bound', () => {
    assert.throws(() => assertionHtu('http', undefined, '/'), TypeError);
    assert.throws(() => assertionHtu('http', '', '/'), TypeError);
    assert.throws(() => assertionHtu('http', 'evil.example/path', '/'), TypeError);
    assert.throws(() => assertionHtu('http', 'user@evil.example', '/'), TypeError);
  });

  test('the audience is :svc/app-audience, else the upstream origin', () => {
    assert.equal(assertionAudienceOf({ ...DEFAULT_APP_GATEWAY_CONFIG, upstream: 'http://127.0.0.1:3000/base' }), 'http://127.0.0.1:3000');
    assert.equal(assertionAudienceOf({ ...DEFAULT_APP_GATEWAY_CONFIG, upstream: 'http://127.0.0.1:3000', audience: 'orders' }), 'orders');
    assert.equal(assertionAudienceOf(DEFAULT_APP_GATEWAY_CONFIG), null);
  });
});

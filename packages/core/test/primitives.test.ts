import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import {
  type AuditEvent,
  type AuditEventDraft,
  canonicalJson,
  digestToken,
  GENESIS_HASH,
  isIdOfKind,
  makePrincipal,
  mintSessionToken,
  mintToken,
  newId,
  normalizePairingCode,
  parseSessionToken,
  sealAuditEvent,
  verifyAuditChain,
} from '@svc/core';
import { crockfordBase32, newId as newIdOfSource } from '../src/ids.js';
import { isTokenOfKind } from '../src/tokens.js';
import { challengeString } from '../src/use-cases/create-challenge.js';

const clock = { now: () => Date.UTC(2026, 10, 22, 10, 0, 0) };

test('tokens carry their type prefix and at least 256 bits of randomness', () => {
  const b = mintToken('bootstrap', randomBytes);
  assert.match(b, /^svcb_[A-Za-z0-9_-]{43}$/);
  assert.ok(isTokenOfKind(b, 'bootstrap'));
  assert.notEqual(mintToken('bootstrap', randomBytes), b);
  const sessionId = newId('session', clock, randomBytes);
  const t = mintSessionToken('access', sessionId, randomBytes);
  assert.match(t, /^svca_[0-9A-HJKMNP-TV-Z]{26}[A-Za-z0-9_-]{43}$/);
  assert.ok(isTokenOfKind(t, 'access'));
  assert.ok(!isTokenOfKind(t, 'refresh'));
  assert.ok(!isTokenOfKind(t, 'bootstrap'));
  assert.ok(isTokenOfKind(mintSessionToken('refresh', sessionId, randomBytes), 'refresh'));
  assert.notEqual(mintSessionToken('access', sessionId, randomBytes), t);
  assert.throws(() => mintSessionToken('access', 'dev_01KAQ00000000000000000000Z', randomBytes), TypeError);
});

test('a session token names its session and is checked by the digest of the whole token', () => {
  const sessionId = newId('session', clock, randomBytes);
  const t = mintSessionToken('refresh', sessionId, randomBytes);
  assert.deepEqual(parseSessionToken(t, 'refresh'), { sessionId, digest: digestToken(t) });
  assert.equal(parseSessionToken(t, 'access'), null, 'a refresh token is not an access token');
  // The same token with a selector that is not Crockford base32 (I is not in its alphabet).
  assert.ok(isTokenOfKind(t.replace(/^svcr_./, 'svcr_J'), 'refresh'));
  for (const bad of [undefined, 42, '', 'svcr_', t.slice(0, -1), `${t}A`, t.replace(/^svcr_./, 'svcr_I')]) {
    assert.equal(parseSessionToken(bad, 'refresh'), null, String(bad));
  }
  assert.equal(parseSessionToken(mintToken('bootstrap', randomBytes), 'access'), null);
});

test('only the SHA-256 digest of a token is what gets stored', () => {
  const t = mintSessionToken('refresh', newId('session', clock, randomBytes), randomBytes);
  const d = digestToken(t);
  assert.match(d, /^[0-9a-f]{64}$/);
  assert.ok(!d.includes(t.slice(31, 46)));
});

test('ids are prefixed and time-sortable', () => {
  let now = 1_000;
  const c = { now: () => now };
  const a = newId('session', c, randomBytes);
  now += 1;
  const b = newId('session', c, randomBytes);
  assert.ok(isIdOfKind(a, 'session') && isIdOfKind(b, 'session'));
  assert.ok(a < b);
  assert.ok(!isIdOfKind(a, 'device'));
});

test('the challenge string is domain-separated and binds project, realm, id, nonce and expiry', () => {
  const s = challengeString({ projectId: 'prj_X', realm: 'management', id: 'chl_Y', nonce: 'ab'.repeat(16), expiresAt: 1_795_000_000_000 });
  assert.equal(s, `svc-auth-v1 challenge prj_X management chl_Y ${'ab'.repeat(16)} 1795000000`);
  assert.match(s, /^[\x20-\x7e]+$/);
});

test('a principal is immutable', () => {
  const p = makePrincipal({
    subject: 'sub_1',
    realm: 'management',
    session: 'ses_1',
    device: 'dev_1',
    claims: { amr: ['ed25519'], auth_time: 'x', exp: 'y' },
  });
  assert.throws(() => {
    (p as { subject: string }).subject = 'sub_2';
  }, TypeError);
  assert.throws(() => {
    (p.claims.amr as string[]).push('pwd');
  }, TypeError);
});

test('canonical JSON sorts keys and refuses non-integers', () => {
  assert.equal(canonicalJson({ b: 1, a: [true, null, 'x'], c: { z: 1, y: 2 } }), '{"a":[true,null,"x"],"b":1,"c":{"y":2,"z":1}}');
  assert.throws(() => canonicalJson({ a: 1.5 }), TypeError);
});

test('pairing codes are read forgivingly: case, dashes and look-alike letters do not matter', () => {
  assert.equal(normalizePairingCode('abcd-ef0l'), normalizePairingCode('ABCDEF01'));
  assert.equal(normalizePairingCode('o0 Ii'), '0011');
});

function chain(n: number): AuditEvent[] {
  const out: AuditEvent[] = [];
  let prev = GENESIS_HASH;
  for (let i = 0; i < n; i++) {
    const draft: AuditEventDraft = {
      id: newId('event', clock, randomBytes),
      at: clock.now() + i,
      type: 'session.created',
      realm: 'management',
      subject: 'sub_1',
      deviceId: 'dev_1',
      sessionId: `ses_${i}`,
      data: { n: i },
    };
    const e = sealAuditEvent(draft, i, prev);
    out.push(e);
    prev = e.hash;
  }
  return out;
}

test('an unbroken audit chain verifies', () => {
  const v = verifyAuditChain(chain(5));
  assert.deepEqual(v.ok && v.length, 5);
});

test('the audit chain detects an edited event', () => {
  const events = chain(5);
  events[2] = { ...(events[2] as AuditEvent), data: { n: 99 } };
  const v = verifyAuditChain(events);
  assert.equal(v.ok, false);
  assert.equal(!v.ok && v.seq, 3);
});

test('the audit chain detects a removed event', () => {
  const events = chain(5);
  events.splice(1, 1);
  assert.equal(verifyAuditChain(events).ok, false);
});

test('the audit chain detects reordered events', () => {
  const events = chain(5);
  const [a, b] = [events[1] as AuditEvent, events[2] as AuditEvent];
  events[1] = { ...b, seq: 2 };
  events[2] = { ...a, seq: 3 };
  assert.equal(verifyAuditChain(events).ok, false);
});

/** The encoding as first written (BigInt): the reference the plain-number one must match. */
function crockfordBase32Reference(bytes: Uint8Array, length: number): string {
  let value = 0n;
  for (const b of bytes) value = (value << 8n) | BigInt(b);
  let out = '';
  for (let i = 0; i < length; i++) {
    out = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'[Number(value & 31n)] + out;
    value >>= 5n;
  }
  return out;
}

test('IDs follow the ULID layout: the spec example time, then the random bits', () => {
  const at = { now: () => 1469918176385 };
  assert.equal(
    newIdOfSource('session', at, (n) => new Uint8Array(n)),
    `ses_01ARYZ6S41${'0'.repeat(16)}`,
  );
  assert.equal(
    newIdOfSource('event', at, (n) => new Uint8Array(n).fill(255)),
    `evt_01ARYZ6S41${'Z'.repeat(16)}`,
  );
  // 0x0123456789 (five bytes) then 0xabcdef0123 (five bytes): 80 bits, 16 symbols.
  const random = Uint8Array.of(0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23);
  assert.equal(
    newIdOfSource('device', { now: () => 0 }, () => random),
    `dev_${'0'.repeat(10)}${crockfordBase32Reference(random, 16)}`,
  );
  assert.equal(crockfordBase32(random, 16), '04HMASW9NF6YY093', "as Python's int.from_bytes and a base-32 digit loop give it");
});

test('the Crockford encoding matches the BigInt reference for any bytes and length', () => {
  for (let i = 0; i < 2000; i++) {
    const bytes = randomBytes(i % 33);
    const length = 1 + (i % 53);
    assert.equal(crockfordBase32(bytes, length), crockfordBase32Reference(bytes, length), `${bytes.toString('hex')} in ${length}`);
  }
  // A clock that reads no time is refused, as the BigInt conversion refused it.
  for (const bad of [Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(() => newIdOfSource('session', { now: () => bad }, (n) => new Uint8Array(n)), RangeError);
  }
  assert.equal(crockfordBase32(Uint8Array.of(1, 2), 0), '');
  // Times beyond 48 bits keep their low 48 bits, as before.
  const late = { now: () => 2 ** 48 + 5 };
  assert.equal(
    newIdOfSource('session', late, (n) => new Uint8Array(n)).slice(4, 14),
    crockfordBase32Reference(Uint8Array.of(0, 0, 0, 0, 0, 5), 10),
  );
});

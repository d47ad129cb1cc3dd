import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkProviderIdentity, type ExternalIdentity, MAX_EXTERNAL_SUBJECT_CHARS, type ProviderPolicy } from '@svc/core';

const policy: ProviderPolicy = {
  name: 'corp',
  realms: ['application'],
  allowedIssuers: ['https://login.example.com'],
  jit: { enabled: false, emailDomains: [] },
};
const good: ExternalIdentity = {
  issuer: 'https://login.example.com',
  subject: '248289761001',
  claims: { email: 'a@example.com', email_verified: true },
};
const withSubject = (subject: string): ExternalIdentity => ({ ...good, subject });
const withClaims = (claims: unknown): ExternalIdentity => ({ ...good, claims: claims as ExternalIdentity['claims'] });

test('an identity of an allowed issuer with a printable subject and small claims is accepted', () => {
  assert.equal(checkProviderIdentity(policy, 'application', good), null);
  assert.equal(checkProviderIdentity(policy, 'application', withSubject('x'.repeat(MAX_EXTERNAL_SUBJECT_CHARS))), null);
  assert.equal(checkProviderIdentity(policy, 'application', withSubject('Zoë 🔑 ключ')), null);
  assert.equal(checkProviderIdentity(policy, 'application', withClaims({})), null);
});

test('a ceremony in a realm the provider’s policy does not name is refused, whatever the identity', () => {
  assert.match(checkProviderIdentity(policy, 'management', good) ?? '', /the provider corp is not allowed in the management realm/);
  assert.equal(checkProviderIdentity({ ...policy, realms: ['application', 'management'] }, 'management', good), null);
});

test('an issuer not in allowedIssuers is refused: exact match, no prefix, case or trailing-slash leniency', () => {
  for (const issuer of [
    'https://evil.example',
    'https://login.example.com/',
    'HTTPS://LOGIN.EXAMPLE.COM',
    'https://login.example.com.evil',
    '',
  ]) {
    assert.match(
      checkProviderIdentity(policy, 'application', { ...good, issuer }) ?? '',
      /is not an allowed issuer of the provider corp/,
      issuer,
    );
  }
  assert.match(checkProviderIdentity({ ...policy, allowedIssuers: [] }, 'application', good) ?? '', /not an allowed issuer/);
});

test('a subject that is empty, too long, unprintable or padded is refused', () => {
  const refused: Array<[string, RegExp]> = [
    ['', /1 to 255 characters/],
    ['x'.repeat(MAX_EXTERNAL_SUBJECT_CHARS + 1), /1 to 255 characters \(it has 256\)/],
    ['alice\n', /unprintable/],
    ['ali\u0000ce', /unprintable/],
    ['alice\u202e', /unprintable/],
    ['ali\u200bce', /unprintable/],
    ['a\u2028b', /unprintable/],
    ['\ud800', /unprintable/],
    [' alice', /white space/],
    ['alice ', /white space/],
  ];
  for (const [subject, why] of refused)
    assert.match(checkProviderIdentity(policy, 'application', withSubject(subject)) ?? '', why, JSON.stringify(subject));
  assert.match(checkProviderIdentity(policy, 'application', { ...good, subject: 42 as unknown as string }) ?? '', /not a string/);
});

test('claims that are not a few small strings and booleans are refused', () => {
  const refused: Array<[unknown, RegExp]> = [
    [null, /not an object/],
    [['a'], /not an object/],
    [{ groups: ['admin'] }, /neither a string nor a boolean/],
    [{ n: 1 }, /neither a string nor a boolean/],
    [{ 'bad name': 'x' }, /claim name "bad name"/],
    [{ ['x'.repeat(65)]: 'x' }, /claim name/],
    [{ email: 'x'.repeat(1025) }, /over 1024 characters/],
    [{ email: 'a\u0007b' }, /control character/],
    [Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`c${i}`, true])), /33 claims/],
    [Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`c${i}`, 'x'.repeat(1000)])), /bytes as JSON \(at most 4096\)/],
  ];
  for (const [claims, why] of refused)
    assert.match(checkProviderIdentity(policy, 'application', withClaims(claims)) ?? '', why, JSON.stringify(claims)?.slice(0, 60));
});

test('a refusal quotes untrusted text short', () => {
  const why = checkProviderIdentity(policy, 'application', { ...good, issuer: `https://${'a'.repeat(5000)}` }) ?? '';
  assert.ok(why.length < 200, why);
});

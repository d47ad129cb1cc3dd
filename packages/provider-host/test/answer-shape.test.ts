import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ANSWER_LIMITS, checkBeginAnswer, checkCredentialIdAnswer, checkFinishAnswer, checkHealthAnswer } from '@svc/provider-host';

const identity = { issuer: 'https://idp.test', subject: 'alice', claims: { email: 'a@example.com', email_verified: true } };
const problemOf = (checked: { ok: boolean; problem?: string }): string => (checked.ok ? '' : (checked.problem ?? ''));

test('well-formed answers pass and come back as fresh copies', () => {
  const begin = checkBeginAnswer({ state: { n: 1 }, reply: { kind: 'json', body: { a: [1, 'x', null] } } });
  assert.ok(begin.ok);
  assert.deepEqual(checkBeginAnswer({ state: null, reply: { kind: 'redirect', location: 'https://idp.test/authorize?x=1' } }), {
    ok: true,
    value: { state: null, reply: { kind: 'redirect', location: 'https://idp.test/authorize?x=1' } },
  });
  const claims = { ...identity.claims };
  const finish = checkFinishAnswer({ identity: { ...identity, claims }, credential: { id: 'cred-1', data: { pk: 'ab' }, counter: 0 } });
  assert.ok(finish.ok);
  assert.notEqual(finish.value.identity.claims, claims);
  assert.ok(checkFinishAnswer({ identity, credential: null }).ok);
  assert.ok(checkFinishAnswer({ identity, credential: { id: 'c', data: null, counter: null } }).ok);
  assert.deepEqual(checkCredentialIdAnswer(null), { ok: true, value: null });
  assert.deepEqual(checkCredentialIdAnswer('abc'), { ok: true, value: 'abc' });
  assert.deepEqual(checkHealthAnswer({ status: 'degraded', detail: 'slow' }), { ok: true, value: { status: 'degraded', detail: 'slow' } });
});

test('a forged principal, session, token or realm anywhere in a finish answer is refused, not ignored', () => {
  for (const field of ['principal', 'session', 'access_token', 'refresh_token', 'realm', '__proto__']) {
    const extra = JSON.parse(`{"${field}": {"subject": "sub_admin"}}`);
    assert.match(problemOf(checkFinishAnswer({ identity, credential: null, ...extra })), new RegExp(`the answer has the field "${field}"`));
    assert.match(
      problemOf(checkFinishAnswer({ identity: { ...identity, ...extra }, credential: null })),
      new RegExp(`the identity has the field "${field}"`),
    );
    assert.match(
      problemOf(checkFinishAnswer({ identity, credential: { id: 'c', data: null, counter: null, ...extra } })),
      new RegExp(`the credential has the field "${field}"`),
    );
    assert.match(problemOf(checkBeginAnswer({ state: null, reply: { kind: 'json', body: {} }, ...extra })), /the answer has the field/);
  }
});

test('a groups claim (an array of strings) crosses the boundary as it was sent', () => {
  const checked = checkFinishAnswer({ identity: { ...identity, claims: { groups: ['app-ops', 'staff'] } }, credential: null });
  assert.ok(checked.ok);
  assert.deepEqual(checked.value.identity.claims, { groups: ['app-ops', 'staff'] });
});

test('malformed finish answers are refused with the reason', () => {
  const cases: Array<[unknown, RegExp]> = [
    [null, /not an object/],
    [[identity], /not an object/],
    [{ identity }, /lacks the field credential/],
    [{ identity: { issuer: 'https://idp.test', subject: 'a' }, credential: null }, /lacks the field claims/],
    [{ identity: { ...identity, issuer: '' }, credential: null }, /the issuer is empty/],
    [{ identity: { ...identity, issuer: 7 }, credential: null }, /the issuer is not a string/],
    [{ identity: { ...identity, subject: 'x'.repeat(ANSWER_LIMITS.subjectChars + 1) }, credential: null }, /the subject is over/],
    [{ identity: { ...identity, subject: 'a\nb' }, credential: null }, /control character/],
    [{ identity: { ...identity, claims: { roles: { admin: true } } }, credential: null }, /neither a string, a boolean nor an array/],
    [{ identity: { ...identity, claims: { groups: ['ops', 7] } }, credential: null }, /array that is not of strings/],
    [{ identity: { ...identity, claims: { groups: Array.from({ length: 201 }, (_, i) => `g${i}`) } }, credential: null }, /over 200 items/],
    [
      { identity: { ...identity, claims: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, true])) }, credential: null },
      /40 claims/,
    ],
    [{ identity, credential: 'c' }, /neither null nor an object/],
    [{ identity, credential: { id: '', data: null, counter: null } }, /credential id is empty/],
    [{ identity, credential: { id: 'c', data: null, counter: -1 } }, /counter/],
    [{ identity, credential: { id: 'c', data: null, counter: 1.5 } }, /counter/],
    [{ identity, credential: { id: 'c', data: null, counter: 2 ** 53 } }, /counter/],
    [{ identity, credential: { id: 'c', data: null, counter: '1' } }, /counter/],
    [
      { identity, credential: { id: 'c', data: 'x'.repeat(ANSWER_LIMITS.credentialDataBytes), counter: null } },
      /credential data is \d+ bytes/,
    ],
  ];
  for (const [answer, why] of cases) assert.match(problemOf(checkFinishAnswer(answer)), why, JSON.stringify(answer)?.slice(0, 80));
});

test('malformed begin answers are refused: a redirect must be an absolute http(s) URL without credentials', () => {
  const reply = (r: unknown) => checkBeginAnswer({ state: null, reply: r });
  assert.match(problemOf(reply({ kind: 'redirect', location: '/relative' })), /not an absolute URL/);
  assert.match(problemOf(reply({ kind: 'redirect', location: 'javascript:alert(1)' })), /scheme javascript: is not http or https/);
  assert.match(problemOf(reply({ kind: 'redirect', location: 'data:text/html,x' })), /scheme data:/);
  assert.match(problemOf(reply({ kind: 'redirect', location: 'https://user:pw@idp.test/' })), /carries credentials/);
  assert.match(problemOf(reply({ kind: 'redirect', location: `https://idp.test/${'a'.repeat(5000)}` })), /over 4096 characters/);
  assert.match(problemOf(reply({ kind: 'redirect', location: 'https://idp.test/', body: {} })), /the reply has the field "body"/);
  assert.match(problemOf(reply({ kind: 'html', body: '<script>' })), /neither json nor redirect/);
  assert.match(problemOf(reply({ kind: 'json', body: 'x'.repeat(ANSWER_LIMITS.replyBodyBytes) })), /reply body is \d+ bytes/);
  assert.match(
    problemOf(checkBeginAnswer({ state: 'x'.repeat(ANSWER_LIMITS.stateBytes), reply: { kind: 'json', body: null } })),
    /the state is/,
  );
  let deep: unknown = null;
  for (let i = 0; i < 100; i++) deep = [deep];
  assert.match(problemOf(checkBeginAnswer({ state: deep, reply: { kind: 'json', body: null } })), /nests deeper than 32/);
});

test('malformed credential ids and health answers are refused', () => {
  assert.match(problemOf(checkCredentialIdAnswer(5)), /not a string/);
  assert.match(problemOf(checkCredentialIdAnswer('')), /empty/);
  assert.match(problemOf(checkCredentialIdAnswer('x'.repeat(ANSWER_LIMITS.credentialIdChars + 1))), /over/);
  assert.match(problemOf(checkHealthAnswer({ status: 'fine' })), /not ok, degraded or down/);
  assert.match(problemOf(checkHealthAnswer({ status: 'ok', extra: 1 })), /the field "extra"/);
  assert.match(problemOf(checkHealthAnswer({ status: 'ok', detail: 'x'.repeat(501) })), /at most 500/);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { signInMethodWords } from '@svc/core';

test('signInMethodWords: how a session was signed in, in words, never a module alias', () => {
  assert.equal(signInMethodWords(['hwk', 'user']), 'a passkey');
  assert.equal(signInMethodWords(['swk', 'user']), 'a passkey');
  assert.equal(signInMethodWords(['fed']), 'your company sign-in');
  assert.equal(signInMethodWords(['fed'], 'Acme SSO'), 'your company sign-in (Acme SSO)');
  assert.equal(signInMethodWords(['ed25519']), 'a device key');
  assert.equal(signInMethodWords([]), 'another method');
});

import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { createCredentialStore, credentialsFromTokenPair, defaultCredentialsPath } from '../src/index.js';

const PAIR = {
  session_id: 'ses_01JD0000000000000000000000',
  realm: 'management',
  token_type: 'Bearer',
  access_token: `svca_${'0'.repeat(26)}${'a'.repeat(43)}`,
  expires_in: 900,
  refresh_token: `svcr_${'0'.repeat(26)}${'r'.repeat(43)}`,
  refresh_expires_in: 3600,
} as const;

describe('credential store', () => {
  const root = mkdtempSync(join(tmpdir(), 'svc-client-creds-'));
  after(() => rmSync(root, { recursive: true, force: true }));

  test('saves owner-only (file 0600, new directory 0700), atomically, and loads back what it saved', () => {
    const path = join(root, 'nested', 'svc', 'credentials.json');
    const store = createCredentialStore(path);
    assert.equal(store.load(), null);
    const creds = credentialsFromTokenPair('http://127.0.0.1:9090', PAIR, Date.parse('2026-01-01T00:00:00Z'), 'ab'.repeat(32));
    assert.equal(creds.access_expires_at, '2026-01-01T00:15:00.000Z');
    store.save(creds);
    store.save({ ...creds, access_token: `svca_${'0'.repeat(26)}${'b'.repeat(43)}` });
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.equal(statSync(join(root, 'nested', 'svc')).mode & 0o777, 0o700);
    assert.deepEqual(readdirSync(join(root, 'nested', 'svc')), ['credentials.json'], 'no temporary file is left behind');
    assert.equal(store.load()?.access_token, `svca_${'0'.repeat(26)}${'b'.repeat(43)}`);
    assert.equal(store.remove(), true);
    assert.equal(store.remove(), false);
    assert.equal(store.load(), null);
  });

  test('a damaged file is refused with a TypeError, not half-read', () => {
    const path = join(root, 'bad.json');
    writeFileSync(path, '{"url": "x"');
    assert.throws(() => createCredentialStore(path).load(), TypeError);
    writeFileSync(path, '{"url": "x"}');
    assert.throws(() => createCredentialStore(path).load(), TypeError);
  });

  test('the default path is $SVC_CREDENTIALS, else ~/.config/svc/credentials.json', () => {
    assert.equal(defaultCredentialsPath({ SVC_CREDENTIALS: '/x/c.json' }, '/home/me'), '/x/c.json');
    assert.equal(defaultCredentialsPath({}, '/home/me'), '/home/me/.config/svc/credentials.json');
  });
});

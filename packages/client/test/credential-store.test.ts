import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { contextNameFor, createCredentialStore, credentialsFromTokenPair, defaultCredentialsPath } from '../src/index.js';

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

  test('one context per service URL and realm: a second sign-in is added, not written over the first', () => {
    const path = join(root, 'contexts', 'credentials.json');
    const admin = credentialsFromTokenPair('http://127.0.0.1:9090', PAIR, Date.parse('2026-01-01T00:00:00Z'));
    const app = credentialsFromTokenPair('https://app.example', { ...PAIR, realm: 'application' }, Date.parse('2026-01-01T00:00:00Z'));
    assert.equal(contextNameFor(admin), 'management@127.0.0.1:9090');
    assert.equal(contextNameFor(app), 'application@app.example');
    const store = createCredentialStore(path);
    store.select(contextNameFor(admin)).save(admin);
    store.select(contextNameFor(app)).save(app);
    assert.deepEqual(store.load(), admin, 'the first context saved is current until another is chosen');
    store.use('application@app.example');
    assert.deepEqual(store.load(), app);
    assert.deepEqual(createCredentialStore(path, { context: 'management@127.0.0.1:9090' }).load(), admin);
    assert.deepEqual(
      store.contexts().map((c) => [c.name, c.current]),
      [
        ['application@app.example', true],
        ['management@127.0.0.1:9090', false],
      ],
    );
    assert.equal(store.remove(), true, 'removes the current context only');
    assert.deepEqual(store.load(), admin, 'the only one left is used');
    assert.throws(() => store.use('nope'), TypeError);
    assert.throws(() => createCredentialStore(path, { context: '../x' }), TypeError);
  });

  test('a file from before contexts (one sign-in) loads as the current context and is kept at the next save', () => {
    const path = join(root, 'legacy.json');
    const admin = credentialsFromTokenPair('http://127.0.0.1:9090', PAIR, Date.parse('2026-01-01T00:00:00Z'), 'ab'.repeat(32));
    writeFileSync(path, JSON.stringify(admin));
    const store = createCredentialStore(path);
    assert.deepEqual(store.load(), admin);
    const app = credentialsFromTokenPair('https://app.example', { ...PAIR, realm: 'application' }, Date.parse('2026-01-01T00:00:00Z'));
    store.select('application@app.example').save(app);
    assert.deepEqual(store.load(), admin);
    assert.deepEqual(store.select('application@app.example').load(), app);
    assert.equal(JSON.parse(readFileSync(path, 'utf8')).version, 2);
  });

  test('saves go through <file>.lock, removed after; a lock left by a crashed command is taken over', () => {
    const dir = join(root, 'locking');
    const path = join(dir, 'credentials.json');
    const store = createCredentialStore(path);
    const creds = credentialsFromTokenPair('http://127.0.0.1:9090', PAIR, Date.parse('2026-01-01T00:00:00Z'));
    store.save(creds);
    assert.deepEqual(readdirSync(dir), ['credentials.json']);
    writeFileSync(`${path}.lock`, '');
    const longAgo = new Date(Date.now() - 3_600_000);
    utimesSync(`${path}.lock`, longAgo, longAgo);
    store.select('other').save(creds);
    assert.deepEqual(readdirSync(dir), ['credentials.json']);
    assert.deepEqual(
      store.contexts().map((c) => c.name),
      ['management@127.0.0.1:9090', 'other'],
    );
  });

  test('the default path is $SVC_CREDENTIALS, else ~/.config/svc/credentials.json', () => {
    assert.equal(defaultCredentialsPath({ SVC_CREDENTIALS: '/x/c.json' }, '/home/me'), '/x/c.json');
    assert.equal(defaultCredentialsPath({}, '/home/me'), '/home/me/.config/svc/credentials.json');
  });
});

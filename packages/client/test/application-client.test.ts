import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  createApplicationClient,
  createCredentialStore,
  createManagementClient,
  createSignInClient,
  credentialsFromTokenPair,
  InsecureBearerUrlError,
  openManagementSession,
  openSession,
  SIGN_IN_PREFIXES,
} from '../src/index.js';

/** A fetch that records what was asked and answers `body`. */
function recorder(
  body: unknown = {},
  status = 200,
): { calls: { url: string; method: string; auth: string | null }[]; fetch: typeof fetch } {
  const calls: { url: string; method: string; auth: string | null }[] = [];
  return {
    calls,
    fetch: async (input, init) => {
      const headers = new Headers(init?.headers);
      calls.push({ url: String(input), method: init?.method ?? 'GET', auth: headers.get('authorization') });
      return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
    },
  };
}

const PAIR = {
  session_id: 'ses_x',
  realm: 'application',
  token_type: 'Bearer',
  access_token: 'svca_a',
  expires_in: 900,
  refresh_token: 'svcr_r',
  refresh_expires_in: 3600,
} as const;

describe('one client for both realms: the sign-in calls under each realm prefix', () => {
  test('the application client calls /.svc/auth/v1/*, the management client /v1/auth/*, with the same calls', async () => {
    assert.deepEqual(SIGN_IN_PREFIXES, { management: '/v1/auth', application: '/.svc/auth/v1' });
    for (const [realm, prefix] of Object.entries(SIGN_IN_PREFIXES) as ['management' | 'application', string][]) {
      const r = recorder(PAIR);
      const base = realm === 'application' ? 'https://app.example/' : 'http://127.0.0.1:9090';
      const client =
        realm === 'application'
          ? createApplicationClient({ baseUrl: base, fetch: r.fetch })
          : createManagementClient({ baseUrl: base, fetch: r.fetch });
      assert.equal(client.realm, realm);
      assert.equal(createSignInClient({ baseUrl: base, realm }).realm, realm);
      await client.createChallenge('ab'.repeat(32));
      await client.createSession({ challenge_id: 'chl_x', signature: 'cd'.repeat(64) });
      await client.refresh('svcr_r');
      await client.me('svca_a');
      await client.revoke('svca_a');
      const origin = base.replace(/\/+$/, '');
      assert.deepEqual(
        r.calls.map((c) => `${c.method} ${c.url}`),
        ['POST challenges', 'POST sessions', 'POST refresh', 'GET me', 'POST revoke'].map((s) => {
          const [m, p] = s.split(' ');
          return `${m} ${origin}${prefix}/${p}`;
        }),
      );
      assert.equal(r.calls[3]?.auth, 'Bearer svca_a');
    }
    // The application client has no operator calls.
    assert.equal((createApplicationClient({ baseUrl: 'https://app.example' }) as unknown as { devices?: unknown }).devices, undefined);
  });

  test('application tokens cross https:// anywhere and http:// only to loopback; nothing is sent otherwise', async () => {
    const r = recorder(PAIR);
    const remote = createApplicationClient({ baseUrl: 'http://app.example', fetch: r.fetch });
    await assert.rejects(remote.me('svca_a'), InsecureBearerUrlError);
    await assert.rejects(remote.refresh('svcr_r'), InsecureBearerUrlError);
    await assert.rejects(remote.createSession({ challenge_id: 'chl_x', signature: 'cd'.repeat(64) }), InsecureBearerUrlError);
    assert.equal(r.calls.length, 0);
    await createApplicationClient({ baseUrl: 'https://app.example', fetch: r.fetch }).me('svca_a');
    await createApplicationClient({ baseUrl: 'http://127.0.0.1:8080', fetch: r.fetch }).me('svca_a');
    assert.equal(r.calls.length, 2);
  });

  test('openSession follows the saved realm; openManagementSession refuses application credentials', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-app-client-'));
    try {
      const store = createCredentialStore(join(dir, 'credentials.json'));
      store.save(credentialsFromTokenPair('https://app.example', PAIR, Date.now(), null));
      const r = recorder({ subject: 'sub_x', realm: 'application' });
      const session = openSession({ store, fetch: r.fetch });
      assert.equal(session.client.realm, 'application');
      await session.withAccessToken((t) => session.client.me(t));
      assert.equal(r.calls[0]?.url, 'https://app.example/.svc/auth/v1/me');
      assert.throws(() => openManagementSession({ store }), /application realm/);
      store.save(credentialsFromTokenPair('http://127.0.0.1:9090', { ...PAIR, realm: 'management' }, Date.now(), null));
      assert.equal(openSession({ store }).client.realm, 'management');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

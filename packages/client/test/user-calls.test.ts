import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createApplicationClient, createManagementClient, InsecureBearerUrlError, SIGN_IN_PREFIXES } from '../src/index.js';

/** A fetch that records what was asked (method, URL, bearer, body) and answers `{}`. */
function recorder(): { calls: { method: string; url: string; auth: string | null; body: unknown }[]; fetch: typeof fetch } {
  const calls: { method: string; url: string; auth: string | null; body: unknown }[] = [];
  return {
    calls,
    fetch: async (input, init) => {
      const headers = new Headers(init?.headers);
      const body = typeof init?.body === 'string' ? JSON.parse(init.body) : undefined;
      calls.push({ method: init?.method ?? 'GET', url: String(input), auth: headers.get('authorization'), body });
      return new Response('{}', { status: 200, headers: { 'content-type': 'application/json' } });
    },
  };
}

describe('the SDK calls of users, groups and self-service', () => {
  test('each user and group call goes to its route, with the bearer token, the query and the body given', async () => {
    const r = recorder();
    const api = createManagementClient({ baseUrl: 'http://127.0.0.1:9090/', fetch: r.fetch });
    const sub = 'sub_01KAQ0000000000000000000AB';
    await api.users('svca_t');
    await api.users('svca_t', {
      realm: 'application',
      status: 'disabled',
      group: 'ops',
      email: 'a@b.example',
      filter: 'ada lo',
      after: sub,
      limit: 5,
    });
    await api.user('svca_t', sub);
    await api.addUser('svca_t', { realm: 'application', name: 'Ada', groups: ['ops'] });
    await api.changeUser('svca_t', sub, { email: null });
    await api.disableUser('svca_t', sub);
    await api.enableUser('svca_t', sub);
    await api.removeUser('svca_t', sub);
    await api.groups('svca_t');
    await api.groups('svca_t', { realm: 'management' });
    await api.removeUser('svca_t', '../devices/dev_x');
    const base = 'http://127.0.0.1:9090';
    assert.deepEqual(
      r.calls.map((c) => [c.method, c.url, c.body]),
      [
        ['GET', `${base}/v1/auth/users`, undefined],
        [
          'GET',
          `${base}/v1/auth/users?realm=application&status=disabled&group=ops&email=a%40b.example&filter=ada+lo&after=${sub}&limit=5`,
          undefined,
        ],
        ['GET', `${base}/v1/auth/users/${sub}`, undefined],
        ['POST', `${base}/v1/auth/users`, { realm: 'application', name: 'Ada', groups: ['ops'] }],
        ['PATCH', `${base}/v1/auth/users/${sub}`, { email: null }],
        ['POST', `${base}/v1/auth/users/${sub}/disable`, {}],
        ['POST', `${base}/v1/auth/users/${sub}/enable`, {}],
        ['DELETE', `${base}/v1/auth/users/${sub}`, undefined],
        ['GET', `${base}/v1/auth/groups`, undefined],
        ['GET', `${base}/v1/auth/groups?realm=management`, undefined],
        ['DELETE', `${base}/v1/auth/users/..%2Fdevices%2Fdev_x`, undefined],
      ],
    );
    assert.ok(r.calls.every((c) => c.auth === 'Bearer svca_t'));
  });

  test('self-service is the same call in both realms, under each realm prefix', async () => {
    for (const [realm, base] of [
      ['management', 'http://127.0.0.1:9090'],
      ['application', 'https://app.example'],
    ] as const) {
      const r = recorder();
      const client =
        realm === 'management'
          ? createManagementClient({ baseUrl: base, fetch: r.fetch })
          : createApplicationClient({ baseUrl: base, fetch: r.fetch });
      await client.ownSessions('svca_t');
      await client.ownDevices('svca_t');
      await client.revokeOtherSessions('svca_t');
      const prefix = SIGN_IN_PREFIXES[realm];
      assert.deepEqual(
        r.calls.map((c) => `${c.method} ${c.url}`),
        [`GET ${base}${prefix}/sessions?mine`, `GET ${base}${prefix}/devices?mine`, `POST ${base}${prefix}/sessions/revoke-others`],
      );
    }
  });

  test('no user call sends the management token over clear text to another machine', async () => {
    const r = recorder();
    const api = createManagementClient({ baseUrl: 'http://mgmt.example', fetch: r.fetch });
    await assert.rejects(api.users('svca_t'), InsecureBearerUrlError);
    await assert.rejects(api.disableUser('svca_t', 'sub_x'), InsecureBearerUrlError);
    assert.equal(r.calls.length, 0);
  });
});

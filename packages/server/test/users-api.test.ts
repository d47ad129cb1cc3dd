import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { newId } from '@svc/core';
import { admin, api, type Harness, type Pair, signIn, startHarness } from './support/harness.js';

/** An audit event as `GET /v1/auth/audit` lists it. */
interface AuditJson {
  type: string;
  realm: string | null;
  subject: string | null;
  data: Record<string, string | boolean | number | null>;
}

async function auditOf(h: Harness, token: string): Promise<{ events: AuditJson[]; text: string }> {
  const r = await api(h, 'GET', '/v1/auth/audit?limit=1000', { token });
  assert.equal(r.status, 200);
  return { events: r.body.events as AuditJson[], text: r.text };
}

describe('management API: users and groups', () => {
  let h: Harness;
  let me: Awaited<ReturnType<typeof admin>>;
  let token: string;
  before(async () => {
    h = await startHarness({ socket: false, store: 'memory' });
    me = await admin(h);
    token = me.pair.access_token;
  });
  after(() => h.close());

  test('an operator adds, reads, lists, changes and clears a user; each change is audited with old and new values, by whom, and no token', async () => {
    const added = await api(h, 'POST', '/v1/auth/users', {
      token,
      body: { realm: 'application', name: 'Ada Lovelace', email: 'ada@bücher.example', email_verified: true, groups: ['ops', 'dev'] },
    });
    assert.equal(added.status, 201);
    const user = added.body.user;
    assert.match(user.subject, /^sub_/);
    assert.equal(user.realm, 'application');
    assert.equal(user.email, 'ada@xn--bcher-kva.example', 'an internationalised domain is kept in its A-label form');
    assert.equal(user.email_verified, true);
    assert.deepEqual(user.groups, ['dev', 'ops']);
    assert.deepEqual(user.sources, { name: 'operator', email: 'operator', groups: 'operator' });
    assert.equal(user.status, 'active');

    const read = await api(h, 'GET', `/v1/auth/users/${user.subject}`, { token });
    assert.equal(read.status, 200);
    assert.deepEqual(read.body.user, user);

    const byEmail = await api(h, 'GET', '/v1/auth/users?email=ada@xn--bcher-kva.example', { token });
    assert.deepEqual(
      byEmail.body.users.map((u: { subject: string }) => u.subject),
      [user.subject],
    );
    const byText = await api(h, 'GET', '/v1/auth/users?filter=LOVELACE&realm=application', { token });
    assert.deepEqual(
      byText.body.users.map((u: { subject: string }) => u.subject),
      [user.subject],
    );
    const byGroup = await api(h, 'GET', '/v1/auth/users?group=ops&status=active', { token });
    assert.deepEqual(
      byGroup.body.users.map((u: { subject: string }) => u.subject),
      [user.subject],
    );
    const management = await api(h, 'GET', '/v1/auth/users?realm=management', { token });
    assert.ok(management.body.users.every((u: { realm: string }) => u.realm === 'management'));
    const self = (await api(h, 'GET', '/v1/auth/me', { token })).body.subject;
    assert.ok(
      management.body.users.some((u: { subject: string }) => u.subject === self),
      'the enrolled administrator has a user',
    );

    const changed = await api(h, 'PATCH', `/v1/auth/users/${user.subject}`, {
      token,
      body: { name: 'Ada King', groups: ['ops'] },
    });
    assert.equal(changed.status, 200);
    assert.equal(changed.body.user.name, 'Ada King');
    assert.deepEqual(changed.body.user.groups, ['ops']);
    assert.equal(changed.body.user.email, 'ada@xn--bcher-kva.example', 'an attribute not given is left as is');

    const cleared = await api(h, 'PATCH', `/v1/auth/users/${user.subject}`, { token, body: { email: null, groups: null } });
    assert.equal(cleared.status, 200);
    assert.equal(cleared.body.user.email, null);
    assert.equal(cleared.body.user.email_verified, false);
    assert.deepEqual(cleared.body.user.groups, []);
    assert.deepEqual(cleared.body.user.sources, { name: 'operator', email: null, groups: null });

    const principal = (await api(h, 'GET', '/v1/auth/me', { token })).body;
    const { events, text } = await auditOf(h, token);
    const mine = events.filter((e) => e.subject === user.subject);
    assert.deepEqual(
      mine.map((e) => e.type),
      ['user.created', 'user.updated', 'user.updated'],
    );
    const [created, renamed, emptied] = mine as [AuditJson, AuditJson, AuditJson];
    for (const e of mine) {
      assert.equal(e.data.via, 'management_api');
      assert.equal(e.data.by_subject, principal.subject);
      assert.equal(e.data.by_session, principal.session);
    }
    assert.equal(created.data.email, 'ada@xn--bcher-kva.example');
    assert.equal(renamed.data.name_old, 'Ada Lovelace');
    assert.equal(renamed.data.name_new, 'Ada King');
    assert.equal(renamed.data.groups_old, 'dev,ops');
    assert.equal(renamed.data.groups_new, 'ops');
    assert.equal(emptied.data.email_old, 'ada@xn--bcher-kva.example');
    assert.equal(emptied.data.email_new, null);
    assert.doesNotMatch(text, /svc[abr]_/, 'no token of any kind is in the audit trail');
  });

  test('the groups are listed per realm with their member counts', async () => {
    for (const groups of [['ops', 'sre'], ['sre']]) {
      const r = await api(h, 'POST', '/v1/auth/users', { token, body: { realm: 'application', groups } });
      assert.equal(r.status, 201);
    }
    const r = await api(h, 'GET', '/v1/auth/groups?realm=application', { token });
    assert.equal(r.status, 200);
    const counts = Object.fromEntries(
      (r.body.groups as { name: string; members: number; realm: string }[]).map((g) => [g.name, g.members]),
    );
    assert.equal(counts.sre, 2);
    assert.ok((counts.ops ?? 0) >= 1);
    assert.ok((r.body.groups as { realm: string }[]).every((g) => g.realm === 'application'));
    const all = await api(h, 'GET', '/v1/auth/groups', { token });
    assert.equal(all.status, 200);
    assert.equal((await api(h, 'GET', '/v1/auth/groups?realm=nowhere', { token })).body.code, 'invalid_request');
  });

  test('the user list pages with after and limit: next is the after of the next page, null on the last', async () => {
    const seen: string[] = [];
    let after: string | null = null;
    for (let page = 0; page < 100; page++) {
      const r = await api(h, 'GET', `/v1/auth/users?limit=2${after === null ? '' : `&after=${after}`}`, { token });
      assert.equal(r.status, 200);
      assert.ok(r.body.users.length <= 2);
      seen.push(...r.body.users.map((u: { subject: string }) => u.subject));
      after = r.body.next;
      if (after === null) break;
    }
    assert.equal(after, null, 'the pages end');
    const whole = await api(h, 'GET', '/v1/auth/users', { token });
    assert.deepEqual(
      seen,
      whole.body.users.map((u: { subject: string }) => u.subject),
    );
    assert.equal(whole.body.next, null);
  });

  test('bad input is 400 invalid_request, never a 500, and changes nothing', async () => {
    const target = (await api(h, 'POST', '/v1/auth/users', { token, body: { realm: 'application', name: 'Target' } })).body.user;
    const cases: [string, string, unknown?][] = [
      ['POST', '/v1/auth/users', { name: 'no realm' }],
      ['POST', '/v1/auth/users', { realm: 'elsewhere' }],
      ['POST', '/v1/auth/users', { realm: 'application', email: 'not-an-email' }],
      ['POST', '/v1/auth/users', { realm: 'application', groups: ['Bad Group'] }],
      ['POST', '/v1/auth/users', { realm: 'application', groups: 'ops' }],
      ['POST', '/v1/auth/users', { realm: 'application', email_verified: true }],
      ['POST', '/v1/auth/users', { realm: 'application', status: 'disabled' }],
      ['POST', '/v1/auth/users', { realm: 'application', name: 'x'.repeat(2000) }],
      ['PATCH', `/v1/auth/users/${target.subject}`, { subject: 'sub_other' }],
      ['PATCH', `/v1/auth/users/${target.subject}`, { email: 'a@b@c' }],
      ['PATCH', `/v1/auth/users/${target.subject}`, { email_verified: 'yes' }],
      ['PATCH', `/v1/auth/users/${target.subject}`, { name: '\u0007bell' }],
      ['GET', '/v1/auth/users/dev_notasubject'],
      ['PATCH', '/v1/auth/users/nope', { name: 'x' }],
      ['POST', '/v1/auth/users/nope/disable', {}],
      ['DELETE', '/v1/auth/users/nope'],
      ['GET', '/v1/auth/users?limit=0'],
      ['GET', '/v1/auth/users?limit=5000'],
      ['GET', '/v1/auth/users?limit=ten'],
      ['GET', '/v1/auth/users?after=dev_1'],
      ['GET', '/v1/auth/users?status=gone'],
      ['GET', '/v1/auth/users?group=Not%20A%20Group'],
      ['GET', '/v1/auth/users?email=nope'],
      ['GET', '/v1/auth/users?sort=name'],
      ['POST', `/v1/auth/users/${target.subject}/disable`, { now: true }],
    ];
    for (const [method, path, body] of cases) {
      const r = await api(h, method, path, { token, ...(body === undefined ? {} : { body }) });
      assert.equal(r.status, 400, `${method} ${path} ${JSON.stringify(body)}: ${r.text}`);
      assert.equal(r.body.code, 'invalid_request', `${method} ${path}`);
      assert.match(r.headers.get('content-type') ?? '', /^application\/problem\+json/);
    }
    const unchanged = await api(h, 'GET', `/v1/auth/users/${target.subject}`, { token });
    assert.deepEqual(unchanged.body.user, target);
  });

  test('an unknown subject is 404 not_found on every route of one user', async () => {
    const ghost = newId('subject', h.clock, (n) => randomBytes(n));
    for (const [method, path, body] of [
      ['GET', `/v1/auth/users/${ghost}`],
      ['PATCH', `/v1/auth/users/${ghost}`, { name: 'x' }],
      ['POST', `/v1/auth/users/${ghost}/disable`],
      ['POST', `/v1/auth/users/${ghost}/enable`],
      ['DELETE', `/v1/auth/users/${ghost}`],
    ] as [string, string, unknown?][]) {
      const r = await api(h, method, path, { token, ...(body === undefined ? {} : { body }) });
      assert.equal(r.status, 404, `${method} ${path}: ${r.text}`);
      assert.equal(r.body.code, 'not_found');
    }
  });

  test('without a management bearer token no user route answers: none, or an application token, is 401', async () => {
    for (const [method, path] of [
      ['GET', '/v1/auth/users'],
      ['POST', '/v1/auth/users'],
      ['GET', '/v1/auth/groups'],
      ['DELETE', `/v1/auth/users/${me.pair.session_id}`],
    ] as const) {
      const r = await api(h, method, path, method === 'POST' ? { body: { realm: 'application' } } : {});
      assert.equal(r.status, 401, `${method} ${path}`);
      assert.equal(r.body.code, 'invalid_token');
    }
  });
});

describe('management API: disabling, enabling and removing users', () => {
  let h: Harness;
  before(async () => {
    h = await startHarness({ socket: false, store: 'memory' });
  });
  after(() => h.close());

  /** The subject of a management principal. */
  const subjectOf = async (pair: Pair): Promise<string> => (await api(h, 'GET', '/v1/auth/me', { token: pair.access_token })).body.subject;

  test('the last active management user can be neither disabled nor removed (409 last_management_user), and nothing changes', async () => {
    const only = await admin(h);
    const subject = await subjectOf(only.pair);
    for (const [method, path] of [
      ['POST', `/v1/auth/users/${subject}/disable`],
      ['DELETE', `/v1/auth/users/${subject}`],
    ] as const) {
      const r = await api(h, method, path, { token: only.pair.access_token });
      assert.equal(r.status, 409, `${method} ${path}: ${r.text}`);
      assert.equal(r.body.code, 'last_management_user');
    }
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: only.pair.access_token })).status, 200, 'still signed in');
    const user = (await api(h, 'GET', `/v1/auth/users/${subject}`, { token: only.pair.access_token })).body.user;
    assert.equal(user.status, 'active');
  });

  test("a disabled administrator's stolen access token is refused at once, its device cannot sign in (403 user_disabled), and enabling restores sign-in but not the sessions", async () => {
    const operator = await admin(h);
    const victim = await admin(h);
    const second = await signIn(h, victim.key);
    const subject = await subjectOf(victim.pair);

    const disabled = await api(h, 'POST', `/v1/auth/users/${subject}/disable`, { token: operator.pair.access_token });
    assert.equal(disabled.status, 200, disabled.text);
    assert.equal(disabled.body.user.status, 'disabled');
    assert.notEqual(disabled.body.user.disabled_at, null);
    assert.equal(disabled.body.revoked_sessions, 2);
    for (const pair of [victim.pair, second]) {
      const r = await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
      assert.equal(r.status, 401, 'the very next request with the old access token');
      assert.equal(r.body.code, 'invalid_token');
      const refreshed = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: pair.refresh_token } });
      assert.equal(refreshed.status, 401);
      assert.equal(refreshed.body.code, 'invalid_refresh_token');
    }
    const c = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: victim.key.publicKeyHex } });
    const refused = await api(h, 'POST', '/v1/auth/sessions', {
      body: { challenge_id: c.body.challenge_id, signature: victim.key.signHex(c.body.challenge) },
    });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.code, 'user_disabled');

    const again = await api(h, 'POST', `/v1/auth/users/${subject}/disable`, { token: operator.pair.access_token });
    assert.equal(again.status, 200, 'disabling a disabled user is idempotent');
    assert.equal(again.body.revoked_sessions, 0);

    const enabled = await api(h, 'POST', `/v1/auth/users/${subject}/enable`, { token: operator.pair.access_token });
    assert.equal(enabled.status, 200);
    assert.equal(enabled.body.user.status, 'active');
    assert.equal(enabled.body.user.disabled_at, null);
    assert.equal(enabled.body.revoked_sessions, 0);
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: second.access_token })).status, 401, 'a revoked session stays revoked');
    const back = await signIn(h, victim.key);
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: back.access_token })).status, 200, 'sign-in works again');

    const { events } = await auditOf(h, operator.pair.access_token);
    const types = events.filter((e) => e.subject === subject).map((e) => e.type);
    assert.ok(types.includes('user.disabled') && types.includes('user.enabled'));
    const disabledEvent = events.find((e) => e.type === 'user.disabled' && e.subject === subject);
    assert.equal(disabledEvent?.data.by_subject, await subjectOf(operator.pair));
    assert.equal(disabledEvent?.data.via, 'management_api');
  });

  test('removing a user removes its devices and revokes its sessions; its device key no longer signs in', async () => {
    const operator = await admin(h);
    const gone = await admin(h);
    const subject = await subjectOf(gone.pair);
    const r = await api(h, 'DELETE', `/v1/auth/users/${subject}`, { token: operator.pair.access_token });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body, { subject, removed: true, revoked_sessions: 1, removed_devices: 1, removed_links: 0 });
    assert.equal((await api(h, 'GET', '/v1/auth/me', { token: gone.pair.access_token })).status, 401);
    assert.equal((await api(h, 'GET', `/v1/auth/users/${subject}`, { token: operator.pair.access_token })).status, 404);
    const c = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: gone.key.publicKeyHex } });
    const s = await api(h, 'POST', '/v1/auth/sessions', {
      body: { challenge_id: c.body.challenge_id, signature: gone.key.signHex(c.body.challenge) },
    });
    assert.equal(s.status, 401);
    assert.equal(s.body.code, 'invalid_signature');
    const { events } = await auditOf(h, operator.pair.access_token);
    const removed = events.find((e) => e.type === 'user.removed' && e.subject === subject);
    assert.equal(removed?.data.via, 'management_api');
  });
});

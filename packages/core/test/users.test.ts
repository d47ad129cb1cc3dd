import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import {
  AuthError,
  checkDisplayName,
  checkEmail,
  checkGroups,
  decideUserUpdate,
  groupNameProblem,
  identityAttributesFromClaims,
  identityAttributesOf,
  identityHeaders,
  normalizeEmailDomain,
  refreshedUser,
  type UserActor,
} from '@svc/core';
import { defaultUser, type UserRecord } from '@svc/core/store';

const deps = { clock: { now: () => 1_700_000_000_000 }, random: (n: number) => new Uint8Array(n).fill(7) };
const actor: UserActor = { via: 'management_api', subject: 'sub_01JD0000000000000000000000', session: 'ses_01JD0000000000000000000000' };
const NOW = 1_700_000_000_000;

function user(extra: Partial<UserRecord> = {}): UserRecord {
  return { ...defaultUser({ subject: 'sub_01JD0000000000000000000001', realm: 'application', now: NOW - 1000 }), ...extra };
}

describe('user attributes: what is accepted at input', () => {
  test('an email with an internationalised domain is kept in its A-label form, the local part as given', () => {
    assert.deepEqual(checkEmail('Ada@Bücher.Example'), { email: 'Ada@xn--bcher-kva.example' });
    assert.deepEqual(checkEmail(' ada@example.com '), { email: 'ada@example.com' });
  });

  test('addresses that cannot travel in an ASCII header, or are not addresses, are refused', () => {
    for (const bad of [
      'adä@example.com',
      'ada',
      '@example.com',
      'ada@',
      'ada@localhost',
      'a b@example.com',
      'ada@-x.com',
      'ada@exa mple.com',
      7,
    ]) {
      assert.ok('problem' in checkEmail(bad), `accepted ${String(bad)}`);
    }
  });

  test('a display name in any script is kept (NFC, trimmed); control and bidi-override characters are refused', () => {
    assert.deepEqual(checkDisplayName('  Zoë Ångström 山田 '), { name: 'Zoë Ångström 山田' });
    assert.deepEqual(checkDisplayName('Zoe\u0308'), { name: 'Zoë' });
    for (const bad of ['', '   ', 'a\nb', 'evil\u202Egnp.exe', 'x'.repeat(129), 'tab\there', 'lone \uD800 surrogate', null]) {
      assert.ok('problem' in checkDisplayName(bad), `accepted ${JSON.stringify(bad)}`);
    }
  });

  test('group names outside [a-z0-9][a-z0-9._-]{0,63} are refused, never rewritten', () => {
    assert.equal(groupNameProblem('ops'), null);
    assert.equal(groupNameProblem('team.platform_eng-2'), null);
    for (const bad of ['Ops', 'Tour Guides', '-ops', '.ops', 'ops,admins', 'ops\r\nx-svc-subject: sub_x', 'é', '', 'a'.repeat(65)]) {
      assert.notEqual(groupNameProblem(bad), null, `accepted ${JSON.stringify(bad)}`);
    }
    assert.deepEqual(checkGroups(['ops', 'dev', 'ops']), { groups: ['dev', 'ops'] });
    assert.ok('problem' in checkGroups(['ops', 'Ops']));
    assert.ok('problem' in checkGroups('ops'));
  });

  test('email domains in policy are compared in the form emails are kept', () => {
    assert.equal(normalizeEmailDomain('Bücher.Example'), 'xn--bcher-kva.example');
    assert.equal(normalizeEmailDomain('not a domain'), null);
  });
});

describe('user attributes: what reaches the application', () => {
  test('headers: ASCII email, percent-encoded UTF-8 name, comma-separated groups', () => {
    const h = identityHeaders({ email: 'ada@xn--bcher-kva.example', email_verified: true, name: 'Zoë 山田, "x"', groups: ['dev', 'ops'] });
    assert.deepEqual(h, {
      'svc-email': 'ada@xn--bcher-kva.example',
      'svc-name': 'Zo%C3%AB%20%E5%B1%B1%E7%94%B0%2C%20%22x%22',
      'svc-groups': 'dev,ops',
    });
    assert.equal(decodeURIComponent(h['svc-name'] as string), 'Zoë 山田, "x"');
    for (const value of Object.values(h)) assert.match(value, /^[\x21-\x7e]+$/);
  });

  test('unknown attributes are absent, never empty strings', () => {
    assert.deepEqual(identityHeaders({}), {});
    assert.deepEqual(identityHeaders({ groups: [] }), {});
  });

  test('header forgery by an unverified email: an address the IdP let a user type is never sent as Svc-Email', () => {
    assert.deepEqual(identityHeaders({ email: 'ceo@example.com', email_verified: false, name: 'Mallory' }), { 'svc-name': 'Mallory' });
    assert.deepEqual(identityHeaders({ email: 'ceo@example.com', name: 'Mallory' }), { 'svc-name': 'Mallory' });
    assert.deepEqual(identityAttributesOf(user()), {});
    assert.deepEqual(identityAttributesOf(user({ email: 'a@example.com', emailVerified: false })), {
      email: 'a@example.com',
      email_verified: false,
    });
  });
});

describe('identity provider claims', () => {
  test('claims are checked like operator input: a bad one is dropped and named, never passed on', () => {
    const r = identityAttributesFromClaims(
      { email: 'ada@Example.COM', email_verified: true, name: 'Ada\u202E', roles: ['app-ops', 'app-Bad Name', 'other'] },
      { groupsClaim: 'roles', groupPrefix: 'app-' },
    );
    assert.deepEqual(r.attributes, { email: 'ada@example.com', emailVerified: true, groups: ['ops'] });
    assert.deepEqual(r.dropped, ['name', 'group "app-Bad Name"']);
  });

  test('email_verified is true only when the IdP says exactly true', () => {
    assert.equal(identityAttributesFromClaims({ email: 'a@example.com', email_verified: 'true' }).attributes.emailVerified, false);
  });

  test('a sign-in refreshes only what is unset or owned by that provider', () => {
    const current = user({ name: 'Set By Operator', nameSource: 'operator', groups: ['old'], groupsSource: 'provider:corp' });
    const r = refreshedUser(
      deps,
      current,
      { name: 'IdP Name', email: 'ada@example.com', emailVerified: true, groups: ['ops'] },
      'corp',
      NOW,
    );
    assert.ok(r !== null);
    assert.equal(r.user.name, 'Set By Operator');
    assert.equal(r.user.email, 'ada@example.com');
    assert.equal(r.user.emailSource, 'provider:corp');
    assert.deepEqual(r.user.groups, ['ops']);
    const event = r.events[0];
    assert.equal(event?.type, 'user.updated');
    assert.equal(event?.data.groups_old, 'old');
    assert.equal(event?.data.groups_new, 'ops');
    assert.equal(
      refreshedUser(deps, r.user, { name: 'IdP Name', email: 'ada@example.com', emailVerified: true, groups: ['ops'] }, 'corp', NOW),
      null,
    );
  });

  test('another provider cannot overwrite attributes a provider owns', () => {
    const current = user({ email: 'ada@example.com', emailVerified: true, emailSource: 'provider:corp' });
    assert.equal(refreshedUser(deps, current, { email: 'mallory@example.com', emailVerified: true }, 'other', NOW), null);
  });
});

describe('changing a user', () => {
  const input = (attributes: Record<string, unknown>) => ({ attributes, source: 'operator' as const, actor, now: NOW });

  test('disabling revokes the sessions and records who did it; enabling does not bring sessions back', () => {
    const change = decideUserUpdate(deps, user(), { otherActiveManagementUsers: 0 }, input({ status: 'disabled' }));
    assert.equal(change.kind, 'update');
    if (change.kind !== 'update') return;
    assert.equal(change.revokeSessions, 'user_disabled');
    assert.equal(change.user.disabledAt, NOW);
    assert.deepEqual(
      change.events.map((e) => [e.type, e.data.by_subject]),
      [['user.disabled', actor.subject]],
    );
    const enable = decideUserUpdate(deps, change.user, { otherActiveManagementUsers: 0 }, input({ status: 'active' }));
    assert.equal(enable.kind === 'update' && enable.revokeSessions, null);
  });

  test('the last active management user cannot be disabled', () => {
    const admin = user({ realm: 'management' });
    assert.throws(
      () => decideUserUpdate(deps, admin, { otherActiveManagementUsers: 0 }, input({ status: 'disabled' })),
      (e: unknown) => e instanceof AuthError && e.code === 'last_management_user',
    );
    assert.equal(decideUserUpdate(deps, admin, { otherActiveManagementUsers: 1 }, input({ status: 'disabled' })).kind, 'update');
  });

  test('every attribute change is audited with its old and new value; no change writes nothing', () => {
    const change = decideUserUpdate(
      deps,
      user({ name: 'Old' }),
      { otherActiveManagementUsers: 0 },
      input({ name: 'New', groups: ['ops'] }),
    );
    assert.ok(change.kind === 'update');
    if (change.kind !== 'update') return;
    const data = change.events[0]?.data;
    assert.equal(data?.name_old, 'Old');
    assert.equal(data?.name_new, 'New');
    assert.equal(data?.groups_new, 'ops');
    assert.equal(decideUserUpdate(deps, change.user, { otherActiveManagementUsers: 0 }, input({ name: 'New' })).kind, 'none');
  });

  test('bad input is refused with invalid_request before anything is written', () => {
    for (const attributes of [
      { groups: ['Bad Name'] },
      { email: 'nope' },
      { status: 'gone' },
      { email_verified: 'yes' },
      { role: 'admin' },
    ]) {
      assert.throws(
        () => decideUserUpdate(deps, user(), { otherActiveManagementUsers: 0 }, input(attributes)),
        (e: unknown) => e instanceof AuthError && e.code === 'invalid_request',
        JSON.stringify(attributes),
      );
    }
  });

  test('a changed email is no longer verified unless said so', () => {
    const verified = user({ email: 'a@example.com', emailVerified: true, emailSource: 'operator' });
    const change = decideUserUpdate(deps, verified, { otherActiveManagementUsers: 0 }, input({ email: 'b@example.com' }));
    assert.ok(change.kind === 'update' && change.user.emailVerified === false);
  });
});

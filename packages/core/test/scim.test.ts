import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  AuthError,
  applyScimGroupPatch,
  applyScimUserPatch,
  parseScimFilter,
  SCIM_SCHEMA,
  ScimError,
  type ScimUserState,
  scimErrorJson,
  scimErrorOf,
  scimListFilter,
  scimPage,
  scimPatchOperations,
  scimUserAttributes,
  scimUserChanges,
  scimUserInput,
} from '../src/index.js';

// The SCIM mapping rules (core's scim.ts), without a server: what a directory's bodies mean.

const ops = (...operations: unknown[]) => scimPatchOperations({ schemas: [SCIM_SCHEMA.patchOp], Operations: operations });
const ada: ScimUserState = { userName: 'ada', externalId: null, name: 'Ada Lovelace', email: 'ada@example.com', active: true };

/** The scimType of what `fn` throws. */
function scimTypeOf(fn: () => unknown): string | null {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ScimError, String(err));
    return err.scimType;
  }
  assert.fail('expected a ScimError');
}

describe('SCIM User input', () => {
  test('the display name is displayName, else name.formatted, else givenName familyName', () => {
    assert.equal(scimUserInput({ userName: 'a', displayName: 'Babs', name: { formatted: 'Barbara' } }).name, 'Babs');
    assert.equal(scimUserInput({ userName: 'a', name: { formatted: 'Barbara J', givenName: 'B' } }).name, 'Barbara J');
    assert.equal(scimUserInput({ userName: 'a', name: { givenName: 'Barbara', familyName: 'Jensen' } }).name, 'Barbara Jensen');
    assert.equal(scimUserInput({ userName: 'a' }).name, null);
  });

  test('the email is the primary one, else the first; it is taken as verified', () => {
    const input = scimUserInput({ userName: 'a', emails: [{ value: 'home@x.example' }, { value: 'work@x.example', primary: true }] });
    assert.equal(input.email, 'work@x.example');
    assert.deepEqual(scimUserAttributes(input), {
      user_name: 'a',
      external_id: null,
      name: null,
      email: 'work@x.example',
      email_verified: true,
    });
  });

  test('attribute names are case-insensitive (RFC 7643 §2.1); active may be a string', () => {
    const input = scimUserInput({ USERNAME: 'a', Active: 'False' });
    assert.deepEqual([input.userName, input.active], ['a', false]);
    assert.equal(scimUserAttributes(input).status, 'disabled');
  });
});

describe('SCIM PATCH of a User', () => {
  test('replace without a path (Entra, Okta) and with one', () => {
    assert.equal(applyScimUserPatch(ada, ops({ op: 'Replace', value: { active: false } })).active, false);
    assert.equal(applyScimUserPatch(ada, ops({ op: 'replace', path: 'active', value: 'false' })).active, false);
    assert.equal(
      applyScimUserPatch(ada, ops({ op: 'replace', path: 'urn:ietf:params:scim:schemas:core:2.0:User:active', value: false })).active,
      false,
    );
  });

  test('only the attributes changed are set', () => {
    const after = applyScimUserPatch(ada, ops({ op: 'replace', value: { active: false, displayName: 'Ada Lovelace' } }));
    assert.deepEqual(scimUserChanges(ada, after), { status: 'disabled' });
  });

  test('one name part replaces that part of the kept name; formatted wins', () => {
    assert.equal(applyScimUserPatch(ada, ops({ op: 'replace', path: 'name.familyName', value: 'King' })).name, 'Ada King');
    assert.equal(
      applyScimUserPatch(ada, ops({ op: 'replace', path: 'name', value: { formatted: 'Countess', givenName: 'A' } })).name,
      'Countess',
    );
    assert.equal(applyScimUserPatch(ada, ops({ op: 'remove', path: 'name' })).name, null);
  });

  test('emails: a non-primary add keeps the email; a filtered value sets it; remove by value clears only that one', () => {
    assert.equal(
      applyScimUserPatch(ada, ops({ op: 'add', path: 'emails', value: [{ value: 'h@x.example', type: 'home' }] })).email,
      'ada@example.com',
    );
    assert.equal(
      applyScimUserPatch(ada, ops({ op: 'add', path: 'emails', value: [{ value: 'p@x.example', primary: true }] })).email,
      'p@x.example',
    );
    assert.equal(
      applyScimUserPatch(ada, ops({ op: 'replace', path: 'emails[type eq "work"].value', value: 'w@x.example' })).email,
      'w@x.example',
    );
    assert.equal(applyScimUserPatch(ada, ops({ op: 'remove', path: 'emails[value eq "other@x.example"]' })).email, 'ada@example.com');
    assert.equal(applyScimUserPatch(ada, ops({ op: 'remove', path: 'emails[value eq "ADA@example.com"]' })).email, null);
  });

  test('refusals: groups read-only, unknown attribute, userName removal, a bad path', () => {
    assert.equal(
      scimTypeOf(() => applyScimUserPatch(ada, ops({ op: 'add', path: 'groups', value: [] }))),
      'mutability',
    );
    assert.equal(
      scimTypeOf(() => applyScimUserPatch(ada, ops({ op: 'add', path: 'shoeSize', value: 42 }))),
      'invalidPath',
    );
    assert.equal(
      scimTypeOf(() => applyScimUserPatch(ada, ops({ op: 'remove', path: 'userName' }))),
      'mutability',
    );
    assert.equal(
      scimTypeOf(() => applyScimUserPatch(ada, ops({ op: 'replace', path: 'a b', value: 1 }))),
      'invalidPath',
    );
  });

  test('attributes svc does not keep are accepted and change nothing', () => {
    const after = applyScimUserPatch(
      ada,
      ops({ op: 'replace', path: 'phoneNumbers[type eq "work"].value', value: '1' }, { op: 'add', value: { nickName: 'x' } }),
    );
    assert.deepEqual(after, ada);
  });
});

describe('SCIM PATCH of a Group', () => {
  const group = { displayName: 'ops', externalId: null, members: ['sub_a', 'sub_b'] };
  test('members: add, remove by filter, remove by value list, remove all, replace', () => {
    assert.deepEqual(applyScimGroupPatch(group, ops({ op: 'add', path: 'members', value: [{ value: 'sub_c' }] })).members, [
      'sub_a',
      'sub_b',
      'sub_c',
    ]);
    assert.deepEqual(applyScimGroupPatch(group, ops({ op: 'remove', path: 'members[value eq "sub_a"]' })).members, ['sub_b']);
    assert.deepEqual(applyScimGroupPatch(group, ops({ op: 'Remove', path: 'members', value: [{ value: 'sub_b' }] })).members, ['sub_a']);
    assert.deepEqual(applyScimGroupPatch(group, ops({ op: 'remove', path: 'members' })).members, []);
    assert.deepEqual(applyScimGroupPatch(group, ops({ op: 'replace', path: 'members', value: [{ value: 'sub_z' }] })).members, ['sub_z']);
  });

  test('a rename without a path (Okta sends the id too)', () => {
    const after = applyScimGroupPatch(group, ops({ op: 'replace', value: { id: 'grp_x', displayName: 'sre' } }));
    assert.equal(after.displayName, 'sre');
  });
});

describe('SCIM queries and errors', () => {
  test('filters: eq on a string, any case, with the URN; anything else is invalidFilter', () => {
    assert.deepEqual(parseScimFilter('userName eq "bjensen"'), { attr: 'username', value: 'bjensen' });
    assert.deepEqual(parseScimFilter('urn:ietf:params:scim:schemas:core:2.0:User:userName EQ "a\\"b"'), { attr: 'username', value: 'a"b' });
    assert.equal(
      scimTypeOf(() => scimListFilter('User', 'userName sw "b"')),
      'invalidFilter',
    );
    assert.equal(
      scimTypeOf(() => scimListFilter('User', 'displayName eq "b"')),
      'invalidFilter',
    );
    assert.equal(
      scimTypeOf(() => scimListFilter('Group', ['a'])),
      'invalidFilter',
    );
    assert.deepEqual(scimListFilter('Group', 'displayName eq "ops"'), { attr: 'displayname', value: 'ops' });
  });

  test('paging: startIndex below 1 reads as 1, count is clamped to 0..1000', () => {
    assert.deepEqual(scimPage({}), { startIndex: 1, count: 100 });
    assert.deepEqual(scimPage({ startIndex: '0', count: '-5' }), { startIndex: 1, count: 0 });
    assert.deepEqual(scimPage({ count: '5000' }), { startIndex: 1, count: 1000 });
    assert.equal(
      scimTypeOf(() => scimPage({ count: '1e3' })),
      'invalidValue',
    );
  });

  test('an AuthError becomes a SCIM error; a bug becomes a detail-less 500', () => {
    assert.deepEqual(scimErrorJson(scimErrorOf(new AuthError('user_exists', 'taken'))), {
      schemas: [SCIM_SCHEMA.error],
      status: '409',
      scimType: 'uniqueness',
      detail: 'taken',
    });
    const bug = scimErrorJson(scimErrorOf(new TypeError('secret internals')));
    assert.deepEqual(bug, { schemas: [SCIM_SCHEMA.error], status: '500', detail: 'the request failed' });
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { SCIM_SCHEMA } from '@svc/core';
import { createFailureLimiter } from '../src/http/failure-limiter.js';
import {
  applicationSignIn,
  applicationUser,
  echoAttach,
  type GatewayHarness,
  gatewayApi,
  pairApplicationDevice,
  startGateway,
  startGatewayHarness,
} from './support/gateway-harness.js';
import { admin, api, type Reply } from './support/harness.js';
import { completion, nodeApi, prepare } from './support/node-harness.js';

// SCIM 2.0 (RFC 7644) on the gateway, through inject over the memory store: the RFC's own
// request and response bodies, an identity provider's usual sequence, and the attacks on its
// authorisation. Every refusal is an RFC 7644 §3.12 error body, never a 500.

const USER = SCIM_SCHEMA.user;
const GROUP = SCIM_SCHEMA.group;
const PATCH = SCIM_SCHEMA.patchOp;
const SCIM_JSON = { 'content-type': 'application/scim+json' };
const BASE = '/.svc/scim/v2';

describe('SCIM 2.0 provisioning on the gateway', () => {
  let h: GatewayHarness;
  let mgmtToken: string;
  let scimToken: string;
  let scimTokenId: string;

  /** A SCIM request with the test's token (or `token`), in application/scim+json. */
  const scim = (method: string, path: string, body?: unknown, token: string | null = scimToken): Promise<Reply> =>
    gatewayApi(h, method, BASE + path, {
      ...(body === undefined ? {} : { body }),
      ...(token === null ? {} : { token }),
      headers: body === undefined ? {} : SCIM_JSON,
    });

  /** Asserts an RFC 7644 §3.12 error: status, `status` as a string, scimType when given. */
  const assertScimError = (r: Reply, status: number, scimType?: string): void => {
    assert.equal(r.status, status, r.text);
    assert.match(r.headers.get('content-type') ?? '', /^application\/scim\+json/);
    assert.deepEqual(r.body.schemas, [SCIM_SCHEMA.error]);
    assert.equal(r.body.status, String(status));
    assert.equal(typeof r.body.detail, 'string');
    if (scimType !== undefined) assert.equal(r.body.scimType, scimType, r.text);
  };

  const newToken = async (name: string): Promise<{ id: string; token: string }> => {
    const r = await api(h, 'POST', '/v1/auth/scim-tokens', { token: mgmtToken, body: { name } });
    assert.equal(r.status, 201, r.text);
    return r.body;
  };

  before(async () => {
    h = await startGatewayHarness({ socket: false, store: 'memory', attach: echoAttach });
    mgmtToken = (await admin(h)).pair.access_token;
    const t = await newToken('entra');
    scimToken = t.token;
    scimTokenId = t.id;
  });
  after(async () => {
    await h?.close();
  });

  describe('SCIM tokens on the management API', () => {
    test('a token is svcs_..., shown once; the listing never carries it; creation and revocation are audited without it', async () => {
      const created = await newToken('okta');
      assert.match(created.token, /^svcs_[A-Za-z0-9_-]{43}$/);
      assert.match(created.id, /^sct_/);
      const list = await api(h, 'GET', '/v1/auth/scim-tokens', { token: mgmtToken });
      assert.equal(list.status, 200);
      const listed = list.body.tokens.find((t: { id: string }) => t.id === created.id);
      assert.deepEqual(Object.keys(listed).sort(), ['created_at', 'id', 'last_used_at', 'name', 'revoked_at']);
      assert.equal(listed.name, 'okta');
      assert.equal(list.text.includes(created.token), false);
      const revoked = await api(h, 'DELETE', `/v1/auth/scim-tokens/${created.id}`, { token: mgmtToken });
      assert.deepEqual(revoked.body, { id: created.id, revoked: true });
      const again = await api(h, 'DELETE', `/v1/auth/scim-tokens/${created.id}`, { token: mgmtToken });
      assert.equal(again.status, 404);
      const audit = await api(h, 'GET', '/v1/auth/audit?limit=1000', { token: mgmtToken });
      const types = audit.body.events
        .filter((e: { data: { token_id?: string } }) => e.data.token_id === created.id)
        .map((e: { type: string }) => e.type);
      assert.deepEqual(types, ['scim_token.created', 'scim_token.revoked']);
      assert.equal(audit.text.includes(created.token), false, 'no token in the audit log');
      const stored = await h.deps.store.listScimTokens();
      assert.equal(JSON.stringify(stored).includes(created.token), false, 'only the digest is stored');
    });

    test('a token needs a name; the routes need a management bearer', async () => {
      assert.equal((await api(h, 'POST', '/v1/auth/scim-tokens', { token: mgmtToken, body: { name: '' } })).status, 400);
      assert.equal((await api(h, 'POST', '/v1/auth/scim-tokens', { token: mgmtToken, body: {} })).status, 400);
      assert.equal((await api(h, 'GET', '/v1/auth/scim-tokens')).status, 401);
      assert.equal((await api(h, 'DELETE', '/v1/auth/scim-tokens/sct_nope', { token: mgmtToken })).status, 400);
    });
  });

  describe('authorisation attacks: only a live SCIM token opens /.svc/scim/v2', () => {
    test('no token', async () => {
      const r = await scim('GET', '/Users', undefined, null);
      assertScimError(r, 401);
      assert.match(r.headers.get('www-authenticate') ?? '', /^Bearer realm="scim"/);
    });

    test('a management access token', async () => {
      assertScimError(await scim('GET', '/Users', undefined, mgmtToken), 401);
    });

    test('an application access token', async () => {
      const u = await applicationUser(h);
      assertScimError(await scim('GET', '/Users', undefined, u.pair.access_token), 401);
      assertScimError(await scim('POST', '/Users', { schemas: [USER], userName: 'mallory' }, u.pair.access_token), 401);
    });

    test('a revoked SCIM token, at once', async () => {
      const t = await newToken('to-revoke');
      assert.equal((await scim('GET', '/Users', undefined, t.token)).status, 200);
      await api(h, 'DELETE', `/v1/auth/scim-tokens/${t.id}`, { token: mgmtToken });
      assertScimError(await scim('GET', '/Users', undefined, t.token), 401);
    });

    test('a forged token of the right shape, another scheme, a token in the query', async () => {
      assertScimError(await scim('GET', '/Users', undefined, `svcs_${'A'.repeat(43)}`), 401);
      const basic = await gatewayApi(h, 'GET', `${BASE}/Users`, {
        headers: { authorization: `Basic ${Buffer.from(`x:${scimToken}`).toString('base64')}` },
      });
      assertScimError(basic, 401);
      assertScimError(await scim('GET', `/Users?access_token=${scimToken}`, undefined, null), 401);
    });

    test('a SCIM token on the management API and on the application', async () => {
      assert.equal((await api(h, 'GET', '/v1/auth/devices', { token: scimToken })).status, 401);
      assert.equal((await api(h, 'GET', '/v1/auth/scim-tokens', { token: scimToken })).status, 401);
      assert.equal((await api(h, 'GET', '/v1/auth/me', { token: scimToken })).status, 401);
      assert.equal((await gatewayApi(h, 'GET', '/app/x', { token: scimToken })).status, 401);
      assert.equal((await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: scimToken })).status, 401);
    });

    test('an unknown SCIM path says nothing without a token, 404 with one', async () => {
      assertScimError(await scim('GET', '/Nope', undefined, null), 401);
      assertScimError(await scim('GET', '/Nope'), 404);
    });

    test('token guessing: beyond the budget of refusals a guess is 429 (Retry-After), and the real token still works', async () => {
      const g = await startGateway(h, { socket: false, scimLimiter: createFailureLimiter({ clock: h.deps.clock, maxFailures: 3 }) });
      try {
        const target = { gatewayBase: g.base, gateway: g.app, injected: true };
        const guess = (n: number) => gatewayApi(target, 'GET', `${BASE}/Users`, { token: `svcs_${String(n).padStart(43, 'A')}` });
        for (let i = 0; i < 3; i++) assertScimError(await guess(i), 401);
        const limited = await guess(4);
        assertScimError(limited, 429);
        assert.match(limited.headers.get('retry-after') ?? '', /^\d+$/);
        assert.equal((await gatewayApi(target, 'GET', `${BASE}/Users`, { token: scimToken })).status, 200);
      } finally {
        await g.app.close();
      }
    });

    test('the last use of a token is recorded', async () => {
      await scim('GET', '/ServiceProviderConfig');
      const list = await api(h, 'GET', '/v1/auth/scim-tokens', { token: mgmtToken });
      const t = list.body.tokens.find((x: { id: string }) => x.id === scimTokenId);
      assert.notEqual(t.last_used_at, null);
    });
  });

  describe('discovery', () => {
    test('ServiceProviderConfig, ResourceTypes and Schemas', async () => {
      const spc = await scim('GET', '/ServiceProviderConfig');
      assert.equal(spc.status, 200);
      assert.match(spc.headers.get('content-type') ?? '', /^application\/scim\+json/);
      assert.deepEqual(spc.body.schemas, [SCIM_SCHEMA.serviceProviderConfig]);
      assert.equal(spc.body.patch.supported, true);
      assert.equal(spc.body.bulk.supported, false);
      assert.equal(spc.body.authenticationSchemes[0].type, 'oauthbearertoken');
      const types = await scim('GET', '/ResourceTypes');
      assert.deepEqual(
        types.body.Resources.map((t: { id: string; endpoint: string }) => [t.id, t.endpoint]),
        [
          ['User', '/Users'],
          ['Group', '/Groups'],
        ],
      );
      const schemas = await scim('GET', '/Schemas');
      assert.deepEqual(
        schemas.body.Resources.map((s: { id: string }) => s.id),
        [USER, GROUP],
      );
      assert.equal((await scim('GET', `/Schemas/${USER}`)).body.name, 'User');
    });
  });

  describe("RFC 7644's own examples", () => {
    let bjensen: string;

    test('§3.3 creating bjensen: 201, the User with id, meta and Location', async () => {
      const r = await scim('POST', '/Users', {
        schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
        userName: 'bjensen',
        externalId: 'bjensen',
        name: { formatted: 'Ms. Barbara J Jensen III', familyName: 'Jensen', givenName: 'Barbara' },
      });
      assert.equal(r.status, 201, r.text);
      bjensen = r.body.id;
      assert.match(bjensen, /^sub_/);
      assert.deepEqual(r.body.schemas, [USER]);
      assert.equal(r.body.userName, 'bjensen');
      assert.equal(r.body.externalId, 'bjensen');
      assert.equal(r.body.name.formatted, 'Ms. Barbara J Jensen III');
      assert.equal(r.body.active, true);
      assert.deepEqual(r.body.groups, []);
      assert.equal(r.body.meta.resourceType, 'User');
      assert.match(r.body.meta.created, /^\d{4}-\d\d-\d\dT/);
      assert.equal(r.body.meta.lastModified, r.body.meta.created);
      assert.equal(r.body.meta.location, `http://127.0.0.1${BASE}/Users/${bjensen}`);
      assert.equal(r.headers.get('location'), r.body.meta.location);
      const user = await h.deps.store.getUser(bjensen);
      assert.equal(user?.realm, 'application');
      assert.equal(user?.nameSource, 'scim');
      const events = await h.deps.store.listAuditEvents({ afterSeq: 0, limit: 10_000 });
      const createdEvent = events.find((e) => e.type === 'user.created' && e.subject === bjensen);
      assert.equal(createdEvent?.data.via, 'scim');
      assert.equal(createdEvent?.data.by_token, scimTokenId);
    });

    test('§3.3 the same userName again is 409 uniqueness', async () => {
      assertScimError(await scim('POST', '/Users', { schemas: [USER], userName: 'bjensen' }), 409, 'uniqueness');
    });

    test('§3.4.1 GET /Users/{id}', async () => {
      const r = await scim('GET', `/Users/${bjensen}`);
      assert.equal(r.status, 200);
      assert.equal(r.body.id, bjensen);
      assert.equal(r.body.userName, 'bjensen');
      assertScimError(await scim('GET', '/Users/2819c223-7f76-453a-919d-413861904646'), 404);
    });

    test('§3.4.2 filter=userName eq "bjensen" (and externalId eq), paging', async () => {
      const r = await scim('GET', `/Users?filter=${encodeURIComponent('userName eq "bjensen"')}`);
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.schemas, [SCIM_SCHEMA.listResponse]);
      assert.equal(r.body.totalResults, 1);
      assert.equal(r.body.startIndex, 1);
      assert.equal(r.body.itemsPerPage, 1);
      assert.equal(r.body.Resources[0].id, bjensen);
      const ext = await scim('GET', `/Users?filter=${encodeURIComponent('externalId Eq "bjensen"')}`);
      assert.equal(ext.body.totalResults, 1);
      const none = await scim('GET', `/Users?filter=${encodeURIComponent('userName eq "nobody"')}`);
      assert.deepEqual([none.status, none.body.totalResults, none.body.Resources], [200, 0, []]);
      const all = await scim('GET', '/Users?startIndex=1&count=1');
      assert.equal(all.body.itemsPerPage, 1);
      assert.ok(all.body.totalResults >= 1);
      const zero = await scim('GET', '/Users?count=0');
      assert.deepEqual(zero.body.Resources, []);
      for (const filter of ['userName co "bj"', 'title eq "x"', 'userName eq bjensen', 'userName eq "a" and externalId eq "b"']) {
        assertScimError(await scim('GET', `/Users?filter=${encodeURIComponent(filter)}`), 400, 'invalidFilter');
      }
    });

    test('§3.5.1 PUT replaces: the first email is kept (as verified), middleName and roles are not', async () => {
      const r = await scim('PUT', `/Users/${bjensen}`, {
        schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
        id: bjensen,
        userName: 'bjensen',
        externalId: 'bjensen',
        name: { formatted: 'Ms. Barbara J Jensen III', familyName: 'Jensen', givenName: 'Barbara', middleName: 'Jane' },
        roles: [],
        emails: [{ value: 'bjensen@example.com' }, { value: 'babs@jensen.org' }],
      });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.body.emails, [{ value: 'bjensen@example.com', type: 'work', primary: true }]);
      const user = await h.deps.store.getUser(bjensen);
      assert.equal(user?.email, 'bjensen@example.com');
      assert.equal(user?.emailVerified, true);
      assert.equal(user?.emailSource, 'scim');
    });

    test('§3.5.2.1 add without a path: a home email does not replace the one kept; the nickname is not kept', async () => {
      const r = await scim('PATCH', `/Users/${bjensen}`, {
        schemas: [PATCH],
        Operations: [{ op: 'add', value: { emails: [{ value: 'babs@jensen.org', type: 'home' }], nickname: 'Babs' } }],
      });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.emails[0].value, 'bjensen@example.com');
    });

    test('§3.5.2.3 replace without a path, and on an attribute not kept (addresses)', async () => {
      const r = await scim('PATCH', `/Users/${bjensen}`, {
        schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
        Operations: [
          { op: 'replace', value: { emails: [{ value: 'barbara@example.com', type: 'work', primary: true }], nickname: 'Babs' } },
        ],
      });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.emails[0].value, 'barbara@example.com');
      const addr = await scim('PATCH', `/Users/${bjensen}`, {
        schemas: [PATCH],
        Operations: [
          { op: 'replace', path: 'addresses[type eq "work"]', value: { type: 'work', streetAddress: '911 Universal City Plaza' } },
          { op: 'replace', path: 'addresses[type eq "work"].streetAddress', value: '1010 Broadway Ave' },
        ],
      });
      assert.equal(addr.status, 200, addr.text);
    });

    test('PATCH paths an IdP sends: name parts, emails[type eq "work"].value, displayName, externalId, userName', async () => {
      const d = await scim('PATCH', `/Users/${bjensen}`, {
        schemas: [PATCH],
        Operations: [
          { op: 'replace', path: 'displayName', value: 'Barbara Jensen' },
          { op: 'replace', path: 'userName', value: 'bjensen@example.com' },
        ],
      });
      assert.equal(d.body.name.formatted, 'Barbara Jensen');
      assert.equal(d.body.userName, 'bjensen@example.com');
      const r = await scim('PATCH', `/Users/${bjensen}`, {
        schemas: [PATCH],
        Operations: [
          { op: 'Replace', path: 'name.givenName', value: 'Babs' },
          { op: 'Replace', path: 'emails[type eq "work"].value', value: 'babs@example.com' },
          { op: 'Add', path: 'externalId', value: 'ext-1' },
          { op: 'replace', path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department', value: 'Tours' },
        ],
      });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.name.formatted, 'Babs Jensen', 'one part replaces that part of the kept name');
      assert.equal(r.body.emails[0].value, 'babs@example.com');
      assert.equal(r.body.externalId, 'ext-1');
      const whole = await scim('PATCH', `/Users/${bjensen}`, {
        schemas: [PATCH],
        Operations: [{ op: 'replace', path: 'name', value: { givenName: 'Barbara', familyName: 'Jensen' } }],
      });
      assert.equal(whole.body.name.formatted, 'Barbara Jensen');
      assertScimError(
        await scim('PATCH', `/Users/${bjensen}`, { schemas: [PATCH], Operations: [{ op: 'replace', path: 'groups', value: [] }] }),
        400,
        'mutability',
      );
      assertScimError(
        await scim('PATCH', `/Users/${bjensen}`, {
          schemas: [PATCH],
          Operations: [{ op: 'replace', path: 'favouriteColour', value: 'x' }],
        }),
        400,
        'invalidPath',
      );
    });

    test('the RFC group "Tour Guides" is refused at input as invalidValue, never rewritten', async () => {
      const r = await scim('POST', '/Groups', { schemas: [GROUP], displayName: 'Tour Guides', members: [] });
      assertScimError(r, 400, 'invalidValue');
      const list = await scim('GET', '/Groups');
      assert.equal(
        list.body.Resources.some((g: { displayName: string }) => /tour/i.test(g.displayName)),
        false,
      );
    });

    let tourGuides: string;
    let jsmith: string;
    test('§3.5.2.1 add members; the member sees the group in its User and in its principal', async () => {
      const g = await scim('POST', '/Groups', { schemas: [GROUP], displayName: 'tour-guides' });
      assert.equal(g.status, 201, g.text);
      tourGuides = g.body.id;
      assert.match(tourGuides, /^grp_/);
      assert.deepEqual(g.body.members, []);
      jsmith = (await scim('POST', '/Users', { schemas: [USER], userName: 'jsmith', name: { givenName: 'James', familyName: 'Smith' } }))
        .body.id;
      const r = await scim('PATCH', `/Groups/${tourGuides}`, {
        schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
        Operations: [
          {
            op: 'add',
            path: 'members',
            value: [{ display: 'Babs Jensen', $ref: `https://example.com/v2/Users/${bjensen}`, value: bjensen }],
          },
        ],
      });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(
        r.body.members.map((m: { value: string }) => m.value),
        [bjensen],
      );
      const user = await scim('GET', `/Users/${bjensen}`);
      assert.deepEqual(
        user.body.groups.map((x: { value: string; display: string }) => [x.value, x.display]),
        [[tourGuides, 'tour-guides']],
      );
      const stored = await h.deps.store.getUser(bjensen);
      assert.deepEqual([stored?.groups, stored?.groupsSource], [['tour-guides'], 'scim']);
    });

    test('§3.5.2.2 remove one member and add another in one request; then remove all members', async () => {
      const r = await scim('PATCH', `/Groups/${tourGuides}`, {
        schemas: [PATCH],
        Operations: [
          { op: 'remove', path: `members[value eq "${bjensen}"]` },
          {
            op: 'add',
            path: 'members',
            value: [{ display: 'James Smith', $ref: `https://example.com/v2/Users/${jsmith}`, value: jsmith }],
          },
        ],
      });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(
        r.body.members.map((m: { value: string }) => m.value),
        [jsmith],
      );
      assert.deepEqual((await h.deps.store.getUser(bjensen))?.groups, []);
      const all = await scim('PATCH', `/Groups/${tourGuides}`, { schemas: [PATCH], Operations: [{ op: 'remove', path: 'members' }] });
      assert.deepEqual(all.body.members, []);
    });

    test('§3.5.2.3 replace members; remove with a value list (Entra); filter displayName eq; excludedAttributes=members', async () => {
      const r = await scim('PATCH', `/Groups/${tourGuides}`, {
        schemas: [PATCH],
        Operations: [
          {
            op: 'replace',
            path: 'members',
            value: [
              { display: 'Babs Jensen', value: bjensen },
              { display: 'James Smith', value: jsmith },
            ],
          },
        ],
      });
      assert.deepEqual(r.body.members.map((m: { value: string }) => m.value).sort(), [bjensen, jsmith].sort());
      const removed = await scim('PATCH', `/Groups/${tourGuides}`, {
        schemas: [PATCH],
        Operations: [{ op: 'Remove', path: 'members', value: [{ value: jsmith }] }],
      });
      assert.deepEqual(
        removed.body.members.map((m: { value: string }) => m.value),
        [bjensen],
      );
      const found = await scim('GET', `/Groups?filter=${encodeURIComponent('displayName eq "tour-guides"')}&excludedAttributes=members`);
      assert.equal(found.body.totalResults, 1);
      assert.equal(found.body.Resources[0].id, tourGuides);
      assert.equal(found.body.Resources[0].members, undefined);
      assertScimError(
        await scim('PATCH', `/Groups/${tourGuides}`, {
          schemas: [PATCH],
          Operations: [{ op: 'add', path: 'members', value: [{ value: 'sub_nobody' }] }],
        }),
        400,
        'invalidValue',
      );
    });

    test('PUT and rename a group: the members carry the new name', async () => {
      const r = await scim('PUT', `/Groups/${tourGuides}`, {
        schemas: [GROUP],
        displayName: 'guides',
        members: [{ value: bjensen }, { value: jsmith }],
      });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.displayName, 'guides');
      assert.deepEqual((await h.deps.store.getUser(bjensen))?.groups, ['guides']);
      assert.deepEqual((await h.deps.store.getUser(jsmith))?.groups, ['guides']);
      assertScimError(await scim('PUT', `/Groups/${tourGuides}`, { schemas: [GROUP], displayName: 'Guides!' }), 400, 'invalidValue');
      const other = await scim('POST', '/Groups', { schemas: [GROUP], displayName: 'other' });
      assertScimError(await scim('PUT', `/Groups/${other.body.id}`, { schemas: [GROUP], displayName: 'guides' }), 409, 'uniqueness');
      assertScimError(await scim('POST', '/Groups', { schemas: [GROUP], displayName: 'guides' }), 409, 'uniqueness');
    });

    test('§3.6 DELETE a group takes its name out of every member; DELETE a user, then it is gone', async () => {
      assert.equal((await scim('DELETE', `/Groups/${tourGuides}`)).status, 204);
      assert.deepEqual((await h.deps.store.getUser(jsmith))?.groups, []);
      assertScimError(await scim('GET', `/Groups/${tourGuides}`), 404);
      const d = await scim('DELETE', `/Users/${bjensen}`);
      assert.equal(d.status, 204);
      assert.equal(d.text, '');
      assertScimError(await scim('GET', `/Users/${bjensen}`), 404);
      assertScimError(await scim('DELETE', `/Users/${bjensen}`), 404);
    });
  });

  test("a management-realm user is not the directory's: not listed, not readable, not changeable", async () => {
    const manager = (await h.deps.store.listUsers({ realm: 'management', limit: 1 }))[0];
    assert.ok(manager !== undefined);
    assertScimError(await scim('GET', `/Users/${manager.subject}`), 404);
    assertScimError(
      await scim('PATCH', `/Users/${manager.subject}`, { schemas: [PATCH], Operations: [{ op: 'replace', value: { active: false } }] }),
      404,
    );
    assertScimError(await scim('DELETE', `/Users/${manager.subject}`), 404);
    const list = await scim('GET', '/Users?count=1000');
    assert.equal(
      list.body.Resources.some((u: { id: string }) => u.id === manager.subject),
      false,
    );
    assert.equal((await h.deps.store.getUser(manager.subject))?.status, 'active');
  });

  test('an IdP sequence: create user, create group, add member, deactivate (the live session is refused at once), delete', async () => {
    const created = await scim('POST', '/Users', {
      schemas: [USER, SCIM_SCHEMA.enterpriseUser],
      userName: 'ada@example.com',
      externalId: '0f6c1c5e-entra',
      active: true,
      displayName: 'Ada Lovelace',
      emails: [{ primary: true, type: 'work', value: 'ada@example.com' }],
      [SCIM_SCHEMA.enterpriseUser]: { department: 'Engines' },
    });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as string;
    // The person signs in with a device paired to the provisioned subject.
    const intent = await prepare(h, mgmtToken, { realm: 'application', subject: id });
    const paired = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, intent.key) });
    assert.equal(paired.status, 201, paired.text);
    const pair = await applicationSignIn(h, intent.key);
    const group = await scim('POST', '/Groups', { schemas: [GROUP], displayName: 'engineers', externalId: 'g-1' });
    assert.equal(group.status, 201);
    const member = await scim('PATCH', `/Groups/${group.body.id}`, {
      schemas: [PATCH],
      Operations: [{ op: 'Add', path: 'members', value: [{ value: id }] }],
    });
    assert.equal(member.status, 200);
    const seen = await gatewayApi(h, 'GET', '/app/x', { token: pair.access_token });
    assert.equal(seen.status, 200);
    assert.equal(seen.body.principal.subject, id);
    assert.deepEqual(seen.body.principal.claims.groups, ['engineers']);
    assert.equal(seen.body.principal.claims.email, 'ada@example.com');
    assert.equal(seen.body.principal.claims.email_verified, true);

    // Entra's form: op "Replace", no path, active as a string.
    const off = await scim('PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'Replace', value: { active: 'False' } }] });
    assert.equal(off.status, 200, off.text);
    assert.equal(off.body.active, false);
    const refused = await gatewayApi(h, 'GET', '/app/x', { token: pair.access_token });
    assert.equal(refused.status, 401, 'the next request of the live session is refused');
    const refresh = await gatewayApi(h, 'POST', '/.svc/auth/v1/refresh', { body: { refresh_token: pair.refresh_token } });
    assert.equal(refresh.status, 401);
    const events = await h.deps.store.listAuditEvents({ afterSeq: 0, limit: 10_000 });
    assert.ok(events.some((e) => e.type === 'user.disabled' && e.subject === id && e.data.by_token === scimTokenId));

    // Okta's form: op "replace", path "active".
    const on = await scim('PATCH', `/Users/${id}`, { schemas: [PATCH], Operations: [{ op: 'replace', path: 'active', value: true }] });
    assert.equal(on.body.active, true);
    assert.equal((await gatewayApi(h, 'GET', '/app/x', { token: pair.access_token })).status, 401, 'enabling does not bring sessions back');

    assert.equal((await scim('DELETE', `/Users/${id}`)).status, 204);
    const byName = await scim('GET', `/Users?filter=${encodeURIComponent('userName eq "ada@example.com"')}`);
    assert.equal(byName.body.totalResults, 0);
    const g = await scim('GET', `/Groups/${group.body.id}`);
    assert.deepEqual(g.body.members, []);
  });

  test('a PUT or PATCH to a userName another user has is 409 uniqueness, nothing written', async () => {
    const a = await scim('POST', '/Users', { schemas: [USER], userName: 'first' });
    const b = await scim('POST', '/Users', { schemas: [USER], userName: 'second', displayName: 'Second' });
    assertScimError(await scim('PUT', `/Users/${b.body.id}`, { schemas: [USER], userName: 'first' }), 409, 'uniqueness');
    assertScimError(
      await scim('PATCH', `/Users/${b.body.id}`, { schemas: [PATCH], Operations: [{ op: 'replace', path: 'userName', value: 'first' }] }),
      409,
      'uniqueness',
    );
    const kept = await h.deps.store.getUser(b.body.id);
    assert.deepEqual([kept?.userName, kept?.name], ['second', 'Second']);
    assert.equal((await h.deps.store.getUser(a.body.id))?.userName, 'first');
  });

  test('a user created inactive holds no session', async () => {
    const r = await scim('POST', '/Users', { schemas: [USER], userName: 'dormant', active: false });
    assert.equal(r.status, 201);
    assert.equal(r.body.active, false);
    assert.equal((await h.deps.store.getUser(r.body.id))?.status, 'disabled');
  });

  describe('bad bodies are 400 SCIM errors, never 500', () => {
    const badUsers: [string, unknown, string][] = [
      ['an array', [], 'invalidSyntax'],
      ['a string', 'bjensen', 'invalidSyntax'],
      ['no userName', { schemas: [USER] }, 'invalidValue'],
      ['a numeric userName', { schemas: [USER], userName: 42 }, 'invalidValue'],
      ['the Group schema', { schemas: [GROUP], userName: 'x' }, 'invalidSyntax'],
      ['emails not objects', { schemas: [USER], userName: 'x1', emails: ['a@example.com'] }, 'invalidValue'],
      ['an email that is not one', { schemas: [USER], userName: 'x2', emails: [{ value: 'not an email' }] }, 'invalidValue'],
      ['a name with a bidi override', { schemas: [USER], userName: 'x3', displayName: 'evil\u202eadmin' }, 'invalidValue'],
      ['active "maybe"', { schemas: [USER], userName: 'x4', active: 'maybe' }, 'invalidValue'],
      ['name a string', { schemas: [USER], userName: 'x5', name: 'Ada' }, 'invalidValue'],
      ['a userName of 300 characters', { schemas: [USER], userName: 'x'.repeat(300) }, 'invalidValue'],
    ];
    for (const [what, body, scimType] of badUsers) {
      test(`POST /Users with ${what}`, async () => {
        assertScimError(await scim('POST', '/Users', body), 400, scimType);
      });
    }

    test('bad PATCH bodies', async () => {
      const u = await scim('POST', '/Users', { schemas: [USER], userName: 'patch-target' });
      const bad: [unknown, string][] = [
        [{ Operations: [{ op: 'replace', value: { active: false } }] }, 'invalidSyntax'],
        [{ schemas: [PATCH] }, 'invalidSyntax'],
        [{ schemas: [PATCH], Operations: [] }, 'invalidSyntax'],
        [{ schemas: [PATCH], Operations: [{ op: 'move', path: 'active', value: false }] }, 'invalidSyntax'],
        [{ schemas: [PATCH], Operations: [{ op: 'remove' }] }, 'noTarget'],
        [{ schemas: [PATCH], Operations: [{ op: 'replace', path: 'name[', value: 'x' }] }, 'invalidPath'],
        [{ schemas: [PATCH], Operations: [{ op: 'replace', path: 'active' }] }, 'invalidSyntax'],
        [{ schemas: [PATCH], Operations: [{ op: 'replace', value: 'x' }] }, 'invalidSyntax'],
        [{ schemas: [PATCH], Operations: [{ op: 'remove', path: 'userName' }] }, 'mutability'],
        [{ schemas: [PATCH], Operations: [{ op: 'replace', path: 'emails[type eq work].value', value: 'a@b.example' }] }, 'invalidPath'],
        [{ schemas: [PATCH], Operations: Array.from({ length: 1001 }, () => ({ op: 'replace', path: 'active', value: true })) }, 'tooMany'],
      ];
      for (const [body, scimType] of bad) assertScimError(await scim('PATCH', `/Users/${u.body.id}`, body), 400, scimType);
      assert.equal((await h.deps.store.getUser(u.body.id))?.status, 'active', 'nothing was applied');
    });

    test('malformed JSON, __proto__, a wrong media type, an oversized body, bad paging', async () => {
      const raw = (rawBody: string, contentType = 'application/scim+json') =>
        gatewayApi(h, 'POST', `${BASE}/Users`, { rawBody, token: scimToken, headers: { 'content-type': contentType } });
      assertScimError(await raw('{"schemas": ['), 400);
      assertScimError(await raw('{"__proto__": {"admin": true}, "userName": "p"}'), 400);
      assertScimError(await raw('userName=x', 'application/x-www-form-urlencoded'), 415);
      assertScimError(await raw('{}', 'application/scim+json; charset=latin1'), 415);
      assertScimError(await raw(JSON.stringify({ schemas: [USER], userName: 'big', x: 'y'.repeat(70_000) })), 413);
      const plain = await gatewayApi(h, 'POST', `${BASE}/Users`, { body: { schemas: [USER], userName: 'plain-json' }, token: scimToken });
      assert.equal(plain.status, 201, 'application/json is accepted too');
      assertScimError(await scim('GET', '/Users?startIndex=abc'), 400, 'invalidValue');
      assertScimError(await scim('GET', '/Users?filter=a&filter=b'), 400, 'invalidFilter');
    });
  });

  test('a second application device of another person is not touched by a PATCH of someone else', async () => {
    const bystander = await pairApplicationDevice(h);
    const pair = await applicationSignIn(h, bystander.key);
    const u = await scim('POST', '/Users', { schemas: [USER], userName: 'leaver' });
    await scim('PATCH', `/Users/${u.body.id}`, { schemas: [PATCH], Operations: [{ op: 'replace', path: 'active', value: false }] });
    assert.equal((await gatewayApi(h, 'GET', '/app/x', { token: pair.access_token })).status, 200);
  });
});

// Review findings (SCIM part of #27), as attacks, on both embedded stores.
for (const store of ['memory', 'sqlite'] as const) {
  describe(`SCIM attacks on the directory's own consistency (${store})`, () => {
    let h: GatewayHarness;
    let mgmtToken: string;
    let scimToken: string;
    const scim = (method: string, path: string, body?: unknown): Promise<Reply> =>
      gatewayApi(h, method, BASE + path, {
        ...(body === undefined ? {} : { body }),
        token: scimToken,
        headers: body === undefined ? {} : SCIM_JSON,
      });
    const filterUsers = (expr: string) => scim('GET', `/Users?filter=${encodeURIComponent(expr)}`);

    before(async () => {
      h = await startGatewayHarness({ socket: false, store, attach: echoAttach });
      mgmtToken = (await admin(h)).pair.access_token;
      scimToken = (await api(h, 'POST', '/v1/auth/scim-tokens', { token: mgmtToken, body: { name: 'entra' } })).body.token;
    });
    after(async () => {
      await h?.close();
    });

    /** A paired application user (not from the directory), with `email` set verified by an operator when given. */
    const existingPerson = async (email: string | null): Promise<{ subject: string; access: string }> => {
      const u = await applicationUser(h);
      const subject = (await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: u.pair.access_token })).body.subject;
      if (email !== null) {
        const set = await api(h, 'PATCH', `/v1/auth/users/${subject}`, { token: mgmtToken, body: { email, email_verified: true } });
        assert.equal(set.status, 200, set.text);
      }
      return { subject, access: u.pair.access_token };
    };

    test('a directory re-creating an existing person instead of finding them is refused: the shown userName finds them, a duplicate POST is 409', async () => {
      const ann = await existingPerson('ann@example.com');
      const shown = await scim('GET', `/Users/${ann.subject}`);
      assert.equal(shown.body.userName, 'ann@example.com');
      // The directory looks the person up by the userName the listing shows, in any letter case (RFC 7643: userName is case-insensitive).
      for (const asked of ['ann@example.com', 'Ann@Example.COM']) {
        const found = await filterUsers(`userName eq "${asked}"`);
        assert.equal(found.status, 200, found.text);
        assert.deepEqual(
          found.body.Resources.map((r: { id: string }) => r.id),
          [ann.subject],
          `filter userName eq ${asked}`,
        );
        assert.equal(found.body.totalResults, 1);
      }
      // Had it not found them, its POST of the same person is refused, whether by that userName or by a userName of its own with the same email.
      const bySameName = await scim('POST', '/Users', { schemas: [USER], userName: 'ANN@example.com' });
      assert.equal(bySameName.status, 409, bySameName.text);
      assert.equal(bySameName.body.scimType, 'uniqueness');
      const bySameEmail = await scim('POST', '/Users', {
        schemas: [USER],
        userName: 'ann.other',
        emails: [{ value: 'Ann@example.com', primary: true }],
      });
      assert.equal(bySameEmail.status, 409, bySameEmail.text);
      assert.equal(bySameEmail.body.scimType, 'uniqueness');
      const holders = await api(h, 'GET', '/v1/auth/users?realm=application&filter=ann', { token: mgmtToken });
      assert.equal(holders.status, 200, holders.text);
      assert.deepEqual(
        holders.body.users.map((u: { subject: string }) => u.subject),
        [ann.subject],
        'no second account of the person was created',
      );
      // So deprovisioning through what the filter found ends the real account's session at once.
      const off = await scim('PATCH', `/Users/${ann.subject}`, {
        schemas: [PATCH],
        Operations: [{ op: 'replace', value: { active: false } }],
      });
      assert.equal(off.status, 200, off.text);
      assert.equal((await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: ann.access })).status, 401);
    });

    test('a person with neither userName nor email is found by the subject they are shown with; an unverified email is not a match for the uniqueness refusal', async () => {
      const bare = await existingPerson(null);
      const shown = await scim('GET', `/Users/${bare.subject}`);
      assert.equal(shown.body.userName, bare.subject);
      const found = await filterUsers(`userName eq "${bare.subject}"`);
      assert.deepEqual(
        found.body.Resources.map((r: { id: string }) => r.id),
        [bare.subject],
      );
      // A directory user whose userName is an email is found by it exactly, and not by a user who only contains it.
      const created = await scim('POST', '/Users', { schemas: [USER], userName: 'bob@example.com' });
      assert.equal(created.status, 201, created.text);
      const bob = await filterUsers('userName eq "bob@example.com"');
      assert.deepEqual(
        bob.body.Resources.map((r: { id: string }) => r.id),
        [created.body.id],
      );
      assert.equal((await filterUsers('userName eq "b@example.com"')).body.totalResults, 0, 'a substring is not a match');
      // An email held unverified does not block the directory's own user.
      const carol = await existingPerson(null);
      const unverified = await api(h, 'PATCH', `/v1/auth/users/${carol.subject}`, {
        token: mgmtToken,
        body: { email: 'carol@example.com', email_verified: false },
      });
      assert.equal(unverified.status, 200, unverified.text);
      const own = await scim('POST', '/Users', { schemas: [USER], userName: 'carol', emails: [{ value: 'carol@example.com' }] });
      assert.equal(own.status, 201, own.text);
    });

    test('a group write refused for one member writes nothing: POST, PATCH and a renaming PUT', async () => {
      const a = (await scim('POST', '/Users', { schemas: [USER], userName: `a-${store}` })).body.id;
      const b = (await scim('POST', '/Users', { schemas: [USER], userName: `b-${store}` })).body.id;
      const full = Array.from({ length: 100 }, (_, i) => `g${i}`);
      const set = await api(h, 'PATCH', `/v1/auth/users/${b}`, { token: mgmtToken, body: { groups: full } });
      assert.equal(set.status, 200, set.text);
      const groupsOfA = async (): Promise<string[]> =>
        (await scim('GET', `/Users/${a}`)).body.groups.map((g: { display: string }) => g.display);

      const created = await scim('POST', '/Groups', { schemas: [GROUP], displayName: 'eng', members: [{ value: a }, { value: b }] });
      assert.equal(created.status, 400, created.text);
      assert.equal(created.body.scimType, 'invalidValue');
      assert.equal(
        (await scim('GET', `/Groups?filter=${encodeURIComponent('displayName eq "eng"')}`)).body.totalResults,
        0,
        'no group written',
      );
      assert.deepEqual(await groupsOfA(), [], 'no member written');

      const ops = await scim('POST', '/Groups', { schemas: [GROUP], displayName: 'ops' });
      assert.equal(ops.status, 201, ops.text);
      const patched = await scim('PATCH', `/Groups/${ops.body.id}`, {
        schemas: [PATCH],
        Operations: [{ op: 'add', path: 'members', value: [{ value: a }, { value: b }] }],
      });
      assert.equal(patched.status, 400, patched.text);
      assert.deepEqual(await groupsOfA(), [], 'the first member was not added');

      const put = await scim('PUT', `/Groups/${ops.body.id}`, {
        schemas: [GROUP],
        displayName: 'sre',
        members: [{ value: a }, { value: b }],
      });
      assert.equal(put.status, 400, put.text);
      const after = await scim('GET', `/Groups/${ops.body.id}`);
      assert.equal(after.body.displayName, 'ops', 'not renamed');
      assert.deepEqual(after.body.members, []);
      assert.deepEqual(await groupsOfA(), []);
    });

    test('a SCIM token flood is not a write flood: a refused client over budget is 429 before the shared budget, and a valid token is written once a minute', async () => {
      const real = createFailureLimiter({ clock: h.deps.clock, maxFailures: 2 });
      let reserved = 0;
      const limiter = {
        check: (keys: readonly string[]) => real.check(keys),
        reserve: (keys: readonly string[]) => {
          reserved += 1;
          return real.reserve(keys);
        },
      };
      const g = await startGateway(h, { socket: false, scimLimiter: limiter });
      try {
        const target = { gatewayBase: g.base, gateway: g.app, injected: true };
        const lastUsed = async (): Promise<string | null> =>
          (await api(h, 'GET', '/v1/auth/scim-tokens', { token: mgmtToken })).body.tokens.find((t: { name: string }) => t.name === 'entra')
            .last_used_at;
        const guess = (n: number) => gatewayApi(target, 'GET', `${BASE}/Users`, { token: `svcs_${String(n).padStart(43, 'B')}` });
        for (let i = 0; i < 2; i++) assert.equal((await guess(i)).status, 401);
        assert.equal(reserved, 2);
        for (let i = 2; i < 12; i++) assert.equal((await guess(i)).status, 429);
        assert.equal(reserved, 2, 'a client over budget is refused without reserving (no store I/O for the budget)');

        const use = () => gatewayApi(target, 'GET', `${BASE}/ServiceProviderConfig`, { token: scimToken });
        assert.equal((await use()).status, 200, 'a valid token goes through the spent budget');
        const first = await lastUsed();
        assert.notEqual(first, null);
        h.clock.advance(30_000);
        assert.equal((await use()).status, 200);
        assert.equal(await lastUsed(), first, 'a use within the minute is not written');
        h.clock.advance(30_000);
        assert.equal((await use()).status, 200);
        assert.notEqual(await lastUsed(), first, 'a minute later it is');
      } finally {
        await g.app.close();
      }
    });

    test('paging GET /Users and GET /Groups gives every resource once, in order, with the right total', async () => {
      for (let i = 0; i < 5; i++) assert.equal((await scim('POST', '/Users', { schemas: [USER], userName: `pager-${i}` })).status, 201);
      for (let i = 0; i < 5; i++) assert.equal((await scim('POST', '/Groups', { schemas: [GROUP], displayName: `pg-${i}` })).status, 201);
      for (const resource of ['/Users', '/Groups']) {
        const all = await scim('GET', `${resource}?count=1000`);
        const ids: string[] = all.body.Resources.map((r: { id: string }) => r.id);
        assert.equal(all.body.totalResults, ids.length);
        assert.deepEqual([...ids].sort(), ids, 'ordered by id');
        const paged: string[] = [];
        for (let start = 1; start <= ids.length; start += 3) {
          const page = await scim('GET', `${resource}?startIndex=${start}&count=3`);
          assert.equal(page.body.totalResults, ids.length);
          assert.equal(page.body.startIndex, start);
          paged.push(...page.body.Resources.map((r: { id: string }) => r.id));
        }
        assert.deepEqual(paged, ids, `${resource} pages`);
        const beyond = await scim('GET', `${resource}?startIndex=${ids.length + 1}&count=3`);
        assert.deepEqual([beyond.body.totalResults, beyond.body.Resources.length], [ids.length, 0]);
      }
      const one = await scim('GET', `/Groups?filter=${encodeURIComponent('displayName eq "pg-3"')}&count=0`);
      assert.deepEqual([one.body.totalResults, one.body.Resources.length], [1, 0]);
    });
  });
}

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { AppPathRequirement } from '../src/app-config.js';
import { isIdentityHeader, pathMatches } from '../src/gateway-policy.js';
import {
  AuthError,
  framingRefusal,
  IDENTITY_HEADER_NAMES,
  IDENTITY_HEADER_PREFIXES,
  identityHeaderPredicate,
  isPublicPath,
  isSvcCredential,
  makePrincipal,
  normalizeHeaderName,
  type PrincipalClaims,
  relayedSessionEnd,
  requirementFor,
  requirementNeeds,
  unambiguousPath,
  unmetRequirement,
  upgradeRefusal,
} from '../src/index.js';

/** Every spelling a forged header arrives in: as listed, upper, lower, mixed case, `_` for `-`, and both. */
function spellings(name: string): string[] {
  const mixed = [...name].map((c, i) => (i % 2 === 0 ? c.toUpperCase() : c.toLowerCase())).join('');
  return [
    name,
    name.toUpperCase(),
    name.toLowerCase(),
    mixed,
    name.replaceAll('-', '_'),
    mixed.replaceAll('-', '_'),
    name.replaceAll('-', '.'),
  ];
}

describe('identity headers', () => {
  const isIdentity = identityHeaderPredicate(['X-Tenant']);

  test('every listed name and prefix is an identity header in every case and separator spelling (CVE-2025-64484: underscore variants)', () => {
    const examples = [...IDENTITY_HEADER_NAMES, ...IDENTITY_HEADER_PREFIXES.map((p) => (p.endsWith('-') ? `${p}anything` : `${p}-id`))];
    for (const name of examples) for (const spelled of spellings(name)) assert.equal(isIdentity(spelled), true, spelled);
    for (const spelled of spellings('x-ms-client-principal')) assert.equal(isIdentity(spelled), true, spelled);
  });

  test('forged identity headers of other proxies (Remote-Groups, X-Webauth-User, X-Amzn-Oidc-*, IAP, AAD, mod_auth_openidc) are identity headers in every spelling', () => {
    // The contract's full list (Application gateway, step 1 "Strip"): one example per name and prefix.
    const contract = [
      'svc-subject',
      'svc-email',
      'svc-name',
      'svc-groups',
      'x-svc-subject',
      'x-forwarded-user',
      'x-forwarded-email',
      'x-forwarded-preferred-username',
      'x-forwarded-groups',
      'x-forwarded-access-token',
      'x-user',
      'x-email',
      'x-webauth-user',
      'remote-user',
      'remote-groups',
      'remote-email',
      'remote-name',
      'x-remote-user',
      'x-remote-groups',
      'x-auth-request-email',
      'x-pomerium-jwt-assertion',
      'cf-access-jwt-assertion',
      'x-ms-client-principal',
      'x-ms-client-principal-name',
      'x-ms-token-aad-id-token',
      'x-goog-authenticated-user-email',
      'x-goog-iap-jwt-assertion',
      'x-amzn-oidc-data',
      'x-amzn-oidc-identity',
      'oidc-claim-email',
      'x-webauth-groups',
    ];
    for (const name of contract) for (const spelled of spellings(name)) assert.equal(isIdentity(spelled), true, spelled);
  });

  test("the project's own names are stripped the same way", () => {
    for (const spelled of spellings('x-tenant')) assert.equal(isIdentity(spelled), true, spelled);
    assert.equal(isIdentityHeader('x_tenant'), false, 'not without the project list');
    assert.equal(isIdentityHeader('x_tenant', ['x-tenant']), true);
  });

  test('ordinary headers are kept', () => {
    for (const name of [
      'accept',
      'content-type',
      'x-forwarded-for',
      'x-forwarded-proto',
      'authorization',
      'cookie',
      'x-svcx',
      'svc',
      'x-user-agent',
      'user-agent',
    ]) {
      assert.equal(isIdentity(name), false, name);
    }
  });

  test('normalizeHeaderName folds case and every separator', () => {
    assert.equal(normalizeHeaderName('X_Forwarded.User'), 'x-forwarded-user');
    assert.equal(normalizeHeaderName('SVC~Subject'), 'svc-subject');
  });
});

describe('framing refusal (request smuggling)', () => {
  const ok = (raw: string[], v = '1.1') => assert.equal(framingRefusal(raw, v), null, JSON.stringify(raw));
  const refused = (raw: string[], match: RegExp, v = '1.1') =>
    assert.match(framingRefusal(raw, v) ?? 'accepted', match, JSON.stringify(raw));

  test('a plain request passes', () => {
    ok(['Host', 'a', 'Content-Length', '2']);
    ok(['Host', 'a', 'Transfer-Encoding', 'chunked']);
    ok(['Host', 'a', 'Transfer-Encoding', 'Chunked ']);
  });

  test('CL.CL: Content-Length twice, equal or not', () => {
    refused(['Content-Length', '2', 'Content-Length', '2'], /Content-Length is sent more than once/);
    refused(['content-length', '2', 'CONTENT-LENGTH', '3'], /more than once/);
  });

  test('CL.TE and TE.CL: Transfer-Encoding with Content-Length', () => {
    refused(['Transfer-Encoding', 'chunked', 'Content-Length', '5'], /both sent/);
    refused(['Content-Length', '5', 'Transfer-Encoding', 'chunked'], /both sent/);
  });

  test('TE.TE: an obfuscated or doubled Transfer-Encoding', () => {
    refused(['Transfer-Encoding', 'gzip, chunked'], /exactly chunked/);
    refused(['Transfer-Encoding', 'chunked', 'Transfer-Encoding', 'chunked'], /more than once/);
    refused(['Transfer-Encoding', 'chunked'], /HTTP\/1\.0/, '1.0');
  });

  test('obs-fold: a value continued on another line', () => {
    refused(['X-A', 'a\r\n svc-subject: x'], /obs-fold/);
    refused(['X-A', 'a\n\tb'], /obs-fold/);
  });

  test('a framing header spelled with _ (a second Content-Length for a CGI backend)', () => {
    refused(['Content-Length', '2', 'Content_Length', '5'], /reads as content-length/);
    refused(['Transfer_Encoding', 'chunked'], /reads as transfer-encoding/);
    refused(['X_Forwarded_For', '1.2.3.4'], /reads as x-forwarded-for/);
  });

  test('Host or Authorization twice (two parsers may pick different ones)', () => {
    refused(['Host', 'a', 'Host', 'b'], /Host is sent more than once/);
    refused(['Authorization', 'Bearer a', 'authorization', 'Bearer b'], /Authorization is sent more than once/);
  });
});

describe('upgrades (websocket handshakes)', () => {
  const valid = {
    method: 'GET',
    httpVersion: '1.1',
    headers: {
      connection: 'keep-alive, Upgrade',
      upgrade: 'WebSocket',
      'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
      'sec-websocket-version': '13',
    },
  };
  const refused = (over: Partial<typeof valid>, headers: Record<string, string | undefined> = {}) =>
    assert.notEqual(
      upgradeRefusal({ ...valid, ...over, headers: { ...valid.headers, ...headers } }),
      null,
      JSON.stringify([over, headers]),
    );

  test('a valid websocket opening handshake passes', () => {
    assert.equal(upgradeRefusal(valid), null);
  });

  test('an invalid upgrade reaches the upstream: anything but a valid GET websocket handshake is refused', () => {
    for (const method of ['POST', 'PUT', 'HEAD', 'OPTIONS', 'get']) refused({ method });
    refused({ httpVersion: '1.0' });
    for (const upgrade of ['h2c', 'websocket, h2c', 'h2c, websocket', 'TLS/1.2', '', undefined]) refused({}, { upgrade });
    for (const connection of ['keep-alive', 'close', undefined]) refused({}, { connection });
    for (const key of ['short', 'dGhlIHNhbXBsZSBub25jZQ', 'dGhlIHNhbXBsZSBub25jZQ==, dGhlIHNhbXBsZSBub25jZQ==', '', undefined]) {
      refused({}, { 'sec-websocket-key': key });
    }
    for (const version of ['8', '12', '13, 8', '', undefined]) refused({}, { 'sec-websocket-version': version });
  });
});

describe('ambiguous request paths', () => {
  const refusedPath = (target: string) =>
    assert.throws(
      () => unambiguousPath(target),
      (err: unknown) => err instanceof AuthError && err.code === 'invalid_request',
      target,
    );

  test('an ordinary path is decoded, the query left aside', () => {
    assert.equal(unambiguousPath('/docs/a%20b?x=/../y'), '/docs/a b');
    assert.equal(unambiguousPath('/'), '/');
    assert.equal(unambiguousPath('/a/b.c/..d/.e'), '/a/b.c/..d/.e');
    assert.equal(unambiguousPath('/%61dmin'), '/admin', 'an encoded letter decodes to what the application sees');
    assert.equal(unambiguousPath('/api/v1/items/123?x=%2e./..'), '/api/v1/items/123', 'no % and no . in the path: as it is');
  });

  test('the checks a path with neither % nor . skips cannot miss anything: each one needs a % or a .', () => {
    for (const t of ['/public/..;/admin', '/public/%2e%2e/admin', '/public%2fadmin', '/a/%00', '/a/%zz', '/a/%c3']) refusedPath(t);
  });

  test('public prefix escaped with dot segments: /public/../admin, /public/./x', () => {
    for (const t of ['/public/../admin', '/public/./x', '/public/..', '/..', '/.', '/a/..?x']) refusedPath(t);
  });

  test('dot segments percent-encoded: /public/%2e%2e/admin, /public/.%2E/admin', () => {
    for (const t of ['/public/%2e%2e/admin', '/public/.%2E/admin', '/public/%2E/x']) refusedPath(t);
  });

  test('Tomcat-style path parameter: /public/..;/admin', () => {
    for (const t of ['/public/..;/admin', '/public/.;x/admin', '/public/..;jsessionid=1/admin']) refusedPath(t);
  });

  test('encoded slash and backslash: /public%2fadmin, /public%5c..%5cadmin', () => {
    for (const t of ['/public%2f..%2fadmin', '/public%2Fadmin', '/public%5cadmin', '/public%5C']) refusedPath(t);
  });

  test('raw backslash (IIS, Windows backends): /public\\..\\admin', () => {
    refusedPath('/public\\..\\admin');
    refusedPath('/public\\x');
  });

  test('empty segments: //admin, /public//x', () => {
    for (const t of ['//admin', '/public//x', '//']) refusedPath(t);
  });

  test('double encoding, control characters, malformed escapes', () => {
    for (const t of ['/public/%252e%252e/admin', '/a%25', '/a%00', '/a%0a', '/a%7F', '/a%zz', '/a%c3', '/a%']) refusedPath(t);
  });

  test('path parameters get past a requirement: a ; raw or encoded anywhere in the path is refused (Tomcat, Jetty read /admin;x/y as /admin/y)', () => {
    for (const t of ['/admin;x/y', '/admin;/y', '/admin%3b/y', '/admin%3B/y', '/a/b;jsessionid=1', '/;', '/admin;']) refusedPath(t);
    assert.equal(unambiguousPath('/a/b?x=1;y=2'), '/a/b', 'a ; in the query is not a path parameter');
  });

  test('a segment an upstream reads without its trailing dot or space is refused (IIS, Windows: /admin./x is /admin/x)', () => {
    for (const t of ['/admin./x', '/admin.', '/admin%20/x', '/admin%20', '/a/b%2E%20', '/a /b', '/a/b.../c']) refusedPath(t);
    assert.equal(unambiguousPath('/a.b/c.d'), '/a.b/c.d');
    assert.equal(unambiguousPath('/a%20b/c'), '/a b/c', 'a space inside a segment is the same for everyone');
  });

  test('a path that Unicode compatibility folding (NFKC) changes is refused (fullwidth / and letters read as ASCII by some upstreams)', () => {
    for (const t of ['/admin%EF%BC%8Fx', '/%EF%BD%81dmin/x', '/a/%EF%BC%8E%EF%BC%8E/b', '/%E2%84%AA']) refusedPath(t);
    assert.equal(unambiguousPath('/caf%C3%A9'), '/café', 'an ordinary composed letter stays');
  });

  test('anything but origin form: absolute form, asterisk, fragment', () => {
    for (const t of ['http://evil/admin', '*', 'admin', '', '/a#b']) refusedPath(t);
  });
});

describe('public paths and requirements', () => {
  test('exact paths and /* prefixes', () => {
    assert.equal(pathMatches('/public/*', '/public/a/b'), true);
    assert.equal(pathMatches('/public/*', '/public/'), true);
    assert.equal(pathMatches('/public/*', '/public'), false);
    assert.equal(pathMatches('/public/*', '/publicity'), false);
    assert.equal(pathMatches('/healthz', '/healthz'), true);
    assert.equal(pathMatches('/healthz', '/healthz/'), false);
    assert.equal(pathMatches('/healthz', '/healthzz'), false);
  });

  test('a public path is matched case-sensitively: /HEALTHZ is not public', () => {
    assert.equal(isPublicPath(['/healthz', '/public/*'], '/healthz'), true);
    assert.equal(isPublicPath(['/healthz', '/public/*'], '/HEALTHZ'), false);
    assert.equal(isPublicPath(['/healthz', '/public/*'], '/Public/x'), false);
    assert.equal(isPublicPath([], '/'), false);
  });

  const req = (path: string, over: Partial<AppPathRequirement> = {}): AppPathRequirement => ({
    path,
    subjects: null,
    groups: null,
    emailDomains: null,
    amr: null,
    maxAuthAgeSeconds: null,
    ...over,
  });

  test('the most specific requirement wins: exact over prefix, longer prefix over shorter, whatever the order', () => {
    const list = [req('/admin/*'), req('/admin/audit/*'), req('/admin/audit/export'), req('/*')];
    assert.equal(requirementFor(list, '/admin/audit/export')?.path, '/admin/audit/export');
    assert.equal(requirementFor(list, '/admin/audit/x')?.path, '/admin/audit/*');
    assert.equal(requirementFor(list, '/admin/x')?.path, '/admin/*');
    assert.equal(requirementFor(list, '/other')?.path, '/*');
    assert.equal(requirementFor([...list].reverse(), '/admin/audit/x')?.path, '/admin/audit/*');
    assert.equal(requirementFor([req('/admin/*')], '/other'), null);
  });

  test('a requirement covers the bare prefix and the forms an upstream serves as it: /admin/* covers /admin, /admin/, /admin.json', () => {
    const list = [req('/admin/*'), req('/reports')];
    for (const path of ['/admin', '/admin/', '/admin/x', '/ADMIN', '/admin.json', '/Admin.html']) {
      assert.equal(requirementFor(list, path)?.path, '/admin/*', path);
    }
    for (const path of ['/reports', '/reports/', '/reports.csv', '/REPORTS'])
      assert.equal(requirementFor(list, path)?.path, '/reports', path);
    for (const path of ['/administrator', '/adminx/y', '/reports/2026', '/reportsx', '/x/admin']) {
      assert.equal(requirementFor(list, path), null, path);
    }
    assert.equal(requirementFor([req('/admin/*'), req('/admin')], '/admin')?.path, '/admin', 'an exact pattern still wins');
  });

  test('a requirement covers case variants of its path (a case-insensitive application serves /Admin as /admin)', () => {
    assert.equal(requirementFor([req('/admin/*')], '/ADMIN/x')?.path, '/admin/*');
  });

  const principal = makePrincipal({
    subject: 'sub_a',
    realm: 'application',
    session: 'ses_a',
    device: 'dev_a',
    claims: { amr: ['ed25519'], auth_time: '2026-11-22T10:00:00.000Z', exp: '2026-11-22T10:15:00.000Z' },
  });
  const signedIn = Date.parse('2026-11-22T10:00:00.000Z');

  test('subjects, amr and sign-in age', () => {
    assert.equal(unmetRequirement(req('/a'), principal, signedIn), null, 'nothing asked');
    assert.equal(unmetRequirement(req('/a', { subjects: ['sub_a', 'sub_b'] }), principal, signedIn), null);
    assert.match(unmetRequirement(req('/a', { subjects: ['sub_b'] }), principal, signedIn) ?? '', /subject/);
    assert.match(unmetRequirement(req('/a', { subjects: [] }), principal, signedIn) ?? '', /subject/, 'an empty list admits nobody');
    assert.equal(unmetRequirement(req('/a', { amr: ['hwk', 'ed25519'] }), principal, signedIn), null);
    assert.match(unmetRequirement(req('/a', { amr: ['hwk'] }), principal, signedIn) ?? '', /hwk/);
    assert.equal(unmetRequirement(req('/a', { maxAuthAgeSeconds: 60 }), principal, signedIn + 60_000), null);
    assert.match(unmetRequirement(req('/a', { maxAuthAgeSeconds: 60 }), principal, signedIn + 60_001) ?? '', /sign in again/);
  });

  const who = (claims: Partial<PrincipalClaims>) =>
    makePrincipal({
      subject: 'sub_a',
      realm: 'application',
      session: 'ses_a',
      device: 'dev_a',
      claims: { amr: ['ed25519'], auth_time: '2026-11-22T10:00:00.000Z', exp: '2026-11-22T10:15:00.000Z', ...claims },
    });

  test('groups: any listed group suffices; none, or no groups at all, is refused', () => {
    const r = req('/ops/*', { groups: ['ops', 'admins'] });
    assert.equal(unmetRequirement(r, who({ groups: ['admins'] }), signedIn), null);
    assert.equal(unmetRequirement(r, who({ groups: ['dev', 'ops'] }), signedIn), null);
    assert.match(unmetRequirement(r, who({ groups: ['dev'] }), signedIn) ?? '', /groups is required here: ops, admins/);
    assert.match(unmetRequirement(r, who({}), signedIn) ?? '', /groups/, 'a caller in no group');
    assert.match(unmetRequirement(r, who({ groups: ['OPS', 'ops-x', 'op'] }), signedIn) ?? '', /groups/, 'no near miss counts');
  });

  test('email domains: a VERIFIED email at a listed domain; an unverified one never satisfies it', () => {
    const r = req('/staff/*', { emailDomains: ['example.com', 'xn--bcher-kva.example'] });
    assert.equal(unmetRequirement(r, who({ email: 'ada@example.com', email_verified: true }), signedIn), null);
    assert.equal(unmetRequirement(r, who({ email: 'zoe@xn--bcher-kva.example', email_verified: true }), signedIn), null);
    const unverified = unmetRequirement(r, who({ email: 'ada@example.com', email_verified: false }), signedIn);
    assert.match(unverified ?? '', /a verified email at one of these domains is required here: example\.com/);
    assert.match(unmetRequirement(r, who({ email: 'ada@example.org', email_verified: true }), signedIn) ?? '', /verified email/);
    assert.match(
      unmetRequirement(r, who({ email: 'ada@sub.example.com', email_verified: true }), signedIn) ?? '',
      /verified email/,
      'a subdomain is another domain',
    );
    assert.match(unmetRequirement(r, who({ email: 'ada@evilexample.com', email_verified: true }), signedIn) ?? '', /verified email/);
    assert.match(
      unmetRequirement(r, who({ email: 'example.com@evil.org', email_verified: true }), signedIn) ?? '',
      /verified email/,
      'the domain is after the last @',
    );
    assert.match(unmetRequirement(r, who({}), signedIn) ?? '', /verified email/, 'no email at all');
  });

  test('every key given must hold (groups AND email domains AND amr); within a key any value suffices', () => {
    const r = req('/ops/*', { groups: ['ops', 'admins'], emailDomains: ['example.com'], amr: ['ed25519', 'hwk'] });
    const ok = { groups: ['admins'], email: 'ada@example.com', email_verified: true } as const;
    assert.equal(unmetRequirement(r, who(ok), signedIn), null);
    assert.match(unmetRequirement(r, who({ ...ok, groups: ['dev'] }), signedIn) ?? '', /groups/);
    assert.match(unmetRequirement(r, who({ ...ok, email_verified: false }), signedIn) ?? '', /verified email/);
    assert.match(unmetRequirement(r, who({ ...ok, amr: ['passkey'] }), signedIn) ?? '', /methods/);
    const withSubjects = req('/ops/*', { subjects: ['sub_b'], groups: ['ops'] });
    assert.match(
      unmetRequirement(withSubjects, who({ groups: ['ops'] }), signedIn) ?? '',
      /subject/,
      'the group does not stand in for the subject',
    );
  });

  test('what a requirement asks for, in words (the refusal page), never the allowed subjects', () => {
    assert.deepEqual(requirementNeeds(req('/a', { groups: ['ops', 'admins'] })), ['a member of ops or admins']);
    assert.deepEqual(requirementNeeds(req('/a', { groups: ['a', 'b', 'c'] })), ['a member of a, b or c']);
    assert.deepEqual(requirementNeeds(req('/a', { emailDomains: ['example.com'] })), ['an email at example.com, verified']);
    assert.deepEqual(requirementNeeds(req('/a', { emailDomains: ['xn--bcher-kva.example'] })), [
      'an email at xn--bcher-kva.example, verified',
    ]);
    const unicode = (d: string) => (d === 'xn--bcher-kva.example' ? 'bücher.example' : d);
    assert.deepEqual(requirementNeeds(req('/a', { emailDomains: ['example.com', 'xn--bcher-kva.example'] }), unicode), [
      'an email at example.com or bücher.example, verified',
    ]);
    const all = requirementNeeds(req('/a', { subjects: ['sub_secret'], amr: ['hwk'], maxAuthAgeSeconds: 300 }));
    assert.deepEqual(all, ['one of the accounts allowed here', 'a sign-in with hwk', 'a sign-in at most 300 seconds old']);
    assert.ok(!all.join(' ').includes('sub_secret'));
  });
});

describe('relayed websockets and their session', () => {
  const principal = makePrincipal({
    subject: 'sub_a',
    realm: 'application',
    session: 'ses_a',
    device: 'dev_a',
    claims: { amr: ['ed25519'], auth_time: '2026-11-22T10:00:00.000Z', exp: '2026-11-22T10:15:00.000Z' },
  });
  const exp = Date.parse('2026-11-22T10:15:00.000Z');
  const live = { id: 'ses_a', revokedAt: null, expiresAt: exp + 3600_000 };

  test('a websocket outlives its session: revoked, ended, unknown or another session closes it; a live one goes on', () => {
    assert.equal(relayedSessionEnd(principal, live, exp - 1), null);
    assert.equal(relayedSessionEnd(principal, { ...live, revokedAt: exp - 10 }, exp - 1), 'session_revoked');
    assert.equal(relayedSessionEnd(principal, { ...live, expiresAt: exp - 1 }, exp - 1), 'session_ended');
    assert.equal(relayedSessionEnd(principal, null, exp - 1), 'session_ended');
    assert.equal(relayedSessionEnd(principal, { ...live, id: 'ses_b' }, exp - 1), 'session_ended');
  });

  test('a websocket outlives its access token: the token that opened it expiring closes it, even with the store unreadable', () => {
    assert.equal(relayedSessionEnd(principal, live, exp), 'token_expired');
    assert.equal(relayedSessionEnd(principal, undefined, exp - 1), null, 'store unreadable: only expiry is judged');
    assert.equal(relayedSessionEnd(principal, undefined, exp), 'token_expired');
  });
});

test('svc credentials are recognised by shape, whatever their kind or validity', () => {
  for (const t of ['svca_x', 'svcr_01ABC', 'svcb_', 'svca_garbage']) assert.equal(isSvcCredential(t), true, t);
  for (const t of [undefined, '', 'eyJhbGciOiJIUzI1NiJ9.e30.x', 'SVCA_x', 'xsvca_']) assert.equal(isSvcCredential(t), false, String(t));
});

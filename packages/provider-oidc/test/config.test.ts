import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import type { ProviderJson } from '@svc/core';
import { DEFAULT_SCOPES, isLoopbackHost, parseOidcConfig, svcAuthProvider } from '../src/index.js';

const valid = { 'oidc/issuer': 'https://login.example.com', 'oidc/client-id': 'svc-app', 'oidc/client-secret': 'resolved-secret-value' };

test('the export is an AuthProvider of contract version 1, kind oidc, holding no credential of its own', () => {
  assert.equal(svcAuthProvider.contractVersion, 1);
  assert.equal(svcAuthProvider.kind, 'oidc');
  assert.equal(svcAuthProvider.credentialIdOf({ query: { code: 'c', state: 's' }, body: null }), null);
});

test('a complete config is valid; scopes default to openid, email, profile; provider/* policy keys are left to the service', () => {
  assert.deepEqual(svcAuthProvider.validateConfig({ ...valid, 'provider/realms': ['application'], 'provider/jit': true }), []);
  const parsed = parseOidcConfig(valid);
  assert.ok(parsed.config !== null);
  assert.deepEqual(parsed.config.scopes, DEFAULT_SCOPES);
  assert.deepEqual([...DEFAULT_SCOPES], ['openid', 'email', 'profile']);
  assert.equal(parsed.config.tokenEndpointAuth, 'client_secret_basic');
  assert.equal(parsed.config.insecureLoopback, false);
});

test('every problem is one line naming its key', () => {
  const problems = svcAuthProvider.validateConfig({
    'oidc/scopes': ['email'],
    'oidc/token-endpoint-auth': 'private_key_jwt',
    'oidc/isuer': 'x',
  });
  const keys = problems.map((p) => p.split(':')[0]);
  assert.deepEqual(keys.sort(), [
    'oidc/client-id',
    'oidc/client-secret',
    'oidc/issuer',
    'oidc/isuer',
    'oidc/scopes',
    'oidc/token-endpoint-auth',
  ]);
  for (const p of problems) assert.ok(!p.includes('\n'));
  assert.deepEqual(svcAuthProvider.validateConfig('not a map'), ['config: must be a map of :oidc/* keys']);
});

test('plain http is refused for an issuer on the network (a downgrade), accepted only on loopback', () => {
  const at = (issuer: string): readonly string[] => svcAuthProvider.validateConfig({ ...valid, 'oidc/issuer': issuer });
  assert.match(at('http://login.example.com')[0] ?? '', /^oidc\/issuer: .*must use https/);
  assert.match(at('http://10.0.0.5:8080')[0] ?? '', /must use https/);
  assert.match(at('http://127.0.0.1.evil.example')[0] ?? '', /must use https/);
  assert.match(at('ftp://login.example.com')[0] ?? '', /must be an https URL/);
  assert.match(at('https://login.example.com/?tenant=a')[0] ?? '', /query or fragment/);
  assert.match(at('https://user:pw@login.example.com')[0] ?? '', /user name or password/);
  assert.match(at('login.example.com')[0] ?? '', /is not a URL/);
  for (const loopback of ['http://127.0.0.1:9000', 'http://localhost:9000', 'http://[::1]:9000']) {
    assert.deepEqual(at(loopback), []);
    assert.equal(parseOidcConfig({ ...valid, 'oidc/issuer': loopback }).config?.insecureLoopback, true);
  }
  assert.equal(parseOidcConfig({ ...valid, 'oidc/issuer': 'https://127.0.0.1:9000' }).config?.insecureLoopback, false);
  assert.equal(isLoopbackHost('127.300.0.1'), false);
});

test('a missing or empty client secret is refused without echoing any value', () => {
  for (const secret of [undefined, '', 42, null] as (ProviderJson | undefined)[]) {
    const config: Record<string, ProviderJson> = { ...valid };
    if (secret === undefined) delete config['oidc/client-secret'];
    else config['oidc/client-secret'] = secret;
    const problems = svcAuthProvider.validateConfig(config);
    assert.equal(problems.length, 1);
    assert.match(problems[0] ?? '', /^oidc\/client-secret: required/);
  }
  const wrongId = svcAuthProvider.validateConfig({ ...valid, 'oidc/client-id': '  ' });
  assert.ok(wrongId.every((p) => !p.includes(valid['oidc/client-secret'])));
});

test('scopes must be scope tokens and include openid (without it there is no ID token)', () => {
  const at = (scopes: ProviderJson): readonly string[] => svcAuthProvider.validateConfig({ ...valid, 'oidc/scopes': scopes });
  assert.deepEqual(at(['openid', 'email', 'groups']), []);
  assert.match(at(['email'])[0] ?? '', /must include "openid"/);
  assert.match(at([])[0] ?? '', /non-empty list/);
  assert.match(at(['openid email'])[0] ?? '', /non-empty list/);
  assert.match(at('openid')[0] ?? '', /non-empty list/);
});

test('begin and finish refuse an invalid config, and finish refuses a flow state it did not make', async () => {
  const ctx = {
    realm: 'application' as const,
    intent: 'signin' as const,
    origin: 'https://app.example.com',
    callbackUrl: 'https://app.example.com/.svc/auth/v1/providers/corp/callback',
    subject: null,
    existingCredentials: [],
  };
  await assert.rejects(svcAuthProvider.begin(ctx, { ...valid, 'oidc/issuer': 'http://login.example.com' }), { code: 'invalid_config' });
  const request = { query: { code: 'c', state: 's' }, body: null };
  await assert.rejects(svcAuthProvider.finish(ctx, valid, { state: { v: 1 }, request, credential: null }), { code: 'invalid_flow_state' });
  const flow = { v: 1, issuer: 'https://other.example.com', redirectUri: ctx.callbackUrl, state: 's', nonce: 'n', codeVerifier: 'v' };
  await assert.rejects(svcAuthProvider.finish(ctx, valid, { state: flow, request, credential: null }), {
    code: 'invalid_flow_state',
    message: 'the flow was begun for another issuer',
  });
  const otherCallback = { ...flow, issuer: valid['oidc/issuer'], redirectUri: 'https://evil.example.com/callback' };
  await assert.rejects(svcAuthProvider.finish(ctx, valid, { state: otherCallback, request, credential: null }), {
    code: 'invalid_flow_state',
    message: 'the flow was begun for another callback URL',
  });
});

test('the svc-addon.json manifest names this package and points svc/auth-provider at the built svcAuthProvider', async () => {
  const dir = new URL('../', import.meta.url);
  const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { name: string; version: string };
  const manifest = JSON.parse(readFileSync(new URL('svc-addon.json', dir), 'utf8')) as {
    name: string;
    version: string;
    exports: Record<string, { entry: string; export: string }>;
    operations: unknown[];
    native: unknown;
  };
  assert.equal(manifest.name, pkg.name);
  assert.equal(manifest.version, pkg.version);
  assert.deepEqual(Object.keys(manifest.exports), ['svc/auth-provider']);
  assert.deepEqual(manifest.exports['svc/auth-provider'], { entry: './dist/index.js', export: 'svcAuthProvider' });
  assert.deepEqual(manifest.operations, []);
  assert.equal(manifest.native, null);
  const built = (await import(new URL('dist/index.js', dir).href)) as Record<string, unknown>;
  assert.equal((built.svcAuthProvider as { kind?: unknown } | undefined)?.kind, 'oidc');
});

test('a plain-http loopback issuer whose endpoints leave the machine over http is refused (no downgrade through a local issuer)', async () => {
  const server = createServer((req, res) => {
    if (req.url !== '/.well-known/openid-configuration') return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        issuer,
        authorization_endpoint: `${issuer}/auth`,
        token_endpoint: 'http://login.example.com/token',
        jwks_uri: `${issuer}/jwks`,
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['ES256'],
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const ctx = {
      realm: 'application' as const,
      intent: 'signin' as const,
      origin: 'http://127.0.0.1:1',
      callbackUrl: 'http://127.0.0.1:1/callback',
      subject: null,
      existingCredentials: [],
    };
    await assert.rejects(svcAuthProvider.begin(ctx, { ...valid, 'oidc/issuer': issuer }), {
      code: 'discovery_failed',
      message: `discovery of ${issuer} failed: token_endpoint http://login.example.com/token leaves this machine over plain http`,
    });
  } finally {
    server.close();
  }
});

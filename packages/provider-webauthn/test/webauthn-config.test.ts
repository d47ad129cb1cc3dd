import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ProviderContext } from '@svc/core';
import { createWebAuthnProvider, readWebAuthnConfig, webauthnProvider } from '@svc/provider-webauthn';

const GOOD = {
  'webauthn/rp-id': 'example.com',
  'webauthn/rp-name': 'Example',
  'webauthn/origins': ['https://example.com', 'https://app.example.com'],
};

test('a complete configuration is accepted, with preferred user verification and a 5-minute timeout by default', () => {
  assert.deepEqual(webauthnProvider.validateConfig(GOOD), []);
  const { config } = readWebAuthnConfig(GOOD);
  assert.equal(config?.userVerification, 'preferred');
  assert.equal(config?.timeoutMs, 300_000);
  assert.equal(webauthnProvider.contractVersion, 1);
  assert.equal(webauthnProvider.kind, 'webauthn');
});

test("the service's provider/* keys are ignored; any other unknown key is refused by name", () => {
  assert.deepEqual(webauthnProvider.validateConfig({ ...GOOD, 'provider/jit': true, 'provider/realms': ['application'] }), []);
  const problems = webauthnProvider.validateConfig({ ...GOOD, 'webauthn/rpid': 'x' });
  assert.equal(problems.length, 1);
  assert.match(problems[0] ?? '', /^:webauthn\/rpid: unknown key/);
});

test('every problem is one line naming its key', () => {
  const problems = webauthnProvider.validateConfig({
    'webauthn/rp-id': 'https://example.com',
    'webauthn/rp-name': '',
    'webauthn/origins': ['http://example.com', 'https://example.com/login', 'https://evil.test', 7],
    'webauthn/user-verification': 'always',
    'webauthn/timeout-seconds': 5,
  });
  const keys = problems.map((p) => p.split(': ')[0]);
  assert.deepEqual(keys.sort(), [
    ':webauthn/origins',
    ':webauthn/origins',
    ':webauthn/origins',
    ':webauthn/origins',
    ':webauthn/rp-id',
    ':webauthn/rp-name',
    ':webauthn/timeout-seconds',
    ':webauthn/user-verification',
  ]);
  for (const p of problems) assert.ok(!p.includes('\n'), p);
  assert.deepEqual(webauthnProvider.validateConfig(null), ['config: must be a map of :webauthn/* keys']);
  assert.deepEqual(
    webauthnProvider.validateConfig({}).map((p) => p.split(': ')[0]),
    [':webauthn/rp-id', ':webauthn/rp-name', ':webauthn/origins'],
  );
});

test('plain http is accepted only on localhost and 127.0.0.1, and origins must sit on the RP id', () => {
  const local = { 'webauthn/rp-id': 'localhost', 'webauthn/rp-name': 'dev', 'webauthn/origins': ['http://localhost:8080'] };
  assert.deepEqual(webauthnProvider.validateConfig(local), []);
  assert.match(webauthnProvider.validateConfig({ ...GOOD, 'webauthn/origins': ['http://example.com'] })[0] ?? '', /must use https/);
  assert.match(
    webauthnProvider.validateConfig({ ...GOOD, 'webauthn/origins': ['https://notexample.com'] })[0] ?? '',
    /not on the relying party id/,
  );
  assert.match(webauthnProvider.validateConfig({ ...GOOD, 'webauthn/rp-id': '127.0.0.1' })[0] ?? '', /^:webauthn\/rp-id:/);
});

test('health is ok with a valid configuration and down naming the key otherwise', async () => {
  assert.deepEqual(await webauthnProvider.health(GOOD), { status: 'ok' });
  const bad = await webauthnProvider.health({ ...GOOD, 'webauthn/user-verification': 'sometimes' });
  assert.equal(bad.status, 'down');
  assert.match(bad.detail ?? '', /:webauthn\/user-verification/);
});

const ctx = (intent: ProviderContext['intent'], existing: string[] = []): ProviderContext => ({
  realm: 'application',
  intent,
  origin: 'https://example.com',
  callbackUrl: 'https://example.com/.svc/auth/v1/providers/passkey/callback',
  subject: intent === 'link' ? 'usr_1' : null,
  existingCredentials: existing,
});

test('registration options: discoverable, existing passkeys excluded, a random user handle, the challenge kept in the state', async () => {
  const provider = createWebAuthnProvider();
  const a = await provider.begin(ctx('link', ['AAAA', 'BBBB']), { ...GOOD, 'webauthn/user-verification': 'required' });
  const b = await provider.begin(ctx('signup'), GOOD);
  assert.equal(a.reply.kind, 'json');
  const opts = (a.reply.kind === 'json' ? a.reply.body : null) as Record<string, unknown>;
  const optsB = (b.reply.kind === 'json' ? b.reply.body : null) as Record<string, unknown>;
  assert.deepEqual(
    (opts.excludeCredentials as { id: string }[]).map((c) => c.id),
    ['AAAA', 'BBBB'],
  );
  assert.equal((opts.authenticatorSelection as Record<string, string>).residentKey, 'required');
  assert.equal((opts.authenticatorSelection as Record<string, string>).userVerification, 'required');
  assert.equal((opts.rp as Record<string, string>).id, 'example.com');
  assert.notEqual((opts.user as Record<string, string>).id, (optsB.user as Record<string, string>).id);
  assert.equal((a.state as Record<string, string>).challenge, opts.challenge);
  assert.notEqual(opts.challenge, optsB.challenge);
});

test('sign-in options name no credential (discoverable) and keep the challenge in the state', async () => {
  const r = await webauthnProvider.begin(ctx('signin'), GOOD);
  const opts = (r.reply.kind === 'json' ? r.reply.body : null) as Record<string, unknown>;
  assert.deepEqual(opts.allowCredentials ?? [], []);
  assert.equal(opts.rpId, 'example.com');
  assert.equal((r.state as Record<string, string>).challenge, opts.challenge);
});

test('credentialIdOf reads only a bounded base64url id equal to rawId', () => {
  const id = (body: unknown) => webauthnProvider.credentialIdOf({ query: {}, body: body as never });
  assert.equal(id({ id: 'abc_-9', rawId: 'abc_-9' }), 'abc_-9');
  assert.equal(id({ id: 'abc', rawId: 'abd' }), null);
  assert.equal(id({ id: 'a+b/', rawId: 'a+b/' }), null);
  assert.equal(id({ id: 'a'.repeat(1365), rawId: 'a'.repeat(1365) }), null);
  assert.equal(id(null), null);
  assert.equal(id(['x']), null);
});

test('a sign-in finish without a stored credential, or with a forged state, is refused', async () => {
  const provider = createWebAuthnProvider();
  const begun = await provider.begin(ctx('signin'), GOOD);
  const body = {
    id: 'AAAA',
    rawId: 'AAAA',
    type: 'public-key',
    response: { clientDataJSON: 'e30', authenticatorData: 'AA', signature: 'AA' },
  };
  const reason = (p: Promise<unknown>) =>
    p.then(
      () => 'accepted',
      (e: Error & { reason?: string }) => e.reason,
    );
  assert.equal(
    await reason(provider.finish(ctx('signin'), GOOD, { state: begun.state, request: { query: {}, body }, credential: null })),
    'unknown_credential',
  );
  assert.equal(
    await reason(provider.finish(ctx('signin'), GOOD, { state: { challenge: 'x' }, request: { query: {}, body }, credential: null })),
    'bad_state',
  );
  // A sign-in state cannot finish a registration.
  assert.equal(
    await reason(provider.finish(ctx('signup'), GOOD, { state: begun.state, request: { query: {}, body }, credential: null })),
    'bad_state',
  );
});

// The WebAuthn provider against a real browser: Debian's Chromium with a CDP virtual
// authenticator (test-support/browser.ts), the page's script using the browser's own JSON
// helpers, and a harness standing in for the service (./harness.ts).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ProviderContext, ProviderJson } from '@svc/core';
import { createWebAuthnProvider } from '@svc/provider-webauthn';
import { type FinishOutcome, type Harness, startHarness } from '../harness.js';
import { addAuthenticator, launchBrowser, pageWithAuthenticator } from '../repo.js';

type Browser = Awaited<ReturnType<typeof launchBrowser>>;
type AuthPage = Awaited<ReturnType<typeof pageWithAuthenticator>>;

/** A credential as the browser's `credential.toJSON()` gives it. */
type CredentialJson = { readonly id: string } & { readonly [key: string]: ProviderJson };

interface CeremonyResult {
  readonly flow: string;
  readonly options: Record<string, unknown>;
  readonly credential: CredentialJson;
  readonly outcome: FinishOutcome;
}

/** What the harness page's script offers (harness.ts): the browser side of the service's routes. */
interface PageApi {
  svc: {
    begin(intent: string): Promise<{ flow: string; options: ProviderJson }>;
    get(options: ProviderJson, tamper?: object): Promise<CredentialJson>;
    finish(flow: string, credential: CredentialJson): Promise<FinishOutcome>;
    ceremony(intent: string, tamper: object): Promise<CeremonyResult>;
  };
}
let browser: Browser;
const opened: { close(): Promise<void> }[] = [];

before(async () => {
  browser = await launchBrowser();
});

after(async () => {
  for (const o of opened.reverse()) await o.close().catch(() => {});
  await browser?.close();
});

function webauthnConfig(origins: string[], extra: Record<string, string | number> = {}) {
  return { 'webauthn/rp-id': 'localhost', 'webauthn/rp-name': 'svc test', 'webauthn/origins': origins, 'provider/jit': true, ...extra };
}

async function harness(options: Parameters<typeof startHarness>[0]): Promise<Harness> {
  const h = await startHarness(options);
  opened.push(h);
  return h;
}

async function authPage(h: Harness): Promise<AuthPage> {
  const p = await pageWithAuthenticator(browser);
  opened.push(p.context);
  await p.page.goto(h.origin);
  return p;
}

async function ceremony(
  p: AuthPage,
  intent: 'signup' | 'link' | 'signin',
  tamper: { userVerification?: string; residentKey?: string } = {},
): Promise<CeremonyResult> {
  const result: unknown = await p.page.evaluate(([i, t]) => (globalThis as unknown as PageApi).svc.ceremony(i, t), [
    intent,
    tamper,
  ] as const);
  return result as CeremonyResult;
}

/** Makes an assertion in the page for options begun elsewhere, without finishing it. */
async function assertion(p: AuthPage, options: ProviderJson): Promise<CredentialJson> {
  const result: unknown = await p.page.evaluate((o) => (globalThis as unknown as PageApi).svc.get(o as never), options as never);
  return result as CredentialJson;
}

/** The provider's data of a credential the harness stores. */
function storedData(h: Harness, id: string): Record<string, unknown> {
  const c = h.credentials.get(id);
  assert.ok(c !== undefined, `no stored credential ${id}`);
  return c.data as Record<string, unknown>;
}

function assertOk(outcome: FinishOutcome): asserts outcome is Extract<FinishOutcome, { ok: true }> {
  assert.ok(outcome.ok, `expected success, got ${outcome.ok ? '' : `${outcome.reason}: ${outcome.message}`}`);
}

test('a passkey registered at signup signs in, and signs in again after sign-out', async () => {
  const h = await harness({ provider: createWebAuthnProvider(), config: (origin) => webauthnConfig([origin]) });
  const p = await authPage(h);

  const signup = await ceremony(p, 'signup');
  assertOk(signup.outcome);
  // The options asked for a discoverable credential with a random user handle.
  const sel = signup.options.authenticatorSelection as Record<string, unknown>;
  assert.equal(sel.residentKey, 'required');
  assert.equal(sel.userVerification, 'preferred');
  assert.equal(signup.outcome.subject, signup.credential.id);
  const stored = h.credentials.get(signup.credential.id);
  assert.ok(stored !== undefined);
  const data = stored.data as Record<string, unknown>;
  assert.equal(typeof data.public_key, 'string');
  assert.deepEqual(data.transports, ['internal']);
  assert.equal(typeof signup.outcome.claims.backed_up, 'boolean');
  assert.ok(signup.outcome.claims.device_type === 'singleDevice' || signup.outcome.claims.device_type === 'multiDevice');
  // The authenticator really holds it as a resident (discoverable) credential.
  const { credentials } = await p.cdp.send('WebAuthn.getCredentials', { authenticatorId: p.authenticatorId });
  assert.equal(credentials.length, 1);
  assert.equal(credentials[0]?.isResidentCredential, true);

  const first = await ceremony(p, 'signin');
  assert.deepEqual(first.options.allowCredentials ?? [], [], 'discoverable sign-in names no credential');
  assertOk(first.outcome);
  assert.equal(first.outcome.subject, signup.credential.id);
  assert.ok(h.sessions.has(first.outcome.session));

  // Sign out: the harness drops the session, as the service's logout revokes it.
  h.sessions.delete(first.outcome.session);
  assert.equal(h.sessions.has(first.outcome.session), false);

  const again = await ceremony(p, 'signin');
  assertOk(again.outcome);
  assert.equal(again.outcome.subject, signup.credential.id);
  assert.notEqual(again.outcome.session, first.outcome.session);
  assert.ok((again.outcome.counter ?? 0) > (first.outcome.counter ?? 0), 'the counter moved forward');
  assert.equal(h.credentials.get(signup.credential.id)?.counter, again.outcome.counter);
});

test('a cloned authenticator (an exported passkey with a lower sign count) is refused by the provider', async () => {
  const h = await harness({ provider: createWebAuthnProvider(), config: (origin) => webauthnConfig([origin]) });
  const original = await authPage(h);
  assertOk((await ceremony(original, 'signup')).outcome);
  assertOk((await ceremony(original, 'signin')).outcome);

  // The attacker copies the key (private key and sign count) off the authenticator...
  const { credentials } = await original.cdp.send('WebAuthn.getCredentials', { authenticatorId: original.authenticatorId });
  const copy = credentials[0];
  assert.ok(copy !== undefined);
  // ...the owner keeps using the original, so the service's counter moves past the copy's.
  const later = await ceremony(original, 'signin');
  assertOk(later.outcome);
  assert.ok((later.outcome.counter ?? 0) > copy.signCount);

  const clone = await authPage(h);
  await clone.cdp.send('WebAuthn.addCredential', { authenticatorId: clone.authenticatorId, credential: copy });
  const counterBefore = h.credentials.get(copy.credentialId)?.counter;
  const attempt = await ceremony(clone, 'signin');
  assert.equal(attempt.credential.id, later.credential.id, 'the clone answered with the same passkey');
  assert.equal(attempt.outcome.ok, false);
  assert.equal(attempt.outcome.ok ? '' : attempt.outcome.reason, 'counter_regression', 'refused by the provider, before the store');
  assert.equal(h.credentials.get(copy.credentialId)?.counter, counterBefore, 'the stored counter is untouched');
});

const SIGNIN = (h: Harness): ProviderContext => ({
  realm: 'application',
  intent: 'signin',
  origin: h.origin,
  callbackUrl: `${h.origin}/callback`,
  subject: null,
  existingCredentials: [],
});

/** The refusal of a provider call as `reason: message`, or 'accepted'. */
function refusalOf(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => 'accepted',
    (e: Error & { reason?: string }) => `${e.reason}: ${e.message}`,
  );
}

test('a replayed assertion is refused: the same flow again, on a fresh flow, and the same state given to the provider twice', async () => {
  const provider = createWebAuthnProvider();
  let config: ProviderJson = null;
  const h = await harness({
    provider,
    config: (origin) => {
      config = webauthnConfig([origin]);
      return config;
    },
  });
  const p = await authPage(h);
  const signup = await ceremony(p, 'signup');
  assertOk(signup.outcome);
  const registered = h.credentials.get(signup.credential.id);
  assert.ok(registered !== undefined);
  const signin = await ceremony(p, 'signin');
  assertOk(signin.outcome);
  const sessions = h.sessions.size;

  // 1. The captured assertion posted again with its flow: the flow was consumed.
  const sameFlow = await h.finish(signin.flow, signin.credential);
  assert.equal(sameFlow.ok ? '' : sameFlow.reason, 'unknown_flow');

  // 2. The captured assertion on a fresh flow: it signed another challenge. The credential is
  // given as it was before that sign-in, so the counter alone would not catch it.
  const fresh = await provider.begin(SIGNIN(h), config);
  const onFresh = { state: fresh.state, request: { query: {}, body: signin.credential }, credential: registered };
  assert.match(
    await refusalOf(provider.finish(SIGNIN(h), config, onFresh)),
    /^not_verified: .*unexpected authentication response challenge/i,
  );

  // 3. The provider itself, given the same state and response twice (a service that failed to
  // consume its flow): the second is refused as a replay, again with the counter out of play.
  const begun = await provider.begin(SIGNIN(h), config);
  assert.equal(begun.reply.kind, 'json');
  const made = await assertion(p, begun.reply.kind === 'json' ? begun.reply.body : null);
  const current = h.credentials.get(signup.credential.id);
  assert.ok(current !== undefined);
  const input = { state: begun.state, request: { query: {}, body: made }, credential: current };
  const first = await provider.finish(SIGNIN(h), config, input);
  assert.equal(first.identity.subject, signup.credential.id);
  assert.match(await refusalOf(provider.finish(SIGNIN(h), config, input)), /^replayed: /);
  assert.equal(h.sessions.size, sessions, 'no session came of any replay');
});

test('an expired challenge is refused', async () => {
  let skewMs = 0;
  const h = await harness({
    provider: createWebAuthnProvider({ now: () => Date.now() + skewMs }),
    config: (origin) => webauthnConfig([origin], { 'webauthn/timeout-seconds': 60 }),
  });
  const p = await authPage(h);
  assertOk((await ceremony(p, 'signup')).outcome);
  const begun: unknown = await p.page.evaluate(() => (globalThis as unknown as PageApi).svc.begin('signin'));
  const { flow, options } = begun as { flow: string; options: ProviderJson };
  const credential = await assertion(p, options);
  // The provider's clock passes the timeout between begin and finish.
  skewMs = 61_000;
  const late: unknown = await p.page.evaluate(([f, c]) => (globalThis as unknown as PageApi).svc.finish(f, c as never), [
    flow,
    credential as never,
  ] as const);
  assert.equal((late as FinishOutcome).ok ? '' : (late as { reason: string }).reason, 'expired');
  // On time, the same passkey still signs in.
  skewMs = 0;
  assertOk((await ceremony(p, 'signin')).outcome);
});

test('an assertion made on an origin not in webauthn/origins is refused', async () => {
  const good = await harness({ provider: createWebAuthnProvider(), config: (origin) => webauthnConfig([origin]) });
  // A second origin on the same RP id (localhost), sharing the store but configured for the first origin only.
  const other = await harness({
    provider: createWebAuthnProvider(),
    config: () => webauthnConfig([good.origin]),
    credentials: good.credentials,
  });
  const p = await authPage(good);
  assertOk((await ceremony(p, 'signup')).outcome);
  await p.page.goto(other.origin);
  const signin = await ceremony(p, 'signin');
  assert.equal(signin.outcome.ok ? '' : signin.outcome.reason, 'not_verified');
  assert.match(signin.outcome.ok ? '' : signin.outcome.message, /unexpected authentication response origin/i);
  // And registration on the wrong origin is refused the same way.
  const q = await authPage(other);
  const signup = await ceremony(q, 'signup');
  assert.equal(signup.outcome.ok ? '' : signup.outcome.reason, 'not_verified');
  assert.match(signup.outcome.ok ? '' : signup.outcome.message, /unexpected registration response origin/i);
  assert.equal(good.credentials.has(signup.credential.id), false);
});

test('user verification required: an assertion without it is refused, even from a client that ignores the policy', async () => {
  const h = await harness({
    provider: createWebAuthnProvider(),
    config: (origin) => webauthnConfig([origin], { 'webauthn/user-verification': 'required' }),
  });
  const p = await authPage(h);
  const signup = await ceremony(p, 'signup');
  assertOk(signup.outcome);
  assert.equal((signup.options.authenticatorSelection as Record<string, unknown>).userVerification, 'required');
  assert.equal(signup.outcome.claims.user_verified, true);
  assertOk((await ceremony(p, 'signin')).outcome);

  // The authenticator now fails verification, and the page does not ask for it.
  await p.cdp.send('WebAuthn.setUserVerified', { authenticatorId: p.authenticatorId, isUserVerified: false });
  const attempt = await ceremony(p, 'signin', { userVerification: 'discouraged' });
  assert.equal(attempt.outcome.ok, false);
  assert.equal(attempt.outcome.ok ? '' : attempt.outcome.reason, 'not_verified');
  assert.match(attempt.outcome.ok ? '' : attempt.outcome.message, /user could not be verified/);
  // The assertion itself was well formed: only the missing UV flag refused it.
  assert.equal(attempt.credential.id, signup.credential.id);
  // A registration without user verification is refused the same way, and nothing is stored:
  // from a security key that cannot verify users (the tampering client also drops the resident key).
  await p.cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId: p.authenticatorId });
  await addAuthenticator(p.cdp, { transport: 'usb', hasResidentKey: false, hasUserVerification: false, isUserVerified: false });
  const unverified = await ceremony(p, 'signup', { userVerification: 'discouraged', residentKey: 'discouraged' });
  assert.equal(unverified.outcome.ok ? '' : unverified.outcome.reason, 'not_verified');
  assert.match(unverified.outcome.ok ? '' : unverified.outcome.message, /user could not be verified/);
  assert.equal(h.credentials.has(unverified.credential.id), false);
  assert.equal(h.credentials.size, 1);
});

test('linking a second passkey excludes the ones the subject has: the same authenticator is refused, another one links', async () => {
  const h = await harness({ provider: createWebAuthnProvider(), config: (origin) => webauthnConfig([origin]) });
  const p = await authPage(h);
  const first = await ceremony(p, 'signup');
  assertOk(first.outcome);

  const again = await p.page
    .evaluate(() => (globalThis as unknown as PageApi).svc.ceremony('link', {}))
    .then(
      () => 'created',
      (e: Error) => e.message,
    );
  assert.match(again, /InvalidStateError/, 'the authenticator holding an excluded credential refuses to make another');
  assert.equal(h.credentials.size, 1);

  const other = await authPage(h);
  const linked = await ceremony(other, 'link');
  assert.deepEqual(
    (linked.options.excludeCredentials as { id: string }[]).map((c) => c.id),
    [first.credential.id],
  );
  assertOk(linked.outcome);
  assert.notEqual(linked.credential.id, first.credential.id);
  assert.equal(h.credentials.size, 2);
  assertOk((await ceremony(other, 'signin')).outcome);
});

test('backup flags: a passkey that becomes backed up signs in with backed_up updated; one whose backup eligibility changes is refused', async () => {
  const h = await harness({ provider: createWebAuthnProvider(), config: (origin) => webauthnConfig([origin]) });
  const p = await authPage(h);
  // A synced-passkey provider: backup eligible, not yet backed up.
  await p.cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId: p.authenticatorId });
  const authenticatorId = await addAuthenticator(p.cdp, { defaultBackupEligibility: true, defaultBackupState: false });
  const signup = await ceremony(p, 'signup');
  assertOk(signup.outcome);
  assert.equal(signup.outcome.claims.device_type, 'multiDevice');
  assert.equal(signup.outcome.claims.backed_up, false);
  const id = signup.credential.id;
  // CDP's binary fields are standard base64, WebAuthn's ids base64url.
  const credentialId = Buffer.from(id, 'base64url').toString('base64');

  await p.cdp.send('WebAuthn.setCredentialProperties', { authenticatorId, credentialId, backupEligibility: true, backupState: true });
  const synced = await ceremony(p, 'signin');
  assertOk(synced.outcome);
  assert.equal(synced.outcome.claims.backed_up, true);
  assert.equal(storedData(h, id).backed_up, true);

  // Backup eligibility is fixed when the credential is made: a change means another authenticator.
  await p.cdp.send('WebAuthn.setCredentialProperties', { authenticatorId, credentialId, backupEligibility: false, backupState: false });
  const changed = await ceremony(p, 'signin');
  assert.equal(changed.outcome.ok ? '' : changed.outcome.reason, 'device_type_changed');
  assert.equal(storedData(h, id).device_type, 'multiDevice');
});

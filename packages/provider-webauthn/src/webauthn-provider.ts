import { randomBytes } from 'node:crypto';
import {
  type AuthenticationResponseJSON,
  generateAuthenticationOptions,
  generateRegistrationOptions,
  type RegistrationResponseJSON,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
} from '@simplewebauthn/server';
import type {
  AuthProvider,
  ProviderBeginResult,
  ProviderContext,
  ProviderFinishResult,
  ProviderHealth,
  ProviderJson,
  ProviderRequest,
  StoredCredential,
} from '@svc/core';
import { readWebAuthnConfig, type WebAuthnConfig } from './config.js';
import { type CeremonyState, decodeState, encodeState } from './state.js';

/** The contract version this package implements (core's `PROVIDER_CONTRACT_VERSION`; core is a type-only dependency). */
const CONTRACT_VERSION = 1;
/** A WebAuthn credential id is at most 1023 bytes: 1364 base64url characters. */
const MAX_CREDENTIAL_ID_CHARS = 1364;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
/** A finished response larger than this is not a passkey ceremony (attestation 'none' keeps it small). */
const MAX_RESPONSE_FIELD_CHARS = 64 * 1024;
const TRANSPORTS: ReadonlySet<string> = new Set(['ble', 'cable', 'hybrid', 'internal', 'nfc', 'smart-card', 'usb']);
/** A state issued this far in the future is not ours (clock skew between the service and this process is nil: same host). */
const FUTURE_SKEW_MS = 5_000;
/** How many consumed challenges a provider process remembers (each for the ceremony timeout at most). */
const MAX_CONSUMED = 100_000;

/** A stable reason code for each refusal. */
export type WebAuthnRefusalReason =
  | 'bad_config'
  | 'bad_state'
  | 'expired'
  | 'replayed'
  | 'bad_response'
  | 'not_verified'
  | 'unknown_credential'
  | 'counter_regression'
  | 'device_type_changed';

/** A refused ceremony: an `Error` named `WebAuthnRefusal` with its `reason`. */
export type WebAuthnRefusal = Error & { readonly reason: WebAuthnRefusalReason };

/**
 * Why a ceremony was refused: one line, never a secret. Not an error class of its own: a
 * refusal crosses the provider boundary as a message, and the service answers with its own
 * code (core's registry), never with the provider's.
 */
function refusal(reason: WebAuthnRefusalReason, message: string): WebAuthnRefusal {
  return Object.assign(new Error(message), { name: 'WebAuthnRefusal', reason });
}

/**
 * The reason of a refusal this provider threw, or null for anything else.
 *
 * @example
 * try { await provider.finish(ctx, config, input); } catch (e) { if (refusalReason(e) === 'expired') beginAgain(); }
 */
export function refusalReason(error: unknown): WebAuthnRefusalReason | null {
  return error instanceof Error && error.name === 'WebAuthnRefusal' && typeof (error as { reason?: unknown }).reason === 'string'
    ? (error as WebAuthnRefusal).reason
    : null;
}

/** Options for tests and embedders: the clock (the service's flows expire on the service's clock; this one is the provider's own check). */
export interface WebAuthnProviderOptions {
  /** Milliseconds since the epoch; defaults to `Date.now`. */
  readonly now?: () => number;
}

/** The credential data this provider keeps in the service's link (opaque to the service). */
interface CredentialData {
  readonly publicKey: string;
  readonly transports: string[];
  readonly backedUp: boolean;
  readonly deviceType: 'singleDevice' | 'multiDevice';
  readonly userId: string | null;
}

function isRecord(v: ProviderJson | undefined): v is { readonly [key: string]: ProviderJson } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function b64url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64url');
}

/** The library's options as plain JSON (no `undefined` members): only JSON crosses the provider boundary. */
function asJson(options: object): ProviderJson {
  return JSON.parse(JSON.stringify(options)) as ProviderJson;
}

function configOrThrow(raw: ProviderJson): WebAuthnConfig {
  const { config, problems } = readWebAuthnConfig(raw);
  if (config === null) throw refusal('bad_config', `webauthn provider misconfigured: ${problems.join('; ')}`);
  return config;
}

function isCredentialId(v: ProviderJson | undefined): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= MAX_CREDENTIAL_ID_CHARS && BASE64URL.test(v);
}

/** The browser's `credential.toJSON()`, shape-checked and bounded before the library parses it. */
function responseOf(
  request: ProviderRequest,
  kind: 'registration' | 'authentication',
): RegistrationResponseJSON & AuthenticationResponseJSON {
  const body = request.body;
  if (!isRecord(body)) throw refusal('bad_response', 'the request body is not a WebAuthn credential (credential.toJSON())');
  const { id, rawId, type, response } = body;
  if (!isCredentialId(id) || rawId !== id) throw refusal('bad_response', 'the credential id is missing, malformed or too long');
  if (type !== 'public-key') throw refusal('bad_response', 'the credential type is not public-key');
  if (!isRecord(response)) throw refusal('bad_response', 'the credential has no response');
  const fields = kind === 'registration' ? ['clientDataJSON', 'attestationObject'] : ['clientDataJSON', 'authenticatorData', 'signature'];
  for (const f of fields) {
    const v = response[f];
    if (typeof v !== 'string' || v.length === 0 || v.length > MAX_RESPONSE_FIELD_CHARS || !BASE64URL.test(v))
      throw refusal('bad_response', `the credential's response.${f} is missing or malformed`);
  }
  // The library reads these fields only; the cast is to its JSON type after the checks above.
  return body as unknown as RegistrationResponseJSON & AuthenticationResponseJSON;
}

function transportsOf(v: ProviderJson | undefined): string[] {
  if (!Array.isArray(v)) return [];
  return v.filter((t): t is string => typeof t === 'string' && TRANSPORTS.has(t)).slice(0, TRANSPORTS.size);
}

function credentialDataOf(stored: StoredCredential): CredentialData {
  const d = stored.data;
  if (!isRecord(d)) throw refusal('unknown_credential', 'the stored credential is not a WebAuthn credential');
  const { public_key, transports, backed_up, device_type, user_id } = d;
  if (typeof public_key !== 'string' || !BASE64URL.test(public_key) || public_key.length > 4096)
    throw refusal('unknown_credential', 'the stored credential has no public key');
  if (device_type !== 'singleDevice' && device_type !== 'multiDevice')
    throw refusal('unknown_credential', 'the stored credential has no device type');
  return {
    publicKey: public_key,
    transports: transportsOf(transports),
    backedUp: backed_up === true,
    deviceType: device_type,
    userId: typeof user_id === 'string' ? user_id : null,
  };
}

function credentialDataJson(d: CredentialData): ProviderJson {
  return { public_key: d.publicKey, transports: d.transports, backed_up: d.backedUp, device_type: d.deviceType, user_id: d.userId };
}

/**
 * Creates the WebAuthn (passkey) provider: the `svc/auth-provider` export of this package.
 * It runs the two ceremonies with `@simplewebauthn/server` and returns what it proved; the
 * service keeps the flow state and the stored credential, creates the session and enforces
 * the counter in its store as well.
 *
 * @example
 * const provider = createWebAuthnProvider();
 * const { state, reply } = await provider.begin(ctx, config); // reply.body: the options for the browser
 * const result = await provider.finish(ctx, config, { state, request: { query: {}, body: credentialJson }, credential: null });
 */
export function createWebAuthnProvider(options: WebAuthnProviderOptions = {}): AuthProvider {
  const now = options.now ?? Date.now;
  // Challenges this process has already seen finished, until they would have expired anyway:
  // a replayed finish (same state, same response) is refused here too, not only by the
  // service's single-use flow. Entries are added in about expiry order, so pruning walks from the
  // front; the size cap bounds memory whatever a caller sends.
  const consumed = new Map<string, number>();

  function consume(state: CeremonyState, timeoutMs: number): void {
    const t = now();
    for (const [challenge, expires] of consumed) {
      if (expires > t && consumed.size < MAX_CONSUMED) break;
      consumed.delete(challenge);
    }
    if (consumed.has(state.challenge)) throw refusal('replayed', 'this ceremony was already finished (replayed challenge)');
    consumed.set(state.challenge, state.issuedAt + timeoutMs);
  }

  function checkFresh(state: CeremonyState, config: WebAuthnConfig): void {
    const t = now();
    if (state.issuedAt > t + FUTURE_SKEW_MS) throw refusal('bad_state', 'the ceremony state was issued in the future');
    if (t - state.issuedAt > config.timeoutMs) throw refusal('expired', `the ceremony expired (${config.timeoutMs / 1000} s); begin again`);
  }

  return {
    contractVersion: CONTRACT_VERSION,
    kind: 'webauthn',

    validateConfig(config: ProviderJson): readonly string[] {
      return readWebAuthnConfig(config).problems;
    },

    async begin(ctx: ProviderContext, rawConfig: ProviderJson): Promise<ProviderBeginResult> {
      const config = configOrThrow(rawConfig);
      const issuedAt = now();
      const uv = config.userVerification;
      if (ctx.intent === 'signin') {
        // Discoverable credentials: no allowCredentials, the authenticator offers its passkeys for this RP.
        const opts = await generateAuthenticationOptions({ rpID: config.rpId, userVerification: uv, timeout: config.timeoutMs });
        const state = encodeState({ ceremony: 'authentication', intent: ctx.intent, challenge: opts.challenge, issuedAt, userId: null });
        return { state, reply: { kind: 'json', body: asJson(opts) } };
      }
      const userId = new Uint8Array(randomBytes(32));
      const userName = ctx.subject ?? `${config.rpName} account`;
      const opts = await generateRegistrationOptions({
        rpName: config.rpName,
        rpID: config.rpId,
        userName,
        userID: userId,
        timeout: config.timeoutMs,
        attestationType: 'none',
        excludeCredentials: ctx.existingCredentials.filter(isCredentialId).map((id) => ({ id })),
        authenticatorSelection: { residentKey: 'required', requireResidentKey: true, userVerification: uv },
      });
      const state = encodeState({
        ceremony: 'registration',
        intent: ctx.intent,
        challenge: opts.challenge,
        issuedAt,
        userId: b64url(userId),
      });
      return { state, reply: { kind: 'json', body: asJson(opts) } };
    },

    credentialIdOf(request: ProviderRequest): string | null {
      const body = request.body;
      if (!isRecord(body)) return null;
      return isCredentialId(body.id) && body.rawId === body.id ? body.id : null;
    },

    async finish(ctx, rawConfig, input): Promise<ProviderFinishResult> {
      const config = configOrThrow(rawConfig);
      const state = decodeState(input.state);
      if (state === null) throw refusal('bad_state', 'the ceremony state is not a WebAuthn state');
      if (state.intent !== ctx.intent) throw refusal('bad_state', `the ceremony was begun for ${state.intent}, not ${ctx.intent}`);
      checkFresh(state, config);
      const response = responseOf(input.request, state.ceremony);
      // Burn the challenge before verifying: a failed attempt does not leave it reusable.
      consume(state, config.timeoutMs);
      const requireUserVerification = config.userVerification === 'required';
      const issuer = `webauthn:${config.rpId}`;

      if (state.ceremony === 'registration') {
        if (ctx.existingCredentials.includes(response.id)) throw refusal('bad_response', 'this passkey is already linked to the subject');
        const v = await verifyRegistrationResponse({
          response,
          expectedChallenge: state.challenge,
          expectedOrigin: [...config.origins],
          expectedRPID: config.rpId,
          requireUserVerification,
        }).catch((error: unknown) => {
          throw refusal('not_verified', `registration not verified: ${(error as Error).message}`);
        });
        if (!v.verified || v.registrationInfo === undefined) throw refusal('not_verified', 'registration not verified');
        const info = v.registrationInfo;
        if (info.credential.id !== response.id) throw refusal('bad_response', 'the attested credential id differs from the response id');
        const data: CredentialData = {
          publicKey: b64url(info.credential.publicKey),
          transports: transportsOf(response.response.transports as ProviderJson | undefined),
          backedUp: info.credentialBackedUp,
          deviceType: info.credentialDeviceType,
          userId: state.userId,
        };
        return {
          identity: {
            issuer,
            subject: info.credential.id,
            claims: { backed_up: info.credentialBackedUp, device_type: info.credentialDeviceType, user_verified: info.userVerified },
          },
          credential: { id: info.credential.id, data: credentialDataJson(data), counter: info.credential.counter },
        };
      }

      const stored = input.credential;
      if (stored === null) throw refusal('unknown_credential', 'no passkey is linked with this credential id');
      if (stored.id !== response.id) throw refusal('unknown_credential', 'the stored credential is not the one the assertion names');
      const data = credentialDataOf(stored);
      // A discoverable credential returns the user handle it was registered with; it must be ours.
      const userHandle = response.response.userHandle;
      if (userHandle !== undefined && data.userId !== null && userHandle !== data.userId)
        throw refusal('unknown_credential', "the assertion's user handle is not the one this passkey was registered with");
      const storedCounter = stored.counter ?? 0;
      const v = await verifyAuthenticationResponse({
        response,
        expectedChallenge: state.challenge,
        expectedOrigin: [...config.origins],
        expectedRPID: config.rpId,
        credential: {
          id: stored.id,
          publicKey: new Uint8Array(Buffer.from(data.publicKey, 'base64url')),
          counter: storedCounter,
          transports: data.transports,
        },
        requireUserVerification,
      }).catch((error: unknown) => {
        const message = (error as Error).message;
        if (/counter/i.test(message)) throw refusal('counter_regression', `possible cloned authenticator: ${message}`);
        throw refusal('not_verified', `authentication not verified: ${message}`);
      });
      if (!v.verified) throw refusal('not_verified', 'authentication not verified');
      const info = v.authenticationInfo;
      // Our own check, whatever the library does: a counter that does not move forward means a
      // copy of the key is in use (spec: both zero means the authenticator keeps no counter).
      if ((info.newCounter !== 0 || storedCounter !== 0) && info.newCounter <= storedCounter)
        throw refusal('counter_regression', `possible cloned authenticator: counter ${info.newCounter} is not above ${storedCounter}`);
      // Backup eligibility is fixed at creation; a change means another authenticator is answering.
      if (info.credentialDeviceType !== data.deviceType)
        throw refusal('device_type_changed', `the passkey's device type changed from ${data.deviceType} to ${info.credentialDeviceType}`);
      const updated: CredentialData = { ...data, backedUp: info.credentialBackedUp };
      return {
        identity: {
          issuer,
          subject: stored.id,
          claims: { backed_up: info.credentialBackedUp, device_type: info.credentialDeviceType, user_verified: info.userVerified },
        },
        credential: { id: stored.id, data: credentialDataJson(updated), counter: info.newCounter },
      };
    },

    async health(config: ProviderJson): Promise<ProviderHealth> {
      const problems = readWebAuthnConfig(config).problems;
      return problems.length === 0 ? { status: 'ok' } : { status: 'down', detail: problems.join('; ') };
    },
  };
}

/**
 * The `svc/auth-provider` export: one provider per process, on the real clock.
 *
 * @example
 * const problems = webauthnProvider.validateConfig(config);
 */
export const webauthnProvider: AuthProvider = createWebAuthnProvider();

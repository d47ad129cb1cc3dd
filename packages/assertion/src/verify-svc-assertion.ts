import { createLocalJWKSet, createRemoteJWKSet, errors, type JSONWebKeySet, type JWK, type JWTPayload, jwtVerify } from 'jose';

/** The longest lifetime (`exp` - `iat`) an assertion may have, in seconds (the gateway gives 30). */
export const MAX_ASSERTION_LIFETIME_SECONDS = 60;

const TYP = 'svc-assertion+jwt';

/** Why an assertion was refused: the `code` of the error {@link verifySvcAssertion} throws. */
export type SvcAssertionErrorCode =
  | 'malformed'
  | 'wrong_algorithm'
  | 'wrong_typ'
  | 'unknown_key'
  | 'bad_signature'
  | 'jwks_unavailable'
  | 'expired'
  | 'not_yet_valid'
  | 'lifetime_too_long'
  | 'wrong_audience'
  | 'wrong_issuer'
  | 'missing_claim'
  | 'request_mismatch';

/** The error {@link verifySvcAssertion} throws: `name` `SvcAssertionError`, `code` the failed check, the message says which. */
export interface SvcAssertionError extends Error {
  readonly name: 'SvcAssertionError';
  readonly code: SvcAssertionErrorCode;
}

/** Options of {@link verifySvcAssertion}. */
export interface VerifySvcAssertionOptions {
  /** The gateway's `/.svc/jwks.json` (fetched, cached, and fetched again for a key id it does not know), or a JWK Set. */
  readonly jwks: URL | { readonly keys: readonly JWK[] };
  /** The audience the gateway is configured with (`:svc/app-audience`, default this application's upstream origin). */
  readonly audience: string;
  /** When given, the `iss` (the gateway's node id) must be this one. */
  readonly issuer?: string | undefined;
  /**
   * The request this application received, to check the request binding: `method`, and `url`
   * as the gateway received it (its public scheme and host, and the path; the query is ignored).
   */
  readonly request?: { readonly method: string; readonly url: string | URL } | undefined;
  /** Clock skew allowed on `exp` and `iat`, in seconds (default 5). */
  readonly clockToleranceSeconds?: number | undefined;
  /** The time to verify at (default now): for tests. */
  readonly currentDate?: Date | undefined;
}

/** Who the gateway vouches for. */
export interface SvcIdentity {
  readonly subject: string;
  /** `application` for callers of the gateway. */
  readonly realm: string;
  readonly session: string;
  readonly device: string;
  /** How it signed in: `amr` (the methods), `auth_time`, `exp` (of the access token that authenticated the request). */
  readonly claims: Readonly<Record<string, unknown>>;
  /** The caller's email (ASCII; an internationalised domain in its A-label form, `xn--...`), when known. */
  readonly email?: string;
  /** Whether the email was verified (false unless the assertion says true); present exactly when `email` is. */
  readonly emailVerified?: boolean;
  /** The caller's display name (UTF-8), when known. */
  readonly name?: string;
  /** The caller's groups, when it is in any. */
  readonly groups?: readonly string[];
  /** The gateway node that signed the assertion. */
  readonly issuer: string;
  /** The assertion's unique id, for applications that keep a replay cache. */
  readonly assertionId: string;
  /** When the assertion expires (seconds since the epoch). */
  readonly expiresAt: number;
}

function refuse(code: SvcAssertionErrorCode, message: string, cause?: unknown): SvcAssertionError {
  const error = new Error(`Svc-Assertion refused (${code}): ${message}`, cause === undefined ? undefined : { cause }) as Error & {
    code: SvcAssertionErrorCode;
  };
  error.name = 'SvcAssertionError';
  error.code = code;
  return error as SvcAssertionError;
}

// One remote set per JWKS address: jose caches its keys and refetches (at most every 30 s) on an unknown `kid`.
const remoteSets = new Map<string, ReturnType<typeof createRemoteJWKSet>>();

function keysOf(jwks: VerifySvcAssertionOptions['jwks']) {
  if (!(jwks instanceof URL)) return createLocalJWKSet(jwks as JSONWebKeySet);
  let set = remoteSets.get(jwks.href);
  if (set === undefined) {
    set = createRemoteJWKSet(jwks);
    remoteSets.set(jwks.href, set);
  }
  return set;
}

/** `scheme://host/path` of a URL the same way the gateway forms `htu` (WHATWG-normalised, no query or fragment). */
function htuOf(url: string | URL): string | null {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return null;
  }
}

function translate(error: unknown): SvcAssertionError {
  if (error instanceof errors.JWTExpired) return refuse('expired', 'it has expired', error);
  if (error instanceof errors.JWTClaimValidationFailed) {
    switch (error.claim) {
      case 'aud':
        return refuse('wrong_audience', 'it is for another audience', error);
      case 'iss':
        return refuse('wrong_issuer', 'another issuer signed it', error);
      case 'typ':
        return refuse('wrong_typ', `its typ is not ${TYP}`, error);
      case 'nbf':
      case 'iat':
        return refuse('not_yet_valid', 'it is not valid yet', error);
      default:
        return refuse('missing_claim', `its "${error.claim}" claim is missing or invalid`, error);
    }
  }
  if (error instanceof errors.JOSEAlgNotAllowed || error instanceof errors.JOSENotSupported) {
    return refuse('wrong_algorithm', 'it is not signed with EdDSA', error);
  }
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys) {
    return refuse('unknown_key', 'its key id is not one the gateway publishes', error);
  }
  if (error instanceof errors.JWSSignatureVerificationFailed) return refuse('bad_signature', 'its signature does not verify', error);
  if (error instanceof errors.JWKSTimeout || error instanceof errors.JWKSInvalid) {
    return refuse('jwks_unavailable', "the gateway's JWK Set could not be fetched", error);
  }
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid || error instanceof errors.JWKInvalid) {
    return refuse('malformed', 'it is not a well-formed compact JWS', error);
  }
  if (error instanceof errors.JOSEError) return refuse('malformed', error.message, error);
  // A failed fetch of the JWK Set surfaces as a plain error (network, HTTP status).
  return refuse('jwks_unavailable', `the gateway's JWK Set could not be used: ${(error as Error).message}`, error);
}

const str = (p: JWTPayload, name: string): string => {
  const v = p[name];
  if (typeof v !== 'string' || v === '') throw refuse('missing_claim', `its "${name}" claim is missing`);
  return v;
};

/** Who the caller is, as the assertion states it (absent when unknown); a claim of the wrong type is refused. */
function identityOf(p: JWTPayload): Pick<SvcIdentity, 'email' | 'emailVerified' | 'name' | 'groups'> {
  const out: { email?: string; emailVerified?: boolean; name?: string; groups?: readonly string[] } = {};
  if (p.email !== undefined) {
    if (typeof p.email !== 'string' || p.email === '') throw refuse('missing_claim', 'its "email" claim is not a string');
    out.email = p.email;
    out.emailVerified = p.email_verified === true;
  }
  if (p.name !== undefined) {
    if (typeof p.name !== 'string' || p.name === '') throw refuse('missing_claim', 'its "name" claim is not a string');
    out.name = p.name;
  }
  if (p.groups !== undefined) {
    if (!Array.isArray(p.groups) || !p.groups.every((g) => typeof g === 'string')) {
      throw refuse('missing_claim', 'its "groups" claim is not an array of group names');
    }
    out.groups = Object.freeze([...(p.groups as string[])]);
  }
  return out;
}

/**
 * Verifies the `Svc-Assertion` header the svc auth gateway attached to a request and returns
 * who it vouches for. Checks, in order: EdDSA only, `typ` `svc-assertion+jwt`, a key the
 * gateway publishes (`kid`), the signature, `exp` and `iat` (with the tolerance), a lifetime
 * of at most 60 s, the audience (and issuer), and, with `request`, the request binding:
 * `htm` is the method and `htu` the `scheme://host/path` of the request, so an assertion lifted
 * from one request is refused on another.
 *
 * @throws {SvcAssertionError} whose `code` names the failed check.
 * @example
 * const who = await verifySvcAssertion(req.headers['svc-assertion'], {
 *   jwks: new URL('https://app.example/.svc/jwks.json'),
 *   audience: 'http://127.0.0.1:3000',
 *   request: { method: req.method, url: `https://app.example${req.url}` },
 * });
 * who.subject; // "dev_..."
 */
export async function verifySvcAssertion(token: unknown, options: VerifySvcAssertionOptions): Promise<SvcIdentity> {
  if (typeof token !== 'string' || token === '') throw refuse('malformed', 'no assertion');
  const tolerance = options.clockToleranceSeconds ?? 5;
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, keysOf(options.jwks), {
      algorithms: ['EdDSA'],
      typ: TYP,
      audience: options.audience,
      ...(options.issuer === undefined ? {} : { issuer: options.issuer }),
      clockTolerance: tolerance,
      requiredClaims: ['iss', 'aud', 'sub', 'iat', 'exp', 'jti'],
      ...(options.currentDate === undefined ? {} : { currentDate: options.currentDate }),
    }));
  } catch (error) {
    throw translate(error);
  }
  const now = Math.floor((options.currentDate?.getTime() ?? Date.now()) / 1000);
  const iat = payload.iat as number;
  const exp = payload.exp as number;
  if (iat > now + tolerance) throw refuse('not_yet_valid', 'it was issued in the future');
  if (exp - iat > MAX_ASSERTION_LIFETIME_SECONDS) {
    throw refuse('lifetime_too_long', `it is valid ${exp - iat} s, more than ${MAX_ASSERTION_LIFETIME_SECONDS} s`);
  }
  const identity: SvcIdentity = {
    subject: str(payload, 'sub'),
    realm: str(payload, 'realm'),
    session: str(payload, 'sid'),
    device: str(payload, 'dev'),
    claims: typeof payload.claims === 'object' && payload.claims !== null ? (payload.claims as Record<string, unknown>) : {},
    issuer: str(payload, 'iss'),
    assertionId: str(payload, 'jti'),
    expiresAt: exp,
    ...identityOf(payload),
  };
  const htm = str(payload, 'htm');
  const htu = str(payload, 'htu');
  if (options.request !== undefined) {
    if (options.request.method.toUpperCase() !== htm) {
      throw refuse('request_mismatch', `it was issued for a ${htm} request, not ${options.request.method.toUpperCase()}`);
    }
    const received = htuOf(options.request.url);
    if (received === null) throw new TypeError(`request.url must be an absolute URL, not ${JSON.stringify(String(options.request.url))}`);
    if (received !== htu) throw refuse('request_mismatch', `it was issued for ${htu}, not ${received}`);
  }
  return identity;
}

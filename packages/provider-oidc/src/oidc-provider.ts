import type {
  AuthProvider,
  ExternalIdentity,
  ProviderBeginResult,
  ProviderContext,
  ProviderFinishResult,
  ProviderHealth,
  ProviderJson,
  ProviderRequest,
} from '@svc/core';
import * as oidc from 'openid-client';
import { type OidcConfig, parseOidcConfig } from './config.js';
import { createDiscoveryCache, type DiscoveryCache } from './discovery-cache.js';
import { OidcRefusal } from './errors.js';

/** Options of {@link createOidcProvider}; the defaults suit the service. */
export interface OidcProviderOptions {
  /** How long a discovered issuer is reused before it is fetched again. Default 1 hour. */
  readonly discoveryTtlMs?: number;
  /** Timeout of each request to the OpenID Provider, in seconds. Default 10. */
  readonly requestTimeoutSeconds?: number;
}

/** What `begin` keeps in the flow for `finish`: never sent to the browser (the service keeps it, single use). */
interface FlowState {
  readonly v: 1;
  readonly issuer: string;
  readonly redirectUri: string;
  readonly state: string;
  readonly nonce: string;
  readonly codeVerifier: string;
}

// The callback parameters an authorization response may carry (RFC 6749 4.1.2 and 4.1.2.1, RFC 9207 `iss`).
const CALLBACK_PARAMS = ['code', 'state', 'iss', 'error', 'error_description', 'error_uri'] as const;
// The claims a provider hands over (contract: strings and booleans, small).
const MAX_CLAIM_LENGTH = 320;
// The contract's `kind`, which the sign-in page reads to drive a redirect ceremony.
const KIND = 'oidc';

function configOrThrow(raw: ProviderJson): OidcConfig {
  const parsed = parseOidcConfig(raw);
  if (parsed.config === null) throw new OidcRefusal('invalid_config', `invalid OIDC provider config: ${parsed.problems.join('; ')}`);
  return parsed.config;
}

function flowStateOf(raw: ProviderJson): FlowState {
  const s = raw as Partial<Record<keyof FlowState, unknown>> | null;
  const ok =
    typeof s === 'object' &&
    s !== null &&
    !Array.isArray(s) &&
    s.v === 1 &&
    typeof s.issuer === 'string' &&
    typeof s.redirectUri === 'string' &&
    typeof s.state === 'string' &&
    typeof s.nonce === 'string' &&
    typeof s.codeVerifier === 'string';
  if (!ok) throw new OidcRefusal('invalid_flow_state', 'the flow state is not one this OIDC provider began');
  return s as FlowState;
}

function smallString(v: unknown): string | undefined {
  return typeof v === 'string' && v.length > 0 && v.length <= MAX_CLAIM_LENGTH ? v : undefined;
}

/**
 * `email_verified` as a boolean. Some providers send the strings "true"/"false" (a known
 * deviation of a few large IdPs); anything else is dropped rather than guessed.
 */
function verifiedFlag(v: unknown): boolean | undefined {
  if (typeof v === 'boolean') return v;
  if (v === 'true') return true;
  if (v === 'false') return false;
  return undefined;
}

/**
 * The few facts the service may use (JIT by verified email domain, a display name), the ID
 * token's first and userinfo's only for what it lacks. `email` and `email_verified` always come
 * from the same source: a verified flag must never vouch for another source's address.
 */
function pickClaims(idToken: Record<string, unknown>, userinfo: Record<string, unknown>): Record<string, string | boolean> {
  const out: Record<string, string | boolean> = {};
  const emailSource = smallString(idToken.email) !== undefined ? idToken : userinfo;
  const email = smallString(emailSource.email);
  const verified = verifiedFlag(emailSource.email_verified);
  if (email !== undefined) out.email = email;
  if (email !== undefined && verified !== undefined) out.email_verified = verified;
  const name = smallString(idToken.name) ?? smallString(userinfo.name);
  if (name !== undefined) out.name = name;
  return out;
}

/** The first line of an error's message: library messages never hold a code, a token or a secret, but may be long. */
function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '';
}

/** One line saying why openid-client refused, without the response body (it may echo a code). */
function refusalOf(error: unknown): OidcRefusal {
  if (error instanceof OidcRefusal) return error;
  if (error instanceof oidc.AuthorizationResponseError) {
    return new OidcRefusal('provider_error', `the OpenID Provider refused the sign-in: ${error.error}`, { cause: error });
  }
  if (error instanceof oidc.ResponseBodyError) {
    return new OidcRefusal('code_refused', `the token endpoint refused the code: ${error.error}`, { cause: error });
  }
  if (error instanceof oidc.WWWAuthenticateChallengeError) {
    // A 401 with a challenge: the client's authentication failed (a wrong or rotated secret).
    const errors = error.cause.map((c) => c.parameters.error).filter((x): x is string => typeof x === 'string');
    return new OidcRefusal(
      'code_refused',
      `the token endpoint refused the client: ${errors.join(', ') || error.cause[0]?.scheme || 'unauthorized'}`,
      {
        cause: error,
      },
    );
  }
  // openid-client's ClientError says what kind of check failed; its cause says which one (`iss`, `nonce`, `state`...).
  const e = error as { code?: unknown; cause?: unknown };
  const detail = e.cause instanceof Error ? `: ${firstLine(e.cause)}` : '';
  const code = typeof e.code === 'string' ? ` (${e.code})` : '';
  return new OidcRefusal('response_refused', `the OIDC response was refused: ${firstLine(error)}${detail}${code}`, { cause: error });
}

/**
 * Creates the OIDC login provider: authorization code flow with PKCE (S256), `state` and
 * `nonce`, issuer discovery, the ID token validated by openid-client (signature against the
 * issuer's JWKS, `iss`, `aud`, `exp`, `iat`, `nonce`). It proves `(issuer, sub)` and a few
 * claims; the service decides what that identity may do.
 *
 * @example
 * const provider = createOidcProvider();
 * const { state, reply } = await provider.begin(ctx, config); // reply.location: the IdP's authorization URL
 * const { identity } = await provider.finish(ctx, config, { state, request: { query, body: null }, credential: null });
 */
export function createOidcProvider(options: OidcProviderOptions = {}): AuthProvider {
  const discovery: DiscoveryCache = createDiscoveryCache({
    ttlMs: options.discoveryTtlMs ?? 60 * 60 * 1000,
    timeoutSeconds: options.requestTimeoutSeconds ?? 10,
  });

  async function begin(ctx: ProviderContext, raw: ProviderJson): Promise<ProviderBeginResult> {
    const config = configOrThrow(raw);
    const client = await discovery.configurationFor(config);
    const codeVerifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    const location = oidc.buildAuthorizationUrl(client, {
      redirect_uri: ctx.callbackUrl,
      response_type: 'code',
      scope: config.scopes.join(' '),
      code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    });
    const flow: FlowState = { v: 1, issuer: config.issuer, redirectUri: ctx.callbackUrl, state, nonce, codeVerifier };
    return { state: { ...flow }, reply: { kind: 'redirect', location: location.href } };
  }

  async function finish(
    ctx: ProviderContext,
    raw: ProviderJson,
    input: { readonly state: ProviderJson; readonly request: ProviderRequest },
  ): Promise<ProviderFinishResult> {
    const config = configOrThrow(raw);
    const flow = flowStateOf(input.state);
    // A flow begun for another issuer (the config changed) or another callback cannot finish here.
    if (flow.issuer !== config.issuer) throw new OidcRefusal('invalid_flow_state', 'the flow was begun for another issuer');
    if (flow.redirectUri !== ctx.callbackUrl) throw new OidcRefusal('invalid_flow_state', 'the flow was begun for another callback URL');
    const query = input.request.query;
    if (query.error !== undefined) {
      // Says what the IdP said, not its free-text description (it is attacker-controllable).
      const code = /^[\x20-\x7E]{1,64}$/.test(query.error) ? query.error : 'invalid error code';
      throw new OidcRefusal('provider_error', `the OpenID Provider refused the sign-in: ${code}`);
    }
    try {
      const client = await discovery.configurationFor(config);
      const current = new URL(ctx.callbackUrl);
      current.search = '';
      for (const name of CALLBACK_PARAMS) {
        const value = query[name];
        if (value !== undefined) current.searchParams.set(name, value);
      }
      const tokens = await oidc.authorizationCodeGrant(
        client,
        current,
        { pkceCodeVerifier: flow.codeVerifier, expectedState: flow.state, expectedNonce: flow.nonce, idTokenExpected: true },
        { redirect_uri: flow.redirectUri },
      );
      const idClaims = tokens.claims();
      if (idClaims === undefined) throw new OidcRefusal('response_refused', 'the token response has no ID token');
      let userinfo: Record<string, unknown> = {};
      const wantsMore = idClaims.email === undefined || idClaims.name === undefined;
      // Many IdPs put email and name only in userinfo for the code flow (OIDC Core 5.4); openid-client
      // checks userinfo's `sub` equals the ID token's, so it cannot describe someone else.
      if (wantsMore && client.serverMetadata().userinfo_endpoint !== undefined && tokens.access_token !== undefined) {
        userinfo = await oidc.fetchUserInfo(client, tokens.access_token, idClaims.sub);
      }
      const identity: ExternalIdentity = {
        issuer: client.serverMetadata().issuer,
        subject: idClaims.sub,
        claims: pickClaims(idClaims, userinfo),
      };
      return { identity, credential: null };
    } catch (error) {
      throw refusalOf(error);
    }
  }

  async function health(raw: ProviderJson): Promise<ProviderHealth> {
    const parsed = parseOidcConfig(raw);
    if (parsed.config === null) return { status: 'down', detail: `invalid config: ${parsed.problems.join('; ')}` };
    try {
      await discovery.probe(parsed.config);
      return { status: 'ok' };
    } catch (error) {
      return { status: 'down', detail: refusalOf(error).message };
    }
  }

  return {
    contractVersion: 1,
    kind: KIND,
    validateConfig: (raw) => parseOidcConfig(raw).problems,
    begin,
    // An OIDC login holds no credential of ours: the identity is (issuer, sub).
    credentialIdOf: () => null,
    finish,
    health,
  };
}

import type {
  AuditPageJson,
  ChallengeJson,
  DeviceListJson,
  DeviceRemovedJson,
  DeviceResponseJson,
  EnrollBody,
  GroupListJson,
  HealthJson,
  PrincipalJson,
  Realm,
  RevokedJson,
  RevokeOthersJson,
  ScimTokenCreatedJson,
  ScimTokenListJson,
  ScimTokenRevokedJson,
  SessionBody,
  SessionListJson,
  TokenPairJson,
  UserChangeBody,
  UserCreateBody,
  UserPageJson,
  UserRemovedJson,
  UserResponseJson,
  UserStatusJson,
} from '@svc/core';
import { ApiError, ApiUnreachableError, problemFromResponse } from './api-error.js';
import { assertMayCarryBearer } from './bearer-transport.js';
import type { DeviceKey } from './device-key.js';
import { createDpopProof } from './dpop-proof.js';

// The answers' types are derived from the schemas the server serializes them with (core's
// wire shapes): one declaration, so the SDK cannot miss a field the server sends.
export type {
  AuditEventJson,
  AuditPageJson,
  ChallengeJson,
  GroupJson,
  GroupListJson,
  UserJson,
  UserPageJson,
  UserRemovedJson,
  UserResponseJson,
  UserStatusJson,
} from '@svc/core';

/**
 * Where each realm's sign-in routes live: the management API's `/v1/auth/...`, the application
 * gateway's reserved `/.svc/auth/v1/...` (contract: "Application gateway"). The same calls, the
 * same rules, one client code path.
 */
export const SIGN_IN_PREFIXES: Readonly<Record<Realm, string>> = Object.freeze({
  management: '/v1/auth',
  application: '/.svc/auth/v1',
});

/** The sign-in calls of one realm: challenge, session, refresh, me, revoke (own session). */
export interface SignInClient {
  /** The base URL, without a trailing slash. */
  readonly baseUrl: string;
  /** The realm whose routes these are. */
  readonly realm: Realm;
  createChallenge(publicKeyHex: string): Promise<ChallengeJson>;
  createSession(input: SessionBody): Promise<TokenPairJson>;
  /**
   * Rotates the pair. With the device `key` the request carries a DPoP proof by it, which a
   * session bound to that key needs (`:auth/sender-constraint`, on by default) and a bearer
   * session ignores.
   */
  refresh(refreshToken: string, key?: DeviceKey): Promise<TokenPairJson>;
  me(accessToken: string): Promise<PrincipalJson>;
  revoke(accessToken: string, sessionId?: string): Promise<RevokedJson>;
  /** The caller's own active sessions, newest first (self-service, in either realm). */
  ownSessions(accessToken: string): Promise<SessionListJson>;
  /** The caller's own enrolled devices (self-service, in either realm). */
  ownDevices(accessToken: string): Promise<DeviceListJson>;
  /** Revokes the caller's other sessions (sign out everywhere else), in either realm. */
  revokeOtherSessions(accessToken: string): Promise<RevokeOthersJson>;
}

/** The filters of {@link ManagementClient.users}: each given narrows the page. */
export interface UserQuery {
  readonly realm?: Realm;
  readonly status?: 'active' | 'disabled';
  readonly group?: string;
  readonly email?: string;
  /** A substring of the name, email or user name. */
  readonly filter?: string;
  /** The `next` of the previous page. */
  readonly after?: string;
  readonly limit?: number;
}

/** Typed calls to the loopback management API: the management realm's sign-in calls and the operator's. */
/** The answer of `POST /v1/auth/console-links`. */
export interface ConsoleLinkJson {
  readonly url: string;
  readonly expires_at: string;
  readonly expires_in: number;
}

export interface ManagementClient extends SignInClient {
  readonly realm: 'management';
  health(): Promise<HealthJson>;
  enroll(input: EnrollBody): Promise<DeviceResponseJson>;
  audit(accessToken: string, page?: { readonly after?: number; readonly limit?: number }): Promise<AuditPageJson>;
  /** Active devices; with `mine`, only those of the caller's own subject. */
  devices(accessToken: string, options?: { readonly mine?: boolean }): Promise<DeviceListJson>;
  removeDevice(accessToken: string, deviceId: string): Promise<DeviceRemovedJson>;
  /** Active sessions; with `mine`, only those of the caller's own subject. */
  sessions(accessToken: string, options?: { readonly mine?: boolean }): Promise<SessionListJson>;
  /** A page of users (`next`: the `after` of the next page, null on the last). */
  users(accessToken: string, query?: UserQuery): Promise<UserPageJson>;
  user(accessToken: string, subject: string): Promise<UserResponseJson>;
  addUser(accessToken: string, input: UserCreateBody): Promise<UserResponseJson>;
  /** Sets each attribute given; `null` clears one. */
  changeUser(accessToken: string, subject: string, input: UserChangeBody): Promise<UserResponseJson>;
  /** Refuses the user's sign-ins and revokes all its sessions at once. */
  disableUser(accessToken: string, subject: string): Promise<UserStatusJson>;
  /** Restores sign-in (not the revoked sessions). */
  enableUser(accessToken: string, subject: string): Promise<UserStatusJson>;
  removeUser(accessToken: string, subject: string): Promise<UserRemovedJson>;
  /** A one-time URL (single use, 60 s) that signs a browser on this machine in to the management console. */
  consoleLink(accessToken: string): Promise<ConsoleLinkJson>;
  groups(accessToken: string, options?: { readonly realm?: Realm }): Promise<GroupListJson>;
  /** Creates a SCIM token for a company directory: the answer carries the token, shown this once. */
  createScimToken(accessToken: string, name: string): Promise<ScimTokenCreatedJson>;
  /** The SCIM tokens (never the tokens themselves), revoked ones included. */
  scimTokens(accessToken: string): Promise<ScimTokenListJson>;
  /** Revokes a SCIM token (`sct_...`). */
  revokeScimToken(accessToken: string, id: string): Promise<ScimTokenRevokedJson>;
}

/** Options of {@link createManagementClient}. */
export interface ManagementClientOptions {
  /** E.g. `http://127.0.0.1:9090`. */
  readonly baseUrl: string;
  /** A `fetch` to use instead of the global one (tests, proxies). */
  readonly fetch?: typeof fetch;
  /** The `User-Agent` sent with every request; a session records the one it was created with. */
  readonly userAgent?: string;
  /**
   * The device key that signs DPoP proofs (RFC 9449) for access tokens bound to it: a token this
   * client received with `token_type: "DPoP"`, or one `isBoundToken` names, is sent as
   * `Authorization: DPoP <token>` with a proof carrying its `ath`.
   */
  readonly dpopKey?: DeviceKey | (() => DeviceKey | null | undefined);
  /** Whether an access token obtained elsewhere (saved credentials) is DPoP-bound. */
  readonly isBoundToken?: (accessToken: string) => boolean;
  /**
   * Put the latest server nonce (`DPoP-Nonce`) in every proof (RFC 9449 §8), so a proof is only
   * good shortly after the server issued the nonce. Either way a `use_dpop_nonce` refusal is
   * retried once with the nonce it carries.
   */
  readonly dpopNonces?: boolean;
}

/** Extra options of one call: a bearer token, a body or answer that carries a secret, a DPoP proof signer. */
interface CallInit {
  body?: unknown;
  bearer?: string;
  secret?: true;
  /** Signs a DPoP proof for this exact request (its method and URL) and sends it as the `DPoP` header. */
  dpopKey?: DeviceKey;
}

type Call = <T>(method: string, path: string, init?: CallInit) => Promise<T>;

/**
 * The request function every call of a client goes through. A bearer token, a body that
 * carries a secret, and an answer that carries tokens (`secret`) never cross a non-loopback
 * `http://` URL: refused before anything is sent.
 */
function caller(options: ManagementClientOptions): { baseUrl: string; call: Call } {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const doFetch = options.fetch ?? globalThis.fetch;
  const userAgent = options.userAgent ?? `svc-client (node ${process.version})`;
  // Access tokens this client received as DPoP-bound (token_type "DPoP"); bounded, they expire anyway.
  const bound = new Set<string>();
  const dpopKey = (): DeviceKey | undefined => (typeof options.dpopKey === 'function' ? options.dpopKey() : options.dpopKey) ?? undefined;
  // The latest server nonce (`DPoP-Nonce`) an answer carried (RFC 9449 §8).
  let serverNonce: string | undefined;
  const call: Call = async <T>(method: string, path: string, init: CallInit = {}) => {
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': userAgent };
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    if (init.bearer !== undefined || init.secret === true) assertMayCarryBearer(baseUrl);
    let prove: ((nonce: string | undefined) => string) | undefined;
    if (init.bearer !== undefined) {
      const token = init.bearer;
      const key = bound.has(token) || options.isBoundToken?.(token) === true ? dpopKey() : undefined;
      if (key === undefined) headers.authorization = `Bearer ${token}`;
      else {
        headers.authorization = `DPoP ${token}`;
        prove = (nonce) =>
          createDpopProof(key, { htm: method, htu: `${baseUrl}${path}`, accessToken: token, ...(nonce === undefined ? {} : { nonce }) });
      }
    }
    const signer = init.dpopKey;
    if (prove === undefined && signer !== undefined) {
      prove = (nonce) => createDpopProof(signer, { htm: method, htu: `${baseUrl}${path}`, ...(nonce === undefined ? {} : { nonce }) });
    }
    const send = async (nonce: string | undefined): Promise<Response> => {
      if (prove !== undefined) headers.dpop = prove(nonce);
      try {
        const res = await doFetch(`${baseUrl}${path}`, {
          method,
          headers,
          ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
        });
        serverNonce = res.headers.get('dpop-nonce') ?? serverNonce;
        return res;
      } catch (cause) {
        throw new ApiUnreachableError(baseUrl, cause);
      }
    };
    let res = await send(options.dpopNonces === true ? serverNonce : undefined);
    if (!res.ok) {
      let text = await res.text().catch(() => '');
      // The server asked for (a fresh) nonce: one retry with the one it just sent.
      const fresh = res.headers.get('dpop-nonce');
      if (prove !== undefined && res.status === 401 && fresh !== null && problemFromResponse(res, text).code === 'use_dpop_nonce') {
        res = await send(fresh);
        if (res.ok) text = '';
        else text = await res.text().catch(() => '');
      }
      if (!res.ok) throw problemFromResponse(res, text);
    }
    const answer = (await res.json()) as T;
    const pair = answer as { token_type?: unknown; access_token?: unknown } | null;
    if (pair !== null && typeof pair === 'object' && pair.token_type === 'DPoP' && typeof pair.access_token === 'string') {
      if (bound.size >= 64) bound.clear();
      bound.add(pair.access_token);
    }
    return answer;
  };
  return { baseUrl, call };
}

/** The sign-in calls of `realm` over `call`, under that realm's prefix. */
function signInCalls<R extends Realm>(baseUrl: string, call: Call, realm: R): SignInClient & { readonly realm: R } {
  const prefix = SIGN_IN_PREFIXES[realm];
  return {
    baseUrl,
    realm,
    createChallenge: (publicKeyHex) => call<ChallengeJson>('POST', `${prefix}/challenges`, { body: { public_key: publicKeyHex } }),
    // The answer is a token pair: it never comes back over clear text from another machine.
    createSession: (input) => call<TokenPairJson>('POST', `${prefix}/sessions`, { body: input, secret: true }),
    refresh: (refreshToken, key) =>
      call<TokenPairJson>('POST', `${prefix}/refresh`, {
        body: { refresh_token: refreshToken },
        secret: true,
        ...(key === undefined ? {} : { dpopKey: key }),
      }),
    me: (accessToken) => call<PrincipalJson>('GET', `${prefix}/me`, { bearer: accessToken }),
    revoke: (accessToken, sessionId) =>
      call<RevokedJson>('POST', `${prefix}/revoke`, {
        bearer: accessToken,
        body: sessionId === undefined ? {} : { session_id: sessionId },
      }),
    // `?mine`: the management API's listings are the operator's without it; the gateway's are always the caller's own.
    ownSessions: (accessToken) => call<SessionListJson>('GET', `${prefix}/sessions?mine`, { bearer: accessToken }),
    ownDevices: (accessToken) => call<DeviceListJson>('GET', `${prefix}/devices?mine`, { bearer: accessToken }),
    revokeOtherSessions: (accessToken) =>
      call<RevokeOthersJson>('POST', `${prefix}/sessions/revoke-others`, { bearer: accessToken, body: {} }),
  };
}

/**
 * Creates a client of the application gateway's sign-in routes (`/.svc/auth/v1/...`, the
 * `application` realm): the management client's sign-in calls under the application prefix.
 * Tokens only cross `https://`, or `http://` to a loopback address.
 *
 * @example
 * const app = createApplicationClient({ baseUrl: 'https://app.example' });
 * const pair = await login(app, loadDeviceKey('device.pem'));
 */
export function createApplicationClient(options: ManagementClientOptions): SignInClient {
  const { baseUrl, call } = caller(options);
  return Object.freeze(signInCalls(baseUrl, call, 'application'));
}

/**
 * The sign-in client of `realm` at `baseUrl`: {@link createManagementClient} or
 * {@link createApplicationClient}.
 *
 * @example
 * const client = createSignInClient({ baseUrl: creds.url, realm: creds.realm });
 */
export function createSignInClient(options: ManagementClientOptions & { readonly realm: Realm }): SignInClient {
  return options.realm === 'management' ? createManagementClient(options) : createApplicationClient(options);
}

/**
 * Creates a client of the management API. Every non-2xx answer throws an {@link ApiError}
 * carrying the problem's `code`; a connection failure throws an {@link ApiUnreachableError}.
 *
 * @example
 * const api = createManagementClient({ baseUrl: 'http://127.0.0.1:9090' });
 * const me = await api.me(accessToken);
 */
export function createManagementClient(options: ManagementClientOptions): ManagementClient {
  const { baseUrl, call } = caller(options);
  return Object.freeze({
    ...signInCalls(baseUrl, call, 'management'),
    health: () => call<HealthJson>('GET', '/health'),
    enroll: (input) => call<DeviceResponseJson>('POST', '/v1/auth/enroll', { body: input, secret: true }),
    audit: (accessToken, page = {}) => {
      const q = new URLSearchParams();
      if (page.after !== undefined) q.set('after', String(page.after));
      if (page.limit !== undefined) q.set('limit', String(page.limit));
      const qs = q.size > 0 ? `?${q.toString()}` : '';
      return call<AuditPageJson>('GET', `/v1/auth/audit${qs}`, { bearer: accessToken });
    },
    devices: (accessToken, options) =>
      call<DeviceListJson>('GET', `/v1/auth/devices${options?.mine === true ? '?mine' : ''}`, { bearer: accessToken }),
    removeDevice: (accessToken, deviceId) =>
      call<DeviceRemovedJson>('DELETE', `/v1/auth/devices/${encodeURIComponent(deviceId)}`, { bearer: accessToken }),
    sessions: (accessToken, options) =>
      call<SessionListJson>('GET', `/v1/auth/sessions${options?.mine === true ? '?mine' : ''}`, { bearer: accessToken }),
    users: (accessToken, query = {}) => {
      const q = new URLSearchParams();
      for (const [name, value] of Object.entries(query)) if (value !== undefined) q.set(name, String(value));
      const qs = q.size > 0 ? `?${q.toString()}` : '';
      return call<UserPageJson>('GET', `/v1/auth/users${qs}`, { bearer: accessToken });
    },
    user: (accessToken, subject) => call<UserResponseJson>('GET', userPath(subject), { bearer: accessToken }),
    addUser: (accessToken, input) => call<UserResponseJson>('POST', '/v1/auth/users', { bearer: accessToken, body: input }),
    changeUser: (accessToken, subject, input) => call<UserResponseJson>('PATCH', userPath(subject), { bearer: accessToken, body: input }),
    disableUser: (accessToken, subject) => call<UserStatusJson>('POST', `${userPath(subject)}/disable`, { bearer: accessToken, body: {} }),
    enableUser: (accessToken, subject) => call<UserStatusJson>('POST', `${userPath(subject)}/enable`, { bearer: accessToken, body: {} }),
    removeUser: (accessToken, subject) => call<UserRemovedJson>('DELETE', userPath(subject), { bearer: accessToken }),
    consoleLink: (accessToken) => call<ConsoleLinkJson>('POST', '/v1/auth/console-links', { bearer: accessToken, body: {} }),
    groups: (accessToken, options = {}) =>
      call<GroupListJson>('GET', `/v1/auth/groups${options.realm === undefined ? '' : `?realm=${encodeURIComponent(options.realm)}`}`, {
        bearer: accessToken,
      }),
    // The answer is a bearer secret: it never comes back over clear text from another machine.
    createScimToken: (accessToken, name) =>
      call<ScimTokenCreatedJson>('POST', '/v1/auth/scim-tokens', { bearer: accessToken, body: { name }, secret: true }),
    scimTokens: (accessToken) => call<ScimTokenListJson>('GET', '/v1/auth/scim-tokens', { bearer: accessToken }),
    revokeScimToken: (accessToken, id) =>
      call<ScimTokenRevokedJson>('DELETE', `/v1/auth/scim-tokens/${encodeURIComponent(id)}`, { bearer: accessToken }),
  } satisfies ManagementClient);
}

/** The path of one user's routes. */
function userPath(subject: string): string {
  return `/v1/auth/users/${encodeURIComponent(subject)}`;
}

import type {
  AuditPageJson,
  ChallengeJson,
  DeviceListJson,
  DeviceRemovedJson,
  DeviceResponseJson,
  EnrollBody,
  HealthJson,
  PrincipalJson,
  RevokedJson,
  RevokeOthersJson,
  SessionBody,
  SessionListJson,
  TokenPairJson,
} from '@svc/core';
import { ApiError, ApiUnreachableError, problemFromResponse } from './api-error.js';
import { assertMayCarryBearer } from './bearer-transport.js';

// The answers' types are derived from the schemas the server serializes them with (core's
// wire shapes): one declaration, so the SDK cannot miss a field the server sends.
export type { AuditEventJson, AuditPageJson, ChallengeJson } from '@svc/core';

/** Typed calls to the loopback management API. */
export interface ManagementClient {
  /** The base URL, without a trailing slash. */
  readonly baseUrl: string;
  health(): Promise<HealthJson>;
  enroll(input: EnrollBody): Promise<DeviceResponseJson>;
  createChallenge(publicKeyHex: string): Promise<ChallengeJson>;
  createSession(input: SessionBody): Promise<TokenPairJson>;
  refresh(refreshToken: string): Promise<TokenPairJson>;
  me(accessToken: string): Promise<PrincipalJson>;
  revoke(accessToken: string, sessionId?: string): Promise<RevokedJson>;
  audit(accessToken: string, page?: { readonly after?: number; readonly limit?: number }): Promise<AuditPageJson>;
  /** Active devices; with `mine`, only those of the caller's own subject. */
  devices(accessToken: string, options?: { readonly mine?: boolean }): Promise<DeviceListJson>;
  removeDevice(accessToken: string, deviceId: string): Promise<DeviceRemovedJson>;
  /** Active sessions; with `mine`, only those of the caller's own subject. */
  sessions(accessToken: string, options?: { readonly mine?: boolean }): Promise<SessionListJson>;
  /** Revokes the caller's other sessions (sign out everywhere else). */
  revokeOtherSessions(accessToken: string): Promise<RevokeOthersJson>;
}

/** Options of {@link createManagementClient}. */
export interface ManagementClientOptions {
  /** E.g. `http://127.0.0.1:9090`. */
  readonly baseUrl: string;
  /** A `fetch` to use instead of the global one (tests, proxies). */
  readonly fetch?: typeof fetch;
  /** The `User-Agent` sent with every request; a session records the one it was created with. */
  readonly userAgent?: string;
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
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const doFetch = options.fetch ?? globalThis.fetch;
  const userAgent = options.userAgent ?? `svc-client (node ${process.version})`;

  async function call<T>(method: string, path: string, init: { body?: unknown; bearer?: string; secretBody?: true } = {}): Promise<T> {
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': userAgent };
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    // A bearer, a refresh token or a bootstrap token never goes to a non-loopback http:// URL.
    if (init.bearer !== undefined || init.secretBody === true) assertMayCarryBearer(baseUrl);
    if (init.bearer !== undefined) headers.authorization = `Bearer ${init.bearer}`;
    let res: Response;
    try {
      res = await doFetch(`${baseUrl}${path}`, {
        method,
        headers,
        ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      });
    } catch (cause) {
      throw new ApiUnreachableError(baseUrl, cause);
    }
    if (!res.ok) throw problemFromResponse(res, await res.text().catch(() => ''));
    return (await res.json()) as T;
  }

  return Object.freeze({
    baseUrl,
    health: () => call<HealthJson>('GET', '/health'),
    enroll: (input) => call<DeviceResponseJson>('POST', '/v1/auth/enroll', { body: input, secretBody: true }),
    createChallenge: (publicKeyHex) => call<ChallengeJson>('POST', '/v1/auth/challenges', { body: { public_key: publicKeyHex } }),
    createSession: (input) => call<TokenPairJson>('POST', '/v1/auth/sessions', { body: input }),
    refresh: (refreshToken) => call<TokenPairJson>('POST', '/v1/auth/refresh', { body: { refresh_token: refreshToken }, secretBody: true }),
    me: (accessToken) => call<PrincipalJson>('GET', '/v1/auth/me', { bearer: accessToken }),
    revoke: (accessToken, sessionId) =>
      call<RevokedJson>('POST', '/v1/auth/revoke', {
        bearer: accessToken,
        body: sessionId === undefined ? {} : { session_id: sessionId },
      }),
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
    revokeOtherSessions: (accessToken) =>
      call<RevokeOthersJson>('POST', '/v1/auth/sessions/revoke-others', { bearer: accessToken, body: {} }),
  } satisfies ManagementClient);
}

/**
 * The token of an `Authorization: Bearer <token>` header (scheme case-insensitive, RFC 6750).
 * `undefined` when there is no header; `''` when there is one but it is not a bearer
 * credential, which the use case refuses like a missing token.
 *
 * @example
 * bearerToken('Bearer svca_abc'); // 'svca_abc'
 * bearerToken('Basic dXNlcg=='); // ''
 */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (header.length < 8 || header.charCodeAt(6) !== 32 || header.slice(0, 6).toLowerCase() !== 'bearer') return '';
  return header.slice(7).trim();
}

/**
 * The `WWW-Authenticate` challenge for a refused bearer request (RFC 6750 §3): with
 * `error="invalid_token"` when a credential was sent, bare when none was.
 *
 * @example
 * bearerChallenge('management', true); // 'Bearer realm="management", error="invalid_token"'
 */
export function bearerChallenge(realm: string, credentialSent: boolean): string {
  return credentialSent ? `Bearer realm="${realm}", error="invalid_token"` : `Bearer realm="${realm}"`;
}

/** The access token of an `Authorization` header and whether it came with the `DPoP` scheme (RFC 9449 §7.1). */
export interface AccessCredential {
  /** As {@link bearerToken}: undefined without a header, `''` for a scheme that is neither. */
  readonly token: string | undefined;
  /** True for `Authorization: DPoP <token>`: the request must carry a proof of the key. */
  readonly dpop: boolean;
}

/**
 * Reads `Authorization: Bearer <token>` or `Authorization: DPoP <token>` (schemes
 * case-insensitive).
 *
 * @example
 * accessCredential('DPoP svca_abc'); // { token: 'svca_abc', dpop: true }
 */
export function accessCredential(header: string | undefined): AccessCredential {
  if (header !== undefined && header.length > 5 && header.charCodeAt(4) === 32 && header.slice(0, 4).toLowerCase() === 'dpop') {
    return { token: header.slice(5).trim(), dpop: true };
  }
  return { token: bearerToken(header), dpop: false };
}

/**
 * What a request presents with a DPoP-bound access token: its `DPoP` header, method and URL as
 * the client reached `origin` (scheme, host and port), without the query.
 *
 * @example
 * const dpop = dpopRequestOf(req, `${req.protocol}://${req.host}`);
 */
export function dpopRequestOf(
  req: { readonly method: string; readonly url: string; readonly headers: Readonly<Record<string, string | string[] | undefined>> },
  origin: string,
): { readonly proof: unknown; readonly htm: string; readonly htu: string } {
  return { proof: req.headers.dpop, htm: req.method, htu: `${origin}${req.url.split('?', 1)[0]}` };
}

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

/** What a session records about the client that created it, as the transport saw it. */
export interface SessionClientInput {
  /** The peer address (for a gateway behind a trusted proxy, the address that proxy vouches for). */
  readonly address?: string | undefined;
  /** The `User-Agent` header as sent. */
  readonly userAgent?: string | undefined;
}

/** The longest `User-Agent` a session keeps, in characters; the rest is cut off. */
export const USER_AGENT_MAX_CHARS = 256;

/** The longest client address a session keeps (an IPv6 address with a zone fits). */
const ADDRESS_MAX_CHARS = 64;

/**
 * What a session records about its client: the address and the `User-Agent`, nothing else (no
 * other tracking). Both come from the caller and so are untrusted text bound for listings and
 * terminals: control and format (bidi) characters become spaces, the address must look like an IP address
 * (anything else is dropped), and the agent is cut to {@link USER_AGENT_MAX_CHARS} characters.
 *
 * @example
 * sessionClient({ address: '127.0.0.1', userAgent: 'curl/8.5.0' });
 * // => { clientAddress: '127.0.0.1', userAgent: 'curl/8.5.0' }
 */
export function sessionClient(input: SessionClientInput | undefined): {
  readonly clientAddress: string | null;
  readonly userAgent: string | null;
} {
  const address = input?.address;
  const agent = input?.userAgent
    ?.replace(/[\p{Cc}\p{Cf}]/gu, ' ')
    .trim()
    .slice(0, USER_AGENT_MAX_CHARS);
  return {
    clientAddress:
      address !== undefined && address.length <= ADDRESS_MAX_CHARS && /^[0-9A-Fa-f:.]+(%[\w.-]+)?$/.test(address) ? address : null,
    userAgent: agent === undefined || agent === '' ? null : agent,
  };
}

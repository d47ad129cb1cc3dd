import { BlockList, isIPv4, isIPv6 } from 'node:net';

/** The names proxy-addr (Fastify's `trustProxy`) accepts for address ranges, as CIDRs. */
const NAMED_RANGES: Readonly<Record<string, readonly string[]>> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

/**
 * Whether a TCP peer address is one of `trusted` (addresses, CIDRs, or the names `loopback`,
 * `linklocal`, `uniquelocal`, as Fastify's `trustProxy` takes them); an IPv4-mapped IPv6 peer
 * is compared as IPv4. Empty: nobody is trusted.
 *
 * @throws {TypeError} when an entry is not an address or CIDR.
 * @example
 * const trusted = trustedPeerPredicate(['10.0.0.0/8', '::1']);
 * trusted('::ffff:10.1.2.3'); // true
 */
export function trustedPeerPredicate(trusted: readonly string[]): (address: string | undefined) => boolean {
  if (trusted.length === 0) return () => false;
  const list = new BlockList();
  for (const entry of trusted.flatMap((e) => NAMED_RANGES[e] ?? [e])) {
    const [address = '', prefix] = entry.split('/');
    const type = isIPv4(address) ? 'ipv4' : isIPv6(address) ? 'ipv6' : null;
    if (type === null) throw new TypeError(`trusted proxy ${JSON.stringify(entry)} is not an IP address or CIDR`);
    if (prefix === undefined) list.addAddress(address, type);
    else {
      const bits = Number(prefix);
      if (!/^\d{1,3}$/.test(prefix) || bits > (type === 'ipv4' ? 32 : 128))
        throw new TypeError(`trusted proxy ${JSON.stringify(entry)} has a bad prefix length`);
      list.addSubnet(address, bits, type);
    }
  }
  return (address) => {
    if (address === undefined) return false;
    const mapped = address.toLowerCase().startsWith('::ffff:') && isIPv4(address.slice(7)) ? address.slice(7) : address;
    return list.check(mapped, isIPv4(mapped) ? 'ipv4' : 'ipv6');
  };
}

/**
 * The client address of a request as Fastify's `trustProxy` computes `req.ip`, for requests
 * Fastify never sees (an `upgrade`): the TCP peer, unless it is trusted, then the
 * `X-Forwarded-For` hops from the right, skipping trusted ones; the first untrusted hop (or the
 * leftmost) is the client.
 *
 * @example
 * forwardedClientAddress('127.0.0.1', '203.0.113.9, 10.0.0.2', trustedPeerPredicate(['127.0.0.1', '10.0.0.0/8'])); // '203.0.113.9'
 */
export function forwardedClientAddress(
  peer: string | undefined,
  forwardedFor: string | undefined,
  trusted: (address: string | undefined) => boolean,
): string | undefined {
  let address = peer;
  if (forwardedFor === undefined || !trusted(address)) return address;
  const hops = forwardedFor
    .split(',')
    .map((h) => h.trim())
    .filter((h) => h !== '');
  for (let i = hops.length - 1; i >= 0; i--) {
    address = hops[i];
    if (!trusted(address)) return address;
  }
  return address;
}

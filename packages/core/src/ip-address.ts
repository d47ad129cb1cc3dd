/**
 * IP address and CIDR syntax as pure functions (core imports no `node:net`): what
 * `:svc/app-trusted-proxies` and `:svc/app-listen` are checked with at load, in every profile.
 * Strict on purpose: an address is trusted to speak for clients, so only the canonical written
 * forms are accepted (dotted quads of decimal octets without leading zeros; RFC 4291 IPv6 text,
 * an embedded dotted quad allowed in the last 32 bits, no zone index).
 */

/**
 * The IP version of `text` (4 or 6), or 0 when it is not an IP address: `net.isIP` without
 * Node, minus the spellings Node also refuses (`127.1`, `0x7f.0.0.1`, `010.0.0.1`) and minus
 * IPv6 zone indexes (`fe80::1%eth0`), which name an interface, not an address.
 *
 * @example
 * ipVersion('10.0.0.1'); // 4
 * ipVersion('::ffff:10.0.0.1'); // 6
 * ipVersion('127.1'); // 0
 */
export function ipVersion(text: string): 0 | 4 | 6 {
  if (isIPv4(text)) return 4;
  if (isIPv6(text)) return 6;
  return 0;
}

function isIPv4(text: string): boolean {
  const parts = text.split('.');
  return parts.length === 4 && parts.every((p) => /^(?:0|[1-9]\d{0,2})$/.test(p) && Number(p) <= 255);
}

function isIPv6(text: string): boolean {
  if (text.length === 0 || text.length > 45) return false;
  let groups = 8;
  let body = text;
  const lastColon = body.lastIndexOf(':');
  if (lastColon >= 0 && body.slice(lastColon + 1).includes('.')) {
    // An embedded IPv4 address takes the last two groups.
    if (!isIPv4(body.slice(lastColon + 1))) return false;
    body = `${body.slice(0, lastColon + 1)}0`;
    groups = 7;
  }
  const halves = body.split('::');
  if (halves.length > 2) return false;
  const hex = /^[0-9a-f]{1,4}$/i;
  const count = (half: string): number | null => {
    if (half === '') return 0;
    const parts = half.split(':');
    return parts.every((p) => hex.test(p)) ? parts.length : null;
  };
  if (halves.length === 1) return count(body) === groups;
  const [head, tail] = halves as [string, string];
  const h = count(head);
  const t = count(tail);
  return h !== null && t !== null && h + t <= groups - 1;
}

/**
 * Whether `text` is an IP address or a CIDR block (`10.0.0.0/8`, `fd00::/8`) with a prefix
 * length within the address's bounds (0-32, 0-128, decimal without leading zeros).
 *
 * @example
 * isIpOrCidr('192.0.2.10'); // true
 * isIpOrCidr('10.0.0.0/8'); // true
 * isIpOrCidr('10.0.0.0/33'); // false
 * isIpOrCidr('proxy.internal'); // false
 */
export function isIpOrCidr(text: string): boolean {
  const slash = text.indexOf('/');
  if (slash < 0) return ipVersion(text) !== 0;
  const version = ipVersion(text.slice(0, slash));
  const prefix = text.slice(slash + 1);
  if (version === 0 || !/^(?:0|[1-9]\d{0,2})$/.test(prefix)) return false;
  return Number(prefix) <= (version === 4 ? 32 : 128);
}

/**
 * The prefix length of a CIDR block, or the full length (32 or 128) for a single address; null
 * when {@link isIpOrCidr} is false.
 *
 * @example
 * cidrPrefixLength('10.0.0.0/8'); // 8
 * cidrPrefixLength('::1'); // 128
 */
export function cidrPrefixLength(text: string): number | null {
  if (!isIpOrCidr(text)) return null;
  const slash = text.indexOf('/');
  if (slash >= 0) return Number(text.slice(slash + 1));
  return ipVersion(text) === 4 ? 32 : 128;
}

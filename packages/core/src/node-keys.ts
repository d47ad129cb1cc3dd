import type { RetiredNodeKeyJson } from './wire/node.js';

/** The keys a verifier accepts for one node: the current one, and the retired ones with their windows (discovery's fields). */
export interface NodeKeySetJson {
  readonly public_key: string;
  readonly previous_keys?: readonly RetiredNodeKeyJson[];
}

/**
 * Whether something the key `publicKeyHex` signed, saying it was made at `at` (RFC 3339), is to
 * be accepted under `keys`: always when it is the current key; when it is a retired key, only if
 * `at` falls in its window (`valid_from` <= `at` < `valid_until`), so a key that leaked after its
 * rotation cannot vouch for anything newer than its retirement.
 *
 * @example
 * nodeKeyValidAt(discovery, signed.public_key, signed.payload.generated_at); // true or false
 */
export function nodeKeyValidAt(keys: NodeKeySetJson, publicKeyHex: string, at: string): boolean {
  const key = publicKeyHex.toLowerCase();
  if (keys.public_key.toLowerCase() === key) return true;
  const when = Date.parse(at);
  if (Number.isNaN(when)) return false;
  return (keys.previous_keys ?? []).some((k) => {
    if (k.public_key.toLowerCase() !== key) return false;
    const from = k.valid_from === null ? Number.NEGATIVE_INFINITY : Date.parse(k.valid_from);
    const until = Date.parse(k.valid_until);
    return !Number.isNaN(from) && !Number.isNaN(until) && from <= when && when < until;
  });
}

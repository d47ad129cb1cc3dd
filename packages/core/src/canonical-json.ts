/** Plain data: what audit events and diagnostics payloads are made of. */
export type JsonValue = string | number | boolean | null | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/**
 * Canonical JSON of plain data whose numbers are safe integers: keys sorted by UTF-16 code
 * units, no whitespace. On that domain this is exactly RFC 8785 (JCS), which is why the
 * audit chain can be recomputed by any JCS implementation.
 *
 * @example
 * canonicalJson({ b: 1, a: 'x' }); // '{"a":"x","b":1}'
 */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) throw new TypeError('canonicalJson takes safe integers only');
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v as JsonValue)).join(',')}]`;
  const obj = value as { readonly [key: string]: JsonValue };
  const keys = Object.keys(obj)
    .filter((k) => obj[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k] as JsonValue)}`).join(',')}}`;
}

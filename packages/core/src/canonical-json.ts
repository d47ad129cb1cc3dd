/** Plain data: what audit events and diagnostics payloads are made of. */
export type JsonValue = string | number | boolean | null | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/** What one canonicalization accepts beyond the JSON types: a rule per number and per string. */
interface Domain {
  readonly number: (n: number) => void;
  readonly string: (s: string) => void;
}

/**
 * The one serializer behind {@link canonicalJson} and {@link rfc8785Json}: keys sorted by
 * UTF-16 code units (the default `sort`), no whitespace, and each primitive as ECMAScript's
 * `JSON.stringify` writes it, which is the serialization RFC 8785 prescribes for strings and
 * numbers (shortest round-trip form, `-0` as `0`, exponent from 1e21 and below 1e-6).
 */
function serialize(value: JsonValue, domain: Domain): string {
  if (value === null || typeof value === 'boolean') return JSON.stringify(value);
  if (typeof value === 'string') {
    domain.string(value);
    return JSON.stringify(value);
  }
  if (typeof value === 'number') {
    domain.number(value);
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map((v) => serialize(v as JsonValue, domain)).join(',')}]`;
  const obj = value as { readonly [key: string]: JsonValue };
  const keys = Object.keys(obj)
    .filter((k) => obj[k] !== undefined)
    .sort();
  return `{${keys
    .map((k) => {
      domain.string(k);
      return `${JSON.stringify(k)}:${serialize(obj[k] as JsonValue, domain)}`;
    })
    .join(',')}}`;
}

const AUDIT_DOMAIN: Domain = {
  number: (n) => {
    if (!Number.isSafeInteger(n)) throw new TypeError('canonicalJson takes safe integers only');
  },
  // Device names may hold a lone surrogate; the chain escapes it (as JSON.stringify does) rather
  // than refusing to record the event.
  string: () => {},
};

/** An unpaired UTF-16 surrogate: text that is not Unicode, which I-JSON (RFC 7493) forbids. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const RFC8785_DOMAIN: Domain = {
  number: (n) => {
    if (!Number.isFinite(n)) throw new TypeError(`RFC 8785 has no form for ${n}`);
  },
  string: (s) => {
    if (LONE_SURROGATE.test(s)) throw new TypeError('RFC 8785 refuses strings with a lone surrogate');
  },
};

/**
 * Canonical JSON of the audit chain: plain data whose numbers are safe integers, keys sorted
 * by UTF-16 code units, no whitespace. On that domain it is {@link rfc8785Json} (RFC 8785, JCS),
 * so any JCS implementation can recompute the chain; the one difference is a string with a
 * lone surrogate, which RFC 8785 refuses and this escapes, so such a device name is still
 * audited.
 *
 * @throws {TypeError} for a number that is not a safe integer.
 * @example
 * canonicalJson({ b: 1, a: 'x' }); // '{"a":"x","b":1}'
 */
export function canonicalJson(value: JsonValue): string {
  return serialize(value, AUDIT_DOMAIN);
}

/**
 * RFC 8785 (JSON Canonicalization Scheme) of any I-JSON value: what signed diagnostics are
 * signed and verified over. Numbers are every finite double, written as ECMAScript does.
 *
 * @throws {TypeError} for NaN or an infinity, and for a string or key with a lone surrogate
 * (RFC 8785 section 3.2.2.2: such data must end in an error).
 * @example
 * rfc8785Json({ b: [1e21, -0], a: 5e-324 }); // '{"a":5e-324,"b":[1e+21,0]}'
 */
export function rfc8785Json(value: JsonValue): string {
  return serialize(value, RFC8785_DOMAIN);
}

// The EDN model of `project.edn` as the configuration schema sees it, and the few operations
// every reader of it shares. The parser (text → this model) lives with the program that reads
// files; core only reads the model, so it needs no EDN library.

/** An EDN keyword, e.g. `:svc/store` is `{ keyword: 'svc/store' }`. */
export interface EdnKeyword {
  readonly keyword: string;
}
/** An EDN tagged literal, e.g. `#svc/secret "env:PGPASSWORD"`. */
export interface EdnTagged {
  readonly tag: string;
  readonly value: EdnValue;
}
/** An EDN map. Keyword keys are spelled `:ns/name`, string keys as they are. */
export type EdnMap = ReadonlyMap<string, EdnValue>;
/** A parsed EDN value as the config schema sees it. */
export type EdnValue = string | number | bigint | boolean | null | EdnKeyword | EdnTagged | readonly EdnValue[] | EdnMap;

/**
 * Whether a value is an EDN map.
 *
 * @example
 * isEdnMap(new Map()); // true
 */
export function isEdnMap(v: EdnValue | undefined): v is EdnMap {
  return v instanceof Map;
}
/**
 * Whether a value is an EDN keyword.
 *
 * @example
 * isKeyword({ keyword: 'svc/store' }); // true
 */
export function isKeyword(v: EdnValue | undefined): v is EdnKeyword {
  return typeof v === 'object' && v !== null && !(v instanceof Map) && !Array.isArray(v) && 'keyword' in v;
}
/**
 * Whether a value is a tagged literal.
 *
 * @example
 * isTagged({ tag: 'svc/secret', value: 'env:PGPASSWORD' }); // true
 */
export function isTagged(v: EdnValue | undefined): v is EdnTagged {
  return typeof v === 'object' && v !== null && !(v instanceof Map) && !Array.isArray(v) && 'tag' in v;
}

/**
 * How a value is named in a problem message: `a map`, `the keyword :x`, `string "y"`.
 *
 * @example
 * describeEdn({ keyword: 'dev' }); // 'the keyword :dev'
 */
export function describeEdn(v: EdnValue | undefined): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'nil';
  if (isEdnMap(v)) return 'a map';
  if (Array.isArray(v)) return 'a vector';
  if (isKeyword(v)) return `the keyword :${v.keyword}`;
  if (isTagged(v)) return `#${v.tag}`;
  return `${typeof v} ${JSON.stringify(typeof v === 'bigint' ? v.toString() : v)}`;
}

/**
 * Deep-merges a profile over the base: maps merge key by key, anything else replaces.
 *
 * @example
 * mergeEdn(new Map([[':a', 1]]), new Map([[':b', 2]])); // Map { ':a' => 1, ':b' => 2 }
 */
export function mergeEdn(base: EdnValue | undefined, over: EdnValue): EdnValue {
  if (!isEdnMap(base) || !isEdnMap(over)) return over;
  const out = new Map(base);
  for (const [k, v] of over) out.set(k, mergeEdn(base.get(k), v));
  return out;
}

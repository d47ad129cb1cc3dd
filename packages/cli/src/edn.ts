import type { ConfigProblem, EdnValue } from '@svc/core/config';
import { parseEDNString } from 'edn-data';

const PARSE_OPTIONS = { mapAs: 'doubleArray', keywordAs: 'object', listAs: 'array', setAs: 'array' } as const;

/**
 * Parses the text of an EDN file with `edn-data` and converts it to core's `EdnValue`: maps
 * become `Map`s with keyword keys spelled `:ns/name` (string keys as they are), keyword values
 * `{ keyword }`, tagged literals `{ tag, value }`, lists, vectors and sets arrays. Every
 * problem (syntax, incomplete input, unsupported values) is returned, none thrown.
 *
 * @example
 * const { value, problems } = parseEdn(text, 'demo/project.edn');
 */
export function parseEdn(text: string, file: string): { value: EdnValue | undefined; problems: ConfigProblem[] } {
  const problems: ConfigProblem[] = [];
  if (text.trim() === '') {
    problems.push({ file, key: '(top level)', message: 'the file is empty; expected a map such as {:svc/project "demo" ...}' });
    return { value: undefined, problems };
  }
  let raw: unknown;
  try {
    raw = parseEDNString(text, PARSE_OPTIONS);
  } catch (error) {
    problems.push({ file, key: '(top level)', message: `not valid EDN: ${(error as Error).message}` });
    return { value: undefined, problems };
  }
  // edn-data answers incomplete input (an unclosed map, an unterminated string) with
  // null/undefined instead of throwing.
  if (raw === undefined || (raw === null && text.trim() !== 'nil')) {
    problems.push({
      file,
      key: '(top level)',
      message: 'incomplete EDN: an unclosed {, [ or ( or an unterminated string; expected one complete map',
    });
    return { value: undefined, problems };
  }
  const value = convert(raw, '(top level)', file, problems);
  return { value, problems };
}

function convert(raw: unknown, where: string, file: string, problems: ConfigProblem[]): EdnValue | undefined {
  if (raw === null || typeof raw === 'string' || typeof raw === 'boolean' || typeof raw === 'bigint') return raw;
  if (typeof raw === 'number') return raw;
  if (Array.isArray(raw)) {
    const out: EdnValue[] = [];
    raw.forEach((item, i) => {
      const v = convert(item, `${where} [${i}]`, file, problems);
      if (v !== undefined) out.push(v);
    });
    return out;
  }
  if (typeof raw === 'object') {
    const o = raw as Record<string, unknown>;
    if (Array.isArray(o.map)) {
      const out = new Map<string, EdnValue>();
      for (const entry of o.map as unknown[]) {
        const [k, v] = entry as [unknown, unknown];
        const key = mapKey(k);
        if (key === null) {
          problems.push({ file, key: where, message: `map keys must be keywords or strings, found ${JSON.stringify(k)}` });
          continue;
        }
        const path = where === '(top level)' ? key : `${where} ${key}`;
        if (out.has(key)) problems.push({ file, key: path, message: 'duplicate key' });
        const value = convert(v, path, file, problems);
        if (value !== undefined) out.set(key, value);
      }
      return out;
    }
    if (typeof o.key === 'string') return { keyword: o.key };
    if (typeof o.tag === 'string' && 'val' in o) {
      const value = convert(o.val, `${where} #${o.tag}`, file, problems);
      return value === undefined ? undefined : { tag: o.tag, value };
    }
    if (typeof o.sym === 'string') {
      problems.push({ file, key: where, message: `unexpected symbol ${o.sym}; strings are quoted and keywords start with :` });
      return undefined;
    }
  }
  problems.push({ file, key: where, message: `unsupported EDN value ${JSON.stringify(raw)}` });
  return undefined;
}

function mapKey(k: unknown): string | null {
  if (typeof k === 'string') return k;
  if (typeof k === 'object' && k !== null && typeof (k as { key?: unknown }).key === 'string') return `:${(k as { key: string }).key}`;
  return null;
}

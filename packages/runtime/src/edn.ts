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
  // edn-data is lenient (it drops a key without a value, accepts `#{1 2]`, reads JSON's `:` as
  // an empty keyword) and its errors carry no position: the structure is checked here first,
  // so every syntax problem is `file:line:col: what`.
  const syntax = checkEdnSyntax(text);
  if (syntax !== null) {
    const { line, col } = lineAndColumn(text, syntax.at);
    problems.push({ file: `${file}:${line}:${col}`, key: '', message: syntax.message });
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
          problems.push({ file, key: where, message: `map keys must be keywords or strings, found ${describe(k)}` });
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
  problems.push({ file, key: where, message: `unsupported EDN value: ${describe(raw)}` });
  return undefined;
}

function mapKey(k: unknown): string | null {
  if (typeof k === 'string') return k;
  if (typeof k === 'object' && k !== null && typeof (k as { key?: unknown }).key === 'string') return `:${(k as { key: string }).key}`;
  return null;
}

/**
 * One configuration problem as the line the CLI prints: `file: key: message`, or
 * `file:line:col: message` for a syntax problem (whose `key` is empty).
 *
 * @example
 * printError(formatProblem(problem)); // /p/project.edn:3:9: expected } to close the map opened at 1:1, found ]
 */
export function formatProblem(p: ConfigProblem): string {
  return p.key === '' ? `${p.file}: ${p.message}` : `${p.file}: ${p.key}: ${p.message}`;
}

/** What a parsed value is, in EDN's words (never the parser's internal structures). */
function describe(raw: unknown): string {
  if (raw === null) return 'nil';
  if (typeof raw === 'number' || typeof raw === 'bigint') return `the number ${String(raw)}`;
  if (typeof raw === 'boolean') return String(raw);
  if (Array.isArray(raw)) return 'a vector, list or set';
  if (typeof raw === 'object') {
    const o = raw as Record<string, unknown>;
    if (Array.isArray(o.map)) return 'a map';
    if (typeof o.key === 'string') return `the keyword :${o.key}`;
    if (typeof o.sym === 'string') return `the symbol ${o.sym}`;
    if (typeof o.tag === 'string') return `a #${o.tag} tagged value`;
    if (typeof o.char === 'string') return 'a character literal';
  }
  return 'a value of a kind project.edn does not use';
}

/** 1-based line and column (in UTF-16 code units) of offset `at`. */
function lineAndColumn(text: string, at: number): { line: number; col: number } {
  let line = 1;
  let start = 0;
  for (let i = 0; i < at && i < text.length; i++) {
    if (text[i] === '\n') {
      line++;
      start = i + 1;
    }
  }
  return { line, col: at - start + 1 };
}

/** Where the structure check stopped, and why; thrown inside {@link checkEdnSyntax} only, never out of it. */
class EdnSyntaxError {
  constructor(
    readonly at: number,
    readonly message: string,
  ) {}
}

const CLOSERS: Readonly<Record<string, string>> = { '{': '}', '[': ']', '(': ')' };
const KINDS: Readonly<Record<string, string>> = { '{': 'map', '[': 'vector', '(': 'list', '#{': 'set' };
const DELIMITER = /[\s,{}[\]()";]/;

/**
 * The first structural problem of an EDN text, with its offset, or null: unclosed or
 * mismatched brackets, an unterminated string, a map key without a value, a lone `:` (JSON's
 * key separator), a tag without a value, anything after the top-level form. Values themselves
 * are left to the parser and the schema.
 */
function checkEdnSyntax(text: string): { at: number; message: string } | null {
  const n = text.length;
  let i = 0;
  const where = (at: number) => {
    const { line, col } = lineAndColumn(text, at);
    return `${line}:${col}`;
  };
  const skip = () => {
    while (i < n) {
      const c = text[i] as string;
      if (c === ';') while (i < n && text[i] !== '\n') i++;
      else if (/[\s,]/.test(c)) i++;
      else break;
    }
  };
  const readSeq = (open: number, opener: string): number => {
    const closer = CLOSERS[opener.at(-1) as string] as string;
    let count = 0;
    for (;;) {
      skip();
      if (i >= n) throw new EdnSyntaxError(open, `the ${KINDS[opener]} opened here is never closed (expected ${closer})`);
      const c = text[i] as string;
      if (c === closer) {
        i++;
        return count;
      }
      if (c === '}' || c === ']' || c === ')') {
        throw new EdnSyntaxError(i, `expected ${closer} to close the ${KINDS[opener]} opened at ${where(open)}, found ${c}`);
      }
      if (text.startsWith('#_', i)) {
        i += 2;
        readForm();
        continue;
      }
      readForm();
      count++;
    }
  };
  const readForm = (): void => {
    skip();
    if (i >= n) throw new EdnSyntaxError(n, 'the file ends where a value was expected');
    const start = i;
    const c = text[i] as string;
    if (c === '{' || c === '[' || c === '(') {
      i++;
      const count = readSeq(start, c);
      if (c === '{' && count % 2 === 1) {
        throw new EdnSyntaxError(start, `the map opened here has a key without a value (${count} forms; a map holds key value pairs)`);
      }
      return;
    }
    if (c === '}' || c === ']' || c === ')') throw new EdnSyntaxError(i, `unexpected ${c}: nothing open here to close`);
    if (c === '"') {
      i++;
      while (i < n && text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
      if (i >= n) throw new EdnSyntaxError(start, 'the string that starts here is never closed (expected ")');
      i++;
      return;
    }
    if (c === '#') {
      const next = text[i + 1];
      if (next === '{') {
        i += 2;
        readSeq(start, '#{');
        return;
      }
      if (next === '_') {
        i += 2;
        readForm();
        readForm();
        return;
      }
      if (next !== '#') {
        i++;
        const tag = readAtom();
        if (tag === '' || tag.startsWith(':'))
          throw new EdnSyntaxError(start, 'a # must be followed by a tag name, as in #svc/secret "env:NAME"');
        skip();
        if (i >= n || '}])'.includes(text[i] as string)) throw new EdnSyntaxError(start, `the tag #${tag} has no value after it`);
        readForm();
        return;
      }
    }
    if (c === '\\') i++;
    const atom = readAtom();
    if (atom === ':') {
      throw new EdnSyntaxError(
        start,
        'a : with no keyword name; keywords are written :name (JSON\'s "key": value is written :key value in EDN)',
      );
    }
  };
  const readAtom = (): string => {
    const start = i;
    while (i < n && !DELIMITER.test(text[i] as string)) i++;
    if (i === start) i++;
    return text.slice(start, i);
  };
  try {
    if (/^\s*\{\s*"[^"]*"\s*:/.test(text)) {
      const at = text.indexOf(':', text.indexOf('"'));
      throw new EdnSyntaxError(
        at,
        'this looks like JSON, not EDN: project.edn is written {:svc/project "demo" :svc/modules {...}} (keywords for keys, no : between key and value)',
      );
    }
    skip();
    if (i < n && text[i] !== '{') {
      throw new EdnSyntaxError(i, 'expected the map that holds the whole file, {:svc/project "demo" ...}, to start here');
    }
    readForm();
    skip();
    if (i < n) throw new EdnSyntaxError(i, 'more after the top-level map; the file holds one map');
    return null;
  } catch (error) {
    if (error instanceof EdnSyntaxError) return { at: error.at, message: error.message };
    throw error;
  }
}

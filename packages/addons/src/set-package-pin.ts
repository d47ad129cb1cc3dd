import { parseEDNString } from 'edn-data';
import { isSafePackageName, isSafeVersion } from './archive.js';

/** A form of the EDN text with its span; only what locating a map entry needs. */
interface Form {
  readonly kind: 'map' | 'vector' | 'list' | 'set' | 'string' | 'tagged' | 'atom';
  readonly start: number;
  readonly end: number;
  readonly children: readonly Form[];
}

const DELIMITERS = new Set([' ', '\t', '\n', '\r', '\f', ',', '(', ')', '[', ']', '{', '}', '"', ';']);
const CLOSERS: Record<string, Form['kind']> = { '}': 'map', ']': 'vector', ')': 'list' };

/**
 * Finds the spans of EDN forms. edn-data parses values but reports no positions, and an
 * edit that keeps the operator's comments and layout needs positions; the result is always
 * read back with edn-data, so a scanning mistake can never write a wrong pin.
 */
class Spans {
  pos = 0;
  constructor(readonly text: string) {}

  /** Skips whitespace, commas, `;` comments and `#_` discarded forms. */
  skip(): void {
    const t = this.text;
    while (this.pos < t.length) {
      const c = t[this.pos] as string;
      if (c === ',' || /\s/.test(c)) this.pos++;
      else if (c === ';') {
        const nl = t.indexOf('\n', this.pos);
        this.pos = nl < 0 ? t.length : nl + 1;
      } else if (c === '#' && t[this.pos + 1] === '_') {
        this.pos += 2;
        this.read();
      } else break;
    }
  }

  read(): Form {
    this.skip();
    const t = this.text;
    const start = this.pos;
    const c = t[start];
    if (c === undefined) throw new SyntaxError('unexpected end of EDN');
    if (c === '{') return this.collection(start, 1, '}', 'map');
    if (c === '[') return this.collection(start, 1, ']', 'vector');
    if (c === '(') return this.collection(start, 1, ')', 'list');
    if (c === '#' && t[start + 1] === '{') return this.collection(start, 2, '}', 'set');
    if (c in CLOSERS) throw new SyntaxError(`unexpected ${c} at offset ${start}`);
    if (c === '"') {
      for (let i = start + 1; i < t.length; i++) {
        if (t[i] === '\\') i++;
        else if (t[i] === '"') {
          this.pos = i + 1;
          return { kind: 'string', start, end: this.pos, children: [] };
        }
      }
      throw new SyntaxError(`unterminated string at offset ${start}`);
    }
    if (c === '#') {
      this.pos++;
      const tag = this.atom(this.pos);
      const value = this.read();
      return { kind: 'tagged', start, end: value.end, children: [tag, value] };
    }
    // A character literal takes at least the one character after the backslash, even a delimiter.
    return this.atom(c === '\\' ? start + 2 : start, start);
  }

  private atom(from: number, start = from): Form {
    let i = from;
    while (i < this.text.length && !DELIMITERS.has(this.text[i] as string)) i++;
    this.pos = i;
    return { kind: 'atom', start, end: i, children: [] };
  }

  private collection(start: number, open: number, close: string, kind: Form['kind']): Form {
    this.pos = start + open;
    const children: Form[] = [];
    for (;;) {
      this.skip();
      const c = this.text[this.pos];
      if (c === undefined) throw new SyntaxError(`unclosed ${kind} at offset ${start}`);
      if (c === close) {
        this.pos++;
        return { kind, start, end: this.pos, children };
      }
      children.push(this.read());
    }
  }
}

function stringValue(text: string, form: Form): string | null {
  if (form.kind !== 'string') return null;
  const raw = text.slice(form.start, form.end);
  try {
    return JSON.parse(raw) as string;
  } catch {
    return raw.slice(1, -1);
  }
}

/**
 * Inserts `entry` into `map` after the key/value pair whose value is `anchor` (the last pair
 * when null), following the map's layout: on its own line at the keys' indentation when the
 * anchor ends its line, otherwise on the same line.
 */
function insertEntry(text: string, map: Form, entry: string, anchor: Form | null): string {
  const last = anchor ?? map.children[map.children.length - 1];
  if (last === undefined) {
    const at = map.start + 1;
    const next = text[at];
    return `${text.slice(0, at)}${entry}${next === '}' || next === undefined || /\s/.test(next) ? '' : ' '}${text.slice(at)}`;
  }
  let i = last.end;
  while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === ',')) i++;
  if (text[i] === ';') while (i < text.length && text[i] !== '\n') i++;
  if (i < text.length && text[i] !== '\n' && text[i] !== '\r') return `${text.slice(0, last.end)} ${entry}${text.slice(last.end)}`;
  const first = map.children[0] as Form;
  const column = first.start - (text.lastIndexOf('\n', first.start - 1) + 1);
  const eol = text[i] === '\r' ? '\r\n' : '\n';
  return `${text.slice(0, i)}${eol}${' '.repeat(column)}${entry}${text.slice(i)}`;
}

function readsBack(text: string, name: string, pin: { version: string; sha256: string }): boolean {
  type Raw = { map?: [unknown, unknown][]; key?: string };
  const lookup = (m: unknown, key: (k: unknown) => boolean): unknown => (m as Raw | null)?.map?.find(([k]) => key(k))?.[1];
  const kw = (k: string) => (v: unknown) => (v as Raw | null)?.key === k;
  try {
    const root = parseEDNString(text, { mapAs: 'doubleArray', keywordAs: 'object', listAs: 'array', setAs: 'array' });
    const entry = lookup(lookup(root, kw('svc/packages')), (k) => k === name);
    return lookup(entry, kw('version')) === pin.version && lookup(entry, kw('sha256')) === pin.sha256;
  } catch {
    return false;
  }
}

/**
 * Pins `name` in the text of a `project.edn`: replaces its entry in the top-level
 * `:svc/packages` map with `{:version … :sha256 …}`, or inserts it (creating `:svc/packages`
 * after `:svc/project` when absent). Everything else (comments, order, layout) is kept
 * byte for byte. The result is read back with edn-data and must hold the new pin; otherwise
 * this throws and the caller leaves the file alone.
 *
 * @example
 * const text = await readFile(file, 'utf8');
 * await writeFile(file, setPackagePin(text, 'svc-store-sqlite', { version: '0.1.0', sha256 }));
 */
export function setPackagePin(ednText: string, name: string, pin: { version: string; sha256: string }): string {
  if (!isSafePackageName(name)) throw new TypeError(`"${name}" is not a valid package name`);
  if (!isSafeVersion(pin.version)) throw new TypeError(`"${pin.version}" is not a valid package version`);
  if (!/^[0-9a-f]{64}$/.test(pin.sha256)) throw new TypeError('the pin must be 64 lowercase hex digits');
  const spans = new Spans(ednText);
  const root = spans.read();
  spans.skip();
  if (root.kind !== 'map' || spans.pos !== ednText.length) throw new TypeError('project.edn must hold exactly one map');

  const pinText = `{:version "${pin.version}" :sha256 "${pin.sha256}"}`;
  const entryText = `"${name}" ${pinText}`;
  const pairs = (m: Form) =>
    Array.from({ length: Math.floor(m.children.length / 2) }, (_, i) => [m.children[2 * i], m.children[2 * i + 1]] as [Form, Form]);
  const isKey = (f: Form, k: string) => f.kind === 'atom' && ednText.slice(f.start, f.end) === k;

  let out: string;
  const packages = pairs(root).find(([k]) => isKey(k, ':svc/packages'))?.[1];
  if (packages === undefined) {
    const after = pairs(root).find(([k]) => isKey(k, ':svc/project'))?.[1] ?? null;
    out = insertEntry(ednText, root, `:svc/packages {${entryText}}`, after);
  } else {
    if (packages.kind !== 'map') throw new TypeError(':svc/packages in project.edn is not a map');
    const matches = pairs(packages).filter(([k]) => stringValue(ednText, k) === name);
    if (matches.length > 1) throw new TypeError(`"${name}" appears more than once in :svc/packages`);
    const value = matches[0]?.[1];
    out =
      value === undefined
        ? insertEntry(ednText, packages, entryText, null)
        : `${ednText.slice(0, value.start)}${pinText}${ednText.slice(value.end)}`;
  }
  if (!readsBack(out, name, pin))
    throw new Error(`could not pin ${name} in project.edn without changing its meaning; edit :svc/packages by hand`);
  return out;
}

// Renders the generated parts of docs/ from the one place each fact lives in code, so the
// docs cannot drift: `npm run docs` writes them, and a test fails when they differ.
import { AUDIT_SINK_SETTINGS, AUTH_SETTINGS, DEFAULT_AUTH_SETTINGS, ERROR_CODES } from '@svc/core';

export const GENERATED_BEGIN = '<!-- generated: do not edit by hand (npm run docs) -->';
export const GENERATED_END = '<!-- end generated -->';

/** The table of every error code: status, code, title, meaning. */
export function renderErrorTable(): string {
  const rows = Object.entries(ERROR_CODES).map(([code, e]) => `| ${e.status} | \`${code}\` | ${e.title} | ${e.meaning} |`);
  return ['| status | code | title | when |', '|---|---|---|---|', ...rows].join('\n');
}

/** The table of every `:auth/...` setting with its default, bounds and meaning. */
export function renderSettingsTable(): string {
  const rows = AUTH_SETTINGS.map((s) => `| \`${s.key}\` | ${DEFAULT_AUTH_SETTINGS[s.field]} | ${s.min} – ${s.max} | ${s.meaning} |`);
  return ['| key | default | allowed | meaning |', '|---|---|---|---|', ...rows].join('\n');
}

/** The table of every `:svc/audit-sinks` key with its default, allowed values and meaning. */
export function renderAuditSinksTable(): string {
  const allowed = (s: (typeof AUDIT_SINK_SETTINGS)[number]) =>
    s.kind === 'integer' ? `${s.min} – ${s.max}` : s.kind === 'boolean' ? 'true, false' : 'a path';
  const rows = AUDIT_SINK_SETTINGS.map(
    (s) => `| \`${s.key}\` | ${s.default === null ? 'none' : s.default} | ${allowed(s)} | ${s.meaning} |`,
  );
  return ['| key | default | allowed | meaning |', '|---|---|---|---|', ...rows].join('\n');
}

/**
 * Replaces a generated block of a document: the first unnamed one, or with `name` the one
 * opened by `<!-- generated: NAME: do not edit by hand (npm run docs) -->`.
 */
export function withGenerated(doc: string, body: string, name?: string): string {
  const begin = name === undefined ? GENERATED_BEGIN : GENERATED_BEGIN.replace('generated:', `generated: ${name}:`);
  const start = doc.indexOf(begin);
  const end = doc.indexOf(GENERATED_END, start);
  if (start < 0 || end < start) throw new Error(`document has no generated block markers${name === undefined ? '' : ` for ${name}`}`);
  return `${doc.slice(0, start + begin.length)}\n${body}\n${doc.slice(end)}`;
}

/** The generated documents: path (relative to the repo root, `#name` for a named block) → how to render its block. */
export const GENERATED_DOCS: Record<string, () => string> = {
  'docs/errors.md': renderErrorTable,
  'docs/configuration.md': renderSettingsTable,
  'docs/configuration.md#audit-sinks': renderAuditSinksTable,
};

/**
 * A document with every generated block of `GENERATED_DOCS` for `path` rendered anew.
 *
 * @example
 * writeFileSync(path, regenerated(path, readFileSync(path, 'utf8')));
 */
export function regenerated(path: string, doc: string): string {
  let out = doc;
  for (const [key, render] of Object.entries(GENERATED_DOCS)) {
    const [file, name] = key.split('#') as [string, string | undefined];
    if (file === path) out = withGenerated(out, render(), name);
  }
  return out;
}

/** The documents `GENERATED_DOCS` renders blocks of, once each. */
export const GENERATED_FILES: readonly string[] = [...new Set(Object.keys(GENERATED_DOCS).map((k) => k.split('#')[0] as string))];

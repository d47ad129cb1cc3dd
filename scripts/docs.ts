// Renders the generated parts of docs/ from the one place each fact lives in code, so the
// docs cannot drift: `npm run docs` writes them, and a test fails when they differ.
import { AUTH_SETTINGS, DEFAULT_AUTH_SETTINGS, ERROR_CODES, FAILURE_CODES, HTTP_ERROR_CLASSES } from '@svc/core';

export const GENERATED_BEGIN = '<!-- generated: do not edit by hand (npm run docs) -->';
export const GENERATED_END = '<!-- end generated -->';

/**
 * Every error code: the HTTP codes (status, code, title, meaning), then the codes that are not
 * HTTP answers (code, `svc` exit code, the class that carries it, meaning).
 */
export function renderErrorTable(): string {
  const rows = Object.entries(ERROR_CODES).map(([code, e]) => `| ${e.status} | \`${code}\` | ${e.title} | ${e.meaning} |`);
  const failures = Object.entries(FAILURE_CODES).map(([code, f]) => `| \`${code}\` | ${f.exit} | ${f.raisedBy} | ${f.meaning} |`);
  return [
    `Carried by ${HTTP_ERROR_CLASSES.join(', ')}.`,
    '',
    '| status | code | title | when |',
    '|---|---|---|---|',
    ...rows,
    '',
    '### Codes that are not HTTP answers',
    '',
    'Failures of configuration, store opening, addon verification, listening, the client SDK',
    'and the CLI. Every error class of every package carries one of these (or an HTTP code above)',
    'as `code`; `svc` exits with the code shown when the failure ends a command.',
    '',
    '| code | exit | class | when |',
    '|---|---|---|---|',
    ...failures,
  ].join('\n');
}

/** The table of every `:auth/...` setting with its default, bounds and meaning. */
export function renderSettingsTable(): string {
  const rows = AUTH_SETTINGS.map((s) => `| \`${s.key}\` | ${DEFAULT_AUTH_SETTINGS[s.field]} | ${s.min} – ${s.max} | ${s.meaning} |`);
  return ['| key | default | allowed | meaning |', '|---|---|---|---|', ...rows].join('\n');
}

/** Replaces the generated block of a document. */
export function withGenerated(doc: string, body: string): string {
  const start = doc.indexOf(GENERATED_BEGIN);
  const end = doc.indexOf(GENERATED_END);
  if (start < 0 || end < start) throw new Error('document has no generated block markers');
  return `${doc.slice(0, start + GENERATED_BEGIN.length)}\n${body}\n${doc.slice(end)}`;
}

/** The generated documents: path (relative to the repo root) → how to render its block. */
export const GENERATED_DOCS: Record<string, () => string> = {
  'docs/errors.md': renderErrorTable,
  'docs/configuration.md': renderSettingsTable,
};

// Renders the generated parts of docs/ from the one place each fact lives in code, so the
// docs cannot drift: `npm run docs` writes them, and a test fails when they differ.
import { ERROR_CODES } from '@svc/core';
import { AUTH_SETTINGS, DEFAULT_AUTH_SETTINGS } from '@svc/core/config';

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

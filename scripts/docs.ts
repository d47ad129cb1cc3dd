// Renders the generated parts of docs/ from the one place each fact lives in code, so the
// docs cannot drift: `npm run docs` writes them, and a test fails when they differ.
import { ADDONS_FAILURE_CODES } from '@svc/addons';
import { CLI_FAILURE_CODES } from '@svc/cli';
import { CLIENT_FAILURE_CODES, CLIENT_HTTP_ERROR_CLASSES } from '@svc/client';
import { CORE_FAILURE_CODES, ERROR_CODES, type FailureCodeEntry, type FailureCodeTable, HTTP_ERROR_CLASSES } from '@svc/core';
import { AUDIT_SINK_SETTINGS, type ConfigField, PROVIDER_POLICY_SETTINGS } from '@svc/core/config';
import {
  AUTH_SETTINGS,
  AUTH_STORE_KEY,
  AUTH_STORE_MEANING,
  CAPABILITIES,
  FIXED_LIMITS,
  formatLimit,
  PROJECT_KEYS,
  SENDER_CONSTRAINT_KEY,
  SENDER_CONSTRAINT_MEANING,
  WEAKENING_KEYS,
} from '@svc/core/settings';
import { PROVIDER_HOST_FAILURE_CODES } from '@svc/provider-host';
import { RUNTIME_FAILURE_CODES } from '@svc/runtime/errors';
import { SERVER_FAILURE_CODES } from '@svc/server';
import { STORE_POSTGRES_FAILURE_CODES } from 'svc-store-postgres';
import { POSTGRES_STORE_CONFIG } from 'svc-store-postgres/config-fields';
import { STORE_SQLITE_FAILURE_CODES } from 'svc-store-sqlite';
import { SQLITE_STORE_CONFIG } from 'svc-store-sqlite/config-fields';

/**
 * Every package's failure-code table, by package: each package registers the codes of its own
 * classes, and the docs list them all (a test checks every error class has its code in exactly one).
 */
export const FAILURE_TABLES: readonly { readonly name: string; readonly table: FailureCodeTable }[] = [
  { name: '@svc/core', table: CORE_FAILURE_CODES },
  { name: 'svc-store-sqlite', table: STORE_SQLITE_FAILURE_CODES },
  { name: 'svc-store-postgres', table: STORE_POSTGRES_FAILURE_CODES },
  { name: '@svc/addons', table: ADDONS_FAILURE_CODES },
  { name: '@svc/server', table: SERVER_FAILURE_CODES },
  { name: '@svc/client', table: CLIENT_FAILURE_CODES },
  { name: '@svc/cli', table: CLI_FAILURE_CODES },
  { name: '@svc/runtime', table: RUNTIME_FAILURE_CODES },
  { name: '@svc/provider-host', table: PROVIDER_HOST_FAILURE_CODES },
];

/** Every failure code of every package, merged in the order of {@link FAILURE_TABLES}. */
export const FAILURE_CODES: Readonly<Record<string, FailureCodeEntry>> = Object.freeze(
  Object.assign({}, ...FAILURE_TABLES.map((t) => t.table)),
);

/** The error classes whose `code` is an HTTP code of `ERROR_CODES`, of every package. */
export const HTTP_ERROR_CLASS_NAMES: readonly string[] = [...HTTP_ERROR_CLASSES, ...CLIENT_HTTP_ERROR_CLASSES];

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
    `Carried by ${HTTP_ERROR_CLASS_NAMES.join(', ')}.`,
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

/**
 * The configuration reference, from core's one configuration table: every `project.edn` key,
 * every setting of the auth module, every capability a module may activate and every fixed
 * limit, each with its type, default, bounds, unit and meaning.
 */
export function renderSettingsTable(): string {
  const cell = (s: string) => s.replaceAll('|', '\\|');
  return [
    '### `project.edn` keys',
    '',
    '| key | default | in a profile | meaning |',
    '|---|---|---|---|',
    ...PROJECT_KEYS.map((k) => `| \`${k.key}\` | ${k.default ?? 'required'} | ${k.inProfile ? 'yes' : 'no'} | ${cell(k.meaning)} |`),
    '',
    '### The auth module (`{:module :svc/auth}`) `:config`',
    '',
    '| key | default | allowed | unit | meaning |',
    '|---|---|---|---|---|',
    `| \`${AUTH_STORE_KEY}\` | required | a module alias | | ${cell(AUTH_STORE_MEANING)} |`,
    ...AUTH_SETTINGS.map((s) => `| \`${s.key}\` | ${s.default} | ${s.min} – ${s.max} | ${s.unit} | ${cell(s.meaning)} |`),
    `| \`${SENDER_CONSTRAINT_KEY}\` | \`:refresh\` | \`:refresh\`, \`:required\`, \`:off\`, or a map per realm | | ${cell(SENDER_CONSTRAINT_MEANING)} |`,
    '',
    '### Capabilities (`:activate`)',
    '',
    '| capability | meaning | in this build |',
    '|---|---|---|',
    ...CAPABILITIES.map(
      (c) => `| \`:${c.keyword}\` | ${cell(c.meaning)} | ${c.refusal === null ? 'yes' : `refused: ${cell(c.refusal)}`} |`,
    ),
    '',
    '### Provider modules',
    '',
    "A module that activates `:svc/auth-provider` (alone) runs a provider package signed by a publisher of `:svc/trusted-publishers` (see [providers](providers.md)). Its `:config` holds these policy keys, which the service enforces and the provider never sees, beside the provider's own keys (`:oidc/...`, `:webauthn/...`), which it receives as JSON with every `#svc/secret` reference resolved. A key ending in `secret`, `password`, `token` or similar may only hold a `#svc/secret` reference.",
    '',
    '| key | default | allowed | meaning |',
    '|---|---|---|---|',
    ...PROVIDER_POLICY_SETTINGS.map((s) => `| \`${s.key}\` | ${s.default} | ${s.allowed} | ${cell(s.meaning)} |`),
    '',
    '### Fixed limits (not configurable)',
    '',
    '| limit | value | meaning |',
    '|---|---|---|',
    ...FIXED_LIMITS.map((l) => `| ${l.name} | ${formatLimit(l.value, l.unit)} | ${cell(l.meaning)} |`),
    '',
    '### Keys refused on purpose',
    '',
    `No profile, setting or environment variable can turn off or weaken the management realm; these keys are refused wherever they appear, with a message that says so: ${WEAKENING_KEYS.map((k) => `\`${k}\``).join(', ')}.`,
    '',
    "### The bundled store modules' `:config`",
    '',
    '| addon | key | type | allowed | meaning |',
    '|---|---|---|---|---|',
    ...Object.entries({ 'svc-store-sqlite': SQLITE_STORE_CONFIG, 'svc-store-postgres': POSTGRES_STORE_CONFIG }).flatMap(([addon, fields]) =>
      Object.entries(fields as Readonly<Record<string, ConfigField>>).map(([key, f]) => {
        const allowed =
          f.oneOf !== undefined ? f.oneOf.map((v) => `\`"${v}"\``).join(', ') : f.min !== undefined ? `${f.min} – ${f.max}` : '';
        return `| \`${addon}\` | \`${key}\` | ${f.kind} | ${allowed} | ${cell(f.meaning ?? '')} |`;
      }),
    ),
  ].join('\n');
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
 * The sentence of docs/configuration.md's "Profiles" that names the keys a profile may override:
 * the `project.edn` keys core's table marks `inProfile`, the very set the loader accepts.
 */
export function renderProfileKeys(): string {
  const keys = PROJECT_KEYS.filter((k) => k.inProfile).map((k) => `\`${k.key}\``);
  const list = keys.length > 1 ? `${keys.slice(0, -1).join(', ')} and ${keys.at(-1)}` : keys.join('');
  return `A profile may override ${list}; maps merge key by key. Any other key in a profile is refused at load, naming the keys a profile may override.`;
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
  'docs/configuration.md#profile-keys': renderProfileKeys,
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

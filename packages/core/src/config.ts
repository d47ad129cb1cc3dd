import { type AppGatewayConfig, type AppPathRequirement, DEFAULT_APP_GATEWAY_CONFIG } from './app-config.js';
import { canonicalOrigin } from './browser-policy.js';
import type { AuthSettings } from './deps.js';
import { SENDER_CONSTRAINTS, type SenderConstraint, type SenderConstraints } from './dpop.js';
import { parsePublicKeyHex } from './ed25519.js';
import { ConfigError, type ConfigProblem } from './errors.js';
import { normalizeHeaderName } from './gateway-policy.js';
import { isIdOfKind } from './ids.js';
import { cidrPrefixLength, ipVersion } from './ip-address.js';
import { PROVIDER_ALIAS, type ProviderModuleConfig, readProviderModuleConfig } from './provider-config.js';
import { isRealm, type Realm } from './realm.js';
import {
  APP_CAPABILITY,
  AUTH_MODULE,
  AUTH_SETTINGS,
  AUTH_STORE_KEY,
  CAPABILITIES,
  DEFAULT_AUTH_SETTINGS,
  MAX_AUTH_AGE_SECONDS_LIMIT,
  PRIVILEGED_EXPORTS,
  PROJECT_KEYS,
  PROVIDER_CAPABILITY,
  type ProjectKeySpec,
  SENDER_CONSTRAINT_KEY,
  UNSTRIPPABLE_HEADERS,
  WEAKENING_KEYS,
} from './settings.js';

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

/** A reference to a deployment-time secret: never the secret itself. */
export interface SecretRef {
  readonly source: 'env' | 'file';
  readonly name: string;
}

/** A module of `:svc/modules`. */
export interface ModuleConfig {
  readonly alias: string;
  readonly package: string | null;
  readonly module: string | null;
  readonly activate: readonly string[];
  readonly config: EdnMap;
}

/** A pinned package of `:svc/packages`. */
export interface PackagePin {
  readonly version: string;
  readonly sha256: string | null;
}

/**
 * `:auth/sender-constraint`: one keyword for both realms, or a map of realm keyword to keyword
 * (a realm left out keeps the default). A string is the problem to report.
 */
function parseSenderConstraint(v: EdnValue | undefined): SenderConstraints | string {
  const expected = `expected one of ${SENDER_CONSTRAINTS.map((c) => `:${c}`).join(', ')}, or a map {:management ... :application ...} of them`;
  const one = (x: EdnValue | undefined): SenderConstraint | null =>
    isKeyword(x) && (SENDER_CONSTRAINTS as readonly string[]).includes(x.keyword) ? (x.keyword as SenderConstraint) : null;
  const single = one(v);
  if (single !== null) return Object.freeze({ management: single, application: single });
  if (!isEdnMap(v)) return `${expected}, found ${describe(v)}`;
  const result: Record<Realm, SenderConstraint> = { ...DEFAULT_AUTH_SETTINGS.senderConstraint };
  for (const [realmKey, mode] of v) {
    const realm = realmKey.startsWith(':') ? realmKey.slice(1) : realmKey;
    if (!isRealm(realm)) return `${expected}; ${realmKey} is not a realm (management, application)`;
    const m = one(mode);
    if (m === null) return `${expected}, found ${describe(mode)} for ${realmKey}`;
    result[realm] = m;
  }
  return Object.freeze(result);
}

/** A validated, deep-frozen project configuration. */
export interface ProjectConfig {
  readonly project: string;
  readonly profile: string | null;
  readonly controlDir: string | null;
  readonly packages: Readonly<Record<string, PackagePin>>;
  readonly modules: Readonly<Record<string, ModuleConfig>>;
  /** The module that holds the control state (`:auth/store`). */
  readonly store: ModuleConfig;
  readonly auth: AuthSettings;
  readonly nodeListen: string | null;
  /** `:svc/metrics-listen`: the Prometheus metrics and probes listener, or null (off unless the flag or environment turns it on). */
  readonly metricsListen: string | null;
  /** `:svc/audit-sinks`: where a running service ships the audit trail (see {@link AUDIT_SINK_SETTINGS}). */
  readonly auditSinks: AuditSinks;
  /** The application gateway (`:svc/app-*` keys). */
  readonly app: AppGatewayConfig;
  /** `:svc/trusted-publishers`: publisher name → Ed25519 public key (64 lowercase hex digits). */
  readonly trustedPublishers: Readonly<Record<string, string>>;
  /** The provider modules (those activating `:svc/auth-provider`), in `project.edn` order. */
  readonly providers: readonly ProviderModuleConfig[];
}

/** Where a running service delivers audit events and checkpoints, from `:svc/audit-sinks`. */
export interface AuditSinks {
  /** A JSON-lines file (relative paths from the project directory), or null for none. */
  readonly file: string | null;
  readonly fileMaxBytes: number;
  readonly fileKeep: number;
  readonly stdout: boolean;
  readonly batch: number;
  readonly pollMilliseconds: number;
}

/** One key of the `:svc/audit-sinks` map: how it is read, its default and its meaning (the docs table comes from here). */
export interface AuditSinkSetting {
  readonly key: string;
  readonly field: keyof AuditSinks;
  readonly kind: 'string' | 'integer' | 'boolean';
  readonly min?: number;
  readonly max?: number;
  readonly default: string | number | boolean | null;
  readonly meaning: string;
}

/**
 * Every key of `:svc/audit-sinks {...}` with its default and meaning. Without the map (or with
 * neither sink on) nothing is shipped; the trail stays in the control store either way.
 */
export const AUDIT_SINK_SETTINGS: readonly AuditSinkSetting[] = [
  {
    key: ':file',
    field: 'file',
    kind: 'string',
    default: null,
    meaning:
      'append every audit event and a signed checkpoint after each batch to this JSON-lines file (created 0600; a relative path is from the project directory). Refused, with nothing written, when it is a symbolic link, owned by another user or readable or writable by group or others, or in a directory its group or others can write (keep it in a dedicated one such as /var/log/svc, 0750)',
  },
  {
    key: ':file-max-bytes',
    field: 'fileMaxBytes',
    kind: 'integer',
    min: 4096,
    max: 1_073_741_824,
    default: 10_485_760,
    meaning: 'rotate the file before a line would make it larger than this: `audit.jsonl` becomes `audit.jsonl.1`, `.1` becomes `.2`, …',
  },
  {
    key: ':file-keep',
    field: 'fileKeep',
    kind: 'integer',
    min: 1,
    max: 1000,
    default: 5,
    meaning: 'how many rotated files to keep; older ones are deleted',
  },
  {
    key: ':stdout',
    field: 'stdout',
    kind: 'boolean',
    default: false,
    meaning: 'also write every event and checkpoint line to standard output, for container log collection',
  },
  {
    key: ':batch',
    field: 'batch',
    kind: 'integer',
    min: 1,
    max: 10_000,
    default: 500,
    meaning: 'events read and delivered per batch before the cursor is saved',
  },
  {
    key: ':poll-milliseconds',
    field: 'pollMilliseconds',
    kind: 'integer',
    min: 50,
    max: 60_000,
    default: 1000,
    meaning: 'how often the service looks for new events once it has delivered everything',
  },
];

/** The sinks when `:svc/audit-sinks` is absent: none. */
export const DEFAULT_AUDIT_SINKS: AuditSinks = Object.freeze(
  Object.fromEntries(AUDIT_SINK_SETTINGS.map((s) => [s.field, s.default])) as unknown as AuditSinks,
);

const FORBIDDEN_KEYS = new Set(WEAKENING_KEYS);

const TOP_KEYS = new Set(PROJECT_KEYS.map((k) => k.key));
const PROFILE_KEYS = new Set(PROJECT_KEYS.filter((k) => k.inProfile).map((k) => k.key));
const MODULE_KEYS = new Set([':package', ':module', ':activate', ':config']);
const PACKAGE_KEYS = new Set([':version', ':sha256']);
const AUTH_CONFIG_KEYS = new Set([AUTH_STORE_KEY, SENDER_CONSTRAINT_KEY, ...AUTH_SETTINGS.map((s) => s.key)]);
const CAPABILITY_LIST = CAPABILITIES.map((c) => `:${c.keyword}`).join(', ');
/** Key names whose value is a credential: a module whose schema svc does not know may still not hold one literally. */
const SECRET_NAME = /(^|[-/_.:])(password|passphrase|secret|token|api-?key|private-?key|credentials?)$/i;

/** Whether a value is an EDN map. */
export function isEdnMap(v: EdnValue | undefined): v is EdnMap {
  return v instanceof Map;
}
/** Whether a value is an EDN keyword. */
export function isKeyword(v: EdnValue | undefined): v is EdnKeyword {
  return typeof v === 'object' && v !== null && !(v instanceof Map) && !Array.isArray(v) && 'keyword' in v;
}
/** Whether a value is a tagged literal. */
export function isTagged(v: EdnValue | undefined): v is EdnTagged {
  return typeof v === 'object' && v !== null && !(v instanceof Map) && !Array.isArray(v) && 'tag' in v;
}

/**
 * Reads a secret reference: `#svc/secret "env:NAME"`, `#svc/secret "file:/path"` or
 * `#svc/secret "/path"`. A plain string is refused: secrets never live in `project.edn`.
 *
 * @example
 * parseSecretRef(storeConfig.get(':password'), problems, file, ':svc/modules :store :config :password');
 */
export function parseSecretRef(v: EdnValue | undefined, problems: ConfigProblem[], file: string, key: string): SecretRef | null {
  if (isTagged(v) && v.tag === 'svc/secret' && typeof v.value === 'string') {
    const s = v.value;
    if (s.startsWith('env:') && /^env:[A-Za-z_][A-Za-z0-9_]*$/.test(s)) return { source: 'env', name: s.slice(4) };
    if (s.startsWith('file:') && s.length > 5) return { source: 'file', name: s.slice(5) };
    if (s.startsWith('/') || s.startsWith('./')) return { source: 'file', name: s };
    problems.push({ file, key, message: 'expected #svc/secret "env:NAME" or #svc/secret "file:/path"' });
    return null;
  }
  problems.push({
    file,
    key,
    message: 'secrets are never written in project.edn: use #svc/secret "env:NAME" or #svc/secret "file:/path"',
  });
  return null;
}

function describe(v: EdnValue | undefined): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'nil';
  if (isEdnMap(v)) return 'a map';
  if (Array.isArray(v)) return 'a vector';
  if (isKeyword(v)) return `the keyword :${v.keyword}`;
  if (isTagged(v)) return `#${v.tag}`;
  return `${typeof v} ${JSON.stringify(typeof v === 'bigint' ? v.toString() : v)}`;
}

/** Deep-merges a profile over the base: maps merge key by key, anything else replaces. */
function mergeEdn(base: EdnValue | undefined, over: EdnValue): EdnValue {
  if (!isEdnMap(base) || !isEdnMap(over)) return over;
  const out = new Map(base);
  for (const [k, v] of over) out.set(k, mergeEdn(base.get(k), v));
  return out;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    if (value instanceof Map) {
      for (const v of value.values()) deepFreeze(v);
      const m = value as Map<unknown, unknown>;
      m.set = () => {
        throw new TypeError('configuration is immutable');
      };
      m.delete = m.set as never;
      m.clear = m.set as never;
    } else {
      for (const v of Object.values(value)) deepFreeze(v);
    }
    Object.freeze(value);
  }
  return value;
}

/** The `:config` field tables of the packages whose modules svc can check at load, by `name@version`. */
export type ModuleConfigSchemas = Readonly<Record<string, Readonly<Record<string, ConfigField>>>>;

/** What {@link validateProjectConfig} is told besides the parsed file. */
export interface ValidateOptions {
  readonly file: string;
  /** The profile chosen with `--profile` or `SVC_PROFILE`, without the colon; null for none. */
  readonly profile?: string | null;
  /**
   * The `:config` field tables of known package versions (`name@version`, e.g. the bundled
   * store addons'), so their modules are checked at load in every profile rather than only when
   * the addon opens. A module of any other package still has its capabilities, tags and secret
   * references checked.
   */
  readonly moduleConfigs?: ModuleConfigSchemas;
}

/**
 * Validates a parsed `project.edn` against the one schema ({@link PROJECT_KEYS},
 * {@link AUTH_SETTINGS}, {@link CAPABILITIES}), checks every profile merged over the base
 * whether it is chosen or not, applies the chosen one, fills every default, and returns a
 * deep-frozen configuration. All problems of all profiles are reported at once in a
 * {@link ConfigError} (file, key, expected); a problem that only a profile has names it
 * (`:svc/profiles :prod ...`).
 *
 * @example
 * const config = validateProjectConfig(parsed, { file: 'demo/project.edn', profile: process.env.SVC_PROFILE });
 */
export function validateProjectConfig(root: EdnValue, opts: ValidateOptions): ProjectConfig {
  const { file } = opts;
  const problems: ConfigProblem[] = [];
  const bad = (key: string, message: string) => problems.push({ file, key, message });
  if (!isEdnMap(root)) throw new ConfigError([{ file, key: '(top level)', message: `expected a map, found ${describe(root)}` }]);

  // Each profile's own keys first: a profile may only override what the table allows.
  const bodies = new Map<string, EdnMap>();
  const profiles = root.get(':svc/profiles');
  const profile = opts.profile ?? null;
  if (profiles !== undefined) {
    if (!isEdnMap(profiles)) bad(':svc/profiles', `expected a map of profile keyword to overrides, found ${describe(profiles)}`);
    else {
      for (const [name, body] of profiles) {
        const where = `:svc/profiles ${name}`;
        if (!name.startsWith(':')) bad(where, 'profile names are keywords, e.g. :dev');
        if (!isEdnMap(body)) {
          bad(where, `expected a map of overrides, found ${describe(body)}`);
          continue;
        }
        for (const k of body.keys()) {
          if (FORBIDDEN_KEYS.has(k)) bad(`${where} ${k}`, 'no profile can turn off or weaken the protection of the management realm');
          else if (!PROFILE_KEYS.has(k)) bad(`${where} ${k}`, `unknown key; a profile may override ${[...PROFILE_KEYS].join(', ')}`);
        }
        bodies.set(name, body);
      }
    }
  }
  const chosen = profile === null ? undefined : bodies.get(`:${profile}`);
  if (profile !== null && chosen === undefined) bad(':svc/profiles', `profile :${profile} (from --profile or SVC_PROFILE) is not defined`);

  // The configuration that runs is reported as it is; every other profile is checked too, so a
  // mistake in one not chosen today is found now rather than on the day it is deployed. A
  // profile's problem that the running configuration shares is reported once.
  const running = checkProject(chosen === undefined ? root : (mergeEdn(root, chosen) as EdnMap), opts);
  problems.push(...running.problems);
  const reported = new Set(running.problems.map((p) => `${p.key}\0${p.message}`));
  for (const [name, body] of bodies) {
    if (body === chosen) continue;
    for (const p of checkProject(mergeEdn(root, body) as EdnMap, opts).problems) {
      if (reported.has(`${p.key}\0${p.message}`)) continue;
      reported.add(`${p.key}\0${p.message}`);
      bad(`:svc/profiles ${name} ${p.key}`, p.message);
    }
  }
  if (problems.length > 0 || running.config === null) throw new ConfigError(problems);
  return deepFreeze({ ...running.config, profile: chosen === undefined ? null : profile });
}

/** Reads one scalar `:svc/...` key by its table entry. */
function readProjectKey(spec: ProjectKeySpec, v: EdnValue | undefined, bad: (key: string, message: string) => void): string | null {
  if (v === undefined && spec.default !== null) return null;
  const ok = typeof v === 'string' && (spec.type === 'project-name' ? /^[a-z0-9][a-z0-9_-]{0,62}$/.test(v) : v.length > 0);
  if (!ok) {
    bad(spec.key, `expected ${spec.expected}, found ${describe(v)}`);
    return null;
  }
  return v;
}

/** Checks one merged configuration (the base, or a profile over it); never throws. */
function checkProject(merged: EdnMap, opts: ValidateOptions): { config: Omit<ProjectConfig, 'profile'> | null; problems: ConfigProblem[] } {
  const { file } = opts;
  const problems: ConfigProblem[] = [];
  const bad = (key: string, message: string) => problems.push({ file, key, message });

  for (const k of merged.keys()) {
    if (FORBIDDEN_KEYS.has(k)) bad(k, 'the management realm is always protected; this setting does not exist');
    else if (!TOP_KEYS.has(k)) bad(k, `unknown key; expected one of ${[...TOP_KEYS].join(', ')}`);
  }
  const scalars: Record<string, string | null> = {};
  for (const spec of PROJECT_KEYS) {
    if (spec.type === 'project-name' || spec.type === 'path' || spec.type === 'listen') {
      scalars[spec.key] = readProjectKey(spec, merged.get(spec.key), bad);
    }
  }

  const auditSinks = readAuditSinks(merged.get(':svc/audit-sinks'), bad);
  const app = readAppGatewayConfig(merged, bad);

  const packages: Record<string, PackagePin> = {};
  const pkgs = merged.get(':svc/packages') ?? new Map();
  if (!isEdnMap(pkgs)) bad(':svc/packages', `expected a map of package name to {:version :sha256}, found ${describe(pkgs)}`);
  else {
    for (const [name, pin] of pkgs) {
      const key = `:svc/packages "${name}"`;
      if (name.startsWith(':')) {
        bad(key, 'package names are strings, e.g. "svc-store-sqlite"');
        continue;
      }
      if (!isEdnMap(pin)) {
        bad(key, `expected {:version "x.y.z" :sha256 "<64 hex>"}, found ${describe(pin)}`);
        continue;
      }
      for (const k of pin.keys()) if (!PACKAGE_KEYS.has(k)) bad(`${key} ${k}`, 'unknown key; expected :version and :sha256');
      const version = pin.get(':version');
      const sha256 = pin.get(':sha256');
      if (typeof version !== 'string' || version.length === 0)
        bad(`${key} :version`, `expected a version string, found ${describe(version)}`);
      if (sha256 !== undefined && (typeof sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(sha256))) {
        bad(`${key} :sha256`, `expected 64 lowercase hex digits (the archive's SHA-256), found ${describe(sha256)}`);
      }
      packages[name] = { version: typeof version === 'string' ? version : '', sha256: typeof sha256 === 'string' ? sha256 : null };
    }
  }

  const modules: Record<string, ModuleConfig> = {};
  const mods = merged.get(':svc/modules');
  if (!isEdnMap(mods)) bad(':svc/modules', `expected a map of module alias to module, found ${describe(mods)}`);
  else {
    for (const [alias, body] of mods) {
      const key = `:svc/modules ${alias}`;
      if (!alias.startsWith(':')) {
        bad(key, 'module aliases are keywords, e.g. :store');
        continue;
      }
      if (!isEdnMap(body)) {
        bad(key, `expected a module map, found ${describe(body)}`);
        continue;
      }
      const module = checkModule(alias.slice(1), body, packages, opts, problems);
      modules[module.alias] = module;
    }
  }

  // The auth module and its store binding.
  const authModules = Object.values(modules).filter((m) => m.module === AUTH_MODULE);
  let settings: AuthSettings = DEFAULT_AUTH_SETTINGS;
  let store: ModuleConfig | undefined;
  if (authModules.length !== 1) {
    bad(':svc/modules', `exactly one module must be {:module :${AUTH_MODULE} ...}; found ${authModules.length}`);
  } else {
    const auth = authModules[0] as ModuleConfig;
    const key = `:svc/modules :${auth.alias} :config`;
    const values: Record<string, unknown> = { ...DEFAULT_AUTH_SETTINGS };
    for (const [k, v] of auth.config) {
      if (FORBIDDEN_KEYS.has(k)) {
        bad(`${key} ${k}`, 'the management realm is always protected; this setting does not exist');
        continue;
      }
      if (!AUTH_CONFIG_KEYS.has(k)) {
        bad(`${key} ${k}`, `unknown key; expected one of ${[...AUTH_CONFIG_KEYS].join(', ')}`);
        continue;
      }
      if (k === SENDER_CONSTRAINT_KEY) {
        const parsed = parseSenderConstraint(v);
        if (typeof parsed === 'string') bad(`${key} ${k}`, parsed);
        else values.senderConstraint = parsed;
        continue;
      }
      const spec = AUTH_SETTINGS.find((s) => s.key === k);
      if (spec === undefined) continue;
      if (typeof v !== 'number' || !Number.isInteger(v) || v < spec.min || v > spec.max) {
        bad(`${key} ${k}`, `expected a whole number of ${spec.unit} from ${spec.min} to ${spec.max}, found ${describe(v)}`);
      } else values[spec.field] = v;
    }
    settings = values as unknown as AuthSettings;
    const storeRef = auth.config.get(AUTH_STORE_KEY);
    if (!isKeyword(storeRef)) {
      bad(`${key} ${AUTH_STORE_KEY}`, `expected the keyword alias of the store module (e.g. :store), found ${describe(storeRef)}`);
    } else {
      store = modules[storeRef.keyword];
      if (store === undefined) {
        bad(`${key} ${AUTH_STORE_KEY}`, `:${storeRef.keyword} is not a module alias in :svc/modules (dangling alias)`);
      } else if (!store.activate.includes('svc/store')) {
        bad(`${key} ${AUTH_STORE_KEY}`, `module :${storeRef.keyword} does not activate the :svc/store export; add :activate [:svc/store]`);
      } else if (store.package === null) {
        bad(`${key} ${AUTH_STORE_KEY}`, `module :${storeRef.keyword} must come from a pinned store package`);
      }
    }
  }

  // The gateway attaches one application: an upstream, or the project's :svc/app modules.
  const appModules = Object.values(modules).filter((m) => m.activate.includes('svc/app'));
  if (app.upstream !== null && appModules.length > 0) {
    bad(
      ':svc/app-upstream',
      `upstream mode and module mode exclude each other: remove :svc/app-upstream, or :svc/app from ${appModules.map((m) => `:${m.alias}`).join(', ')}`,
    );
  }

  // Application modules run inside the service's process after identity: only from an archive
  // pinned by its digest, and never from the package that holds the control state.
  for (const appModule of Object.values(modules)) {
    if (!appModule.activate.includes(APP_CAPABILITY) || appModule.package === null) continue;
    const key = `:svc/modules :${appModule.alias} :package`;
    if (store !== undefined && appModule.package === store.package) {
      bad(
        key,
        `package "${appModule.package}" may not activate the privileged export :svc/store for an application: it holds the control store (:auth/store :${store.alias}), and no application module may come from it`,
      );
    } else if (packages[appModule.package] !== undefined && packages[appModule.package]?.sha256 === null) {
      bad(
        key,
        `package "${appModule.package}" has no :sha256 in :svc/packages; an application module runs only from an archive pinned by its SHA-256 (\`svc package install\`)`,
      );
    }
  }

  const trustedPublishers = readTrustedPublishers(merged.get(':svc/trusted-publishers'), bad);

  // Provider modules run a signed package's code (confined, in a child process): only from an
  // archive pinned by its SHA-256, never from the control store's package or an application's,
  // and only when project.edn names a publisher whose signature it must carry.
  const providers: ProviderModuleConfig[] = [];
  for (const m of Object.values(modules)) {
    if (!m.activate.includes(PROVIDER_CAPABILITY) || m.package === null || m.activate.length !== 1) continue;
    const key = `:svc/modules :${m.alias}`;
    const before = problems.length;
    if (!PROVIDER_ALIAS.test(m.alias)) {
      bad(key, `a provider module's alias is its route segment: lowercase letters, digits and -, at most 63 (found :${m.alias})`);
    }
    if (Object.keys(trustedPublishers).length === 0) {
      bad(
        `${key} :activate`,
        `package "${m.package}" may not activate the privileged export :${PROVIDER_CAPABILITY}: provider packages must be signed by a publisher project.edn trusts, and :svc/trusted-publishers names none`,
      );
    }
    if (store !== undefined && m.package === store.package) {
      bad(
        `${key} :package`,
        `package "${m.package}" holds the control store (:auth/store :${store.alias}); no provider module may come from it`,
      );
    }
    const appUse = appModules.find((a) => a.package === m.package);
    if (appUse !== undefined) {
      bad(
        `${key} :package`,
        `package "${m.package}" is also the application module :${appUse.alias}; a provider package is never an application`,
      );
    }
    if (packages[m.package] !== undefined && packages[m.package]?.sha256 === null) {
      bad(
        `${key} :package`,
        `package "${m.package}" has no :sha256 in :svc/packages; a provider module runs only from an archive pinned by its SHA-256 (\`svc package install\`)`,
      );
    }
    const read = readProviderModuleConfig(m.alias, m.config, { file, key: `${key} :config` }, problems);
    if (problems.length === before) providers.push({ alias: m.alias, package: m.package, policy: read.policy, settings: read.settings });
  }

  if (problems.length > 0 || store === undefined) return { config: null, problems };
  return {
    config: {
      project: scalars[':svc/project'] as string,
      controlDir: scalars[':svc/control-dir'] ?? null,
      packages,
      modules,
      store,
      auth: settings,
      nodeListen: scalars[':svc/node-listen'] ?? null,
      metricsListen: scalars[':svc/metrics-listen'] ?? null,
      auditSinks,
      app,
      trustedPublishers,
      providers,
    },
    problems,
  };
}

/** A publisher name of `:svc/trusted-publishers`: what install and audit name the signer by. */
const PUBLISHER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Reads `:svc/trusted-publishers` (name → 64 hex Ed25519 public key), reporting every problem through `bad`. */
function readTrustedPublishers(v: EdnValue | undefined, bad: (key: string, message: string) => void): Record<string, string> {
  const out: Record<string, string> = {};
  if (v === undefined) return out;
  if (!isEdnMap(v)) {
    bad(':svc/trusted-publishers', `expected a map of publisher name to Ed25519 public key (64 hex digits), found ${describe(v)}`);
    return out;
  }
  for (const [name, key] of v) {
    const at = `:svc/trusted-publishers ${name.startsWith(':') ? name : JSON.stringify(name)}`;
    if (!PUBLISHER_NAME.test(name)) {
      bad(at, 'publisher names are strings of letters, digits, ".", "_" and "-", e.g. "svc"');
      continue;
    }
    let hex: string;
    try {
      hex = parsePublicKeyHex(key);
    } catch (error) {
      bad(at, `expected the publisher's Ed25519 public key as 64 hex digits, found ${describe(key)} (${(error as Error).message})`);
      continue;
    }
    const twin = Object.entries(out).find(([, k]) => k === hex);
    if (twin !== undefined) bad(at, `the same key is already trusted as "${twin[0]}"; name each publisher once`);
    else out[name] = hex;
  }
  return out;
}

/**
 * The trusted publishers of a parsed `project.edn` (the chosen profile merged over the base),
 * without validating the rest of the file: what `svc package install` checks a provider
 * package's signature against before the package is pinned (and before the module that will
 * activate it can be valid). Throws a {@link ConfigError} naming the file and key of a bad entry.
 *
 * @example
 * const trusted = trustedPublishersOf(parseEdn(text), { file, profile: null }); // { svc: 'ab12…' }
 */
export function trustedPublishersOf(
  root: EdnValue,
  opts: { readonly file: string; readonly profile?: string | null },
): Readonly<Record<string, string>> {
  const problems: ConfigProblem[] = [];
  const bad = (key: string, message: string) => problems.push({ file: opts.file, key, message });
  if (!isEdnMap(root)) throw new ConfigError([{ file: opts.file, key: '(top level)', message: `expected a map, found ${describe(root)}` }]);
  let merged: EdnMap = root;
  const profile = opts.profile ?? null;
  if (profile !== null) {
    const body = (root.get(':svc/profiles') as EdnMap | undefined)?.get?.(`:${profile}`);
    if (!isEdnMap(body)) throw new ConfigError([{ file: opts.file, key: ':svc/profiles', message: `profile :${profile} is not defined` }]);
    merged = mergeEdn(root, body) as EdnMap;
  }
  const out = readTrustedPublishers(merged.get(':svc/trusted-publishers'), bad);
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(out);
}

/** Reads `:svc/audit-sinks` against {@link AUDIT_SINK_SETTINGS}, reporting every problem through `bad`. */
function readAuditSinks(v: EdnValue | undefined, bad: (key: string, message: string) => void): AuditSinks {
  if (v === undefined) return DEFAULT_AUDIT_SINKS;
  if (!isEdnMap(v)) {
    bad(':svc/audit-sinks', `expected a map such as {:file "audit.jsonl" :stdout true}, found ${describe(v)}`);
    return DEFAULT_AUDIT_SINKS;
  }
  const out: Record<string, string | number | boolean | null> = { ...DEFAULT_AUDIT_SINKS };
  for (const [k, value] of v) {
    const spec = AUDIT_SINK_SETTINGS.find((s) => s.key === k);
    const key = `:svc/audit-sinks ${k}`;
    if (spec === undefined) bad(key, `unknown key; expected one of ${AUDIT_SINK_SETTINGS.map((s) => s.key).join(', ')}`);
    else if (spec.kind === 'string') {
      if (typeof value === 'string' && value.length > 0) out[spec.field] = value;
      else bad(key, `expected a file path string, found ${describe(value)}`);
    } else if (spec.kind === 'boolean') {
      if (typeof value === 'boolean') out[spec.field] = value;
      else bad(key, `expected true or false, found ${describe(value)}`);
    } else if (
      typeof value !== 'number' ||
      !Number.isInteger(value) ||
      value < (spec.min ?? 0) ||
      value > (spec.max ?? Number.MAX_SAFE_INTEGER)
    ) {
      bad(key, `expected a whole number from ${spec.min} to ${spec.max}, found ${describe(value)}`);
    } else out[spec.field] = value;
  }
  return out as unknown as AuditSinks;
}

/** The reserved path prefix of the application gateway: its own routes, never the application's. */
const RESERVED_APP_PREFIX = '/.svc/';

/** Whether `s` holds a C0 control character or DEL. */
function hasControlCharacter(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}

/** The address-range names `:svc/app-trusted-proxies` takes besides addresses and CIDRs (as Fastify's `trustProxy` does). */
const TRUSTED_PROXY_RANGE_NAMES: readonly string[] = ['loopback', 'linklocal', 'uniquelocal'];

/** An HTTP field name (RFC 9110 `token`). */
const HEADER_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * Why `pattern` is not a path pattern of `:svc/app-public` or `:svc/app-require`, or null when
 * it is one: an exact path, or a prefix ending in `/*` (`"/public/*"` matches `/public/` and
 * everything under it), starting with `/`, without a query, fragment, whitespace, empty, `.`
 * or `..` segment, with `*` only as the final segment, and never under the reserved `/.svc/`.
 *
 * @example
 * appPathPatternProblem('/public/*'); // null
 * appPathPatternProblem('/.svc/auth/*'); // 'paths under /.svc/ are the gateway\'s own ...'
 */
export function appPathPatternProblem(pattern: string): string | null {
  if (!pattern.startsWith('/')) return 'a path starts with /';
  if (/[\s?#\\]/.test(pattern) || hasControlCharacter(pattern)) {
    return 'a path has no whitespace, control character, backslash, query (?) or fragment (#)';
  }
  const path = pattern.endsWith('/*') ? pattern.slice(0, -1) : pattern;
  if (path.includes('*')) return 'a * may only end a prefix, as in "/public/*"';
  const segments = path.slice(1).split('/');
  const inner = path.endsWith('/') ? segments.slice(0, -1) : segments;
  if (path !== '/' && inner.some((seg) => seg === '' || seg === '.' || seg === '..')) {
    return 'a path has no empty, "." or ".." segment';
  }
  if (`${path}/`.toLowerCase().startsWith(RESERVED_APP_PREFIX)) {
    return "paths under /.svc/ are the gateway's own and never reach the application";
  }
  return null;
}

/** Whether path pattern `outer` covers every path `inner` matches (both already valid). */
function patternCovers(outer: string, inner: string): boolean {
  if (outer === inner) return true;
  if (!outer.endsWith('/*')) return false;
  const prefix = outer.slice(0, -1);
  return (inner.endsWith('/*') ? inner.slice(0, -1) : inner).startsWith(prefix);
}

/**
 * Why `value` is not a `:svc/app-listen` address, or null: `"off"`, or `host:port` with a port
 * from 0 to 65535 and a non-empty host, an IPv6 address in brackets. (Where it binds, and the
 * stricter checks of host names, are the listener's: the same parser as the node surface.)
 *
 * @example
 * appListenProblem('0.0.0.0:8080'); // null
 * appListenProblem('8080'); // 'expected "host:port" or "off"'
 */
export function appListenProblem(value: string): string | null {
  if (value.trim().toLowerCase() === 'off') return null;
  const m = /^(?:\[([^\]]*)\]|([^:[\]]+)):(\d{1,5})$/.exec(value);
  if (m === null || Number(m[3]) > 65535) return 'expected "host:port" (an IPv6 address in brackets, a port from 0 to 65535) or "off"';
  if (m[1] !== undefined && ipVersion(m[1]) !== 6) return `${JSON.stringify(m[1])} in brackets is not an IPv6 address`;
  return null;
}

/**
 * Reads the `:svc/app-*` keys of one merged configuration into an {@link AppGatewayConfig},
 * reporting every problem through `bad` (file, key, what was expected).
 */
function readAppGatewayConfig(merged: EdnMap, bad: (key: string, message: string) => void): AppGatewayConfig {
  const out: { -readonly [K in keyof AppGatewayConfig]: AppGatewayConfig[K] } = { ...DEFAULT_APP_GATEWAY_CONFIG };
  const spec = (key: string) => PROJECT_KEYS.find((k) => k.key === key) as ProjectKeySpec;
  const expected = (key: string, v: EdnValue | undefined, why?: string) =>
    bad(key, `expected ${spec(key).expected}${why === undefined ? '' : ` (${why})`}, found ${describe(v)}`);
  const strings = (key: string, v: EdnValue | undefined): string[] | null => {
    if (!Array.isArray(v) || !v.every((x: EdnValue) => typeof x === 'string')) {
      expected(key, v);
      return null;
    }
    return [...(v as string[])];
  };

  const listen = merged.get(':svc/app-listen');
  if (listen !== undefined) {
    const problem = typeof listen === 'string' ? appListenProblem(listen) : 'not a string';
    if (problem !== null || typeof listen !== 'string') expected(':svc/app-listen', listen, problem ?? undefined);
    else out.listen = listen.trim().toLowerCase() === 'off' ? 'off' : listen;
  }

  const upstream = merged.get(':svc/app-upstream');
  if (upstream !== undefined) {
    const problem = typeof upstream === 'string' ? upstreamProblem(upstream) : 'not a string';
    if (problem !== null || typeof upstream !== 'string') expected(':svc/app-upstream', upstream, problem ?? undefined);
    else out.upstream = new URL(upstream).origin;
  }

  const audience = merged.get(':svc/app-audience');
  if (audience !== undefined) {
    if (typeof audience !== 'string' || audience.trim() === '' || hasControlCharacter(audience)) {
      expected(':svc/app-audience', audience);
    } else out.audience = audience;
  }

  const publicOrigin = merged.get(':svc/app-public-origin');
  if (publicOrigin !== undefined) {
    // One trailing slash is how origins are often written; a real path is refused.
    const origin = typeof publicOrigin === 'string' ? canonicalOrigin(publicOrigin.replace(/\/$/, '')) : null;
    if (origin === null) expected(':svc/app-public-origin', publicOrigin);
    else out.publicOrigin = origin;
  }

  const publicPaths = merged.get(':svc/app-public');
  if (publicPaths !== undefined) {
    const list = strings(':svc/app-public', publicPaths);
    if (list !== null) {
      const ok: string[] = [];
      for (const p of list) {
        const problem = appPathPatternProblem(p);
        if (problem !== null) bad(`:svc/app-public ${JSON.stringify(p)}`, problem);
        else if (!ok.includes(p)) ok.push(p);
      }
      out.publicPaths = ok;
    }
  }

  const headers = merged.get(':svc/app-identity-headers');
  if (headers !== undefined) {
    const list = strings(':svc/app-identity-headers', headers);
    if (list !== null) {
      const ok: string[] = [];
      for (const h of list) {
        const name = normalizeHeaderName(h);
        if (!HEADER_TOKEN.test(h))
          bad(`:svc/app-identity-headers ${JSON.stringify(h)}`, "not a header name (letters, digits and !#$%&'*+-.^_`|~)");
        else if (UNSTRIPPABLE_HEADERS.includes(name)) {
          bad(
            `:svc/app-identity-headers ${JSON.stringify(h)}`,
            `${name} cannot be stripped: it carries HTTP framing or the credentials the gateway checks (refused: ${UNSTRIPPABLE_HEADERS.join(', ')})`,
          );
        } else if (!ok.includes(name)) ok.push(name);
      }
      out.identityHeaders = ok;
    }
  }

  const require = merged.get(':svc/app-require');
  if (require !== undefined) {
    if (!isEdnMap(require)) expected(':svc/app-require', require);
    else out.requirements = readRequirements(require, out.publicPaths, bad);
  }

  const tls = merged.get(':svc/app-tls');
  if (tls !== undefined) {
    if (!isEdnMap(tls)) expected(':svc/app-tls', tls);
    else {
      for (const k of tls.keys()) if (k !== ':cert' && k !== ':key') bad(`:svc/app-tls ${k}`, 'unknown key; expected :cert and :key');
      const cert = tls.get(':cert');
      const key = tls.get(':key');
      if (typeof cert !== 'string' || cert === '')
        bad(':svc/app-tls :cert', `expected the certificate chain's PEM file path, found ${describe(cert)}`);
      if (typeof key !== 'string' || key === '')
        bad(':svc/app-tls :key', `expected the private key's PEM file path, found ${describe(key)}`);
      if (typeof cert === 'string' && cert !== '' && typeof key === 'string' && key !== '') out.tls = { cert, key };
    }
  }

  const proxies = merged.get(':svc/app-trusted-proxies');
  if (proxies !== undefined) {
    const list = strings(':svc/app-trusted-proxies', proxies);
    if (list !== null) {
      const ok: string[] = [];
      for (const a of list) {
        const prefix = TRUSTED_PROXY_RANGE_NAMES.includes(a) ? -1 : cidrPrefixLength(a);
        if (prefix === null) {
          bad(
            `:svc/app-trusted-proxies ${JSON.stringify(a)}`,
            `not an IP address or CIDR block (e.g. "10.0.0.0/8", "::1") or one of ${TRUSTED_PROXY_RANGE_NAMES.map((n) => `"${n}"`).join(', ')}`,
          );
        } else if (prefix === 0) {
          bad(
            `:svc/app-trusted-proxies ${JSON.stringify(a)}`,
            'trusting every address would let any client forge X-Forwarded-For and X-Forwarded-Proto; name the proxies',
          );
        } else if (!ok.includes(a)) ok.push(a);
      }
      out.trustedProxies = ok;
    }
  }
  return out;
}

/** Why an `:svc/app-upstream` value is not an origin URL, or null. */
function upstreamProblem(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'not a URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `the scheme ${url.protocol} is neither http: nor https:`;
  if (url.username !== '' || url.password !== '') return 'credentials never go in the URL';
  if (value.includes('?') || value.includes('#')) return 'no query or fragment';
  if (url.pathname !== '/') return "the origin only: the path is the request's own";
  return null;
}

/** Reads the `:svc/app-require` map: path pattern → `{:subjects [...] :amr [...] :max-auth-age-seconds n}`. */
function readRequirements(map: EdnMap, publicPaths: readonly string[], bad: (key: string, message: string) => void): AppPathRequirement[] {
  const out: AppPathRequirement[] = [];
  const KEYS = [':subjects', ':amr', ':max-auth-age-seconds'];
  for (const [path, body] of map) {
    const key = `:svc/app-require ${JSON.stringify(path)}`;
    const problem = path.startsWith(':') ? 'path patterns are strings, e.g. "/admin/*"' : appPathPatternProblem(path);
    if (problem !== null) {
      bad(key, problem);
      continue;
    }
    const covering = publicPaths.find((p) => patternCovers(p, path));
    if (covering !== undefined) {
      bad(key, `the path is public (${JSON.stringify(covering)} in :svc/app-public), so no requirement could apply to it`);
      continue;
    }
    if (!isEdnMap(body)) {
      bad(key, `expected a map such as {:subjects ["sub_..."] :amr ["ed25519"] :max-auth-age-seconds 3600}, found ${describe(body)}`);
      continue;
    }
    for (const k of body.keys()) if (!KEYS.includes(k)) bad(`${key} ${k}`, `unknown key; expected one of ${KEYS.join(', ')}`);
    if (![...body.keys()].some((k) => KEYS.includes(k))) {
      bad(key, `an empty requirement says nothing; give at least one of ${KEYS.join(', ')} (or remove the entry)`);
      continue;
    }
    const list = (k: string, valid: (s: string) => boolean, what: string): string[] | null => {
      const v = body.get(k);
      if (v === undefined) return null;
      if (!Array.isArray(v) || v.length === 0 || !v.every((x: EdnValue) => typeof x === 'string' && valid(x))) {
        bad(`${key} ${k}`, `expected a non-empty vector of ${what}, found ${describe(v)}`);
        return null;
      }
      return [...new Set(v as string[])];
    };
    const subjects = list(':subjects', (x) => isIdOfKind(x, 'subject'), 'subject ids ("sub_...")');
    const amr = list(':amr', (x) => /^[a-z0-9][a-z0-9_-]{0,63}$/i.test(x), 'authentication method names (e.g. "ed25519")');
    const age = body.get(':max-auth-age-seconds');
    let maxAuthAgeSeconds: number | null = null;
    if (age !== undefined) {
      if (typeof age !== 'number' || !Number.isInteger(age) || age < 1 || age > MAX_AUTH_AGE_SECONDS_LIMIT) {
        bad(
          `${key} :max-auth-age-seconds`,
          `expected a whole number of seconds from 1 to ${MAX_AUTH_AGE_SECONDS_LIMIT}, found ${describe(age)}`,
        );
      } else maxAuthAgeSeconds = age;
    }
    out.push({ path, subjects, amr, maxAuthAgeSeconds });
  }
  return out;
}

/**
 * Checks one module of `:svc/modules`: its keys, where it comes from, every capability it
 * activates against {@link CAPABILITIES}, and its `:config` (the auth module's is checked by
 * the caller, a known package's against its field table, any other's for tags and literal
 * secrets).
 */
function checkModule(
  alias: string,
  body: EdnMap,
  packages: Readonly<Record<string, PackagePin>>,
  opts: ValidateOptions,
  problems: ConfigProblem[],
): ModuleConfig {
  const { file } = opts;
  const key = `:svc/modules :${alias}`;
  const bad = (k: string, message: string) => problems.push({ file, key: k, message });
  for (const k of body.keys()) if (!MODULE_KEYS.has(k)) bad(`${key} ${k}`, `unknown key; expected ${[...MODULE_KEYS].join(', ')}`);
  const pkg = body.get(':package');
  const mod = body.get(':module');
  const activate = body.get(':activate') ?? [];
  const config = body.get(':config') ?? new Map();
  if (pkg !== undefined && typeof pkg !== 'string') bad(`${key} :package`, `expected a package name string, found ${describe(pkg)}`);
  if (mod !== undefined && !isKeyword(mod))
    bad(`${key} :module`, `expected a module keyword such as :${AUTH_MODULE}, found ${describe(mod)}`);
  if (isKeyword(mod) && mod.keyword !== AUTH_MODULE) {
    bad(`${key} :module`, `:${mod.keyword} is not a built-in module; the only one is :${AUTH_MODULE} (others come from a :package)`);
  }
  if ((pkg === undefined) === (mod === undefined)) bad(key, 'a module names exactly one of :package or :module');
  if (typeof pkg === 'string' && !Object.hasOwn(packages, pkg)) {
    bad(`${key} :package`, `package "${pkg}" is not pinned in :svc/packages; install it with \`svc package install\``);
  }
  const exports: string[] = [];
  if (!Array.isArray(activate) || !activate.every(isKeyword)) {
    bad(`${key} :activate`, `expected a vector of capability keywords (${CAPABILITY_LIST}), found ${describe(activate)}`);
  } else {
    const keywords = (activate as EdnKeyword[]).map((k) => k.keyword);
    for (const keyword of keywords) {
      const capability = CAPABILITIES.find((c) => c.keyword === keyword);
      const privileged = PRIVILEGED_EXPORTS.find((p) => p.keyword === keyword);
      // A provider module activates :svc/auth-provider alone; whether its package is signed by
      // a trusted publisher is checked at install and at every load (@svc/addons).
      const soleProvider = keyword === PROVIDER_CAPABILITY && keywords.length === 1;
      if (typeof pkg === 'string' && privileged !== undefined && !soleProvider) {
        bad(`${key} :activate`, `package "${pkg}" may not activate the privileged export :${keyword}: ${privileged.why}`);
      } else if (typeof pkg === 'string' && keyword === 'svc/store' && keywords.includes(APP_CAPABILITY)) {
        bad(
          `${key} :activate`,
          `package "${pkg}" may not activate the privileged export :svc/store: an application module (:${APP_CAPABILITY}) never holds the control store`,
        );
      } else if (capability === undefined) bad(`${key} :activate`, `unknown capability :${keyword}; expected one of ${CAPABILITY_LIST}`);
      else if (capability.refusal !== null) bad(`${key} :activate`, `:${keyword}: ${capability.refusal}`);
      else if (mod !== undefined) bad(`${key} :activate`, `the built-in :${AUTH_MODULE} module activates nothing; remove :${keyword}`);
      exports.push(keyword);
    }
  }
  const where = { file, key: `${key} :config` };
  if (!isEdnMap(config)) bad(where.key, `expected a map, found ${describe(config)}`);
  else if (typeof pkg === 'string') {
    const fields = opts.moduleConfigs?.[`${pkg}@${packages[pkg]?.version}`];
    if (fields !== undefined) checkModuleConfig(config, fields, where, problems);
    else checkOpaqueConfig(config, where.key, file, problems);
  }
  return {
    alias,
    package: typeof pkg === 'string' ? pkg : null,
    module: isKeyword(mod) ? mod.keyword : null,
    activate: exports,
    config: isEdnMap(config) ? config : new Map(),
  };
}

/**
 * Checks the `:config` of a package whose field table svc does not know: its addon reads the
 * values, but no tag other than `#svc/secret` is accepted, every secret reference must be well
 * formed, and a key named like a credential may only hold a reference, never the secret.
 */
function checkOpaqueConfig(value: EdnValue, key: string, file: string, problems: ConfigProblem[]): void {
  if (isEdnMap(value)) {
    for (const [k, v] of value) {
      const at = `${key} ${k}`;
      if (SECRET_NAME.test(k) && typeof v === 'string') parseSecretRef(v, problems, file, at);
      else checkOpaqueConfig(v, at, file, problems);
    }
  } else if (Array.isArray(value)) {
    value.forEach((v: EdnValue, i: number) => {
      checkOpaqueConfig(v, `${key} [${i}]`, file, problems);
    });
  } else if (isTagged(value)) {
    if (value.tag === 'svc/secret') parseSecretRef(value, problems, file, key);
    else problems.push({ file, key, message: `unknown tag #${value.tag}; the only tag project.edn knows is #svc/secret` });
  }
}

/** How one key of a module's `:config` is read. */
export interface ConfigField {
  readonly kind: 'string' | 'integer' | 'boolean' | 'secret';
  /** Allowed string values. */
  readonly oneOf?: readonly string[];
  readonly min?: number;
  readonly max?: number;
  /** What the key means, with its default as the docs show it (the generated configuration reference). */
  readonly meaning?: string;
}

/** What {@link readModuleConfig} returns for one field. */
export type ConfigFieldValue = string | number | boolean | SecretRef | undefined;

/**
 * Reads a module's `:config` map against a field table: unknown keys, wrong types, values out
 * of range and literal secrets are all reported at once in a {@link ConfigError} naming the
 * file and the full key. Missing keys come back `undefined`.
 *
 * @example
 * const v = readModuleConfig(config, { ':store/synchronous': { kind: 'string', oneOf: ['normal', 'full'] } }, { file, key });
 */
export function readModuleConfig<K extends string>(
  config: EdnMap,
  fields: Readonly<Record<K, ConfigField>>,
  where: { readonly file: string; readonly key: string },
): Record<K, ConfigFieldValue> {
  const problems: ConfigProblem[] = [];
  const out = checkModuleConfig(config, fields, where, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return out;
}

/** {@link readModuleConfig} that adds its problems to `problems` instead of throwing. */
function checkModuleConfig<K extends string>(
  config: EdnMap,
  fields: Readonly<Record<K, ConfigField>>,
  where: { readonly file: string; readonly key: string },
  problems: ConfigProblem[],
): Record<K, ConfigFieldValue> {
  const out = {} as Record<K, ConfigFieldValue>;
  const known = Object.keys(fields) as K[];
  for (const k of config.keys()) {
    if (!known.includes(k as K))
      problems.push({ file: where.file, key: `${where.key} ${k}`, message: `unknown key; expected one of ${known.join(', ')}` });
  }
  for (const k of known) {
    const spec = fields[k];
    const v = config.get(k);
    const key = `${where.key} ${k}`;
    if (v === undefined) continue;
    if (spec.kind === 'secret') {
      const ref = parseSecretRef(v, problems, where.file, key);
      if (ref !== null) out[k] = ref;
    } else if (spec.kind === 'string') {
      if (typeof v !== 'string' || (spec.oneOf !== undefined && !spec.oneOf.includes(v))) {
        problems.push({
          file: where.file,
          key,
          message: `expected ${spec.oneOf ? `one of ${spec.oneOf.map((s) => JSON.stringify(s)).join(', ')}` : 'a string'}, found ${describe(v)}`,
        });
      } else out[k] = v;
    } else if (spec.kind === 'integer') {
      if (
        typeof v !== 'number' ||
        !Number.isInteger(v) ||
        (spec.min !== undefined && v < spec.min) ||
        (spec.max !== undefined && v > spec.max)
      ) {
        problems.push({
          file: where.file,
          key,
          message: `expected a whole number from ${spec.min ?? '-∞'} to ${spec.max ?? '∞'}, found ${describe(v)}`,
        });
      } else out[k] = v;
    } else if (typeof v !== 'boolean') {
      problems.push({ file: where.file, key, message: `expected true or false, found ${describe(v)}` });
    } else out[k] = v;
  }
  return out;
}

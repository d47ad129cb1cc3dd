import { type AuthSettings, DEFAULT_AUTH_SETTINGS } from './deps.js';
import { ConfigError, type ConfigProblem } from './errors.js';

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
      'append every audit event and a signed checkpoint after each batch to this JSON-lines file (created 0600; a relative path is from the project directory)',
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

interface SettingSpec {
  readonly key: string;
  readonly field: keyof AuthSettings;
  readonly min: number;
  readonly max: number;
  readonly meaning: string;
}

/**
 * Every `:auth/...` setting with its bounds and meaning: the one place the configuration docs
 * are generated from. Bounds keep a profile from weakening the service (e.g. day-long access
 * tokens).
 */
export const AUTH_SETTINGS: readonly SettingSpec[] = [
  { key: ':auth/access-token-ttl-seconds', field: 'accessTokenTtlSeconds', min: 30, max: 86_400, meaning: 'lifetime of an access token' },
  {
    key: ':auth/refresh-token-ttl-seconds',
    field: 'refreshTokenTtlSeconds',
    min: 60,
    max: 31_536_000,
    meaning: 'lifetime of a refresh token (each rotation issues a fresh one)',
  },
  {
    key: ':auth/refresh-reuse-grace-seconds',
    field: 'refreshReuseGraceSeconds',
    min: 0,
    max: 300,
    meaning:
      'how long after a rotation the immediately previous refresh token is still answered, with the same pair its rotation issued (lost responses, concurrent tabs); outside it, reuse revokes the session',
  },
  {
    key: ':auth/challenge-ttl-seconds',
    field: 'challengeTtlSeconds',
    min: 10,
    max: 600,
    meaning: 'how long a sign-in challenge can be answered',
  },
  {
    key: ':auth/session-max-lifetime-seconds',
    field: 'sessionMaxLifetimeSeconds',
    min: 300,
    max: 31_536_000,
    meaning: 'absolute lifetime of a session: no rotation extends it',
  },
  {
    key: ':auth/pairing-max-ttl-seconds',
    field: 'pairingMaxTtlSeconds',
    min: 60,
    max: 900,
    meaning: 'the longest lifetime an enrolment intent may be given',
  },
  {
    key: ':auth/retention-days',
    field: 'retentionDays',
    min: 1,
    max: 3650,
    meaning:
      'how long after they ended sessions (expired or revoked) and pairing intents (expired) are kept before the running service deletes them; the audit trail keeps their events regardless',
  },
];

/** Keys that would weaken the management realm: refused with a message that says so. */
const FORBIDDEN_KEYS = new Set([
  ':auth/dev-mode',
  ':auth/insecure',
  ':auth/disable-auth',
  ':auth/management-protected',
  ':auth/realms',
  ':svc/dev-mode',
  ':svc/management-listen',
]);

const TOP_KEYS = new Set([
  ':svc/project',
  ':svc/packages',
  ':svc/modules',
  ':svc/profiles',
  ':svc/control-dir',
  ':svc/node-listen',
  ':svc/metrics-listen',
  ':svc/audit-sinks',
]);
const PROFILE_KEYS = new Set([
  ':svc/packages',
  ':svc/modules',
  ':svc/control-dir',
  ':svc/node-listen',
  ':svc/metrics-listen',
  ':svc/audit-sinks',
]);
const MODULE_KEYS = new Set([':package', ':module', ':activate', ':config']);
const PACKAGE_KEYS = new Set([':version', ':sha256']);
const AUTH_CONFIG_KEYS = new Set([':auth/store', ...AUTH_SETTINGS.map((s) => s.key)]);

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

/**
 * Validates a parsed `project.edn` against the one schema, applies the chosen profile, fills
 * every default, and returns a deep-frozen configuration. All problems are reported at once in
 * a {@link ConfigError} (file, key, expected).
 *
 * @example
 * const config = validateProjectConfig(parsed, { file: 'demo/project.edn', profile: process.env.SVC_PROFILE });
 */
export function validateProjectConfig(root: EdnValue, opts: { readonly file: string; readonly profile?: string | null }): ProjectConfig {
  const { file } = opts;
  const problems: ConfigProblem[] = [];
  const bad = (key: string, message: string) => problems.push({ file, key, message });
  if (!isEdnMap(root)) throw new ConfigError([{ file, key: '(top level)', message: `expected a map, found ${describe(root)}` }]);

  // Profiles first: a profile is checked on its own, then merged over the base.
  let merged: EdnMap = root;
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
      }
    }
  }
  if (profile !== null) {
    const body = isEdnMap(profiles) ? profiles.get(`:${profile}`) : undefined;
    if (!isEdnMap(body)) {
      bad(':svc/profiles', `profile :${profile} (from --profile or SVC_PROFILE) is not defined`);
    } else {
      merged = mergeEdn(root, body) as EdnMap;
    }
  }

  for (const k of merged.keys()) {
    if (FORBIDDEN_KEYS.has(k)) bad(k, 'the management realm is always protected; this setting does not exist');
    else if (!TOP_KEYS.has(k)) bad(k, `unknown key; expected one of ${[...TOP_KEYS].join(', ')}`);
  }

  const project = merged.get(':svc/project');
  if (typeof project !== 'string' || !/^[a-z0-9][a-z0-9_-]{0,62}$/.test(project)) {
    bad(':svc/project', `expected a project name string (lowercase letters, digits, - and _), found ${describe(project)}`);
  }

  const controlDirV = merged.get(':svc/control-dir');
  let controlDir: string | null = null;
  if (controlDirV !== undefined) {
    if (typeof controlDirV === 'string' && controlDirV.length > 0) controlDir = controlDirV;
    else bad(':svc/control-dir', `expected a directory path string, found ${describe(controlDirV)}`);
  }
  const nodeListenV = merged.get(':svc/node-listen');
  let nodeListen: string | null = null;
  if (nodeListenV !== undefined) {
    if (typeof nodeListenV === 'string' && nodeListenV.length > 0) nodeListen = nodeListenV;
    else bad(':svc/node-listen', `expected "host:port", found ${describe(nodeListenV)}`);
  }
  const metricsListenV = merged.get(':svc/metrics-listen');
  let metricsListen: string | null = null;
  if (metricsListenV !== undefined) {
    if (typeof metricsListenV === 'string' && metricsListenV.length > 0) metricsListen = metricsListenV;
    else bad(':svc/metrics-listen', `expected "host:port", found ${describe(metricsListenV)}`);
  }
  const auditSinks = readAuditSinks(merged.get(':svc/audit-sinks'), bad);

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
      for (const k of body.keys()) if (!MODULE_KEYS.has(k)) bad(`${key} ${k}`, `unknown key; expected ${[...MODULE_KEYS].join(', ')}`);
      const pkg = body.get(':package');
      const mod = body.get(':module');
      const activate = body.get(':activate') ?? [];
      const config = body.get(':config') ?? new Map();
      if (pkg !== undefined && typeof pkg !== 'string') bad(`${key} :package`, `expected a package name string, found ${describe(pkg)}`);
      if (mod !== undefined && !isKeyword(mod))
        bad(`${key} :module`, `expected a module keyword such as :svc/auth, found ${describe(mod)}`);
      if ((pkg === undefined) === (mod === undefined)) bad(key, 'a module names exactly one of :package or :module');
      if (typeof pkg === 'string' && !Object.hasOwn(packages, pkg)) {
        bad(`${key} :package`, `package "${pkg}" is not pinned in :svc/packages; install it with \`svc package install\``);
      }
      const exports: string[] = [];
      if (!Array.isArray(activate) || !activate.every(isKeyword))
        bad(`${key} :activate`, `expected a vector of export keywords, found ${describe(activate)}`);
      else for (const k of activate) exports.push((k as EdnKeyword).keyword);
      if (!isEdnMap(config)) bad(`${key} :config`, `expected a map, found ${describe(config)}`);
      modules[alias.slice(1)] = {
        alias: alias.slice(1),
        package: typeof pkg === 'string' ? pkg : null,
        module: isKeyword(mod) ? mod.keyword : null,
        activate: exports,
        config: isEdnMap(config) ? config : new Map(),
      };
    }
  }

  // The auth module and its store binding.
  const authModules = Object.values(modules).filter((m) => m.module === 'svc/auth');
  let settings: AuthSettings = DEFAULT_AUTH_SETTINGS;
  let store: ModuleConfig | undefined;
  if (authModules.length !== 1) {
    bad(':svc/modules', `exactly one module must be {:module :svc/auth ...}; found ${authModules.length}`);
  } else {
    const auth = authModules[0] as ModuleConfig;
    const key = `:svc/modules :${auth.alias} :config`;
    const values: Record<string, number> = { ...DEFAULT_AUTH_SETTINGS };
    for (const [k, v] of auth.config) {
      if (FORBIDDEN_KEYS.has(k)) {
        bad(`${key} ${k}`, 'the management realm is always protected; this setting does not exist');
        continue;
      }
      if (!AUTH_CONFIG_KEYS.has(k)) {
        bad(`${key} ${k}`, `unknown key; expected one of ${[...AUTH_CONFIG_KEYS].join(', ')}`);
        continue;
      }
      const spec = AUTH_SETTINGS.find((s) => s.key === k);
      if (spec === undefined) continue;
      if (typeof v !== 'number' || !Number.isInteger(v) || v < spec.min || v > spec.max) {
        const unit = spec.key.endsWith('-days') ? 'days' : 'seconds';
        bad(`${key} ${k}`, `expected a whole number of ${unit} from ${spec.min} to ${spec.max}, found ${describe(v)}`);
      } else values[spec.field] = v;
    }
    settings = values as unknown as AuthSettings;
    const storeRef = auth.config.get(':auth/store');
    if (!isKeyword(storeRef)) {
      bad(`${key} :auth/store`, `expected the keyword alias of the store module (e.g. :store), found ${describe(storeRef)}`);
    } else {
      store = modules[storeRef.keyword];
      if (store === undefined) {
        bad(`${key} :auth/store`, `:${storeRef.keyword} is not a module alias in :svc/modules (dangling alias)`);
      } else if (!store.activate.includes('svc/store')) {
        bad(`${key} :auth/store`, `module :${storeRef.keyword} does not activate the :svc/store export; add :activate [:svc/store]`);
      } else if (store.package === null) {
        bad(`${key} :auth/store`, `module :${storeRef.keyword} must come from a pinned store package`);
      }
    }
  }

  if (problems.length > 0 || store === undefined) throw new ConfigError(problems);
  return deepFreeze({
    project: project as string,
    profile,
    controlDir,
    packages,
    modules,
    store,
    auth: settings,
    nodeListen,
    metricsListen,
    auditSinks,
  });
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

/** How one key of a module's `:config` is read. */
export interface ConfigField {
  readonly kind: 'string' | 'integer' | 'boolean' | 'secret';
  /** Allowed string values. */
  readonly oneOf?: readonly string[];
  readonly min?: number;
  readonly max?: number;
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
  if (problems.length > 0) throw new ConfigError(problems);
  return out;
}

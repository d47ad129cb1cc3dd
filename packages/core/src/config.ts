import type { AppGatewayConfig } from './app-config.js';
import { type AssetReader, readAppGatewayConfig } from './app-config-reader.js';
import { type AuditSinks, readAuditSinks } from './audit-sinks-config.js';
import { describeEdn as describe, type EdnKeyword, type EdnMap, type EdnValue, isEdnMap, isKeyword, mergeEdn } from './edn-model.js';
import { ConfigError, type ConfigProblem } from './errors.js';
import { checkModuleConfig, checkOpaqueConfig, type ModuleConfigSchemas, parseSecretRef, type SecretRef } from './module-config.js';
import { PROVIDER_ALIAS, type ProviderModuleConfig, readProviderModuleConfig } from './provider-config.js';
import { isRealm, type Realm } from './realm.js';
import { SENDER_CONSTRAINTS, type SenderConstraint, type SenderConstraints } from './sender-constraint.js';
import {
  APP_CAPABILITY,
  AUTH_MODULE,
  AUTH_SETTINGS,
  AUTH_STORE_KEY,
  type AuthSettings,
  CAPABILITIES,
  DEFAULT_AUTH_SETTINGS,
  PRIVILEGED_EXPORTS,
  PROJECT_KEYS,
  PROVIDER_CAPABILITY,
  type ProjectKeySpec,
  SENDER_CONSTRAINT_KEY,
  WEAKENING_KEYS,
} from './settings.js';
import { readTrustedPublishers } from './trusted-publishers.js';

// Validating `project.edn`: the profiles merged over the base (every one checked, the chosen
// one applied), the top-level keys, the modules and their capabilities, the auth module's
// settings and store binding, and the rules between modules. The readers of single keys
// (audit sinks, the application gateway, trusted publishers, a module's :config) have their
// own modules.

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
  /**
   * `:svc/key-encryption-key` and `:svc/previous-key-encryption-key`: what seals the cluster's
   * assertion keys in the control store (references only; the runtime resolves them).
   */
  readonly keyEncryption: { readonly current: SecretRef | null; readonly previous: SecretRef | null };
}

const FORBIDDEN_KEYS = new Set(WEAKENING_KEYS);

const TOP_KEYS = new Set(PROJECT_KEYS.map((k) => k.key));
const PROFILE_KEYS = new Set(PROJECT_KEYS.filter((k) => k.inProfile).map((k) => k.key));
const MODULE_KEYS = new Set([':package', ':module', ':activate', ':config']);
const PACKAGE_KEYS = new Set([':version', ':sha256']);
const AUTH_CONFIG_KEYS = new Set([AUTH_STORE_KEY, SENDER_CONSTRAINT_KEY, ...AUTH_SETTINGS.map((s) => s.key)]);
const CAPABILITY_LIST = CAPABILITIES.map((c) => `:${c.keyword}`).join(', ');

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
  /** Reads a file `project.edn` names (the `:svc/app-brand` logo), relative to the project directory; absent: not read. */
  readonly readAsset?: AssetReader;
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
  const app = readAppGatewayConfig(merged, bad, opts.readAsset);

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
  if (app.routes !== undefined && appModules.length > 0) {
    bad(
      ':svc/app-routes',
      `routes and module mode exclude each other: remove :svc/app-routes, or :svc/app from ${appModules.map((m) => `:${m.alias}`).join(', ')}`,
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

  const secretKey = (key: string): SecretRef | null => {
    const v = merged.get(key);
    return v === undefined ? null : parseSecretRef(v, problems, file, key);
  };
  const keyEncryption = { current: secretKey(':svc/key-encryption-key'), previous: secretKey(':svc/previous-key-encryption-key') };
  if (keyEncryption.previous !== null && keyEncryption.current === null && merged.get(':svc/key-encryption-key') === undefined) {
    bad(':svc/previous-key-encryption-key', 'is only read during a rotation of :svc/key-encryption-key: set :svc/key-encryption-key too');
  }
  // The assertion keys of a shared store are sealed under a key the database never holds.
  if (
    store !== undefined &&
    store.package !== 'svc-store-sqlite' &&
    (app.upstream !== null || (app.routes ?? []).length > 0) &&
    merged.get(':svc/key-encryption-key') === undefined
  ) {
    bad(
      ':svc/key-encryption-key',
      `required: the gateway signs assertions (:svc/app-upstream or :svc/app-routes) and its keys live in the shared control store (${store.package}), sealed under this key; set it to #svc/secret "env:NAME" holding 32 random bytes (openssl rand -base64 32), the same on every node`,
    );
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
      keyEncryption,
    },
    problems,
  };
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

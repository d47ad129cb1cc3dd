/**
 * The manifest every addon archive carries at its package root (`svc-addon.json`, core's
 * `ADDON_MANIFEST_FILE`): what the addon exports, the operation set it implements, the native
 * module it loads and the ABI it was built for. Verification compares it with the running
 * process, never trusts it blindly: every claim is checked against something real.
 */
export interface AddonManifest {
  schema: 1;
  /** The npm package name; equal to the archive's `package.json` name. */
  name: string;
  /** The npm package version; equal to the archive's `package.json` version. */
  version: string;
  /**
   * `svc/store` (a store addon) or `svc/app` (an application module's Fastify plugin), never
   * both; or `svc/auth-provider` alone (a provider package, which must also be signed).
   */
  exports: { 'svc/store'?: AddonExport; 'svc/app'?: AddonExport; 'svc/auth-provider'?: AddonExport };
  /** The store operation set; must equal core's `STORE_OPERATIONS` for a store, and be empty for an application package. */
  operations: string[];
  /** The native module the addon loads, or null for pure JavaScript. */
  native: { package: string; module: string } | null;
  abi: {
    /** Core's `STORE_CONTRACT_VERSION` the addon was built against. */
    store_contract: number;
    /** `process.versions.modules` of the Node that built the native module; null without one. */
    node_module_version: string | null;
    /** The highest N-API version the addon needs; null without a native module. */
    napi: number | null;
  };
}

/** One export of an addon: a file inside the package and the name it exports. */
export interface AddonExport {
  /** A path relative to the package root, starting with `./`, e.g. `./dist/index.js`. */
  entry: string;
  /** The JavaScript export name, e.g. `svcStore`. */
  export: string;
}

/** The export keys an addon may declare. */
export type AddonExportKey = keyof AddonManifest['exports'];

/**
 * Native packages svc accepts, each with the one binding name it builds. An addon that
 * declares any other native package, or another binding name for one of these, is refused:
 * a native module runs with the service's full rights, so the list is short on purpose.
 */
export const TRUSTED_NATIVE_MODULES: Readonly<Record<string, string>> = Object.freeze({ 'better-sqlite3': 'better_sqlite3' });

/** The export of a provider package: privileged, valid only in a package that passes signature verification. */
export const PROVIDER_EXPORT = 'svc/auth-provider' satisfies AddonExportKey;

const EXPORT_KEYS: ReadonlySet<string> = new Set<AddonExportKey>(['svc/store', 'svc/app', PROVIDER_EXPORT]);
/**
 * Exports no package may declare: identity is svc's own (spec rule 1). (`svc/auth-provider`
 * is privileged too, but a signed provider package may declare it: install and every load
 * refuse it without a signature by a trusted publisher, see `verifyProviderPackage`.)
 */
const PRIVILEGED_EXPORT_KEYS: ReadonlySet<string> = new Set(['svc/auth']);
const TOP_KEYS = new Set(['schema', 'name', 'version', 'exports', 'operations', 'native', 'abi']);
const ABI_KEYS = new Set(['store_contract', 'node_module_version', 'napi']);
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const BINDING = /^[A-Za-z0-9_]+$/;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Whether `entry` is a plain relative path inside the package: `./` then segments without
 * `.`, `..` or backslashes, so it cannot point outside the installed directory.
 */
export function isSafeEntryPath(entry: string): boolean {
  if (!entry.startsWith('./')) return false;
  const segments = entry.slice(2).split('/');
  return segments.every((s) => s.length > 0 && s !== '.' && s !== '..' && !s.includes('\\') && !s.includes('\0'));
}

/**
 * Parses and validates the text of an `svc-addon.json`. Returns the manifest, or every
 * problem found (never throws), so callers can report them in one message.
 *
 * @example
 * const { manifest, problems } = parseAddonManifest(await readFile('svc-addon.json', 'utf8'));
 */
export function parseAddonManifest(text: string): { manifest: AddonManifest; problems: [] } | { manifest: null; problems: string[] } {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    return { manifest: null, problems: [`svc-addon.json is not valid JSON (${(error as Error).message})`] };
  }
  const problems: string[] = [];
  if (!isRecord(raw)) return { manifest: null, problems: ['svc-addon.json must hold a JSON object'] };
  for (const k of Object.keys(raw)) if (!TOP_KEYS.has(k)) problems.push(`unknown key "${k}"`);
  if (raw.schema !== 1) problems.push(`"schema" must be 1, found ${JSON.stringify(raw.schema)}`);
  if (typeof raw.name !== 'string' || raw.name.length === 0) problems.push('"name" must be the package name');
  if (typeof raw.version !== 'string' || raw.version.length === 0) problems.push('"version" must be the package version');

  if (!isRecord(raw.exports))
    problems.push('"exports" must be an object such as {"svc/store": {"entry": "./dist/index.js", "export": "svcStore"}}');
  else {
    for (const [key, value] of Object.entries(raw.exports)) {
      if (PRIVILEGED_EXPORT_KEYS.has(key)) problems.push(`it declares the privileged export "${key}", which no package may provide`);
      else if (!EXPORT_KEYS.has(key)) problems.push(`unknown export "${key}"; expected one of ${[...EXPORT_KEYS].join(', ')}`);
      else if (!isRecord(value) || typeof value.entry !== 'string' || typeof value.export !== 'string') {
        problems.push(`export "${key}" must be {"entry": "./path.js", "export": "name"}`);
      } else {
        if (!isSafeEntryPath(value.entry))
          problems.push(`export "${key}" entry "${value.entry}" must be a path inside the package starting with ./`);
        if (!IDENTIFIER.test(value.export)) problems.push(`export "${key}" export name "${value.export}" is not a JavaScript identifier`);
        for (const k of Object.keys(value)) if (k !== 'entry' && k !== 'export') problems.push(`export "${key}": unknown key "${k}"`);
      }
    }
  }

  if (isRecord(raw.exports) && 'svc/store' in raw.exports && 'svc/app' in raw.exports) {
    problems.push('an application package (svc/app) may not also export the privileged "svc/store"');
  }
  // A provider runs confined and proves credentials, nothing else: the package that carries one
  // exports nothing more, implements no store operation and loads no native module.
  const isProvider = isRecord(raw.exports) && PROVIDER_EXPORT in raw.exports;
  if (isProvider) {
    const others = Object.keys(raw.exports as Record<string, unknown>).filter((k) => k !== PROVIDER_EXPORT);
    if (others.length > 0)
      problems.push(
        `a provider package (${PROVIDER_EXPORT}) exports nothing else, and this one also declares ${others.map((k) => `"${k}"`).join(', ')}`,
      );
    if (Array.isArray(raw.operations) && raw.operations.length > 0)
      problems.push('a provider package implements no store operations: "operations" must be []');
    if (raw.native !== null) problems.push('a provider package loads no native module: "native" must be null');
  }

  if (!Array.isArray(raw.operations) || !raw.operations.every((o) => typeof o === 'string')) {
    problems.push('"operations" must be an array of operation names');
  } else if (new Set(raw.operations).size !== raw.operations.length) {
    problems.push('"operations" lists an operation more than once');
  }

  if (raw.native !== null) {
    if (!isRecord(raw.native) || typeof raw.native.package !== 'string' || typeof raw.native.module !== 'string') {
      problems.push('"native" must be null or {"package": "<npm package>", "module": "<binding name>"}');
    } else {
      if (!BINDING.test(raw.native.module)) problems.push(`"native.module" "${raw.native.module}" is not a binding name`);
      for (const k of Object.keys(raw.native)) if (k !== 'package' && k !== 'module') problems.push(`"native": unknown key "${k}"`);
    }
  }

  if (!isRecord(raw.abi)) problems.push('"abi" must be {"store_contract", "node_module_version", "napi"}');
  else {
    const { store_contract, node_module_version, napi } = raw.abi;
    for (const k of Object.keys(raw.abi)) if (!ABI_KEYS.has(k)) problems.push(`"abi": unknown key "${k}"`);
    if (!Number.isInteger(store_contract)) problems.push('"abi.store_contract" must be an integer');
    if (node_module_version !== null && typeof node_module_version !== 'string') {
      problems.push('"abi.node_module_version" must be a string (process.versions.modules) or null');
    }
    if (napi !== null && !Number.isInteger(napi)) problems.push('"abi.napi" must be an integer or null');
  }

  if (problems.length > 0) return { manifest: null, problems };
  return { manifest: raw as unknown as AddonManifest, problems: [] };
}

/**
 * The manifest as written to disk: fixed key order, two-space indent, final newline, so the
 * same inputs always give the same bytes (and the same archive digest).
 *
 * @example
 * await writeFile(join(dir, 'svc-addon.json'), serializeAddonManifest(manifest));
 */
export function serializeAddonManifest(m: AddonManifest): string {
  const ordered: AddonManifest = {
    schema: 1,
    name: m.name,
    version: m.version,
    exports: Object.fromEntries(
      Object.entries(m.exports)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([k, v]) => [k, { entry: v.entry, export: v.export }]),
    ),
    operations: [...m.operations],
    native: m.native === null ? null : { package: m.native.package, module: m.native.module },
    abi: { store_contract: m.abi.store_contract, node_module_version: m.abi.node_module_version, napi: m.abi.napi },
  };
  return `${JSON.stringify(ordered, null, 2)}\n`;
}

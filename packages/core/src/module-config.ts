import { describeEdn as describe, type EdnMap, type EdnValue, isEdnMap, isTagged } from './edn-model.js';
import { ConfigError, type ConfigProblem } from './errors.js';

// A module's `:config` map: reading it against a package's field table, and the secret
// references (`#svc/secret "env:NAME"`) a config may hold instead of a secret.

/** A reference to a deployment-time secret: never the secret itself. */
export interface SecretRef {
  readonly source: 'env' | 'file';
  readonly name: string;
}

/** Key names whose value is a credential: a module whose schema svc does not know may still not hold one literally. */
const SECRET_NAME = /(^|[-/_.:])(password|passphrase|secret|token|api-?key|private-?key|credentials?)$/i;

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

/** The `:config` field tables of the packages whose modules svc can check at load, by `name@version`. */
export type ModuleConfigSchemas = Readonly<Record<string, Readonly<Record<string, ConfigField>>>>;

/**
 * Checks the `:config` of a package whose field table svc does not know: its addon reads the
 * values, but no tag other than `#svc/secret` is accepted, every secret reference must be well
 * formed, and a key named like a credential may only hold a reference, never the secret.
 *
 * @example
 * checkOpaqueConfig(module.config, ':svc/modules :app :config', file, problems);
 */
export function checkOpaqueConfig(value: EdnValue, key: string, file: string, problems: ConfigProblem[]): void {
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

/**
 * {@link readModuleConfig} that adds its problems to `problems` instead of throwing.
 *
 * @example
 * const values = checkModuleConfig(config, fields, { file, key: ':svc/modules :store :config' }, problems);
 */
export function checkModuleConfig<K extends string>(
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

import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, isAbsolute, join, resolve } from 'node:path';
import { ConfigError, type ConfigProblem, type ModuleConfigSchemas, type ProjectConfig, validateProjectConfig } from '@svc/core/config';
import { DEFAULT_AUTH_SETTINGS, DEFAULT_CONTROL_DIR } from '@svc/core/settings';
import { POSTGRES_STORE_CONFIG } from 'svc-store-postgres/config-fields';
import { SQLITE_STORE_CONFIG } from 'svc-store-sqlite/config-fields';
import { formatProblem, parseEdn } from './edn.js';
import { RuntimeError } from './errors.js';
import { shellQuote } from './shell-quote.js';

/** A loaded project: where it is, its validated configuration and its control paths. */
export interface Project {
  /** Absolute project directory. */
  readonly dir: string;
  /** Absolute path of `project.edn`. */
  readonly file: string;
  readonly config: ProjectConfig;
  /** Absolute control directory: `SVC_CONTROL_DIR` > `:svc/control-dir` > `<dir>/.svc/control`. */
  readonly controlDir: string;
  /** `<controlDir>/control.db`. */
  readonly controlDb: string;
  /** `<controlDir>/node-key.pem`: the node's Ed25519 identity key. */
  readonly nodeKey: string;
}

/**
 * A valid project name from a directory name: lowercase, runs of other characters turned
 * into `-`, at most 63 characters, starting with a letter or digit.
 *
 * @example
 * projectNameFor('/home/me/My Demo!'); // "my-demo"
 */
export function projectNameFor(dir: string): string {
  const name = basename(resolve(dir))
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '-')
    .replace(/^[-_]+/, '')
    .replace(/-+$/, '')
    .slice(0, 63);
  return name === '' ? 'project' : name;
}

/**
 * The `project.edn` that `svc auth init` writes when there is none: the contract's shape with
 * the embedded SQLite store, pinned by the SHA-256 of its bundled archive, and the default
 * auth settings.
 *
 * @example
 * writeFileSync(file, defaultProjectEdn('demo', bundledSqliteAddon()));
 */
export function defaultProjectEdn(project: string, sqlite: { readonly version: string; readonly sha256: string }): string {
  const s = DEFAULT_AUTH_SETTINGS;
  return `{:svc/project  ${JSON.stringify(project)}
 :svc/packages {"svc-store-sqlite" {:version ${JSON.stringify(sqlite.version)} :sha256 ${JSON.stringify(sqlite.sha256)}}}
 :svc/modules  {:store {:package "svc-store-sqlite" :activate [:svc/store]}
                :auth  {:module :svc/auth
                        :config {:auth/store :store
                                 :auth/access-token-ttl-seconds ${s.accessTokenTtlSeconds}
                                 :auth/refresh-token-ttl-seconds ${s.refreshTokenTtlSeconds}
                                 :auth/refresh-reuse-grace-seconds ${s.refreshReuseGraceSeconds}
                                 :auth/challenge-ttl-seconds ${s.challengeTtlSeconds}}}}}
`;
}

const require = createRequire(import.meta.url);

/**
 * The `:config` field tables of the store addons this build bundles, by `name@version`: a
 * project pinning exactly those versions has its store modules checked at load, in every
 * profile, instead of only when the chosen one opens.
 */
const BUNDLED_MODULE_CONFIGS: ModuleConfigSchemas = Object.freeze({
  [`svc-store-sqlite@${(require('svc-store-sqlite/package.json') as { version: string }).version}`]: SQLITE_STORE_CONFIG,
  [`svc-store-postgres@${(require('svc-store-postgres/package.json') as { version: string }).version}`]: POSTGRES_STORE_CONFIG,
});

/** The profile chosen with `--profile`, else `SVC_PROFILE`, else none. */
export function chosenProfile(flag: string | undefined, env: NodeJS.ProcessEnv): string | null {
  if (flag !== undefined && flag !== '') return flag.replace(/^:/, '');
  const fromEnv = env.SVC_PROFILE;
  return fromEnv !== undefined && fromEnv !== '' ? fromEnv.replace(/^:/, '') : null;
}

/** One line per problem; a single problem is the one line itself (file, key, expected). */
function configFailure(problems: readonly ConfigProblem[], file: string): RuntimeError {
  const lines = problems.map(formatProblem);
  if (lines.length === 1) return new RuntimeError(lines[0] as string, { code: 'config_invalid' });
  return new RuntimeError(
    `invalid configuration in ${file} (${problems.length} problem${problems.length === 1 ? '' : 's'}); fix it and try again`,
    { code: 'config_invalid', details: lines },
  );
}

/** The largest file `project.edn` may name for reading at load (a logo): anything bigger is refused by its reader anyway. */
const ASSET_READ_LIMIT = 1024 * 1024;

/** Reads a file `project.edn` names (the `:svc/app-brand` logo), relative to the project directory. */
function readProjectAsset(dir: string, path: string): { bytes: Uint8Array } | { problem: string } {
  const full = isAbsolute(path) ? path : resolve(dir, path);
  try {
    const stats = statSync(full);
    if (!stats.isFile()) return { problem: `${full} is not a file` };
    // Never read a huge file into memory just to refuse it.
    if (stats.size > ASSET_READ_LIMIT) return { problem: `${full} is ${stats.size} bytes, far too big` };
    return { bytes: readFileSync(full) };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return { problem: code === 'ENOENT' ? `${full} does not exist` : `${full}: ${code ?? (error as Error).message}` };
  }
}

/**
 * Loads `<dir>/project.edn`: parses it as EDN, validates it against core's schema with the
 * chosen profile, checks the store package is one this build supports, and resolves the
 * control paths. Throws a {@link RuntimeError} naming the file and every problem.
 *
 * @example
 * const project = loadProject('./demo', { profile: null, env: process.env });
 */
export function loadProject(dirArg: string, opts: { readonly profile: string | null; readonly env: NodeJS.ProcessEnv }): Project {
  const dir = resolve(dirArg);
  const file = join(dir, 'project.edn');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new RuntimeError(`no project at ${dir} (${file} does not exist); run \`svc auth init ${shellQuote(dirArg)}\` first`, {
        code: 'project_not_found',
      });
    }
    throw new RuntimeError(`cannot read ${file}: ${(error as Error).message}`);
  }
  const { value, problems } = parseEdn(text, file);
  if (problems.length > 0 || value === undefined) throw configFailure(problems, file);
  let config: ProjectConfig;
  try {
    config = validateProjectConfig(value, {
      file,
      profile: opts.profile,
      moduleConfigs: BUNDLED_MODULE_CONFIGS,
      readAsset: (path) => readProjectAsset(dir, path),
    });
  } catch (error) {
    if (error instanceof ConfigError) throw configFailure(error.problems, file);
    throw error;
  }
  const envControl = opts.env.SVC_CONTROL_DIR;
  let controlDir: string;
  if (envControl !== undefined && envControl !== '') controlDir = resolve(envControl);
  else if (config.controlDir !== null) controlDir = isAbsolute(config.controlDir) ? config.controlDir : resolve(dir, config.controlDir);
  else controlDir = join(dir, DEFAULT_CONTROL_DIR);
  return {
    dir,
    file,
    config,
    controlDir,
    controlDb: join(controlDir, 'control.db'),
    nodeKey: join(controlDir, 'node-key.pem'),
  };
}

import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { readFile, realpath, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';

/**
 * What install recorded about the code an addon loads from outside its archive: the real
 * dependencies directory its `node_modules` link points to, the SHA-256 of every package of its
 * dependency closure (by real directory), and of its native binding. Kept beside the archive as
 * `<packagesDir>/<name>-<version>.lock.json`, owner-only; verification recomputes it and
 * refuses any difference, so a retargeted link, an edited dependency or a swapped `.node`
 * binary never runs.
 */
export interface DependencyLock {
  readonly schema: 1;
  /** The real path of the dependencies directory `node_modules` links to. */
  readonly dependencies_dir: string;
  /** Real package directory → SHA-256 of its loadable files. */
  readonly packages: Readonly<Record<string, string>>;
  /** The native binding, or null for a pure JavaScript addon. */
  readonly native: { readonly file: string; readonly sha256: string } | null;
}

/** The files Node can load: JavaScript, JSON and native bindings. Sources, docs and build intermediates are not. */
const LOADABLE = /\.(?:js|cjs|mjs|json|node)$/;

function sha256Hex(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/**
 * The SHA-256 of a package directory's loadable files: over the sorted lines
 * `<relative path> <sha256 of the file>` (and `<path> -> <target>` for a symlink, never
 * followed). Nested `node_modules` are left out: the packages there that are actually used are
 * reached by resolution and hashed on their own.
 */
export async function packageDigest(dir: string): Promise<string> {
  // Synchronous on purpose: thousands of small files, where one promise per stat and read costs
  // several times the hashing itself. Runs once per store open, before anything is served.
  const lines: string[] = [];
  const walk = (rel: string): void => {
    const abs = rel === '' ? dir : join(dir, rel);
    const entries = readdirSync(abs, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      const path = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.isSymbolicLink()) lines.push(`${path} -> ${readlinkSync(join(abs, entry.name))}`);
      else if (entry.isDirectory()) {
        if (entry.name !== 'node_modules' && entry.name !== '.git') walk(path);
      } else if (entry.isFile() && LOADABLE.test(entry.name)) lines.push(`${path} ${sha256Hex(readFileSync(join(abs, entry.name)))}`);
    }
  };
  walk('');
  return sha256Hex(lines.join('\n'));
}

interface PackageJson {
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

/**
 * The `package.json` of dependency `name` as Node resolves it from the package at `from`: the
 * first `node_modules/<name>` of Node's lookup paths that has one. Not `require.resolve` of
 * `<name>/package.json`, which a package's `exports` map may hide (@simplewebauthn/server's
 * does): the package would then drop out of the closure, unchecked and unreadable when confined.
 */
function packageManifestOf(from: string, name: string): string | null {
  const paths = createRequire(join(from, 'package.json')).resolve.paths(name) ?? [];
  for (const dir of paths) {
    const manifest = join(dir, name, 'package.json');
    if (existsSync(manifest)) return manifest;
  }
  return null;
}

/**
 * Hashes the dependency closure of the package at `fromDir` whose direct dependencies are
 * `roots`: each dependency is resolved exactly as Node will resolve it from the package that
 * declares it, then its own dependencies, transitively. A dependency that does not resolve
 * (an optional one that is absent) is left out; if it appears later the closure differs.
 */
export async function dependencyClosure(fromDir: string, roots: Iterable<string>): Promise<Record<string, string>> {
  const packages: Record<string, string> = {};
  const queue: { from: string; name: string }[] = [...roots].map((name) => ({ from: fromDir, name }));
  while (queue.length > 0) {
    const { from, name } = queue.shift() as { from: string; name: string };
    const manifest = packageManifestOf(from, name);
    if (manifest === null) continue;
    const dir = await realpath(join(manifest, '..'));
    if (Object.hasOwn(packages, dir)) continue;
    packages[dir] = await packageDigest(dir);
    const pkg = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as PackageJson;
    for (const dep of Object.keys({ ...(pkg.dependencies ?? {}), ...(pkg.optionalDependencies ?? {}) })) {
      queue.push({ from: dir, name: dep });
    }
  }
  return Object.fromEntries(Object.entries(packages).sort(([a], [b]) => (a < b ? -1 : 1)));
}

/**
 * Computes the lock of an installed addon at `addonDir` (its `node_modules` link in place):
 * the link's real target, the closure of `dependencies`, and the native binding
 * `<native package>/build/Release/<module>.node` when there is one.
 */
export async function computeDependencyLock(
  addonDir: string,
  dependencies: Iterable<string>,
  native: { readonly package: string; readonly module: string } | null,
): Promise<DependencyLock> {
  const dependenciesDir = await realpath(join(addonDir, 'node_modules'));
  const packages = await dependencyClosure(addonDir, dependencies);
  let nativeLock: DependencyLock['native'] = null;
  if (native !== null) {
    // An unresolvable or untrusted native package is verification's to refuse, not install's.
    const manifest = (() => {
      try {
        return createRequire(join(addonDir, 'package.json')).resolve(`${native.package}/package.json`);
      } catch {
        return null;
      }
    })();
    if (manifest !== null) {
      const file = join(await realpath(join(manifest, '..')), 'build', 'Release', `${native.module}.node`);
      if ((await stat(file).catch(() => null))?.isFile()) nativeLock = { file, sha256: sha256Hex(await readFile(file)) };
    }
  }
  return { schema: 1, dependencies_dir: dependenciesDir, packages, native: nativeLock };
}

/** The lock file's path beside the kept archive. */
export function lockFileOf(archivePath: string): string {
  return archivePath.replace(/\.tgz$/, '.lock.json');
}

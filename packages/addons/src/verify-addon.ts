import { lstat, readdir, readFile, realpath, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { STORE_CONTRACT_VERSION, STORE_OPERATIONS } from '@svc/core/store';
import { type AddonArchive, AddonArchiveError, isSafePackageName, isSafeVersion, readAddonArchive, sha256Hex } from './archive.js';
import { type DependencyLock, dependencyClosure, lockFileOf } from './dependency-lock.js';
import { type AddonCheck, AddonVerificationError } from './errors.js';
import { type AddonExportKey, type AddonManifest, PROVIDER_EXPORT, TRUSTED_NATIVE_MODULES } from './manifest.js';
import { checkPackageSignature, type PackageSigner, signatureFileOf } from './package-signature.js';
import { addonPaths } from './paths.js';

/** What {@link verifyAddon} needs: where addons are installed and the pin from `project.edn`. */
export interface VerifyAddonOptions {
  /** `<project>/.svc/packages`. */
  readonly packagesDir: string;
  readonly name: string;
  /** The `:svc/packages` entry (core's `PackagePin`). */
  readonly pin: { readonly version: string; readonly sha256: string | null };
  /** A store or an application export; a provider package is verified by `verifyProviderPackage` (it needs a signature). */
  readonly exportName: Exclude<AddonExportKey, typeof PROVIDER_EXPORT>;
  /**
   * The `node_modules` directory this svc loads its own dependencies from (the one install
   * linked): the addon's `node_modules` link must point there and nowhere else.
   */
  readonly dependenciesDir: string;
}

/** An addon that passed every check, ready for {@link loadStoreAddon}. */
export interface VerifiedAddon {
  readonly manifest: AddonManifest;
  /** The install directory. */
  readonly dir: string;
  /** The absolute path of the export's entry file. */
  readonly entry: string;
  readonly exportKey: AddonExportKey;
}

const MAX_LISTED = 5;

/**
 * Why `path` may not be loaded from: it is writable by group or others, or owned by another
 * user than this process's (or root). Null when it is fine. Symlinks are judged by their
 * directory (their own mode means nothing).
 */
async function unsafeOwnership(path: string): Promise<string | null> {
  const st = await lstat(path);
  if (st.isSymbolicLink()) return null;
  if ((st.mode & 0o022) !== 0) return `${path} is writable by ${(st.mode & 0o020) !== 0 ? 'its group' : 'others'}`;
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid && st.uid !== 0) return `${path} is owned by another user (uid ${st.uid})`;
  return null;
}

/** Every path under `dir` (itself included, the top-level node_modules link not followed) that {@link unsafeOwnership} refuses. */
async function unsafeTree(dir: string): Promise<string[]> {
  const problems: string[] = [];
  const walk = async (abs: string): Promise<void> => {
    const problem = await unsafeOwnership(abs);
    if (problem !== null) problems.push(problem);
    const st = await lstat(abs);
    if (!st.isDirectory()) return;
    for (const name of (await readdir(abs)).sort()) await walk(join(abs, name));
  };
  await walk(dir);
  return problems;
}

function isLock(value: unknown): value is DependencyLock {
  const v = value as Partial<DependencyLock> | null;
  return (
    typeof v === 'object' &&
    v !== null &&
    v.schema === 1 &&
    typeof v.dependencies_dir === 'string' &&
    typeof v.packages === 'object' &&
    v.packages !== null &&
    (v.native === null || (typeof v.native === 'object' && typeof v.native?.file === 'string' && typeof v.native?.sha256 === 'string'))
  );
}

/**
 * Compares the install directory with the archive: every archive file present with the same
 * bytes, every archive directory present, nothing else except the top-level `node_modules`
 * link that install made (and it must still be a symlink). Returns one line per difference.
 */
async function installedFileProblems(dir: string, archive: AddonArchive): Promise<string[]> {
  const problems: string[] = [];
  const seenFiles = new Set<string>();
  const seenDirs = new Set<string>();
  const walk = async (rel: string): Promise<void> => {
    const abs = rel === '' ? dir : join(dir, rel);
    for (const name of (await readdir(abs)).sort()) {
      const path = rel === '' ? name : `${rel}/${name}`;
      // lstat, never stat: a symlink planted in the install must not be followed.
      const st = await lstat(join(abs, name));
      if (path === 'node_modules') {
        if (!st.isSymbolicLink()) problems.push('node_modules is no longer the dependency link install made');
      } else if (st.isDirectory()) {
        if (!archive.dirs.has(path)) problems.push(`${path}/ was added since install`);
        else {
          seenDirs.add(path);
          await walk(path);
        }
      } else if (st.isFile()) {
        const expected = archive.files.get(path);
        if (expected === undefined) problems.push(`${path} was added since install`);
        else {
          seenFiles.add(path);
          if (!expected.data.equals(await readFile(join(abs, name)))) problems.push(`${path} was edited since install`);
        }
      } else if (archive.files.has(path) || archive.dirs.has(path)) {
        (archive.files.has(path) ? seenFiles : seenDirs).add(path);
        problems.push(`${path} was replaced by a ${st.isSymbolicLink() ? 'symlink' : 'special file'} since install`);
      } else {
        problems.push(`${path} (a ${st.isSymbolicLink() ? 'symlink' : 'special file'}) was added since install`);
      }
    }
  };
  await walk('');
  // Report only the topmost missing thing: a removed directory, not every file below it.
  const parentSeen = (path: string) => {
    const i = path.lastIndexOf('/');
    return i < 0 || seenDirs.has(path.slice(0, i));
  };
  for (const path of [...archive.dirs].sort())
    if (!seenDirs.has(path) && parentSeen(path)) problems.push(`${path}/ was removed since install`);
  for (const path of [...archive.files.keys()].sort()) {
    if (!seenFiles.has(path) && parentSeen(path)) problems.push(`${path} was removed since install`);
  }
  return problems;
}

function listed(problems: readonly string[]): string {
  const shown = problems.slice(0, MAX_LISTED).join(', ');
  return problems.length > MAX_LISTED ? `${shown} and ${problems.length - MAX_LISTED} more` : shown;
}

/**
 * Verifies an installed addon before the control database is opened. Checks, in order:
 * the install exists (`not_installed`); the kept archive's SHA-256 equals the pin, and a
 * missing pin is refused (`archive_digest`); the installed files equal the archive's exactly,
 * nothing added, removed or edited (`installed_files`); the archive's `svc-addon.json` is
 * valid and names the pinned package (`manifest`); the declared operation set equals core's
 * `STORE_OPERATIONS` (`operation_set`); the native package is a trusted one with its one
 * binding name, is a declared dependency and its binding `build/Release/<module>.node`
 * resolves from the addon directory, and no trusted native package is used undeclared
 * (`native_module`); the ABI matches this process: store contract, Node module ABI when
 * native, N-API (`abi`); the requested export is declared and its entry file is part of the
 * archive (`export`). Between the installed-files and the manifest checks: nothing loaded is
 * group- or world-writable or owned by another user (`permissions`: `.svc`, the packages
 * directory, the install, the archive, the lock), and the code loaded from outside the archive
 * is what install recorded (`dependencies`: `node_modules` links to `dependenciesDir`, and the
 * digests of the dependency closure equal the lock's); the native binding's digest must equal
 * the lock's too (`native_module`). The first failure throws an {@link AddonVerificationError}
 * naming it.
 *
 * @example
 * const verified = await verifyAddon({ packagesDir, name: 'svc-store-sqlite', pin: config.packages['svc-store-sqlite'], exportName: 'svc/store', dependenciesDir });
 * const storeExport = await loadStoreAddon(verified);
 */
export async function verifyAddon(opts: VerifyAddonOptions): Promise<VerifiedAddon> {
  if ((opts.exportName as AddonExportKey) === PROVIDER_EXPORT) {
    // Only reachable from untyped callers: the provider export is never verified without its signature.
    throw new TypeError('a provider package is verified with verifyProviderPackage, which checks its signature');
  }
  const { manifest, dir, entry, exportKey } = await verifyInstalled({ ...opts, trustedPublishers: null });
  return { manifest, dir, entry, exportKey };
}

/** What {@link verifyInstalled} found, beyond {@link VerifiedAddon}. */
export interface VerifiedInstall extends VerifiedAddon {
  /** The real directories of the dependency closure the package loads from outside its install. */
  readonly dependencyDirs: readonly string[];
  /** The signer of a provider package; null for a store or application package. */
  readonly signer: PackageSigner | null;
}

/**
 * The project directory of `<project>/.svc/packages` as one POSIX shell word (quoted only when
 * it needs it), so a printed command can be pasted as is; `<PROJECT>` for another layout.
 */
function projectWord(packagesDir: string): string {
  if (basename(packagesDir) !== 'packages' || basename(dirname(packagesDir)) !== '.svc') return '<PROJECT>';
  const dir = dirname(dirname(packagesDir));
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(dir) ? dir : `'${dir.replace(/'/g, `'\\''`)}'`;
}

/**
 * The checks of {@link verifyAddon}, for any export. With `exportName` `svc/auth-provider`,
 * right after the archive digest the package's signature (`<archive>.sig` beside the kept
 * archive) must verify over that digest and be by one of `trustedPublishers` (`unsigned`,
 * `bad_signature`, `signer_not_trusted`), and after the manifest it must declare
 * `svc/auth-provider` (`capability_missing`); like an application package it has no store
 * operations and no native module.
 */
export async function verifyInstalled(
  opts: Omit<VerifyAddonOptions, 'exportName'> & {
    readonly exportName: AddonExportKey;
    readonly trustedPublishers: Readonly<Record<string, string>> | null;
  },
): Promise<VerifiedInstall> {
  const { name, pin } = opts;
  const label = `${name}@${pin.version}`;
  const isProvider = opts.exportName === PROVIDER_EXPORT;
  // A provider package is held to the application rules (no operations, no native module) and more.
  const isApp = opts.exportName === 'svc/app' || isProvider;
  const what = isProvider ? 'provider package' : isApp ? 'application package' : 'store addon';
  const fail: (check: AddonCheck, problem: string, remedy: string) => never = (check, problem, remedy) => {
    throw new AddonVerificationError(check, label, problem, remedy, what);
  };
  const installCmd = (source: string, sha: string) => `\`svc package install ${source} --sha256 ${sha} ${projectWord(opts.packagesDir)}\``;
  if (!isSafePackageName(name) || !isSafeVersion(pin.version)) {
    fail('not_installed', `"${name}" "${pin.version}" is not a valid package name and version`, 'fix :svc/packages in project.edn');
  }
  if (pin.sha256 === null) {
    return fail(
      'archive_digest',
      'project.edn has no :sha256 for it, so its archive cannot be checked',
      `pin it with ${installCmd(label, '<SHA256_HEX>')}`,
    );
  }
  const paths = addonPaths(opts.packagesDir, name, pin.version);
  const reinstall = `reinstall with ${installCmd(paths.archive, pin.sha256)}`;

  const data = await readFile(paths.archive).catch(() => null);
  const dirStat = await lstat(paths.dir).catch(() => null);
  if (data === null || dirStat === null) {
    fail('not_installed', `it is not installed in ${opts.packagesDir}`, `install it with ${installCmd(label, pin.sha256)}`);
  }
  const digest = sha256Hex(data);
  if (digest !== pin.sha256) {
    fail(
      'archive_digest',
      `the kept archive ${paths.archive} has SHA-256 ${digest}, but project.edn pins ${pin.sha256}`,
      `reinstall the pinned archive with ${installCmd(label, pin.sha256)}`,
    );
  }
  const sigFile = signatureFileOf(paths.archive);
  let signer: PackageSigner | null = null;
  if (isProvider) {
    // Before the archive is even unpacked in memory: the pinned bytes must carry a trusted signature.
    const verdict = checkPackageSignature({
      name,
      version: pin.version,
      sha256: digest,
      signatureText: await readFile(sigFile, 'utf8').catch(() => null),
      trusted: opts.trustedPublishers ?? {},
    });
    if ('check' in verdict) {
      fail(
        verdict.check,
        verdict.problem,
        verdict.check === 'signer_not_trusted'
          ? "add the publisher's key to :svc/trusted-publishers only if you trust it, or install a package signed by a trusted publisher"
          : `install the publisher's archive again with its .sig beside it: ${installCmd('<ARCHIVE>', pin.sha256)}`,
      );
    }
    signer = verdict;
  }

  let archive: AddonArchive;
  try {
    archive = await readAddonArchive(data);
  } catch (error) {
    if (!(error instanceof AddonArchiveError)) throw error;
    return fail(error.kind === 'entries' ? 'installed_files' : 'manifest', error.message, 'pin and install a valid svc addon archive');
  }
  if (!dirStat.isDirectory()) fail('installed_files', `${paths.dir} is not a directory`, reinstall);
  const lockFile = lockFileOf(paths.archive);
  // Nothing is loaded from a place someone else could have written: the project's .svc and
  // packages directories, the install, the kept archive and the lock.
  const ownership = [
    ...(
      await Promise.all([...new Set([dirname(opts.packagesDir), opts.packagesDir, dirname(paths.dir), paths.archive])].map(unsafeOwnership))
    ).filter((p): p is string => p !== null),
    ...(await unsafeTree(paths.dir)),
    ...((await lstat(lockFile).catch(() => null)) === null ? [] : [await unsafeOwnership(lockFile)].filter((p): p is string => p !== null)),
    ...(isProvider ? [await unsafeOwnership(sigFile)].filter((p): p is string => p !== null) : []),
  ];
  if (ownership.length > 0) {
    fail('permissions', listed(ownership), `make them owner-only (chmod -R go-w ${dirname(opts.packagesDir)}), then ${reinstall}`);
  }
  const fileProblems = await installedFileProblems(paths.dir, archive);
  if (fileProblems.length > 0) fail('installed_files', listed(fileProblems), reinstall);

  // The code loaded from outside the archive: the node_modules link must point at this svc's
  // own dependencies, and every package of the closure and the native binding must have the
  // digest install recorded.
  const linkTarget = await realpath(join(paths.dir, 'node_modules')).catch(() => null);
  const ownDependencies = await realpath(opts.dependenciesDir).catch(() => opts.dependenciesDir);
  if (linkTarget !== ownDependencies) {
    fail('dependencies', `node_modules points to ${linkTarget ?? 'nothing'}, not to this svc's dependencies ${ownDependencies}`, reinstall);
  }
  let lock: unknown = null;
  try {
    lock = JSON.parse(await readFile(lockFile, 'utf8'));
  } catch {
    lock = null;
  }
  if (!isLock(lock)) {
    return fail('dependencies', `there is no valid dependency lock ${lockFile} (installed by an older svc?)`, reinstall);
  }
  if (lock.dependencies_dir !== ownDependencies) {
    fail('dependencies', `it was installed against ${lock.dependencies_dir}, not this svc's dependencies ${ownDependencies}`, reinstall);
  }
  const closure = await dependencyClosure(paths.dir, archive.dependencies);
  const changed = [...new Set([...Object.keys(closure), ...Object.keys(lock.packages)])]
    .sort()
    .filter((dir) => closure[dir] !== lock.packages[dir])
    .map((dir) =>
      lock.packages[dir] === undefined ? `${dir} was added` : closure[dir] === undefined ? `${dir} is gone` : `${dir} changed`,
    );
  if (changed.length > 0) {
    fail('dependencies', `its dependencies differ from what install recorded: ${listed(changed)}`, `check them, then ${reinstall}`);
  }

  const { manifest } = archive;
  const buildRemedy = `install a build of ${name} made for this svc (store contract ${STORE_CONTRACT_VERSION}, Node ${process.version}) with \`svc package install\``;
  if (archive.name !== name || archive.version !== pin.version) {
    fail(
      'manifest',
      `the pinned archive holds ${archive.name}@${archive.version}, not ${label}`,
      'pin the archive of the package you mean',
    );
  }
  if (isProvider && manifest.exports[PROVIDER_EXPORT] === undefined) {
    fail(
      'capability_missing',
      `it is signed but its manifest does not declare the ${PROVIDER_EXPORT} export (it declares ${Object.keys(manifest.exports).join(', ') || 'none'})`,
      'activate :svc/auth-provider only for a provider package',
    );
  }

  if (isApp && manifest.operations.length > 0) {
    fail(
      'operation_set',
      `${isProvider ? 'a provider' : 'an application'} package implements no store operations, but its manifest declares some`,
      buildRemedy,
    );
  }
  const declared = new Set(manifest.operations);
  const expected = new Set<string>(isApp ? [] : STORE_OPERATIONS);
  const missing = [...expected].filter((op) => !declared.has(op));
  const extra = [...declared].filter((op) => !expected.has(op));
  if (missing.length > 0 || extra.length > 0) {
    const parts = [
      ...(missing.length > 0 ? [`missing ${missing.join(' ')}`] : []),
      ...(extra.length > 0 ? [`unknown ${extra.join(' ')}`] : []),
    ];
    fail('operation_set', `its operation set differs from this svc's store contract (${parts.join('; ')})`, buildRemedy);
  }

  const { native } = manifest;
  if (native === null) {
    const undeclared = [...archive.dependencies].filter((d) => Object.hasOwn(TRUSTED_NATIVE_MODULES, d));
    if (undeclared.length > 0) {
      fail(
        'native_module',
        `it depends on the native package ${undeclared.join(', ')} but its manifest declares no native module`,
        buildRemedy,
      );
    }
  } else if (isApp) {
    // A native module runs with the service's full rights and the one trusted one is the
    // embedded store's driver: an application package gets neither.
    fail(
      'native_module',
      `${isProvider ? 'a provider' : 'an application'} package may not load a native module, and it declares ${native.package}`,
      buildRemedy,
    );
  } else {
    const binding = Object.hasOwn(TRUSTED_NATIVE_MODULES, native.package) ? TRUSTED_NATIVE_MODULES[native.package] : undefined;
    if (binding === undefined) {
      fail(
        'native_module',
        `native package ${native.package} is not one svc trusts (${Object.keys(TRUSTED_NATIVE_MODULES).join(', ')})`,
        'use a store addon built on a trusted native package',
      );
    }
    if (native.module !== binding) {
      fail(
        'native_module',
        `it declares native module "${native.module}" for ${native.package}; the only accepted one is "${binding}"`,
        buildRemedy,
      );
    }
    if (!archive.dependencies.has(native.package)) {
      fail('native_module', `it declares native package ${native.package} but its package.json does not depend on it`, buildRemedy);
    }
    let nativeDir: string;
    try {
      // Resolved exactly as the addon's own import will be: from its directory, through the
      // node_modules link install made.
      nativeDir = dirname(createRequire(join(paths.dir, 'package.json')).resolve(`${native.package}/package.json`));
    } catch {
      return fail(
        'native_module',
        `${native.package} cannot be found from ${paths.dir}`,
        `install the svc CLI's dependencies (they include ${native.package}), then ${reinstall}`,
      );
    }
    const file = join(nativeDir, 'build', 'Release', `${native.module}.node`);
    if (!(await stat(file).catch(() => null))?.isFile()) {
      fail('native_module', `the native binding ${file} does not exist`, `rebuild it for this Node with \`npm rebuild ${native.package}\``);
    }
    const realFile = await realpath(file);
    const nativeDigest = sha256Hex(await readFile(realFile));
    if (lock.native === null || lock.native.file !== realFile || lock.native.sha256 !== nativeDigest) {
      fail(
        'native_module',
        `the native binding ${realFile} has SHA-256 ${nativeDigest}, not the ${lock.native?.sha256 ?? '(none)'} install recorded for ${lock.native?.file ?? '(none)'}`,
        `check it, then ${reinstall}`,
      );
    }
  }

  const { abi } = manifest;
  if (!isApp && abi.store_contract !== STORE_CONTRACT_VERSION) {
    fail('abi', `it was built for store contract ${abi.store_contract}, this svc implements ${STORE_CONTRACT_VERSION}`, buildRemedy);
  }
  if (native !== null && abi.node_module_version !== process.versions.modules) {
    fail(
      'abi',
      `its native module was built for Node module ABI ${abi.node_module_version}, this Node (${process.version}) has ABI ${process.versions.modules}`,
      buildRemedy,
    );
  }
  if (abi.napi !== null && abi.napi > Number(process.versions.napi)) {
    fail('abi', `it needs N-API ${abi.napi}, this Node (${process.version}) provides N-API ${process.versions.napi}`, buildRemedy);
  }

  const declaredExport = manifest.exports[opts.exportName];
  if (declaredExport === undefined) {
    return fail('export', `it does not export :${opts.exportName}`, `activate a package that provides :${opts.exportName}`);
  }
  const entryRel = declaredExport.entry.slice(2);
  if (!archive.files.has(entryRel)) {
    fail('export', `its :${opts.exportName} entry ${declaredExport.entry} is not in the archive`, buildRemedy);
  }
  return {
    manifest,
    dir: paths.dir,
    entry: join(paths.dir, entryRel),
    exportKey: opts.exportName,
    dependencyDirs: Object.keys(closure),
    signer,
  };
}

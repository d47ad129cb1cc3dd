import { chmod, mkdir, mkdtemp, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { AddonArchiveError, MAX_ARCHIVE_BYTES, readAddonArchive, sha256Hex } from './archive.js';
import { computeDependencyLock, lockFileOf } from './dependency-lock.js';
import { AddonVerificationError } from './errors.js';
import { PROVIDER_EXPORT } from './manifest.js';
import { npmPack } from './npm-pack.js';
import { checkPackageSignature, type PackageSigner, signatureFileOf } from './package-signature.js';
import { addonPaths } from './paths.js';

/** What {@link installAddon} needs. */
export interface InstallAddonOptions {
  /** The path of an `.tgz` archive, or `name@version` to fetch with `npm pack name@version`. */
  readonly source: string;
  /** The pinned SHA-256 of the archive, 64 hex digits. */
  readonly sha256: string;
  /** `<project>/.svc/packages`. */
  readonly packagesDir: string;
  /** A `node_modules` directory that already holds the addon's dependencies (the CLI's own). */
  readonly dependenciesDir: string;
  /**
   * `:svc/trusted-publishers` of the project: a provider package (one declaring
   * `svc/auth-provider`, or any archive that comes with a signature) is installed only when its
   * signature verifies and is by one of these. Absent: none is trusted.
   */
  readonly trustedPublishers?: Readonly<Record<string, string>>;
  /** The signature file; default `<source>.sig` when `source` is a file. */
  readonly signatureFile?: string;
}

/** An installed addon, as recorded in `project.edn`'s `:svc/packages`. */
export interface InstalledAddon {
  readonly name: string;
  readonly version: string;
  readonly sha256: string;
  /** `<packagesDir>/<name>@<version>`. */
  readonly dir: string;
  /** The kept archive, `<packagesDir>/<name>-<version>.tgz`. */
  readonly archive: string;
  /** Who signed it (a provider package), or null for an unsigned store or application package. */
  readonly signer: PackageSigner | null;
}

const SPEC = /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*@[0-9A-Za-z.+-]+$/;

async function obtainArchive(source: string): Promise<Buffer> {
  const st = await stat(source).catch(() => null);
  if (st?.isFile()) {
    if (st.size > MAX_ARCHIVE_BYTES) throw new Error(`the archive ${source} is larger than ${MAX_ARCHIVE_BYTES} bytes`);
    return readFile(source);
  }
  if (!SPEC.test(source)) throw new Error(`no archive at ${source}, and it is not a package spec like svc-store-sqlite@0.1.0`);
  const tmp = await mkdtemp(join(tmpdir(), 'svc-fetch-'));
  try {
    return await readFile(await npmPack({ cwd: tmp, dest: tmp, spec: source }));
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/**
 * Installs a store addon pinned by the SHA-256 of its archive. The digest is checked before
 * anything is unpacked or written (a mismatch leaves `packagesDir` untouched); the archive is
 * then read in memory and refused if any entry could escape the install directory (`..`,
 * absolute paths, symlinks, hard links) or if it lacks a valid `svc-addon.json`. The archive
 * is kept as `<packagesDir>/<name>-<version>.tgz` (verification compares the installed files
 * with it), unpacked to `<packagesDir>/<name>@<version>/` with npm's leading `package/`
 * stripped, and `<dir>/node_modules` is made a symlink to `dependenciesDir`: no network and
 * no native rebuild when the CLI already has the dependencies. Every directory and file is
 * created owner-only (0700/0600, explicitly, whatever the umask). The digests of the dependency
 * closure and of the native binding are recorded in `<packagesDir>/<name>-<version>.lock.json`
 * (see {@link computeDependencyLock}). Installing again replaces the previous install, which
 * also repairs a tampered one.
 *
 * @example
 * const addon = await installAddon({
 *   source: 'svc-store-sqlite-0.1.0.tgz',
 *   sha256: '3f7a…',
 *   packagesDir: join(project, '.svc/packages'),
 *   dependenciesDir: cliNodeModules,
 * });
 */
export async function installAddon(opts: InstallAddonOptions): Promise<InstalledAddon> {
  const pin = opts.sha256.toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(pin)) {
    throw new AddonVerificationError(
      'archive_digest',
      opts.source,
      `"${opts.sha256}" is not a SHA-256 digest`,
      'give --sha256 as 64 hex digits',
    );
  }
  const data = await obtainArchive(opts.source);
  const digest = sha256Hex(data);
  if (digest !== pin) {
    // Nothing of an archive that fails its pin is read, not even its manifest: what it is can
    // only be told by the signature a provider package always comes with.
    const signed = opts.signatureFile !== undefined || (await stat(signatureFileOf(opts.source)).catch(() => null))?.isFile() === true;
    throw new AddonVerificationError(
      'archive_digest',
      opts.source,
      `the archive's SHA-256 is ${digest}, not the pinned ${pin}`,
      'nothing was installed; check that the archive and the digest are the ones you meant',
      signed ? 'provider package' : 'addon archive',
    );
  }
  let archive: Awaited<ReturnType<typeof readAddonArchive>>;
  try {
    archive = await readAddonArchive(data);
  } catch (error) {
    if (!(error instanceof AddonArchiveError)) throw error;
    throw new AddonVerificationError(
      error.kind === 'entries' ? 'installed_files' : 'manifest',
      opts.source,
      error.message,
      'nothing was installed; this archive is not a usable svc addon',
    );
  }
  // A provider package, or anything that comes signed (and so claims to be one), is installed
  // only with a signature over these very bytes by a trusted publisher, and only if it declares
  // the provider capability: the same checks every load repeats.
  const sigPath = opts.signatureFile ?? ((await stat(opts.source).catch(() => null))?.isFile() ? signatureFileOf(opts.source) : null);
  const signatureText = sigPath === null ? null : await readFile(sigPath, 'utf8').catch(() => null);
  const isProvider = archive.manifest.exports[PROVIDER_EXPORT] !== undefined;
  let signer: PackageSigner | null = null;
  if (isProvider || signatureText !== null) {
    const label = `${archive.name}@${archive.version}`;
    const verdict = checkPackageSignature({
      name: archive.name,
      version: archive.version,
      sha256: digest,
      signatureText,
      trusted: opts.trustedPublishers ?? {},
    });
    if ('check' in verdict) {
      throw new AddonVerificationError(
        verdict.check,
        label,
        verdict.problem,
        verdict.check === 'signer_not_trusted'
          ? "nothing was installed; add the publisher's key to :svc/trusted-publishers in project.edn only if you trust it"
          : verdict.check === 'unsigned'
            ? `nothing was installed; a provider package is installed with its signature file ${sigPath ?? '<archive>.sig'} beside it`
            : 'nothing was installed; get the archive and its signature from the publisher again',
        'provider package',
      );
    }
    if (!isProvider) {
      throw new AddonVerificationError(
        'capability_missing',
        label,
        `it is signed as a provider package but its manifest does not declare the ${PROVIDER_EXPORT} export`,
        'nothing was installed; install a provider package, or a store or application package without a signature file',
        'provider package',
      );
    }
    signer = verdict;
  }

  const depsStat = await stat(opts.dependenciesDir).catch(() => null);
  if (!depsStat?.isDirectory()) throw new Error(`the dependencies directory ${opts.dependenciesDir} does not exist`);

  const { name, version } = archive;
  const paths = addonPaths(opts.packagesDir, name, version);
  // Owner-only, whatever the umask: a group member who could write here could swap the code
  // the service loads (verification refuses anything group- or world-writable).
  await mkdir(opts.packagesDir, { recursive: true, mode: 0o700 });
  await chmod(opts.packagesDir, 0o700);
  // Unpack beside the target and swap it in, so an interrupted install never leaves a
  // half-written addon where verification (and the service) would look.
  const staging = await mkdtemp(join(opts.packagesDir, '.install-'));
  try {
    const stageDir = join(staging, 'package');
    await mkdir(stageDir, { mode: 0o700 });
    for (const dir of [...archive.dirs].sort()) await mkdir(join(stageDir, dir), { recursive: true, mode: 0o700 });
    for (const [rel, file] of archive.files) {
      const target = join(stageDir, rel);
      await mkdir(dirname(target), { recursive: true, mode: 0o700 });
      // Owner-only (explicit, so the umask cannot widen it), executable if the archive says so.
      const mode = (file.mode & 0o100) | 0o600;
      await writeFile(target, file.data, { flag: 'wx', mode });
      await chmod(target, mode);
    }
    await symlink(resolve(opts.dependenciesDir), join(stageDir, 'node_modules'), 'dir');
    const stagedArchive = join(staging, 'archive.tgz');
    await writeFile(stagedArchive, data, { mode: 0o600 });
    await chmod(stagedArchive, 0o600);

    await rm(paths.dir, { recursive: true, force: true });
    // A scoped package's install lives under `<packagesDir>/@scope/`: owner-only like the rest.
    await mkdir(dirname(paths.dir), { recursive: true, mode: 0o700 });
    if (dirname(paths.dir) !== opts.packagesDir) await chmod(dirname(paths.dir), 0o700);
    await rename(stageDir, paths.dir);
    await rename(stagedArchive, paths.archive);
    // What the addon loads from outside its archive (the dependency closure through the link,
    // the native binding), by digest, for verification to compare with.
    const lock = await computeDependencyLock(paths.dir, archive.dependencies, archive.manifest.native);
    const stagedLock = join(staging, 'lock.json');
    await writeFile(stagedLock, `${JSON.stringify(lock, null, 2)}\n`, { mode: 0o600 });
    await chmod(stagedLock, 0o600);
    await rename(stagedLock, lockFileOf(paths.archive));
    // The signature is kept beside the archive, so every load checks it again; an unsigned
    // package installed over a signed one leaves no stale signature behind.
    if (signer !== null && signatureText !== null) {
      const stagedSig = join(staging, 'archive.sig');
      await writeFile(stagedSig, signatureText, { mode: 0o600 });
      await chmod(stagedSig, 0o600);
      await rename(stagedSig, signatureFileOf(paths.archive));
    } else await rm(signatureFileOf(paths.archive), { force: true });
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  return { name, version, sha256: digest, dir: paths.dir, archive: paths.archive, signer };
}

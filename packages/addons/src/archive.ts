import { createHash } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { ADDON_MANIFEST_FILE } from '@svc/core';
import { Parser, type ReadEntry } from 'tar';
import type { AddonsFailureCode } from './failure-codes.js';
import { type AddonManifest, parseAddonManifest } from './manifest.js';

/** A regular file of an addon archive, by its path relative to the package root. */
export interface ArchiveFile {
  readonly data: Buffer;
  /** Permission bits only (setuid/setgid/sticky dropped): what install writes. */
  readonly mode: number;
}

/** The contents of an addon archive, read wholly in memory and checked for safety. */
export interface AddonArchive {
  /** Regular files by `/`-separated path relative to the package root (npm's `package/` stripped). */
  readonly files: ReadonlyMap<string, ArchiveFile>;
  /** Every directory, declared or implied by a file path, relative to the package root. */
  readonly dirs: ReadonlySet<string>;
  readonly name: string;
  readonly version: string;
  /** `dependencies` and `optionalDependencies` of the archive's package.json. */
  readonly dependencies: ReadonlySet<string>;
  readonly manifest: AddonManifest;
}

/** Why an archive was refused: unsafe or malformed entries, or a missing or invalid manifest. */
export class AddonArchiveError extends Error {
  readonly code = 'addon_archive_invalid' as const satisfies AddonsFailureCode;
  readonly kind: 'entries' | 'manifest';
  constructor(kind: 'entries' | 'manifest', message: string) {
    super(message);
    this.name = 'AddonArchiveError';
    this.kind = kind;
  }
}

// Store addons are small; the bounds stop a hostile archive (or a gzip bomb) from filling
// memory before the digest or the entries are even looked at.
/** The largest compressed archive accepted. */
export const MAX_ARCHIVE_BYTES = 64 * 1024 * 1024;
const MAX_UNPACKED_BYTES = 512 * 1024 * 1024;

const FILE_TYPES = new Set(['File', 'OldFile', 'ContiguousFile']);

/**
 * The lowercase hex SHA-256 of `data`: the pin of an archive.
 *
 * @example
 * const pin = sha256Hex(await readFile('svc-store-sqlite-0.1.0.tgz'));
 */
export function sha256Hex(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/**
 * Splits an entry path into its segments relative to the package root, or explains why it is
 * refused: absolute paths, `..`, backslashes and NUL could write outside the install directory.
 */
function entrySegments(path: string): string[] | string {
  if (path.startsWith('/') || /^[A-Za-z]:/.test(path)) return `entry "${path}" is an absolute path`;
  if (path.includes('\\') || path.includes('\0')) return `entry "${path}" contains a backslash or NUL`;
  const segments = path.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) return `entry "${path}" climbs out of the package directory with ".."`;
  return segments;
}

async function parseTar(tar: Buffer): Promise<ReadEntry[] | string> {
  const entries: { entry: ReadEntry; chunks: Buffer[] }[] = [];
  let refusal: string | null = null;
  let sawEnd = false;
  await new Promise<void>((resolve) => {
    const parser = new Parser({
      strict: true,
      onReadEntry: (entry) => {
        const chunks: Buffer[] = [];
        entry.on('data', (c: Buffer) => chunks.push(c));
        entries.push({ entry, chunks });
      },
    });
    // Only oversized metadata is ignored by the parser (no filter is set): a header we did not
    // read could rename the next entry, so refuse rather than guess.
    parser.on('ignoredEntry', (entry: ReadEntry) => {
      refusal ??= `entry "${entry.path}" has oversized metadata`;
    });
    parser.on('error', (error: Error) => {
      refusal ??= `not a valid tar archive (${error.message})`;
      resolve();
    });
    // A tar may stop at an entry boundary without any error; npm's always end with the
    // end-of-archive marker, so without it the archive is truncated.
    parser.on('eof', () => {
      sawEnd = true;
    });
    parser.on('end', () => resolve());
    parser.end(tar);
  });
  if (refusal === null && !sawEnd) refusal = 'the archive is truncated (no end-of-archive marker)';
  const short = entries.find(({ entry, chunks }) => chunks.reduce((n, c) => n + c.length, 0) !== entry.size);
  if (refusal === null && short !== undefined) refusal = `entry "${short.entry.path}" is truncated`;
  if (refusal !== null) return refusal;
  // Attach the collected bodies; ReadEntry is a stream, so keep its data next to it.
  return entries.map(({ entry, chunks }) => Object.assign(entry, { body: Buffer.concat(chunks) }));
}

/**
 * Reads an addon archive (an `npm pack` `.tgz`) wholly in memory and checks it can be
 * installed safely: only regular files and directories (no symlinks, hard links or devices),
 * no path that escapes the package directory, no duplicate or conflicting paths, nothing
 * under `node_modules` (install puts its own link there), one common top folder (npm's
 * `package/`), a `package.json` with a name and version, and a valid `svc-addon.json` that
 * names the same package. Throws {@link AddonArchiveError} otherwise.
 *
 * @example
 * const archive = await readAddonArchive(await readFile(file));
 * archive.files.get('dist/index.js');
 */
export async function readAddonArchive(data: Buffer): Promise<AddonArchive> {
  if (data.length > MAX_ARCHIVE_BYTES) throw new AddonArchiveError('entries', `the archive is larger than ${MAX_ARCHIVE_BYTES} bytes`);
  if (data.length < 2 || data[0] !== 0x1f || data[1] !== 0x8b)
    throw new AddonArchiveError('entries', 'not a gzip-compressed tar archive (.tgz)');
  let tar: Buffer;
  try {
    tar = gunzipSync(data, { maxOutputLength: MAX_UNPACKED_BYTES });
  } catch (error) {
    throw new AddonArchiveError('entries', `cannot decompress the archive (${(error as Error).message})`);
  }
  const parsed = await parseTar(tar);
  if (typeof parsed === 'string') throw new AddonArchiveError('entries', parsed);
  if (parsed.length === 0) throw new AddonArchiveError('entries', 'the archive is empty');

  const files = new Map<string, ArchiveFile>();
  const dirs = new Set<string>();
  let root: string | null = null;
  for (const entry of parsed as (ReadEntry & { body: Buffer })[]) {
    const segments = entrySegments(entry.path);
    if (typeof segments === 'string') throw new AddonArchiveError('entries', segments);
    const isFile = FILE_TYPES.has(entry.type);
    if (!isFile && entry.type !== 'Directory') {
      throw new AddonArchiveError('entries', `entry "${entry.path}" is a ${entry.type}; only regular files and directories are installed`);
    }
    const [top, ...rest] = segments;
    if (top === undefined) throw new AddonArchiveError('entries', `entry "${entry.path}" has an empty path`);
    root ??= top;
    if (top !== root) throw new AddonArchiveError('entries', `entry "${entry.path}" is outside the package folder "${root}/"`);
    if (rest.length === 0) {
      if (isFile) throw new AddonArchiveError('entries', `entry "${entry.path}" is a file where the package folder should be`);
      continue;
    }
    if (rest[0] === 'node_modules') {
      throw new AddonArchiveError('entries', `entry "${entry.path}" is under node_modules, which install reserves for the dependency link`);
    }
    const rel = rest.join('/');
    if (files.has(rel) || (isFile && dirs.has(rel)))
      throw new AddonArchiveError('entries', `entry "${entry.path}" appears twice in the archive`);
    for (let i = 1; i < rest.length; i++) dirs.add(rest.slice(0, i).join('/'));
    if (isFile) files.set(rel, { data: entry.body, mode: (entry.mode ?? 0o644) & 0o777 });
    else dirs.add(rel);
  }
  for (const dir of dirs) {
    if (files.has(dir)) throw new AddonArchiveError('entries', `"${dir}" is both a file and a directory in the archive`);
  }

  const pkgFile = files.get('package.json');
  if (pkgFile === undefined) throw new AddonArchiveError('manifest', 'the archive has no package.json');
  let pkg: Record<string, unknown>;
  try {
    pkg = JSON.parse(pkgFile.data.toString('utf8')) as Record<string, unknown>;
  } catch {
    throw new AddonArchiveError('manifest', 'the package.json in the archive is not valid JSON');
  }
  const { name, version } = pkg;
  if (typeof name !== 'string' || !isSafePackageName(name)) throw new AddonArchiveError('manifest', 'package.json has no valid "name"');
  if (typeof version !== 'string' || !isSafeVersion(version))
    throw new AddonArchiveError('manifest', 'package.json has no valid "version"');
  const dependencies = new Set<string>();
  for (const field of ['dependencies', 'optionalDependencies']) {
    const deps = pkg[field];
    if (typeof deps === 'object' && deps !== null) for (const d of Object.keys(deps)) dependencies.add(d);
  }

  const manifestFile = files.get(ADDON_MANIFEST_FILE);
  if (manifestFile === undefined) {
    throw new AddonArchiveError(
      'manifest',
      `the archive has no ${ADDON_MANIFEST_FILE} at the package root (is it in package.json "files"?)`,
    );
  }
  const parsedManifest = parseAddonManifest(manifestFile.data.toString('utf8'));
  if (parsedManifest.manifest === null)
    throw new AddonArchiveError('manifest', `invalid ${ADDON_MANIFEST_FILE}: ${parsedManifest.problems.join('; ')}`);
  const manifest = parsedManifest.manifest;
  if (manifest.name !== name || manifest.version !== version) {
    throw new AddonArchiveError(
      'manifest',
      `${ADDON_MANIFEST_FILE} describes ${manifest.name}@${manifest.version} but package.json is ${name}@${version}`,
    );
  }
  return { files, dirs, name, version, dependencies, manifest };
}

/**
 * Whether `name` is an npm package name that is safe as a path component (optionally scoped).
 *
 * @example
 * isSafePackageName('svc-store-sqlite'); // true
 */
export function isSafePackageName(name: string): boolean {
  return /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/.test(name) && name.length <= 214;
}

/**
 * Whether `version` is a semver-shaped version that is safe as a path component.
 *
 * @example
 * isSafeVersion('0.1.0'); // true
 */
export function isSafeVersion(version: string): boolean {
  return /^[0-9]+\.[0-9]+\.[0-9]+(?:[-+][0-9A-Za-z.+-]*)?$/.test(version) && !version.includes('..');
}

import type { KeyObject } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { ADDON_MANIFEST_FILE, parsePublicKeyHex } from '@svc/core';
import { PROVIDER_EXPORT, parseAddonManifest } from './manifest.js';
import { type PackedAddon, packAddon } from './pack-addon.js';
import {
  checkPackageSignature,
  type PackageSignature,
  serializePackageSignature,
  signatureFileOf,
  signPackage,
} from './package-signature.js';
import { writeAddonManifest } from './write-addon-manifest.js';

/** Where the project's publisher public key is committed, relative to the repository root (64 hex digits and a newline). */
export const PUBLISHER_KEY_FILE = 'keys/svc-publisher.pub';
/** Where the bundled providers' signatures are committed, relative to the repository root: `<archive file name>.sig`. */
export const PROVIDER_SIGNATURES_DIR = 'signatures';
/** The publisher name the bundled providers' signatures are checked under. */
export const BUNDLED_PUBLISHER = 'svc';

/**
 * The bundled provider packages of a repository: every `packages/provider-*` directory whose
 * `package.json` ships an `svc-addon.json` (in its `files`), sorted. `provider-host`, the
 * service's side of the confinement, is not one.
 *
 * @example
 * providerAddonDirs(root); // ['/repo/packages/provider-oidc', '/repo/packages/provider-webauthn']
 */
export function providerAddonDirs(root: string): string[] {
  const packages = join(root, 'packages');
  return readdirSync(packages)
    .filter((d) => d.startsWith('provider-') && shipsManifest(join(packages, d, 'package.json')))
    .sort()
    .map((d) => join(packages, d));
}

function shipsManifest(packageJson: string): boolean {
  if (!existsSync(packageJson)) return false;
  const files = (JSON.parse(readFileSync(packageJson, 'utf8')) as { files?: unknown }).files;
  return Array.isArray(files) && files.includes(ADDON_MANIFEST_FILE);
}

/**
 * Reads a publisher public key file: 64 hex digits (an Ed25519 public key), optional
 * surrounding whitespace, nothing else.
 *
 * @example
 * const key = readPublisherKeyFile(join(root, PUBLISHER_KEY_FILE));
 */
export function readPublisherKeyFile(file: string): string {
  return parsePublicKeyHex(readFileSync(file, 'utf8').trim(), file);
}

/**
 * Makes sure a provider package carries its `svc-addon.json`: one the package already has must
 * be a valid provider manifest naming it; without one, the default is written (export
 * `svc/auth-provider` → `./dist/index.js` `svcAuthProvider`, no operations, no native module).
 * The entry must be built.
 */
function ensureProviderManifest(dir: string): void {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name: string; version: string };
  const file = join(dir, ADDON_MANIFEST_FILE);
  if (existsSync(file)) {
    const parsed = parseAddonManifest(readFileSync(file, 'utf8'));
    if (parsed.manifest === null) throw new Error(`${file}: ${parsed.problems.join('; ')}`);
    const m = parsed.manifest;
    if (m.name !== pkg.name || m.version !== pkg.version)
      throw new Error(`${file} names ${m.name}@${m.version}, not ${pkg.name}@${pkg.version}`);
    const entry = m.exports[PROVIDER_EXPORT]?.entry;
    if (entry === undefined) throw new Error(`${file} does not declare the ${PROVIDER_EXPORT} export`);
    if (!existsSync(join(dir, entry))) throw new Error(`${dir}: the entry ${entry} is not built; build the package first`);
    return;
  }
  writeAddonManifest(dir, {
    name: pkg.name,
    version: pkg.version,
    exports: { [PROVIDER_EXPORT]: { entry: './dist/index.js', export: 'svcAuthProvider' } },
    operations: [],
    native: null,
  });
}

/** A bundled provider archive and whether its committed signature covers it. */
export interface BuiltProvider extends PackedAddon {
  /** `signed`: the committed signature verifies for these bytes (and was copied beside the archive); `unsigned`: none is committed; `stale`: one is, for other bytes. */
  readonly signature: 'signed' | 'unsigned' | 'stale';
  /** Why it is not `signed`, one line. */
  readonly problem: string | null;
}

/**
 * Packs each provider package (its manifest ensured, see above) into `outDir` and checks its
 * committed signature (`<root>/signatures/<archive>.sig`) against the archive as built and the
 * publisher key `<root>/keys/svc-publisher.pub`. A signature that verifies is copied beside the
 * archive (`<archive>.sig`), so `svc package install` finds it; any other leaves the archive
 * unsigned (a stale `.sig` is removed): installing it is then refused as `unsigned`, never
 * accepted. The packages must be built first.
 *
 * @example
 * const built = await buildProviderAddons(root, 'packages/runtime/addons');
 * for (const p of built) if (p.signature !== 'signed') console.warn(p.problem);
 */
export async function buildProviderAddons(root: string, outDir: string, dirs = providerAddonDirs(root)): Promise<BuiltProvider[]> {
  const built: BuiltProvider[] = [];
  if (dirs.length === 0) return built;
  const publisherKey = readPublisherKeyFile(join(root, PUBLISHER_KEY_FILE));
  for (const dir of dirs) {
    ensureProviderManifest(dir);
    const packed = await packAddon(dir, outDir);
    const committed = join(root, PROVIDER_SIGNATURES_DIR, `${basename(packed.archive)}.sig`);
    const target = signatureFileOf(packed.archive);
    const text = await readFile(committed, 'utf8').catch(() => null);
    const verdict = checkPackageSignature({
      name: packed.name,
      version: packed.version,
      sha256: packed.sha256,
      signatureText: text,
      trusted: { [BUNDLED_PUBLISHER]: publisherKey },
    });
    if ('check' in verdict) {
      await rm(target, { force: true });
      const problem =
        text === null
          ? `${packed.name}@${packed.version}: no committed signature ${committed}; run \`npm run sign-providers\``
          : `${packed.name}@${packed.version}: the committed signature ${committed} does not cover the archive as built (sha256 ${packed.sha256}): ${verdict.problem}; run \`npm run sign-providers\``;
      built.push({ ...packed, signature: text === null ? 'unsigned' : 'stale', problem });
    } else {
      await copyFile(committed, target);
      built.push({ ...packed, signature: 'signed', problem: null });
    }
  }
  return built;
}

/**
 * Packs each bundled provider into a temporary directory and returns one line per provider
 * whose committed signature does not cover the archive as built: the check a test runs so that
 * a changed provider cannot ship with a signature for other bytes. Empty when all are signed.
 *
 * @example
 * assert.deepEqual(await bundledProviderSignatureProblems(root), []);
 */
export async function bundledProviderSignatureProblems(root: string, dirs = providerAddonDirs(root)): Promise<string[]> {
  const tmp = await mkdtemp(join(tmpdir(), 'svc-provider-check-'));
  try {
    return (await buildProviderAddons(root, tmp, dirs)).flatMap((p) => (p.problem === null ? [] : [p.problem]));
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/**
 * Signs each bundled provider as built: packs it into a temporary directory, signs the archive
 * with the publisher's private key (which must be the one of `keys/svc-publisher.pub`), and
 * writes the signature to `<root>/signatures/<archive>.sig`. The private key never touches the
 * repository.
 *
 * @example
 * const signed = await signBundledProviders(root, publisherKeyFromPem(readFileSync(process.env.SVC_PUBLISHER_KEY_FILE)));
 */
export async function signBundledProviders(
  root: string,
  privateKey: KeyObject,
  dirs = providerAddonDirs(root),
): Promise<{ archive: string; signatureFile: string; signature: PackageSignature }[]> {
  const publisherKey = readPublisherKeyFile(join(root, PUBLISHER_KEY_FILE));
  const tmp = await mkdtemp(join(tmpdir(), 'svc-provider-sign-'));
  try {
    const out: { archive: string; signatureFile: string; signature: PackageSignature }[] = [];
    for (const dir of dirs) {
      ensureProviderManifest(dir);
      const packed = await packAddon(dir, tmp);
      const sig = signPackage(packed, privateKey);
      if (sig.publisher_key !== publisherKey) {
        throw new Error(
          `the key given signs as ${sig.publisher_key}, but ${PUBLISHER_KEY_FILE} is ${publisherKey}: use the project's publisher key`,
        );
      }
      const signatureFile = join(resolve(root), PROVIDER_SIGNATURES_DIR, `${basename(packed.archive)}.sig`);
      await mkdir(dirname(signatureFile), { recursive: true });
      await writeFile(signatureFile, serializePackageSignature(sig));
      out.push({ archive: basename(packed.archive), signatureFile, signature: sig });
    }
    return out;
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

import { readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import {
  AddonArchiveError,
  MAX_ARCHIVE_BYTES,
  type PackageSignature,
  PROVIDER_EXPORT,
  readAddonArchive,
  sha256Hex,
  signatureFileOf,
} from '@svc/addons';
import { publisherKeyFromPem, serializePackageSignature, signPackage } from '@svc/addons/build';
import { RuntimeError } from './errors.js';

/**
 * Signs a provider package archive with a publisher's Ed25519 key read from `keyFile` (PKCS#8
 * PEM, refused when group or others may read or write it: a key others can read is a key others
 * may have copied) and writes the detached signature `<ARCHIVE>.sig` beside it, atomically. Only
 * a valid archive that declares the provider export is signed.
 *
 * @example
 * const { signatureFile } = await signProviderPackage('/dist/svc-provider-oidc-0.1.0.tgz', '/keys/publisher.pem');
 */
export async function signProviderPackage(
  archivePath: string,
  keyFile: string,
): Promise<{ readonly signatureFile: string; readonly signature: PackageSignature }> {
  const st = statSync(archivePath, { throwIfNoEntry: false });
  if (!st?.isFile()) throw new RuntimeError(`no archive at ${archivePath}`);
  if (st.size > MAX_ARCHIVE_BYTES) throw new RuntimeError(`the archive ${archivePath} is larger than ${MAX_ARCHIVE_BYTES} bytes`);
  const data = readFileSync(archivePath);
  let archive: Awaited<ReturnType<typeof readAddonArchive>>;
  try {
    archive = await readAddonArchive(data);
  } catch (error) {
    if (error instanceof AddonArchiveError) throw new RuntimeError(`cannot sign ${archivePath}: ${error.message}`, { cause: error });
    throw error;
  }
  if (archive.manifest.exports[PROVIDER_EXPORT] === undefined) {
    throw new RuntimeError(
      `cannot sign ${archivePath}: ${archive.name}@${archive.version} does not declare the ${PROVIDER_EXPORT} export; only provider packages are signed`,
    );
  }
  const keyStat = statSync(keyFile, { throwIfNoEntry: false });
  if (keyStat === undefined) throw new RuntimeError(`no key file at ${keyFile}`);
  // A publisher key others can read is a key others may have copied.
  if ((keyStat.mode & 0o077) !== 0) {
    throw new RuntimeError(
      `the key file ${keyFile} is readable or writable by others (mode ${(keyStat.mode & 0o777).toString(8)}); run chmod 600 on it`,
    );
  }
  let key: ReturnType<typeof publisherKeyFromPem>;
  try {
    key = publisherKeyFromPem(readFileSync(keyFile));
  } catch (error) {
    throw new RuntimeError(
      `cannot use ${keyFile} as a publisher key: ${(error as Error).message}; expected an Ed25519 PKCS#8 PEM (openssl genpkey -algorithm ed25519)`,
    );
  }
  const sig = signPackage({ name: archive.name, version: archive.version, sha256: sha256Hex(data) }, key);
  const out = signatureFileOf(archivePath);
  const tmp = `${out}.tmp-${process.pid}`;
  writeFileSync(tmp, serializePackageSignature(sig), { mode: 0o644 });
  renameSync(tmp, out);
  return { signatureFile: out, signature: sig };
}

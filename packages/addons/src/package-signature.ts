import { createPrivateKey, createPublicKey, type KeyObject, sign, timingSafeEqual } from 'node:crypto';
import { parsePublicKeyHex, publicKeyHexOf, verifyEd25519 } from '@svc/core';

/**
 * A detached signature of an addon archive by a publisher key (docs/providers.md section 1):
 * kept beside the archive as `<archive>.sig`. It names what it signs (package, version, the
 * archive's SHA-256) so a mismatch can be reported plainly, but only the signature over the
 * statement built from the archive actually read is trusted.
 */
export interface PackageSignature {
  readonly schema: 1;
  /** The npm package name. */
  readonly package: string;
  readonly version: string;
  /** The SHA-256 of the archive, 64 lowercase hex digits: the same bytes the pin covers. */
  readonly sha256: string;
  /** The publisher's Ed25519 public key, 64 lowercase hex digits. */
  readonly publisher_key: string;
  /** The Ed25519 signature over {@link signatureStatement}, 128 lowercase hex digits. */
  readonly signature: string;
}

/** The domain-separation tag that starts every signed statement. */
export const PACKAGE_SIGNATURE_DOMAIN = 'svc-package-signature-v1';

/** Who signed a verified package: the `:svc/trusted-publishers` name and the key. */
export interface PackageSigner {
  readonly name: string;
  /** 64 lowercase hex digits. */
  readonly publicKey: string;
}

/**
 * The exact bytes a publisher signs: the UTF-8 of
 * `svc-package-signature-v1\n<name>\n<version>\n<archive sha256 hex>\n`. Domain-separated, so
 * no other svc signature (a challenge, a checkpoint) can be replayed as a package signature.
 *
 * @example
 * const statement = signatureStatement('@svc/provider-oidc', '0.1.0', sha256Hex(archive));
 */
export function signatureStatement(name: string, version: string, sha256: string): Buffer {
  return Buffer.from(`${PACKAGE_SIGNATURE_DOMAIN}\n${name}\n${version}\n${sha256.toLowerCase()}\n`, 'utf8');
}

/**
 * The signature file of an archive: `<archive>.sig`.
 *
 * @example
 * signatureFileOf('/tmp/svc-provider-oidc-0.1.0.tgz'); // '/tmp/svc-provider-oidc-0.1.0.tgz.sig'
 */
export function signatureFileOf(archivePath: string): string {
  return `${archivePath}.sig`;
}

/**
 * Reads a publisher's Ed25519 private key from PEM text (PKCS#8, as `openssl genpkey
 * -algorithm ed25519` writes it). Throws a TypeError for anything else.
 *
 * @example
 * const key = publisherKeyFromPem(readFileSync(keyFile, 'utf8'));
 */
export function publisherKeyFromPem(pem: string | Buffer): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    throw new TypeError('not a PEM private key');
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new TypeError(`an ${key.asymmetricKeyType ?? 'unknown'} key, not an Ed25519 one`);
  return key;
}

/**
 * Signs an archive: returns the signature record for `<archive>.sig`.
 *
 * @example
 * const sig = signPackage({ name, version, sha256: sha256Hex(data) }, publisherKeyFromPem(pem));
 * writeFileSync(signatureFileOf(archive), serializePackageSignature(sig));
 */
export function signPackage(
  archive: { readonly name: string; readonly version: string; readonly sha256: string },
  privateKey: KeyObject,
): PackageSignature {
  const signature = sign(null, signatureStatement(archive.name, archive.version, archive.sha256), privateKey);
  return {
    schema: 1,
    package: archive.name,
    version: archive.version,
    sha256: archive.sha256.toLowerCase(),
    publisher_key: publicKeyHexOf(createPublicKey(privateKey)),
    signature: signature.toString('hex'),
  };
}

/**
 * The signature file's text: fixed key order, two-space indent, final newline.
 *
 * @example
 * writeFileSync(`${archive}.sig`, serializePackageSignature(sig));
 */
export function serializePackageSignature(sig: PackageSignature): string {
  const { schema, package: name, version, sha256, publisher_key, signature } = sig;
  return `${JSON.stringify({ schema, package: name, version, sha256, publisher_key, signature }, null, 2)}\n`;
}

const SIG_KEYS = ['schema', 'package', 'version', 'sha256', 'publisher_key', 'signature'];

/**
 * Parses a signature file. Returns the record, or why it is not one (never throws).
 *
 * @example
 * const parsed = parsePackageSignature(text);
 * if (typeof parsed === 'string') refuse(parsed);
 */
export function parsePackageSignature(text: string): PackageSignature | string {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return 'the signature file is not valid JSON';
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return 'the signature file must hold a JSON object';
  const r = raw as Record<string, unknown>;
  const unknown = Object.keys(r).filter((k) => !SIG_KEYS.includes(k));
  if (unknown.length > 0) return `the signature file has unknown keys ${unknown.join(', ')}`;
  if (r.schema !== 1) return `the signature file's "schema" must be 1, found ${JSON.stringify(r.schema)}`;
  if (typeof r.package !== 'string' || typeof r.version !== 'string') return 'the signature file must name the "package" and its "version"';
  if (typeof r.sha256 !== 'string' || !/^[0-9a-fA-F]{64}$/.test(r.sha256)) return 'the signature file\'s "sha256" must be 64 hex digits';
  if (typeof r.signature !== 'string' || !/^[0-9a-fA-F]{128}$/.test(r.signature))
    return 'the signature file\'s "signature" must be 128 hex digits (an Ed25519 signature)';
  let key: string;
  try {
    key = parsePublicKeyHex(r.publisher_key, 'publisher_key');
  } catch (error) {
    return `the signature file's ${(error as Error).message}`;
  }
  return {
    schema: 1,
    package: r.package,
    version: r.version,
    sha256: r.sha256.toLowerCase(),
    publisher_key: key,
    signature: r.signature.toLowerCase(),
  };
}

/** Why a signature was refused: the check (as `AddonCheck` names it) and one line saying what was wrong. */
export type SignatureRefusal = { readonly check: 'unsigned' | 'bad_signature' | 'signer_not_trusted'; readonly problem: string };

function sameHex(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Checks a package signature against the archive actually read and the trusted publishers:
 * the file is there (`unsigned`), it is a well-formed record for this package, version and
 * archive digest, and its Ed25519 signature over {@link signatureStatement} (built from the
 * archive's own digest, not the file's claim) verifies (`bad_signature`), and its key is one of
 * `trusted` (`signer_not_trusted`). Returns the signer, or the refusal.
 *
 * @example
 * const verdict = checkPackageSignature({ name, version, sha256: sha256Hex(data), signatureText, trusted: config.trustedPublishers });
 * if ('check' in verdict) throw new AddonVerificationError(verdict.check, label, verdict.problem, remedy, 'provider package');
 */
export function checkPackageSignature(opts: {
  readonly name: string;
  readonly version: string;
  /** The SHA-256 of the archive as read, lowercase hex. */
  readonly sha256: string;
  /** The text of `<archive>.sig`, or null when there is none. */
  readonly signatureText: string | null;
  readonly trusted: Readonly<Record<string, string>>;
}): PackageSigner | SignatureRefusal {
  if (opts.signatureText === null) return { check: 'unsigned', problem: 'it has no signature file (<archive>.sig)' };
  const sig = parsePackageSignature(opts.signatureText);
  if (typeof sig === 'string') return { check: 'bad_signature', problem: sig };
  if (sig.package !== opts.name || sig.version !== opts.version) {
    return {
      check: 'bad_signature',
      problem: `the signature is for ${sig.package}@${sig.version}, not this archive of ${opts.name}@${opts.version}`,
    };
  }
  if (!sameHex(sig.sha256, opts.sha256)) {
    return { check: 'bad_signature', problem: `the signature covers an archive with SHA-256 ${sig.sha256}, not this one (${opts.sha256})` };
  }
  const statement = signatureStatement(opts.name, opts.version, opts.sha256);
  if (!verifyEd25519(sig.publisher_key, statement, Buffer.from(sig.signature, 'hex'))) {
    return { check: 'bad_signature', problem: `the Ed25519 signature does not verify with the key ${sig.publisher_key} it names` };
  }
  const trusted = Object.entries(opts.trusted).find(([, key]) => sameHex(key, sig.publisher_key));
  if (trusted === undefined) {
    return {
      check: 'signer_not_trusted',
      problem: `it is signed by ${sig.publisher_key}, which is not a publisher in :svc/trusted-publishers (${Object.keys(opts.trusted).join(', ') || 'none'})`,
    };
  }
  return { name: trusted[0], publicKey: sig.publisher_key };
}

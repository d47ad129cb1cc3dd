import { readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { AddonArchiveError, MAX_ARCHIVE_BYTES, PROVIDER_EXPORT, readAddonArchive, sha256Hex, signatureFileOf } from '@svc/addons';
import { publisherKeyFromPem, serializePackageSignature, signPackage } from '@svc/addons/build';
import { parseCommandArgs, requireOption } from '../args.js';
import { CliError } from '../cli-error.js';
import type { Command } from '../command.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc package sign',
  summary: "Sign a provider package archive with a publisher's Ed25519 key: writes <ARCHIVE>.sig.",
  usage: 'svc package sign <ARCHIVE> --key <PEM_FILE> [--json]',
  help: [
    '<ARCHIVE>             the provider package archive (.tgz) to sign; it must declare the svc/auth-provider export',
    "--key PEM_FILE        the publisher's Ed25519 private key (PKCS#8 PEM, owner-only); read from the file, never from the command line",
    '--json                print {"signature_file","package","version","sha256","publisher_key"}',
  ],
  options: { key: { type: 'string' }, json: { type: 'boolean' } },
  positionals: ['ARCHIVE'],
} as const;

/**
 * `svc package sign <ARCHIVE> --key <PEM_FILE>`: signs the statement
 * `svc-package-signature-v1\n<name>\n<version>\n<archive sha256>\n` with the publisher's key and
 * writes the detached signature `<ARCHIVE>.sig` (JSON) beside the archive. Only a valid provider
 * package archive is signed; the key file must be owner-only.
 *
 * @example
 * await packageSign.run(['svc-provider-oidc-0.1.0.tgz', '--key', '/work/keys/svc-publisher.pem']);
 */
export const packageSign: Command = {
  path: ['package', 'sign'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const archivePath = resolve(args.positionals[0] as string);
    const keyFile = resolve(requireOption(args.values.key, '--key PEM_FILE', spec.name));
    const st = statSync(archivePath, { throwIfNoEntry: false });
    if (!st?.isFile()) throw new CliError(`no archive at ${archivePath}`);
    if (st.size > MAX_ARCHIVE_BYTES) throw new CliError(`the archive ${archivePath} is larger than ${MAX_ARCHIVE_BYTES} bytes`);
    const data = readFileSync(archivePath);
    let archive: Awaited<ReturnType<typeof readAddonArchive>>;
    try {
      archive = await readAddonArchive(data);
    } catch (error) {
      if (error instanceof AddonArchiveError) throw new CliError(`cannot sign ${archivePath}: ${error.message}`, { cause: error });
      throw error;
    }
    if (archive.manifest.exports[PROVIDER_EXPORT] === undefined) {
      throw new CliError(
        `cannot sign ${archivePath}: ${archive.name}@${archive.version} does not declare the ${PROVIDER_EXPORT} export; only provider packages are signed`,
      );
    }
    const keyStat = statSync(keyFile, { throwIfNoEntry: false });
    if (keyStat === undefined) throw new CliError(`no key file at ${keyFile}`);
    // A publisher key others can read is a key others may have copied.
    if ((keyStat.mode & 0o077) !== 0) {
      throw new CliError(
        `the key file ${keyFile} is readable or writable by others (mode ${(keyStat.mode & 0o777).toString(8)}); run chmod 600 on it`,
      );
    }
    let key: ReturnType<typeof publisherKeyFromPem>;
    try {
      key = publisherKeyFromPem(readFileSync(keyFile));
    } catch (error) {
      throw new CliError(
        `cannot use ${keyFile} as a publisher key: ${(error as Error).message}; expected an Ed25519 PKCS#8 PEM (openssl genpkey -algorithm ed25519)`,
      );
    }
    const sig = signPackage({ name: archive.name, version: archive.version, sha256: sha256Hex(data) }, key);
    const out = signatureFileOf(archivePath);
    const tmp = `${out}.tmp-${process.pid}`;
    writeFileSync(tmp, serializePackageSignature(sig), { mode: 0o644 });
    renameSync(tmp, out);
    if (args.values.json === true) {
      printJson({ signature_file: out, package: sig.package, version: sig.version, sha256: sig.sha256, publisher_key: sig.publisher_key });
    } else {
      printText(`signed ${sig.package}@${sig.version} (sha256 ${sig.sha256})`);
      printText(`  signature:     ${out}`);
      printText(`  publisher key: ${sig.publisher_key}`);
      printText(`install it with the signature beside the archive; the project must trust this key in :svc/trusted-publishers`);
    }
    return 0;
  },
};

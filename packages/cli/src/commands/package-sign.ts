import { resolve } from 'node:path';
import { signProviderPackage } from '@svc/runtime';
import { parseCommandArgs, requireOption } from '../args.js';
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
    const keyFile = resolve(requireOption(args.values.key, '--key PEM_FILE', spec.name));
    const { signatureFile: out, signature: sig } = await signProviderPackage(resolve(args.positionals[0] as string), keyFile);
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

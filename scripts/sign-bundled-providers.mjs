#!/usr/bin/env node
// Signs the bundled provider packages (packages/provider-*) with the project's publisher key:
// `SVC_PUBLISHER_KEY_FILE=/path/to/svc-publisher.pem npm run sign-providers`. Each package is
// packed exactly as `npm run build` packs it, and the signature of that archive is written to
// signatures/<archive>.tgz.sig (commit it). The key must be the private half of
// keys/svc-publisher.pub; it is read from the file the variable names and never enters the
// repository.
import { readFileSync, statSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { publisherKeyFromPem, signBundledProviders } from '../packages/addons/dist/build.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const keyFile = process.env.SVC_PUBLISHER_KEY_FILE;
if (keyFile === undefined || keyFile === '') {
  process.stderr.write('sign-providers: set SVC_PUBLISHER_KEY_FILE to the publisher private key (PKCS#8 PEM, owner-only)\n');
  process.exit(2);
}
try {
  if ((statSync(keyFile).mode & 0o077) !== 0) throw new Error(`${keyFile} is readable or writable by others; run chmod 600 on it`);
  const signed = await signBundledProviders(root, publisherKeyFromPem(readFileSync(keyFile)));
  if (signed.length === 0) process.stdout.write('sign-providers: no provider package under packages/provider-*\n');
  for (const s of signed) {
    process.stdout.write(`${s.signature.sha256}  ${s.archive}  signed -> ${relative(root, s.signatureFile)}\n`);
  }
} catch (error) {
  process.stderr.write(`sign-providers: ${error.message}\n`);
  process.exit(1);
}

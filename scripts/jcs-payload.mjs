// For the README walkthrough's outside check of signed diagnostics: writes the RFC 8785 (JCS)
// canonical form of a diagnostics document's payload, its signature and the node's public key
// (DER) as files openssl reads. The canonical form comes from the independent `canonicalize`
// package (wherever npm placed it), not from this project's own code.
//
//   node scripts/jcs-payload.mjs DIAG_JSON OUT_DIR   (prints the start of the canonical payload)
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [diagFile, outDir] = process.argv.slice(2);
if (diagFile === undefined || outDir === undefined) {
  console.error('usage: node scripts/jcs-payload.mjs DIAG_JSON OUT_DIR');
  process.exit(2);
}
const root = new URL('..', import.meta.url).pathname;
const dir = ['packages/server/node_modules/canonicalize', 'node_modules/canonicalize'].map((d) => join(root, d)).find((d) => existsSync(d));
if (dir === undefined) {
  console.error('jcs-payload: the canonicalize package is not installed; run npm ci');
  process.exit(1);
}
const entry = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).exports['.'].import;
const { default: canonicalize } = await import(pathToFileURL(join(dir, entry)).href);
const diag = JSON.parse(readFileSync(diagFile, 'utf8'));
const payload = canonicalize(diag.payload);
writeFileSync(join(outDir, 'payload.json'), payload);
writeFileSync(join(outDir, 'sig.bin'), Buffer.from(diag.signature, 'hex'));
// An Ed25519 SubjectPublicKeyInfo is this fixed 12-byte prefix and the 32-byte key.
writeFileSync(
  join(outDir, 'pub.der'),
  Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), Buffer.from(diag.public_key, 'hex')]),
);
console.log(`${payload.slice(0, 300)}…`);

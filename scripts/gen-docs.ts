import { readFileSync, writeFileSync } from 'node:fs';
import { renderOpenApiDocument } from '@svc/server';
import { GENERATED_FILES, regenerated } from './docs.js';

const root = new URL('../', import.meta.url);
for (const path of GENERATED_FILES) {
  const url = new URL(path, root);
  const before = readFileSync(url, 'utf8');
  const after = regenerated(path, before);
  if (after !== before) {
    writeFileSync(url, after);
    console.log(`updated ${path}`);
  }
}

// The OpenAPI document, generated from the route schemas (the server package's build: run `npm run build` first).
const openapi = new URL('docs/openapi.json', root);
const openapiAfter = await renderOpenApiDocument();
let openapiBefore = '';
try {
  openapiBefore = readFileSync(openapi, 'utf8');
} catch {
  // first run: no document yet
}
if (openapiAfter !== openapiBefore) {
  writeFileSync(openapi, openapiAfter);
  console.log('updated docs/openapi.json');
}

// The PostgreSQL project template of docs/docker pins the store archive this build bundles
// (run `npm run build` first): a changed store package changes the pin.
const sums = readFileSync(new URL('packages/runtime/addons/SHA256SUMS', root), 'utf8');
const pgSha = /^([0-9a-f]{64})\s+svc-store-postgres-[^\s]+\.tgz$/m.exec(sums)?.[1];
if (pgSha === undefined) throw new Error('packages/runtime/addons/SHA256SUMS lists no svc-store-postgres archive; run npm run build');
const template = new URL('docs/docker/project.postgres.edn', root);
const ednBefore = readFileSync(template, 'utf8');
const ednAfter = ednBefore.replace(/(\{"svc-store-postgres" \{:version "[^"]+"\s+:sha256 ")[0-9a-f]{64}"/, `$1${pgSha}"`);
if (ednAfter !== ednBefore) {
  writeFileSync(template, ednAfter);
  console.log('updated docs/docker/project.postgres.edn');
}

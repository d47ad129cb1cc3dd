import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ERROR_CODES, FAILURE_CODES, HTTP_ERROR_CLASSES } from '@svc/core';
import { GENERATED_FILES, regenerated } from '../../../scripts/docs.js';

const root = new URL('../../../', import.meta.url);

test('the generated parts of docs/ are in step with the code (run `npm run docs`)', () => {
  for (const path of GENERATED_FILES) {
    const doc = readFileSync(new URL(path, root), 'utf8');
    assert.equal(doc, regenerated(path, doc), `${path} is out of date`);
  }
});

test('docs/errors.md lists every error code with its status', () => {
  const doc = readFileSync(new URL('docs/errors.md', root), 'utf8');
  for (const [code, e] of Object.entries(ERROR_CODES)) assert.match(doc, new RegExp(`\\| ${e.status} \\| \`${code}\` \\|`));
});

test('docs/errors.md lists every failure code with its exit code', () => {
  const doc = readFileSync(new URL('docs/errors.md', root), 'utf8');
  for (const [code, f] of Object.entries(FAILURE_CODES)) assert.match(doc, new RegExp(`\\| \`${code}\` \\| ${f.exit} \\|`));
});

/** Every `class X extends …Error` of every package's sources, with the file that declares it. */
function errorClasses(): Map<string, string> {
  const found = new Map<string, string>();
  const packages = new URL('packages/', root).pathname;
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) {
        for (const m of readFileSync(path, 'utf8').matchAll(/\bclass (\w+) extends (\w*Error)\b/g)) found.set(m[1] as string, path);
      }
    }
  };
  // Provider packages (provider-webauthn, provider-oidc) run confined in their own process:
  // their errors never reach the service, which sees only the host's ProviderError.
  for (const pkg of readdirSync(packages)) if (!pkg.startsWith('provider-') || pkg === 'provider-host') walk(join(packages, pkg, 'src'));
  return found;
}

test('every error class of every package carries a registered code', () => {
  const classes = errorClasses();
  assert.ok(classes.size >= 15, `found only ${classes.size} error classes`);
  const registered = [...Object.values(FAILURE_CODES).map((f) => f.raisedBy), ...HTTP_ERROR_CLASSES].map((s) => s.split(' ')[0]);
  for (const [name, file] of classes) assert.ok(registered.includes(name), `${name} (${file}) has no code in core's registry`);
  for (const [code, f] of Object.entries(FAILURE_CODES)) {
    const name = f.raisedBy.split(' ')[0] as string;
    const file = classes.get(name);
    assert.ok(file !== undefined, `${code} names ${name}, which no package declares`);
    assert.ok(readFileSync(file, 'utf8').includes(`'${code}'`), `${name} in ${file} never sets the code ${code}`);
  }
});

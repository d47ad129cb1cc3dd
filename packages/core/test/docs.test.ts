import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ERROR_CODES } from '@svc/core';
import { FAILURE_CODES, FAILURE_TABLES, GENERATED_FILES, HTTP_ERROR_CLASS_NAMES, regenerated } from '../../../scripts/docs.js';

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

/** Every source file of the package that holds `file` (`packages/<pkg>/src/**`). */
function packageSources(file: string): string[] {
  const src = file.slice(0, file.indexOf('/src/') + '/src'.length);
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) out.push(path);
    }
  };
  walk(src);
  return out;
}

/** The package directory of a table's package name (`@svc/cli (audit shipping)` → `cli`). */
function packageDir(name: string): string {
  return (name.split(' ')[0] as string).replace(/^@svc\//, '').replace(/^svc-/, '');
}

// A code in exactly one package's table, the table of the package that declares the class.
test('every error class of every package carries a registered code', () => {
  const classes = errorClasses();
  assert.ok(classes.size >= 15, `found only ${classes.size} error classes`);
  const classOf = (raisedBy: string) => raisedBy.split(' ')[0] as string;
  const httpClasses = HTTP_ERROR_CLASS_NAMES.map(classOf);
  for (const [name, file] of classes) {
    const tables = FAILURE_TABLES.filter((t) => Object.values(t.table).some((e) => classOf(e.raisedBy) === name));
    if (httpClasses.includes(name)) {
      assert.equal(tables.length, 0, `${name} (${file}) carries an HTTP code and is also in ${tables.map((t) => t.name).join(', ')}`);
      continue;
    }
    assert.equal(
      tables.length,
      1,
      `${name} (${file}) is in ${tables.length} tables (${tables.map((t) => t.name).join(', ')}); expected exactly one`,
    );
    const owner = tables[0]?.name as string;
    assert.ok(
      file.includes(`/packages/${packageDir(owner)}/src/`),
      `${name} is declared in ${file}, but its code is in the table of ${owner}`,
    );
  }
  const seen = new Map<string, string>();
  for (const { name: pkg, table } of FAILURE_TABLES) {
    for (const [code, f] of Object.entries(table)) {
      assert.ok(!seen.has(code), `${code} is in the tables of both ${seen.get(code)} and ${pkg}`);
      seen.set(code, pkg);
      const name = classOf(f.raisedBy);
      const file = classes.get(name);
      assert.ok(file !== undefined, `${code} (${pkg}) names ${name}, which no package declares`);
      // A class with one code sets it itself; a class of many (RuntimeError) is given it where it is thrown, in its package.
      const setters = [file, ...packageSources(file)];
      assert.ok(
        setters.some((f) => readFileSync(f, 'utf8').includes(`'${code}'`)),
        `neither ${name} in ${file} nor any other source of its package sets the code ${code}`,
      );
    }
  }
  assert.equal(seen.size, Object.keys(FAILURE_CODES).length);
});

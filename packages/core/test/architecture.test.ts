import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';

const root = new URL('../../../', import.meta.url).pathname;

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (name.endsWith('.ts')) out.push(path);
  }
  return out;
}

function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [
    ...text.matchAll(/(?:^|\n)\s*(?:import|export)[^'";]*?from\s*['"]([^'"]+)['"]/g),
    ...text.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g),
  ].map((m) => m[1] as string);
}

function packageImports(pkg: string): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const file of sources(join(root, 'packages', pkg, 'src'))) {
    for (const spec of importsOf(file)) {
      if (spec.startsWith('.')) continue;
      const list = found.get(spec) ?? [];
      list.push(relative(root, file));
      found.set(spec, list);
    }
  }
  return found;
}

/** Packages core may import for types only (erased at build, so core keeps zero runtime dependencies). */
const CORE_TYPE_ONLY_IMPORTS = ['json-schema-to-ts'];

/** Whether every import of `spec` in `file` is `import type` (verbatimModuleSyntax erases exactly those). */
function importsOnlyTypes(file: string, spec: string): boolean {
  const text = readFileSync(file, 'utf8');
  const all = [...text.matchAll(/(?:^|\n)\s*(import|export)(\s+type)?\s[^'";]*?from\s*['"]([^'"]+)['"]/g)].filter((m) => m[3] === spec);
  return all.length > 0 && all.every((m) => m[1] === 'import' && m[2] !== undefined);
}

test('core is pure: it imports only node:crypto, no framework, driver or node:http', () => {
  for (const [spec, files] of packageImports('core')) {
    if (CORE_TYPE_ONLY_IMPORTS.includes(spec) && files.every((f) => importsOnlyTypes(join(root, f), spec))) continue;
    assert.ok(spec === 'node:crypto', `core imports ${spec} in ${files.join(', ')}`);
  }
});

test('dependencies point inward: stores, server and client never import the CLI or each other', () => {
  const rules: Record<string, RegExp> = {
    'store-sqlite': /^(@svc\/(server|cli|client)|svc-store-postgres)$/,
    'store-testkit': /^(@svc\/(server|cli|client)|svc-store-)/,
    server: /^(@svc\/(cli|client)|svc-store-)/,
    client: /^(@svc\/(server|cli)|svc-store-|fastify|better-sqlite3|pg)$/,
  };
  for (const [pkg, forbidden] of Object.entries(rules)) {
    for (const [spec, files] of packageImports(pkg)) {
      assert.ok(!forbidden.test(spec), `${pkg} imports ${spec} in ${files.join(', ')}`);
    }
  }
});

test('the client imports only the core (and Node built-ins)', () => {
  for (const [spec, files] of packageImports('client')) {
    assert.ok(spec === '@svc/core' || spec.startsWith('node:'), `client imports ${spec} in ${files.join(', ')}`);
  }
});

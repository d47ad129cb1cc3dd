import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

// `npm test` must pass on a clone with nothing beside it: every file a test, benchmark or
// script names by a path relative to itself (`new URL('…', import.meta.url)`) lies inside the
// repository, and none names this machine's /work/ tree (where the shared files sit) directly.
const root = fileURLToPath(new URL('../../../', import.meta.url));

function files(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...files(path));
    else if (/\.(ts|mjs|js|sh)$/.test(name)) out.push(path);
  }
  return out;
}

function readers(): string[] {
  const out = [...files(join(root, 'scripts')), ...files(join(root, 'bench'))];
  for (const pkg of readdirSync(join(root, 'packages'))) {
    const dir = join(root, 'packages', pkg, 'test');
    if (existsSync(dir)) out.push(...files(dir));
  }
  return out;
}

test('no test, benchmark or script reads a file outside the repository (such as the shared vectors folder beside the checkout)', () => {
  const outside: string[] = [];
  let relativeRefs = 0;
  for (const file of readers()) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/new URL\(\s*'([^']+)'\s*,\s*import\.meta\.url\s*\)/g)) {
      const target = resolve(dirname(file), m[1] as string);
      relativeRefs++;
      if (target !== root.replace(/\/$/, '') && !target.startsWith(root.endsWith(sep) ? root : root + sep)) {
        outside.push(`${relative(root, file)}: ${m[1]} -> ${target}`);
      }
    }
    for (const m of text.matchAll(/['"`](\/work\/[^'"`\s]*)/g)) {
      outside.push(`${relative(root, file)}: absolute path ${m[1]}`);
    }
  }
  assert.ok(relativeRefs > 0, 'the scan found the relative references it is meant to check');
  assert.deepEqual(outside, [], `files read from outside the repository:\n${outside.join('\n')}`);
});

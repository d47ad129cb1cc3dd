import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { realpath } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { dependencyClosure } from '../src/dependency-lock.js';

/** A package `name` under `root/node_modules`, with `exports` and its own dependencies. */
function pkg(root: string, name: string, extra: Record<string, unknown>): string {
  const dir = join(root, 'node_modules', name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', ...extra }));
  writeFileSync(join(dir, 'index.js'), 'module.exports = 1;\n');
  return dir;
}

test('a dependency whose exports map hides its package.json is still in the closure (pinned at install, checked at load, readable when confined)', async () => {
  const root = mkdtempSync(join(tmpdir(), 'svc-closure-'));
  try {
    // Like @simplewebauthn/server: `exports` names only its entry points, not ./package.json.
    const hidden = pkg(root, 'hides-manifest', { exports: { '.': './index.js' }, dependencies: { 'plain-dep': '1.0.0' } });
    const plain = pkg(root, 'plain-dep', {});
    const scoped = pkg(root, '@scope/also-hidden', { exports: { '.': { default: './index.js' } } });
    const closure = await dependencyClosure(root, ['hides-manifest', '@scope/also-hidden', 'not-installed']);
    assert.deepEqual(Object.keys(closure).sort(), [await realpath(hidden), await realpath(plain), await realpath(scoped)].sort());
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

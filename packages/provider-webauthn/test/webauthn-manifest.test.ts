import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

const dir = new URL('../', import.meta.url);

// The manifest is written by hand until the addon manifest validator accepts the
// svc/auth-provider export (with signature verification, branch prov-sign): this keeps it honest.
test('svc-addon.json names this package and version, and its svc/auth-provider entry exports the provider', async () => {
  const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { name: string; version: string; files: string[] };
  const manifest = JSON.parse(readFileSync(new URL('svc-addon.json', dir), 'utf8')) as {
    schema: number;
    name: string;
    version: string;
    exports: Record<string, { entry: string; export: string }>;
    operations: string[];
    native: null;
  };
  assert.equal(manifest.schema, 1);
  assert.equal(manifest.name, pkg.name);
  assert.equal(manifest.version, pkg.version);
  assert.deepEqual(Object.keys(manifest.exports), ['svc/auth-provider']);
  assert.deepEqual(manifest.operations, []);
  assert.equal(manifest.native, null);
  assert.ok(pkg.files.includes('svc-addon.json'));
  const exp = manifest.exports['svc/auth-provider'];
  assert.ok(exp !== undefined);
  const mod = (await import(new URL(exp.entry, dir).href)) as Record<string, { contractVersion?: unknown; kind?: unknown }>;
  assert.equal(mod[exp.export]?.contractVersion, 1);
  assert.equal(mod[exp.export]?.kind, 'webauthn');
});

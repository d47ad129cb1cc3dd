import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ADDON_MANIFEST_FILE } from '@svc/core';
import { STORE_CONTRACT_VERSION } from '@svc/core/store';
import { type AddonManifest, parseAddonManifest, serializeAddonManifest } from './manifest.js';

/** What an addon author states; the ABI is filled in from the build environment. */
export type AddonManifestInput = Omit<AddonManifest, 'schema' | 'abi'>;

/**
 * Writes `<packageDir>/svc-addon.json`, filling the ABI from the running process (the one that
 * built, or will load, the native module) and core's `STORE_CONTRACT_VERSION`. Refuses a
 * manifest whose name or version differ from the package's `package.json`, or whose export
 * entry file does not exist yet (build the package first).
 *
 * @example
 * writeAddonManifest('packages/store-postgres', {
 *   name: 'svc-store-postgres', version: '0.1.0',
 *   exports: { 'svc/store': { entry: './dist/index.js', export: 'svcStore' } },
 *   operations: [...STORE_OPERATIONS], native: null,
 * });
 */
export function writeAddonManifest(packageDir: string, m: AddonManifestInput): AddonManifest {
  const pkg = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
  if (pkg.name !== m.name || pkg.version !== m.version) {
    throw new TypeError(
      `the manifest names ${m.name}@${m.version} but ${packageDir}/package.json is ${String(pkg.name)}@${String(pkg.version)}`,
    );
  }
  const manifest: AddonManifest = {
    schema: 1,
    name: m.name,
    version: m.version,
    exports: m.exports,
    operations: [...m.operations],
    native: m.native,
    // A pure JavaScript addon runs on any Node; only a native module ties it to one ABI.
    abi: {
      store_contract: STORE_CONTRACT_VERSION,
      node_module_version: m.native === null ? null : process.versions.modules,
      napi: m.native === null ? null : Number(process.versions.napi),
    },
  };
  const text = serializeAddonManifest(manifest);
  const parsed = parseAddonManifest(text);
  if (parsed.manifest === null) throw new TypeError(`invalid addon manifest: ${parsed.problems.join('; ')}`);
  for (const [key, exp] of Object.entries(m.exports)) {
    if (!existsSync(join(packageDir, exp.entry)))
      throw new TypeError(`export ${key} entry ${exp.entry} does not exist in ${packageDir}; build it first`);
  }
  writeFileSync(join(packageDir, ADDON_MANIFEST_FILE), text);
  return parsed.manifest;
}

import { pathToFileURL } from 'node:url';
import { STORE_CONTRACT_VERSION, STORE_OPERATIONS, type StoreAddonExport } from '@svc/core/store';
import { AddonVerificationError } from './errors.js';
import type { VerifiedAddon } from './verify-addon.js';

/**
 * Imports a verified store addon and returns its `:svc/store` export. The export itself is
 * checked again (contract version, operation set, an `open` function): the manifest is what
 * the addon claims, the export is what will actually run.
 *
 * @example
 * const storeExport = await loadStoreAddon(await verifyAddon({ packagesDir, name, pin, exportName: 'svc/store', dependenciesDir }));
 * const store = await storeExport.open(module.config, ctx);
 */
export async function loadStoreAddon(verified: VerifiedAddon): Promise<StoreAddonExport> {
  const { manifest } = verified;
  const label = `${manifest.name}@${manifest.version}`;
  const remedy = `install a build of ${manifest.name} made for this svc with \`svc package install\``;
  const declared = manifest.exports['svc/store'];
  if (verified.exportKey !== 'svc/store' || declared === undefined) {
    throw new AddonVerificationError('export', label, 'it does not export :svc/store', 'activate a store package for :auth/store');
  }
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(verified.entry).href)) as Record<string, unknown>;
  } catch (error) {
    throw new AddonVerificationError('export', label, `importing ${declared.entry} failed (${(error as Error).message})`, remedy);
  }
  const value = mod[declared.export] as Partial<StoreAddonExport> | undefined;
  if (typeof value !== 'object' || value === null || typeof value.open !== 'function') {
    throw new AddonVerificationError(
      'export',
      label,
      `${declared.entry} has no store export "${declared.export}" with an open function`,
      remedy,
    );
  }
  if (value.contractVersion !== STORE_CONTRACT_VERSION) {
    throw new AddonVerificationError(
      'export',
      label,
      `its export implements store contract ${String(value.contractVersion)}, this svc implements ${STORE_CONTRACT_VERSION}`,
      remedy,
    );
  }
  const ops = Array.isArray(value.operations) ? new Set(value.operations) : new Set();
  if (ops.size !== STORE_OPERATIONS.length || !STORE_OPERATIONS.every((op) => ops.has(op))) {
    throw new AddonVerificationError('export', label, "its export's operation set differs from this svc's store contract", remedy);
  }
  return value as StoreAddonExport;
}

import { pathToFileURL } from 'node:url';
import { AddonVerificationError } from './errors.js';
import type { VerifiedAddon } from './verify-addon.js';

/** The `svc/app` export of a verified application package: a Fastify plugin, typed loosely so this package needs no Fastify. */
export type AppPluginExport = (instance: never, opts: never, done?: never) => unknown;

/** A loaded application package: its `name@version` and the plugin it exports. */
export interface LoadedAppAddon {
  readonly name: string;
  readonly plugin: AppPluginExport;
}

/**
 * Imports a verified application package (`verifyAddon` with `exportName: 'svc/app'`: pin,
 * archive, installed files, dependencies and manifest checked before any of its code runs) and
 * returns its `svc/app` export, which must be a plain Fastify plugin function: one marked with
 * fastify-plugin's `skip-override` asks to share the gateway's own context and is refused.
 *
 * @example
 * const app = await loadAppAddon(await verifyAddon({ packagesDir, name, pin, exportName: 'svc/app', dependenciesDir }));
 * attach: moduleAttach([{ name: app.name, plugin: app.plugin }]);
 */
export async function loadAppAddon(verified: VerifiedAddon): Promise<LoadedAppAddon> {
  const { manifest } = verified;
  const label = `${manifest.name}@${manifest.version}`;
  const fail = (problem: string, remedy: string): never => {
    throw new AddonVerificationError('export', label, problem, remedy, 'application package');
  };
  const declared = manifest.exports['svc/app'];
  if (verified.exportKey !== 'svc/app' || declared === undefined) {
    return fail('it does not export :svc/app', 'activate :svc/app only for an application package');
  }
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(verified.entry).href)) as Record<string, unknown>;
  } catch (error) {
    return fail(`importing ${declared.entry} failed (${(error as Error).message})`, 'fix the package and install it again');
  }
  const plugin = mod[declared.export];
  if (typeof plugin !== 'function') {
    return fail(
      `${declared.entry} has no Fastify plugin function "${declared.export}"`,
      'export the plugin under the name svc-addon.json gives',
    );
  }
  if ((plugin as unknown as Record<symbol, unknown>)[Symbol.for('skip-override')] === true) {
    return fail(
      `its :svc/app export "${declared.export}" is marked skip-override (fastify-plugin), which asks to share the gateway's own context`,
      'export the plain plugin, not the fastify-plugin wrapper',
    );
  }
  return { name: label, plugin: plugin as AppPluginExport };
}

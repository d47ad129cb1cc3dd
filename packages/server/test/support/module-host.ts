import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type AppModule,
  type GatewayAttach,
  type ModuleHost,
  moduleHostAttach,
  startModuleHost,
  type UpstreamTimeouts,
} from '../../src/index.js';

/** The application module fixtures (each a package directory with `index.js` exporting `svcApp`). */
export const APP_FIXTURES = fileURLToPath(new URL('../fixtures/app-modules/', import.meta.url));

/** fastify-plugin, which the hostile fixtures import: the confined process may read it, as an installed package's dependency. */
const FASTIFY_PLUGIN_DIR = realpathSync(dirname(createRequire(import.meta.url).resolve('fastify-plugin/package.json')));

/**
 * The fixture package `name` (or the package directory `dir`) as an application module.
 *
 * @example
 * const host = await startModuleHost({ modules: [fixtureModule('good-app')] });
 */
export function fixtureModule(name: string, dir: string = join(APP_FIXTURES, name)): AppModule {
  return {
    name: `${name}@1.0.0`,
    packageDir: dir,
    entry: join(dir, 'index.js'),
    exportName: 'svcApp',
    dependencyDirs: [FASTIFY_PLUGIN_DIR],
  };
}

/** Writes a one-file application package (ESM `index.js` with `source`) under `root` and returns it as a module. */
export function writeModulePackage(root: string, name: string, source: string): AppModule {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', type: 'module' }));
  writeFileSync(join(dir, 'index.js'), source);
  return fixtureModule(name, dir);
}

/** The modules behind their confined process, as an attach, with the host and how to stop it. */
export async function moduleModeAttach(
  modules: readonly AppModule[],
  timeouts?: UpstreamTimeouts,
): Promise<{ readonly attach: GatewayAttach; readonly host: ModuleHost; close(): Promise<void> }> {
  const host = await startModuleHost({ modules });
  return { attach: moduleHostAttach(host, timeouts), host, close: () => host.close() };
}

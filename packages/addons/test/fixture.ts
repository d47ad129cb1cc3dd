import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { gzipSync } from 'node:zlib';
import { ADDON_MANIFEST_FILE } from '@svc/core';
import { STORE_CONTRACT_VERSION, STORE_OPERATIONS } from '@svc/core/store';
import { Header } from 'tar';
import { type PackedAddon, packAddon } from '../src/build.js';
import { type AddonManifest, serializeAddonManifest } from '../src/index.js';

/** The repository's node_modules: holds better-sqlite3 with its built binding, like the CLI's. */
export const DEPENDENCIES_DIR = join(import.meta.dirname, '..', '..', '..', 'node_modules');

const made: string[] = [];
// Every test file imports this module, so one hook per file removes what its tests made.
after(async () => {
  await Promise.all(made.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

/** A fresh temporary directory, removed when the test file ends. */
export async function tempDir(prefix = 'svc-addons-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

export interface FixtureOptions {
  readonly name?: string;
  readonly version?: string;
  readonly operations?: readonly string[];
  readonly native?: AddonManifest['native'];
  readonly abi?: Partial<AddonManifest['abi']>;
  /** Omit svc-addon.json from the package. */
  readonly noManifest?: boolean;
}

/**
 * Writes a small store addon package (package.json, dist/index.js exporting `svcStore`,
 * svc-addon.json) into a new temporary directory and returns the directory.
 */
export async function writeFixtureAddon(opts: FixtureOptions = {}): Promise<string> {
  const dir = await tempDir('svc-fixture-');
  const name = opts.name ?? 'svc-store-fixture';
  const version = opts.version ?? '0.1.0';
  const native = opts.native ?? null;
  const operations = [...(opts.operations ?? STORE_OPERATIONS)];
  await mkdir(join(dir, 'dist'));
  await writeFile(
    join(dir, 'package.json'),
    `${JSON.stringify(
      {
        name,
        version,
        type: 'module',
        main: './dist/index.js',
        files: ['dist', ADDON_MANIFEST_FILE],
        dependencies: native === null ? {} : { [native.package]: '*' },
      },
      null,
      2,
    )}\n`,
  );
  await writeFile(
    join(dir, 'dist', 'index.js'),
    [
      `export const svcStore = {`,
      `  contractVersion: ${STORE_CONTRACT_VERSION},`,
      `  operations: ${JSON.stringify(operations)},`,
      `  async open() { throw new Error('the fixture store does not open'); },`,
      `};`,
      '',
    ].join('\n'),
  );
  await writeFile(join(dir, 'dist', 'helper.js'), 'export const helper = 1;\n');
  if (opts.noManifest !== true) {
    const manifest: AddonManifest = {
      schema: 1,
      name,
      version,
      exports: { 'svc/store': { entry: './dist/index.js', export: 'svcStore' } },
      operations,
      native,
      abi: {
        store_contract: STORE_CONTRACT_VERSION,
        node_module_version: native === null ? null : process.versions.modules,
        napi: native === null ? null : Number(process.versions.napi),
        ...opts.abi,
      },
    };
    await writeFile(join(dir, ADDON_MANIFEST_FILE), serializeAddonManifest(manifest));
  }
  return dir;
}

/** Writes a fixture addon and packs it with `npm pack` into a new temporary directory. */
export async function packFixtureAddon(opts: FixtureOptions = {}): Promise<PackedAddon> {
  return packAddon(await writeFixtureAddon(opts), await tempDir('svc-packed-'));
}

/** One raw tar entry, for archives npm would never make (traversal, links). */
export function tarEntry(
  path: string,
  opts: { body?: string; type?: 'File' | 'Directory' | 'SymbolicLink' | 'Link'; linkpath?: string } = {},
): Buffer {
  const type = opts.type ?? 'File';
  const body = Buffer.from(type === 'File' ? (opts.body ?? '') : '');
  const header = new Header({
    path,
    mode: 0o644,
    size: body.length,
    type,
    ...(opts.linkpath === undefined ? {} : { linkpath: opts.linkpath }),
    mtime: new Date(0),
    uid: 0,
    gid: 0,
  });
  const block = Buffer.alloc(512);
  header.encode(block, 0);
  return Buffer.concat([block, body, Buffer.alloc((512 - (body.length % 512)) % 512)]);
}

/** A gzip-compressed tar of `entries`, preceded by a valid package.json and (unless told not to) svc-addon.json. */
export function rawAddonArchive(entries: readonly Buffer[], opts: { manifest?: boolean } = {}): Buffer {
  const manifest: AddonManifest = {
    schema: 1,
    name: 'svc-store-raw',
    version: '0.1.0',
    exports: { 'svc/store': { entry: './dist/index.js', export: 'svcStore' } },
    operations: [...STORE_OPERATIONS],
    native: null,
    abi: { store_contract: STORE_CONTRACT_VERSION, node_module_version: null, napi: null },
  };
  return gzipSync(
    Buffer.concat([
      tarEntry('package/package.json', { body: JSON.stringify({ name: 'svc-store-raw', version: '0.1.0' }) }),
      ...(opts.manifest === false ? [] : [tarEntry(`package/${ADDON_MANIFEST_FILE}`, { body: serializeAddonManifest(manifest) })]),
      tarEntry('package/dist/index.js', { body: 'export const svcStore = {};\n' }),
      ...entries,
      Buffer.alloc(1024),
    ]),
  );
}

export interface ProviderFixtureOptions {
  readonly name?: string;
  readonly version?: string;
  /** The manifest's exports; default `svc/auth-provider` alone. */
  readonly exports?: AddonManifest['exports'];
  /** Where to write it; default a new temporary directory. */
  readonly dir?: string;
}

/**
 * Writes a small provider package (package.json, dist/index.js exporting `svcAuthProvider`,
 * svc-addon.json declaring `svc/auth-provider`) and returns its directory. Its code leaves a
 * marker file when imported, named by `SVC_FIXTURE_MARKER`, so a test can prove it never ran.
 */
export async function writeFixtureProvider(opts: ProviderFixtureOptions = {}): Promise<string> {
  const dir = opts.dir ?? (await tempDir('svc-provider-fixture-'));
  const name = opts.name ?? 'svc-provider-fixture';
  const version = opts.version ?? '0.1.0';
  await mkdir(join(dir, 'dist'), { recursive: true });
  await writeFile(
    join(dir, 'package.json'),
    `${JSON.stringify({ name, version, type: 'module', main: './dist/index.js', files: ['dist', ADDON_MANIFEST_FILE] }, null, 2)}\n`,
  );
  await writeFile(
    join(dir, 'dist', 'index.js'),
    [
      `import { writeFileSync } from 'node:fs';`,
      `if (process.env.SVC_FIXTURE_MARKER) writeFileSync(process.env.SVC_FIXTURE_MARKER, 'ran');`,
      `export const svcAuthProvider = { contractVersion: 1, kind: 'fixture', validateConfig: () => [] };`,
      `export const svcApp = async () => {};`,
      '',
    ].join('\n'),
  );
  const manifest: AddonManifest = {
    schema: 1,
    name,
    version,
    exports: opts.exports ?? { 'svc/auth-provider': { entry: './dist/index.js', export: 'svcAuthProvider' } },
    operations: [],
    native: null,
    abi: { store_contract: STORE_CONTRACT_VERSION, node_module_version: null, napi: null },
  };
  await writeFile(join(dir, ADDON_MANIFEST_FILE), serializeAddonManifest(manifest));
  return dir;
}

/** Writes a fixture provider and packs it with `npm pack` into a new temporary directory. */
export async function packFixtureProvider(opts: ProviderFixtureOptions = {}): Promise<PackedAddon> {
  return packAddon(await writeFixtureProvider(opts), await tempDir('svc-packed-'));
}

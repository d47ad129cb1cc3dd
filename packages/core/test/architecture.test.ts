import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';

const root = new URL('../../../', import.meta.url).pathname;

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (name.endsWith('.ts') || name.endsWith('.mjs')) out.push(path);
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

test('the client imports only the core (and Node built-ins)', () => {
  for (const [spec, files] of packageImports('client')) {
    assert.ok(spec === '@svc/core' || spec.startsWith('node:'), `client imports ${spec} in ${files.join(', ')}`);
  }
});

/**
 * Which package may depend on which: `imports` are what its sources may import (and declare
 * in `dependencies`); `bundles` are dependencies it ships but never imports (the CLI bundles
 * the store addons as archives); `testImports` are what only its tests may import (declared
 * in `devDependencies`); `typeImports` are what its sources may import with `import type` only
 * (erased at build, declared in `devDependencies`). Core imports nothing at run time; the client
 * only core; stores only core and their driver; nothing imports the CLI.
 */
const ALLOWED: Record<
  string,
  { imports: readonly string[]; bundles?: readonly string[]; typeImports?: readonly string[]; testImports: readonly string[] }
> = {
  // json-schema-to-ts derives the wire types from the wire schemas; canonicalize is the RFC 8785 oracle of a test.
  '@svc/core': { imports: [], typeImports: ['json-schema-to-ts'], testImports: ['canonicalize', 'json-schema-to-ts'] },
  // The verifier applications install: jose alone, nothing of svc auth (its tests sign with the server's signer).
  '@svc/assertion': { imports: ['jose'], testImports: [] },
  '@svc/addons': { imports: ['@svc/core', 'edn-data', 'tar'], testImports: [] },
  '@svc/store-testkit': { imports: ['@svc/core'], testImports: [] },
  'svc-store-sqlite': { imports: ['@svc/core', 'better-sqlite3'], testImports: ['@svc/store-testkit', 'tsx'] },
  'svc-store-postgres': { imports: ['@svc/core', 'pg'], testImports: ['@svc/store-testkit', 'svc-store-sqlite'] },
  // A provider runs confined and talks JSON over IPC: the contract's types from core, nothing of core at run time.
  '@svc/provider-webauthn': { imports: ['@simplewebauthn/server'], typeImports: ['@svc/core'], testImports: ['@svc/core'] },
  '@svc/server': {
    // The application gateway's upstream mode: @fastify/http-proxy (reply-from on undici) for HTTP, ws for websockets.
    imports: ['@svc/core', 'fastify', '@fastify/swagger', 'fastify-plugin', 'prom-client', '@fastify/http-proxy', 'ws'],
    testImports: [
      '@svc/client',
      'svc-store-sqlite',
      'better-sqlite3',
      'pino',
      '@seriousme/openapi-schema-validator',
      'canonicalize',
      '@svc/assertion',
      '@svc/provider-host',
      '@svc/store-testkit',
      '@types/ws',
    ],
  },
  '@svc/client': { imports: ['@svc/core'], testImports: [] },
  // The OIDC login provider: openid-client at run time, core's contract types only (it runs
  // confined, with nothing of svc loaded); its tests run a real OpenID Provider (oidc-provider)
  // and resolve the client secret with svc's secret-reference helper (through @svc/cli: its package.json is
  // inside the signed archive, whose signature needs the publisher key to change).
  '@svc/provider-oidc': {
    imports: ['openid-client'],
    typeImports: ['@svc/core'],
    testImports: ['@svc/core', '@svc/cli', 'oidc-provider', '@types/oidc-provider'],
  },
  // Runs provider packages confined; its hostile fixtures try to load the SQLite store and driver (and must fail).
  '@svc/provider-host': { imports: ['@svc/core'], testImports: ['better-sqlite3', 'svc-store-sqlite'] },
  // The running service as a library: it wires the store (through its verified addon), the
  // confined providers and the server's surfaces; the bundled stores ship as addon archives, of
  // which it imports only their `:config` field tables. It never imports the CLI.
  '@svc/runtime': {
    imports: [
      '@svc/core',
      '@svc/addons',
      '@svc/server',
      '@svc/provider-host',
      'better-sqlite3',
      'edn-data',
      'pino',
      'svc-store-sqlite',
      'svc-store-postgres',
    ],
    testImports: [],
  },
  // Arguments, prompts, output and exit codes: the service itself is the runtime's.
  '@svc/cli': {
    imports: ['@svc/core', '@svc/addons', '@svc/client', '@svc/runtime'],
    // The OIDC end-to-end test runs provider-oidc's test IdP (oidc-provider), imported from
    // that package's test support rather than copied; the store tests read the stores directly;
    // the in-process tests of the API commands serve the management API over the memory store.
    testImports: ['pg', 'oidc-provider', '@svc/server', 'svc-store-sqlite', 'better-sqlite3', '@svc/store-testkit'],
  },
};

interface PackageJson {
  name: string;
  main?: string;
  types?: string;
  bin?: Record<string, string>;
  exports?: Record<string, unknown>;
  files?: string[];
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

const readJson = (path: string): unknown => JSON.parse(readFileSync(path, 'utf8'));
const workspaces = (readJson(join(root, 'package.json')) as { workspaces: string[] }).workspaces;
const manifests = new Map(workspaces.map((dir) => [dir, readJson(join(root, dir, 'package.json')) as PackageJson]));

/** The package an import specifier names (`tsx/esm/api` → `tsx`, `@svc/core/store` → `@svc/core`), or null for a built-in. */
function packageOf(spec: string): string | null {
  if (spec.startsWith('node:') || builtinModules.includes(spec.split('/')[0] as string)) return null;
  const parts = spec.split('/');
  return (spec.startsWith('@') ? parts.slice(0, 2) : parts.slice(0, 1)).join('/');
}

/** Package name → the files of `dir` (relative to the root) that import it. */
function bareImports(dir: string): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const file of sources(join(root, dir))) {
    for (const spec of importsOf(file)) {
      const pkg = spec.startsWith('.') ? null : packageOf(spec);
      if (pkg === null) continue;
      found.set(pkg, [...(found.get(pkg) ?? []), relative(root, file)]);
    }
  }
  return found;
}

test('the dependency table covers exactly the workspace packages, and its package graph has no cycle', () => {
  assert.equal(manifests.size, 13);
  assert.deepEqual([...manifests.values()].map((m) => m.name).sort(), Object.keys(ALLOWED).sort());
  const visiting = new Set<string>();
  const done = new Set<string>();
  const visit = (name: string, path: readonly string[]): void => {
    if (done.has(name)) return;
    assert.ok(!visiting.has(name), `package cycle: ${[...path, name].join(' -> ')}`);
    visiting.add(name);
    const rule = ALLOWED[name];
    for (const dep of [...(rule?.imports ?? []), ...(rule?.bundles ?? [])]) if (dep in ALLOWED) visit(dep, [...path, name]);
    visiting.delete(name);
    done.add(name);
  };
  for (const name of Object.keys(ALLOWED)) visit(name, []);
});

test("every package's declared dependencies are allowed by the table", () => {
  for (const [dir, m] of manifests) {
    const rule = ALLOWED[m.name];
    assert.ok(rule !== undefined, `${dir}: ${m.name} is not in the dependency table`);
    const runtime = { ...m.dependencies, ...m.optionalDependencies, ...m.peerDependencies };
    for (const dep of Object.keys(runtime)) {
      assert.ok(rule.imports.includes(dep) || (rule.bundles ?? []).includes(dep), `${m.name} may not depend on ${dep}`);
    }
    for (const dep of Object.keys(m.devDependencies ?? {})) {
      assert.ok(rule.testImports.includes(dep), `${m.name} declares the dev dependency ${dep}, which the table does not allow`);
    }
  }
});

test('every bare import of every package is allowed by the table and declared in its package.json', () => {
  for (const [dir, m] of manifests) {
    const rule = ALLOWED[m.name];
    assert.ok(rule !== undefined);
    const runtime = new Set(Object.keys({ ...m.dependencies, ...m.optionalDependencies, ...m.peerDependencies }));
    for (const [pkg, files] of bareImports(join(dir, 'src'))) {
      if (rule.typeImports?.includes(pkg)) {
        for (const file of files) {
          const text = readFileSync(join(root, file), 'utf8');
          const anyImport = new RegExp(`^import\\s[^;]*from\\s+'${pkg}(/[^']*)?';`, 'gm');
          for (const [line] of text.matchAll(anyImport)) {
            assert.match(line, /^import type /, `${m.name} may import ${pkg} only with \`import type\` (${file})`);
          }
        }
        assert.ok(m.devDependencies?.[pkg] !== undefined, `${m.name} imports types of ${pkg} without declaring it (devDependencies)`);
        continue;
      }
      assert.ok(rule.imports.includes(pkg), `${m.name} may not import ${pkg} (${files.join(', ')})`);
      assert.ok(runtime.has(pkg), `${m.name} imports ${pkg} without declaring it in dependencies (${files.join(', ')})`);
    }
    if (!existsSync(join(root, dir, 'test'))) continue;
    const declared = new Set([...runtime, ...Object.keys(m.devDependencies ?? {})]);
    for (const [pkg, files] of bareImports(join(dir, 'test'))) {
      if (pkg === m.name) continue;
      assert.ok(
        rule.imports.includes(pkg) || rule.testImports.includes(pkg) || (rule.bundles ?? []).includes(pkg),
        `${m.name}'s tests may not import ${pkg} (${files.join(', ')})`,
      );
      assert.ok(declared.has(pkg), `${m.name}'s tests import ${pkg} without declaring it (devDependencies) (${files.join(', ')})`);
    }
  }
});

/** The relative imports of `file` that load code at run time (`import type` is erased, so it cannot form a cycle). */
function runtimeImportsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [
    ...text.matchAll(/(?:^|\n)\s*(?:import|export)(?!\s+type\b)[^'";]*?from\s*['"](\.[^'"]+)['"]/g),
    ...text.matchAll(/import\(\s*['"](\.[^'"]+)['"]\s*\)/g),
  ].map((m) => resolve(dirname(file), (m[1] as string).replace(/\.js$/, '.ts')));
}

test('no package has an import cycle among its own modules', () => {
  for (const dir of manifests.keys()) {
    const files = sources(join(root, dir, 'src'));
    const state = new Map<string, 'open' | 'done'>();
    const visit = (file: string, path: readonly string[]): void => {
      if (state.get(file) === 'done') return;
      const at = path.indexOf(file);
      assert.ok(at < 0, `import cycle: ${[...path.slice(at), file].map((f) => relative(root, f)).join(' -> ')}`);
      state.set(file, 'open');
      for (const next of runtimeImportsOf(file)) if (files.includes(next)) visit(next, [...path, file]);
      state.set(file, 'done');
    };
    for (const file of files) visit(file, []);
  }
});

/** Whether an npm `files` entry covers `path` (both relative to the package, without `./`). */
function covers(entry: string, path: string): boolean {
  if (!entry.includes('*')) return path === entry || path.startsWith(`${entry}/`);
  const pattern = entry
    .split('/')
    .map((part) => (part === '**' ? '(?:.+/)?' : `${part.replace(/[.]/g, '\\.').replace(/\*/g, '[^/]*')}/`))
    .join('');
  return new RegExp(`^${pattern.replace(/\/$/, '')}$`).test(path);
}

test("every package's files field ships what its package.json points at, and names only what exists", () => {
  for (const [dir, m] of manifests) {
    const files = m.files ?? [];
    assert.ok(files.length > 0, `${m.name} has no files field: npm would pack its sources and tests`);
    // Only the targets of `exports` are files; its keys (`./settings`) are subpath names.
    const targets = [m.main, m.types, ...Object.values(m.bin ?? {}), ...JSON.stringify(m.exports ?? {}).matchAll(/:"(\.\/[^"]+)"/g)]
      .map((t) => (Array.isArray(t) ? t[1] : t))
      .filter((t): t is string => typeof t === 'string' && t !== './package.json')
      .map((t) => t.replace(/^\.\//, ''));
    for (const target of targets) {
      assert.ok(existsSync(join(root, dir, target)), `${m.name} points at ${target}, which the build did not make`);
      assert.ok(
        files.some((entry) => covers(entry, target)),
        `${m.name}'s files field does not ship ${target}`,
      );
    }
    for (const entry of files.filter((e) => !e.includes('*'))) {
      assert.ok(existsSync(join(root, dir, entry)), `${m.name}'s files field names ${entry}, which does not exist`);
    }
  }
});

test('the runtime takes only the bundled stores’ :config field tables (and the embedded store’s file backup) from their packages; the store it serves comes from the verified addon archive', () => {
  for (const file of sources(join(root, 'packages/runtime/src'))) {
    for (const spec of importsOf(file)) {
      // `svc-store-sqlite/backup` copies, checks and locks a control database FILE for `svc auth
      // backup`/`restore`; the copy is then opened through the project's verified addon.
      if (spec.startsWith('svc-store-'))
        assert.match(
          spec,
          /^svc-store-(sqlite|postgres)\/config-fields$|^svc-store-sqlite\/backup$/,
          `${relative(root, file)} imports ${spec}`,
        );
    }
  }
});

test('the CLI holds no listener, store, key-file or shipping logic: it neither imports the server, a driver or the providers, nor listens', () => {
  for (const file of sources(join(root, 'packages/cli/src'))) {
    const text = readFileSync(file, 'utf8');
    for (const spec of importsOf(file)) {
      assert.ok(
        !/^(@svc\/(server|provider-host)|svc-store-|better-sqlite3|pg$|pino|fastify)/.test(spec),
        `${relative(root, file)} imports ${spec}`,
      );
    }
    assert.doesNotMatch(text, /\.listen\(\s*\{/, `${relative(root, file)} opens a listener`);
    assert.doesNotMatch(text, /generateKeyPairSync|createPrivateKey/, `${relative(root, file)} makes or reads a service key itself`);
  }
});

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { appendFile, chmod, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { gunzipSync, gzipSync } from 'node:zlib';
import { publicKeyHexOf } from '@svc/core';
import {
  bundledProviderSignatureProblems,
  type PackedAddon,
  PUBLISHER_KEY_FILE,
  readPublisherKeyFile,
  serializePackageSignature,
  signatureStatement,
  signBundledProviders,
  signPackage,
} from '../../src/build.js';
import {
  type AddonCheck,
  AddonVerificationError,
  addonPaths,
  checkPackageSignature,
  installAddon,
  sha256Hex,
  signatureFileOf,
  verifyAddon,
  verifyProviderPackage,
} from '../../src/index.js';
import { npmPack } from '../../src/npm-pack.js';
import { DEPENDENCIES_DIR, packFixtureAddon, packFixtureProvider, tempDir, writeFixtureProvider } from '../fixture.js';

const run = promisify(execFile);

// A provider package is an addon archive plus a detached Ed25519 signature by a publisher the
// project trusts. Each test below is an attack on that: every one must be refused, at install
// and at every load, before any of the package's code could run.

function keyPair(): { privateKey: KeyObject; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return { privateKey, publicKey: publicKeyHexOf(publicKey) };
}

const publisher = keyPair();
const stranger = keyPair();
const TRUSTED = { svc: publisher.publicKey };

let good: PackedAddon;

before(async () => {
  good = await packFixtureProvider();
});

/** Writes `<archive>.sig` signed by `key` (default: the trusted publisher). */
async function sign(packed: PackedAddon, key: KeyObject = publisher.privateKey): Promise<void> {
  await writeFile(signatureFileOf(packed.archive), serializePackageSignature(signPackage(packed, key)));
}

/** A copy of `packed` in its own directory (so its signature file is its own). */
async function copyOf(packed: PackedAddon): Promise<PackedAddon> {
  const dir = await tempDir('svc-copy-');
  const archive = join(dir, packed.archive.split('/').pop() as string);
  await writeFile(archive, await readFile(packed.archive));
  return { ...packed, archive };
}

async function refusedBy(promise: Promise<unknown>, check: AddonCheck): Promise<AddonVerificationError> {
  const error = await promise.then(
    () => assert.fail(`expected a refusal by ${check}`),
    (e: unknown) => e,
  );
  assert.ok(error instanceof AddonVerificationError, `expected an AddonVerificationError, got ${String(error)}`);
  assert.equal(error.check, check, error.message);
  assert.equal(error.message.split('\n').length, 1, 'one line');
  return error;
}

async function install(packed: PackedAddon, trusted: Readonly<Record<string, string>> = TRUSTED) {
  const packagesDir = join(await tempDir('svc-project-'), '.svc', 'packages');
  const installed = await installAddon({
    source: packed.archive,
    sha256: packed.sha256,
    packagesDir,
    dependenciesDir: DEPENDENCIES_DIR,
    trustedPublishers: trusted,
  });
  return { packagesDir, installed };
}

function verify(packagesDir: string, packed: PackedAddon, trusted: Readonly<Record<string, string>> = TRUSTED) {
  return verifyProviderPackage({
    packagesDir,
    name: packed.name,
    pin: { version: packed.version, sha256: packed.sha256 },
    dependenciesDir: DEPENDENCIES_DIR,
    trustedPublishers: trusted,
  });
}

describe('a signed provider package by a trusted publisher', () => {
  test('installs with its signature kept beside the archive and verifies at load without being imported', async () => {
    const packed = await copyOf(good);
    await sign(packed);
    const { packagesDir, installed } = await install(packed);
    assert.deepEqual(installed.signer, { name: 'svc', publicKey: publisher.publicKey });
    const paths = addonPaths(packagesDir, packed.name, packed.version);
    assert.equal(await readFile(signatureFileOf(paths.archive), 'utf8'), await readFile(signatureFileOf(packed.archive), 'utf8'));
    assert.equal((await stat(signatureFileOf(paths.archive))).mode & 0o777, 0o600);

    const marker = join(await tempDir('svc-marker-'), 'ran');
    process.env.SVC_FIXTURE_MARKER = marker;
    try {
      const verified = await verify(packagesDir, packed);
      assert.equal(verified.name, 'svc-provider-fixture');
      assert.equal(verified.version, '0.1.0');
      assert.equal(verified.packageDir, paths.dir);
      assert.equal(verified.entry, join(paths.dir, 'dist', 'index.js'));
      assert.equal(verified.exportName, 'svcAuthProvider');
      assert.deepEqual(verified.dependencyDirs, []);
      assert.deepEqual(verified.signer, { name: 'svc', publicKey: publisher.publicKey });
      await assert.rejects(stat(marker), 'verification never imports the package');
    } finally {
      delete process.env.SVC_FIXTURE_MARKER;
    }
  });

  test('the signed statement is the domain-separated name, version and archive digest', () => {
    assert.equal(
      signatureStatement('@svc/provider-oidc', '0.1.0', 'AB'.repeat(32)).toString('utf8'),
      `svc-package-signature-v1\n@svc/provider-oidc\n0.1.0\n${'ab'.repeat(32)}\n`,
    );
  });

  test('a store addon cannot be verified as a provider, and a provider never through verifyAddon', async () => {
    await assert.rejects(
      verifyAddon({
        packagesDir: '/nonexistent',
        name: 'x',
        pin: { version: '0.1.0', sha256: null },
        exportName: 'svc/auth-provider' as 'svc/app',
        dependenciesDir: DEPENDENCIES_DIR,
      }),
      TypeError,
    );
  });
});

describe('attacks on a provider package at install', () => {
  test('an unsigned provider package is refused (unsigned) and nothing is installed', async () => {
    const packed = await copyOf(good);
    const packagesDir = join(await tempDir('svc-project-'), '.svc', 'packages');
    await refusedBy(
      installAddon({
        source: packed.archive,
        sha256: packed.sha256,
        packagesDir,
        dependenciesDir: DEPENDENCIES_DIR,
        trustedPublishers: TRUSTED,
      }),
      'unsigned',
    );
    await assert.rejects(readdir(packagesDir), 'the packages directory was never created');
  });

  test('a provider re-signed by an untrusted key is refused (signer_not_trusted)', async () => {
    const packed = await copyOf(good);
    await sign(packed, stranger.privateKey);
    const error = await refusedBy(install(packed), 'signer_not_trusted');
    assert.ok(error.message.includes(stranger.publicKey));
  });

  test('a tampered archive with the original signature is refused (bad_signature), even pinned by its new digest', async () => {
    const packed = await copyOf(good);
    await sign(packed);
    // The attacker swaps the code and repacks; the pin the operator is given is the new digest.
    const tar = gunzipSync(await readFile(packed.archive));
    const at = tar.indexOf('contractVersion');
    assert.ok(at > 0);
    tar.write('contractVersioX', at);
    const evil = gzipSync(tar);
    await writeFile(packed.archive, evil);
    await refusedBy(install({ ...packed, sha256: sha256Hex(evil) }), 'bad_signature');
  });

  test('a signature whose bytes were altered is refused (bad_signature)', async () => {
    const packed = await copyOf(good);
    const sig = signPackage(packed, publisher.privateKey);
    const flipped = `${sig.signature.slice(0, -1)}${sig.signature.endsWith('0') ? '1' : '0'}`;
    await writeFile(signatureFileOf(packed.archive), serializePackageSignature({ ...sig, signature: flipped }));
    await refusedBy(install(packed), 'bad_signature');
  });

  test("a trusted publisher's signature for another version is refused (bad_signature)", async () => {
    const packed = await copyOf(good);
    await writeFile(
      signatureFileOf(packed.archive),
      serializePackageSignature(signPackage({ ...packed, version: '0.0.9' }, publisher.privateKey)),
    );
    await refusedBy(install(packed), 'bad_signature');
  });

  test('a validly signed package that does not declare svc/auth-provider is refused (capability_missing)', async () => {
    const packed = await copyOf(
      await packFixtureProvider({ name: 'svc-app-signed', exports: { 'svc/app': { entry: './dist/index.js', export: 'svcApp' } } }),
    );
    await sign(packed);
    await refusedBy(install(packed), 'capability_missing');
  });

  test('a package declaring svc/auth-provider beside svc/app is refused (manifest), signed or not', async () => {
    const dir = await writeFixtureProvider({
      name: 'svc-provider-and-app',
      exports: {
        'svc/auth-provider': { entry: './dist/index.js', export: 'svcAuthProvider' },
        'svc/app': { entry: './dist/index.js', export: 'svcApp' },
      },
    });
    const archive = await npmPack({ cwd: dir, dest: await tempDir('svc-packed-') });
    const data = await readFile(archive);
    const packed = { archive, sha256: sha256Hex(data), name: 'svc-provider-and-app', version: '0.1.0' };
    await sign(packed);
    const error = await refusedBy(install(packed), 'manifest');
    assert.match(error.message, /a provider package \(svc\/auth-provider\) exports nothing else/);
  });

  test('a store addon installs as before, unsigned, and leaves no signature behind', async () => {
    const store = await packFixtureAddon();
    const { installed, packagesDir } = await install(store, {});
    assert.equal(installed.signer, null);
    await assert.rejects(stat(signatureFileOf(addonPaths(packagesDir, store.name, store.version).archive)));
  });
});

describe('attacks on an installed provider package, refused at load', () => {
  async function installed() {
    const packed = await copyOf(good);
    await sign(packed);
    const { packagesDir } = await install(packed);
    return { packed, packagesDir, paths: addonPaths(packagesDir, packed.name, packed.version) };
  }

  test('an installed file edited after install is refused (installed_files)', async () => {
    const { packed, packagesDir, paths } = await installed();
    await appendFile(join(paths.dir, 'dist', 'index.js'), '\nglobalThis.evil = 1;\n');
    await refusedBy(verify(packagesDir, packed), 'installed_files');
  });

  test('the kept signature removed after install is refused (unsigned)', async () => {
    const { packed, packagesDir, paths } = await installed();
    await rm(signatureFileOf(paths.archive));
    await refusedBy(verify(packagesDir, packed), 'unsigned');
  });

  test('the kept signature replaced by a stranger re-signing is refused (signer_not_trusted)', async () => {
    const { packed, packagesDir, paths } = await installed();
    await writeFile(signatureFileOf(paths.archive), serializePackageSignature(signPackage(packed, stranger.privateKey)), { mode: 0o600 });
    await refusedBy(verify(packagesDir, packed), 'signer_not_trusted');
  });

  test('a publisher removed from :svc/trusted-publishers after install is refused (signer_not_trusted)', async () => {
    const { packed, packagesDir } = await installed();
    await refusedBy(verify(packagesDir, packed, { other: stranger.publicKey }), 'signer_not_trusted');
  });

  test('the kept archive swapped with its signature for another pin is refused (archive_digest)', async () => {
    const { packed, packagesDir } = await installed();
    await refusedBy(verify(packagesDir, { ...packed, sha256: 'f'.repeat(64) }), 'archive_digest');
  });

  test('a group-writable signature file is refused (permissions)', async () => {
    const { packed, packagesDir, paths } = await installed();
    await chmod(signatureFileOf(paths.archive), 0o660);
    await refusedBy(verify(packagesDir, packed), 'permissions');
  });

  test('a store addon activated as a provider is refused (unsigned) before its manifest is read', async () => {
    const store = await packFixtureAddon();
    const { packagesDir } = await install(store, {});
    await refusedBy(verify(packagesDir, store), 'unsigned');
  });
});

describe('the openssl recipe of docs/providers.md', () => {
  test('a signature made with openssl pkeyutl -rawin is accepted by install and load', async () => {
    const work = await tempDir('svc-openssl-');
    const packed = await copyOf(good);
    const pem = join(work, 'publisher.pem');
    await run('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', pem]);
    // The recipe, as documented: statement file, one-shot Ed25519, hex, and the JSON by hand.
    const script = `
      set -euo pipefail
      archive="$1"; key="$2"; name="$3"; version="$4"
      sha=$(sha256sum "$archive" | cut -d' ' -f1)
      printf 'svc-package-signature-v1\\n%s\\n%s\\n%s\\n' "$name" "$version" "$sha" > statement.txt
      sig=$(openssl pkeyutl -sign -rawin -inkey "$key" -in statement.txt | xxd -p -c 256)
      pub=$(openssl pkey -in "$key" -pubout -outform DER | tail -c 32 | xxd -p -c 64)
      printf '{"schema": 1, "package": "%s", "version": "%s", "sha256": "%s", "publisher_key": "%s", "signature": "%s"}\\n' \\
        "$name" "$version" "$sha" "$pub" "$sig" > "$archive.sig"
      echo "$pub"
    `;
    const { stdout } = await run('bash', ['-c', script, 'recipe', packed.archive, pem, packed.name, packed.version], { cwd: work });
    const publicKey = stdout.trim();
    assert.match(publicKey, /^[0-9a-f]{64}$/);
    const verdict = checkPackageSignature({
      name: packed.name,
      version: packed.version,
      sha256: packed.sha256,
      signatureText: await readFile(signatureFileOf(packed.archive), 'utf8'),
      trusted: { ops: publicKey },
    });
    assert.deepEqual(verdict, { name: 'ops', publicKey });
    const { packagesDir, installed } = await install(packed, { ops: publicKey });
    assert.equal(installed.signer?.name, 'ops');
    assert.equal((await verify(packagesDir, packed, { ops: publicKey })).signer.publicKey, publicKey);
  });
});

describe('bundled providers: signed as built', () => {
  /** A repository root with one provider package and the publisher key committed. */
  async function repo(): Promise<string> {
    const root = await tempDir('svc-repo-');
    await mkdir(join(root, 'packages', 'provider-fixture'), { recursive: true });
    await writeFixtureProvider({ dir: join(root, 'packages', 'provider-fixture'), name: '@svc/provider-fixture' });
    await mkdir(join(root, 'keys'));
    await writeFile(join(root, PUBLISHER_KEY_FILE), `${publisher.publicKey}\n`);
    return root;
  }

  test('packing twice gives the same bytes, so a committed signature covers every build', async () => {
    const root = await repo();
    const a = await npmPack({ cwd: join(root, 'packages', 'provider-fixture'), dest: await tempDir('svc-pack-a-') });
    const b = await npmPack({ cwd: join(root, 'packages', 'provider-fixture'), dest: await tempDir('svc-pack-b-') });
    assert.equal(sha256Hex(await readFile(a)), sha256Hex(await readFile(b)));
  });

  test('unsigned, then signed by the publisher key, then stale after a change to the package', async () => {
    const root = await repo();
    assert.equal(readPublisherKeyFile(join(root, PUBLISHER_KEY_FILE)), publisher.publicKey);
    const [unsigned] = await bundledProviderSignatureProblems(root);
    assert.match(unsigned ?? '', /no committed signature/);

    const signed = await signBundledProviders(root, publisher.privateKey);
    assert.equal(signed.length, 1);
    assert.equal(signed[0]?.signatureFile, join(root, 'signatures', 'svc-provider-fixture-0.1.0.tgz.sig'));
    assert.deepEqual(await bundledProviderSignatureProblems(root), []);

    await appendFile(join(root, 'packages', 'provider-fixture', 'dist', 'index.js'), '// changed\n');
    const [stale] = await bundledProviderSignatureProblems(root);
    assert.match(stale ?? '', /does not cover the archive as built/);
  });

  test("signing with any key but the committed publisher key's private half is refused", async () => {
    const root = await repo();
    await assert.rejects(signBundledProviders(root, stranger.privateKey), /use the project's publisher key/);
  });
});

test("every bundled provider archive as built matches its committed signature (this repository's packages/provider-*)", async () => {
  const root = join(import.meta.dirname, '..', '..', '..', '..');
  assert.deepEqual(await bundledProviderSignatureProblems(root), []);
});

test('a scoped provider package installs under an owner-only @scope directory, and a group-writable one is refused (permissions)', async () => {
  const packed = await copyOf(await packFixtureProvider({ name: '@svc/provider-scoped' }));
  await sign(packed);
  const { packagesDir } = await install(packed);
  const scopeDir = join(packagesDir, '@svc');
  assert.equal((await stat(scopeDir)).mode & 0o777, 0o700);
  assert.equal((await verify(packagesDir, packed)).name, '@svc/provider-scoped');
  await chmod(scopeDir, 0o770);
  await refusedBy(verify(packagesDir, packed), 'permissions');
});

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { appendFileSync, chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { gunzipSync, gzipSync } from 'node:zlib';
import { packAddon, publisherKeyFromPem, serializePackageSignature, signPackage } from '@svc/addons/build';
import { ADDON_MANIFEST_FILE } from '@svc/core';
import { bash, cleanEnv, run, startServer, tempDir } from '../helpers.js';
// Signing, installing and the refusals are the CLI's own checks: those `svc` runs are in process
// (svcInProcess). A service that starts is the installed `svc`, spawned (startServer).
import { initProjectInProcess as initProject, svcInProcess as svc, svcOkInProcess as svcOk } from '../in-process.js';

// Provider packages through `svc`: signed with `svc package sign` (or the openssl
// recipe of docs/providers.md), installed with `svc package install` only when the signature
// verifies and is by a publisher project.edn trusts, and verified again on every start. Every
// attack is refused with one line naming the check and exit code 1.

interface Packed {
  readonly archive: string;
  readonly sha256: string;
  readonly name: string;
  readonly version: string;
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

describe('provider packages are installed and loaded only when signed by a trusted publisher', () => {
  const tmp = tempDir('svc-provider-sign-');
  const env = cleanEnv({ HOME: tmp.dir });
  const dir = join(tmp.dir, 'project');
  const publisherPem = join(tmp.dir, 'publisher.pem');
  const strangerPem = join(tmp.dir, 'stranger.pem');
  const marker = join(tmp.dir, 'provider-code-ran');
  let publisherHex = '';
  let n = 0;
  after(() => tmp.cleanup());

  /** A provider package (or, with `exports`, another one) written and packed with npm pack; invalid manifests are packed as they are. */
  async function pack(opts: { name?: string; exports?: Record<string, { entry: string; export: string }> } = {}): Promise<Packed> {
    const pkg = join(tmp.dir, `pkg-${++n}`);
    const out = join(tmp.dir, `out-${n}`);
    mkdirSync(join(pkg, 'dist'), { recursive: true });
    mkdirSync(out);
    const name = opts.name ?? 'svc-provider-fixture';
    writeFileSync(
      join(pkg, 'package.json'),
      JSON.stringify({ name, version: '0.1.0', type: 'module', main: './dist/index.js', files: ['dist', ADDON_MANIFEST_FILE] }),
    );
    writeFileSync(
      join(pkg, 'dist', 'index.js'),
      `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(marker)}, 'ran');\nexport const svcAuthProvider = { contractVersion: 1, kind: 'fixture' };\nexport const svcApp = async () => {};\n`,
    );
    writeFileSync(
      join(pkg, ADDON_MANIFEST_FILE),
      `${JSON.stringify(
        {
          schema: 1,
          name,
          version: '0.1.0',
          exports: opts.exports ?? { 'svc/auth-provider': { entry: './dist/index.js', export: 'svcAuthProvider' } },
          operations: [],
          native: null,
          abi: { store_contract: 4, node_module_version: null, napi: null },
        },
        null,
        2,
      )}\n`,
    );
    if (opts.exports === undefined) return packAddon(pkg, out);
    const r = await run('npm', ['pack', '--pack-destination', out, '--ignore-scripts', '--silent'], { cwd: pkg, env });
    assert.equal(r.code, 0, r.stderr);
    const archive = join(out, r.stdout.trim().split('\n').pop() as string);
    return { archive, sha256: sha256(readFileSync(archive)), name, version: '0.1.0' };
  }

  function install(p: Packed, extra: string[] = []) {
    return svc(['package', 'install', p.archive, '--sha256', p.sha256, dir, ...extra], { env });
  }

  /** Asserts `svc` exited 1 with one stderr line naming the provider package and `check`. */
  function assertRefused(r: { code: number; stdout: string; stderr: string }, check: string): void {
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stdout, '');
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0] ?? '', new RegExp(`^svc [a-z ]+: provider package [^ ]+ failed verification \\(${check}\\): `));
  }

  before(async () => {
    await initProject(dir, { env });
    for (const pem of [publisherPem, strangerPem]) {
      const r = await run('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', pem], { env });
      assert.equal(r.code, 0, r.stderr);
      chmodSync(pem, 0o600);
    }
    const pub = await bash(`openssl pkey -in "$0" -pubout -outform DER | tail -c 32 | xxd -p -c 64`.replace('$0', publisherPem));
    publisherHex = pub.stdout.trim();
    assert.match(publisherHex, /^[0-9a-f]{64}$/);
    const file = join(dir, 'project.edn');
    const text = readFileSync(file, 'utf8');
    writeFileSync(
      file,
      text.replace(/^\{:svc\/project( +)("[^"]+")\n/, `{:svc/project$1$2\n :svc/trusted-publishers {"svc" "${publisherHex}"}\n`),
    );
    assert.ok(readFileSync(file, 'utf8').includes(':svc/trusted-publishers'));
  });

  test('happy path: svc package sign, then svc package install pins it and keeps the signature', async () => {
    const p = await pack();
    const signed = await svcOk(['package', 'sign', p.archive, '--key', publisherPem, '--json'], { env });
    const out = JSON.parse(signed.stdout) as { signature_file: string; publisher_key: string; sha256: string };
    assert.equal(out.signature_file, `${p.archive}.sig`);
    assert.equal(out.publisher_key, publisherHex);
    assert.equal(out.sha256, p.sha256);
    const r = await install(p, ['--json']);
    assert.equal(r.code, 0, r.stderr);
    const installed = JSON.parse(r.stdout) as { signer: { name: string; publicKey: string } };
    assert.deepEqual(installed.signer, { name: 'svc', publicKey: publisherHex });
    assert.ok(existsSync(join(dir, '.svc', 'packages', 'svc-provider-fixture-0.1.0.tgz.sig')));
    assert.ok(readFileSync(join(dir, 'project.edn'), 'utf8').includes(`"svc-provider-fixture" {:version "0.1.0" :sha256 "${p.sha256}"}`));
    assert.equal(existsSync(marker), false, 'none of its code ran');
  });

  test('happy path: a signature made with the openssl recipe of docs/providers.md installs', async () => {
    const p = await pack();
    const recipe = `
      archive="$1"; key="$2"
      name=svc-provider-fixture version=0.1.0
      sha=$(sha256sum "$archive" | cut -d' ' -f1)
      printf 'svc-package-signature-v1\\n%s\\n%s\\n%s\\n' "$name" "$version" "$sha" > statement.txt
      sig=$(openssl pkeyutl -sign -rawin -inkey "$key" -in statement.txt | xxd -p -c 256)
      pub=$(openssl pkey -in "$key" -pubout -outform DER | tail -c 32 | xxd -p -c 64)
      printf '{"schema": 1, "package": "%s", "version": "%s", "sha256": "%s", "publisher_key": "%s", "signature": "%s"}\\n' \\
        "$name" "$version" "$sha" "$pub" "$sig" > "$archive.sig"
    `;
    const r0 = await run('bash', ['-euo', 'pipefail', '-c', recipe, 'recipe', p.archive, publisherPem], { env, cwd: tmp.dir });
    assert.equal(r0.code, 0, r0.stderr);
    const r = await install(p);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /signed by: svc/);
  });

  test('an unsigned provider package is refused (unsigned)', async () => {
    assertRefused(await install(await pack()), 'unsigned');
  });

  test('a provider re-signed by an untrusted key is refused (signer_not_trusted)', async () => {
    const p = await pack();
    await svcOk(['package', 'sign', p.archive, '--key', strangerPem], { env });
    assertRefused(await install(p), 'signer_not_trusted');
  });

  test('a tampered archive with the original signature is refused (bad_signature)', async () => {
    const p = await pack();
    await svcOk(['package', 'sign', p.archive, '--key', publisherPem], { env });
    const tar = gunzipSync(readFileSync(p.archive));
    tar.write('contractVersioX', tar.indexOf('contractVersion'));
    const evil = gzipSync(tar);
    writeFileSync(p.archive, evil);
    assertRefused(await install({ ...p, sha256: sha256(evil) }), 'bad_signature');
  });

  test('a validly signed package that does not declare svc/auth-provider is refused (capability_missing)', async () => {
    const p = await pack({ name: 'svc-app-signed', exports: { 'svc/app': { entry: './dist/index.js', export: 'svcApp' } } });
    // svc package sign signs provider packages only; a publisher's own tooling may not.
    const refused = await svc(['package', 'sign', p.archive, '--key', publisherPem], { env });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /does not declare the svc\/auth-provider export; only provider packages are signed/);
    writeFileSync(`${p.archive}.sig`, serializePackageSignature(signPackage(p, publisherKeyFromPem(readFileSync(publisherPem)))));
    assertRefused(await install(p), 'capability_missing');
  });

  test('a package that declares svc/auth-provider plus svc/app is refused (manifest), even validly signed', async () => {
    const p = await pack({
      name: 'svc-provider-and-app',
      exports: {
        'svc/auth-provider': { entry: './dist/index.js', export: 'svcAuthProvider' },
        'svc/app': { entry: './dist/index.js', export: 'svcApp' },
      },
    });
    writeFileSync(`${p.archive}.sig`, serializePackageSignature(signPackage(p, publisherKeyFromPem(readFileSync(publisherPem)))));
    const r = await install(p);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, /failed verification \(manifest\): .*a provider package \(svc\/auth-provider\) exports nothing else/);
  });

  test('svc package sign refuses a key file others can read, and never takes the key on the command line', async () => {
    const p = await pack();
    const loose = join(tmp.dir, 'loose.pem');
    copyFileSync(publisherPem, loose);
    chmodSync(loose, 0o644);
    const r = await svc(['package', 'sign', p.archive, '--key', loose], { env });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /is readable or writable by others \(mode 644\); run chmod 600/);
    assert.equal(existsSync(`${p.archive}.sig`), false);
  });

  test('installed files tampered with after install are refused at load (installed_files), and nothing starts', async () => {
    const p = await pack();
    await svcOk(['package', 'sign', p.archive, '--key', publisherPem], { env });
    const r = await install(p);
    assert.equal(r.code, 0, r.stderr);
    const file = join(dir, 'project.edn');
    const text = readFileSync(file, 'utf8');
    writeFileSync(
      file,
      text.replace(
        ':auth  {:module :svc/auth',
        ':idp   {:package "svc-provider-fixture" :activate [:svc/auth-provider]}\n                :auth  {:module :svc/auth',
      ),
    );

    // Verified as installed: the service starts (with the provider verified, not yet run).
    const server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', dir], { env });
    assert.equal(await server.stop(), 0);

    appendFileSync(join(dir, '.svc', 'packages', 'svc-provider-fixture@0.1.0', 'dist', 'index.js'), '\n// evil\n');
    const refused = await svc(['auth', 'serve', '--listen', '127.0.0.1:0', dir], { env });
    assertRefused(refused, 'installed_files');
    assert.match(refused.stderr, /\(provider :idp was not started\)$/m);
    assert.equal(existsSync(marker), false, 'none of its code ran');
  });
});

describe('the bundled providers ship signed by the project publisher key (keys/svc-publisher.pub)', () => {
  const tmp = tempDir('svc-provider-bundled-');
  const env = cleanEnv({ HOME: tmp.dir });
  after(() => tmp.cleanup());
  const root = join(import.meta.dirname, '..', '..', '..', '..');

  const BUNDLED = [
    {
      name: 'webauthn',
      config: '{:webauthn/rp-id "example.com" :webauthn/rp-name "Example" :webauthn/origins ["https://example.com"]}',
    },
    {
      name: 'oidc',
      config: '{:oidc/issuer "https://login.example.com" :oidc/client-id "svc" :oidc/client-secret #svc/secret "env:OIDC_SECRET"}',
    },
  ];
  for (const { name, config } of BUNDLED) {
    test(`@svc/provider-${name} installs by name from the bundled archive, signed by "svc", and verifies at start`, async () => {
      const sums = readFileSync(join(root, 'packages', 'runtime', 'addons', 'SHA256SUMS'), 'utf8');
      const sha = new RegExp(`^([0-9a-f]{64}) {2}svc-provider-${name}-0\\.1\\.0\\.tgz$`, 'm').exec(sums)?.[1];
      assert.ok(sha !== undefined, sums);
      const dir = join(tmp.dir, name);
      await initProject(dir, { env });
      const key = readFileSync(join(root, 'keys', 'svc-publisher.pub'), 'utf8').trim();
      const file = join(dir, 'project.edn');
      writeFileSync(
        file,
        readFileSync(file, 'utf8').replace(
          /^\{:svc\/project( +)("[^"]+")\n/,
          `{:svc/project$1$2\n :svc/trusted-publishers {"svc" "${key}"}\n`,
        ),
      );

      const r = await svc(['package', 'install', `@svc/provider-${name}`, '--sha256', sha, dir, '--json'], { env });
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual((JSON.parse(r.stdout) as { signer: unknown }).signer, { name: 'svc', publicKey: key });

      const text = readFileSync(file, 'utf8');
      writeFileSync(
        file,
        text.replace(
          ':auth  {:module :svc/auth',
          `:${name} {:package "@svc/provider-${name}" :activate [:svc/auth-provider] :config ${config}}\n                :auth  {:module :svc/auth`,
        ),
      );
      const server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', dir], { env });
      assert.equal(await server.stop(), 0);
    });
  }
});

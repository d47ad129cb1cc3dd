import assert from 'node:assert/strict';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cleanEnv, tempDir } from './helpers.js';
// In process: install, init and enroll are offline commands on the project; the token goes from
// one run's standard output to the next one's standard input, as through a pipe.
import { svcInProcess as svc, svcOkInProcess as svcOk } from './in-process.js';
import { BUNDLED_ADDONS_DIR, bundledSha256 } from './support/store-projects.js';

/** The store addon archive this build bundles, and its digest from the build's SHA256SUMS. */
const SQLITE_ARCHIVE = join(BUNDLED_ADDONS_DIR, 'svc-store-sqlite-0.1.0.tgz');
const SQLITE_SHA256 = bundledSha256('svc-store-sqlite');

/** The operator's step 2 of the spec: activate the store's `:svc/store` export and bind `:auth/store` to it. */
const ACTIVATION = ` :svc/modules {:store {:package "svc-store-sqlite" :activate [:svc/store]}
               :auth  {:module :svc/auth :config {:auth/store :store}}}}
`;

describe("the spec's bootstrap order: package install, activation, auth init, auth enroll", () => {
  const tmp = tempDir();
  after(() => tmp.cleanup());

  test('package install on a directory with no project starts one; after activation, init and enroll - succeed', async () => {
    const dir = join(tmp.dir, 'demo');
    const env = cleanEnv({ SVC_DEVICE_KEY: join(tmp.dir, 'admin.pem') });

    // 1. Install, pinned by its digest, before any `svc auth init`.
    const installed = await svc(['package', 'install', SQLITE_ARCHIVE, '--sha256', SQLITE_SHA256, dir], { env });
    assert.equal(installed.code, 0, installed.stderr);
    assert.match(installed.stdout, /installed svc-store-sqlite@0\.1\.0/);
    const file = join(dir, 'project.edn');
    const written = readFileSync(file, 'utf8');
    assert.match(written, new RegExp(`"svc-store-sqlite" \\{:version "0\\.1\\.0" :sha256 "${SQLITE_SHA256}"\\}`));
    assert.equal(statSync(dir).mode & 0o777, 0o700, 'the new project directory is owner-only');
    assert.equal(statSync(file).mode & 0o777, 0o600, 'the new project.edn is owner-only');

    // 2. Activate: the map's closing brace gives way to the modules.
    writeFileSync(file, `${written.trimEnd().replace(/\}$/, '')}\n${ACTIVATION}`);

    // 3 and 4. Init, a device key, and the token through standard input (never in the arguments).
    await svcOk(['auth', 'keygen'], { env });
    const token = await svcOk(['auth', 'init', dir, '--token-only'], { env });
    const enrolled = await svc(['auth', 'enroll', '-', dir, '--json'], { env, stdin: token.stdout });
    assert.equal(enrolled.code, 0, enrolled.stderr);
    const { device } = JSON.parse(enrolled.stdout) as { device: { id: string; realm: string } };
    assert.match(device.id, /^dev_/);
    assert.equal(device.realm, 'management');
    // The pinned, already installed addon is the one the project runs on.
    assert.equal(readFileSync(file, 'utf8').match(/svc-store-sqlite" \{:version/g)?.length, 1, 'the pin was not duplicated');
    const devices = await svcOk(['auth', 'devices', dir, '--json'], { env });
    assert.match(devices.stdout, new RegExp(device.id));
  });

  test('install before init with a wrong digest leaves no project, not even its directory, behind', async () => {
    const dir = join(tmp.dir, 'wrong');
    const wrong = SQLITE_SHA256.replace(/^./, (c) => (c === '0' ? '1' : '0'));
    const r = await svc(['package', 'install', SQLITE_ARCHIVE, '--sha256', wrong, dir]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /archive_digest/);
    assert.throws(() => statSync(dir), { code: 'ENOENT' }, 'the directory made for the new project is gone again');
  });
});

import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { packAddon } from '@svc/addons/build';
import { bundledSqliteAddon } from '@svc/runtime';
import { cleanEnv, enrolledProject, type StartedProcess, startUntilReady, svcOk, tempDir } from '../helpers.js';

// Issue #24.6: an application module must not be able to mint a management identity. The
// intruder package (server/test/fixtures/app-modules/intruder-app), pinned and verified like any
// application package, attacks the service's identity at load and at request time through the
// real `svc serve`: it writes a device of its author's key into control.db, reads the node key
// and the assertion keys, reads the store URL and other secrets from its environment, and
// redefines request.principal. Every attempt must fail, and the key never signs in.

const FIXTURES = fileURLToPath(new URL('../../../server/test/fixtures/app-modules/', import.meta.url));
const READY = /svc auth: management API listening on (http:\/\/\S+)\n[\s\S]*svc app: application gateway listening on (http:\/\/\S+)\n/;
const DENIED = /^refused: /;
/** What Node's permission model answers a read or write outside what the module process may touch. */
const ACCESS_DENIED = 'refused: ERR_ACCESS_DENIED';

/** An Ed25519 key pair and its public key as contract hex. */
function deviceKey(): { publicKey: string; privateKey: KeyObject } {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const x = publicKey.export({ format: 'jwk' }).x as string;
  return { publicKey: Buffer.from(x, 'base64url').toString('hex'), privateKey };
}

interface Report {
  atLoad: Record<string, string>;
  atRequest: Record<string, string>;
  env: { atLoad: Record<string, string>; atRequest: Record<string, string> };
  principal: Record<string, unknown>;
}

describe('an application module cannot reach the service identity (through svc serve, a pinned verified package)', () => {
  const tmp = tempDir('svc-app-confinement-');
  const intruder = deviceKey();
  // Secrets the service's environment holds: a store URL with its password, and a libpq password.
  const storePassword = randomBytes(16).toString('hex');
  const pgPassword = randomBytes(16).toString('hex');
  let dir: string;
  let s: StartedProcess<RegExpExecArray>;
  let report: Report;
  let reportText: string;

  before(async () => {
    const p = await enrolledProject(tmp.dir);
    dir = p.dir;
    const controlDir = join(dir, '.svc', 'control');
    // The assertion key set exists in the control store (as after any upstream-mode start), and a
    // key file as a node kept it before the set moved into the store (store contract 9) lies in
    // the control directory, so a refusal is not "absent".
    await svcOk(['app', 'rotate-key', dir]);
    writeFileSync(join(controlDir, 'assertion-keys.json'), '{"version":1,"keys":[]}\n', { mode: 0o600 });
    assert.ok(existsSync(join(controlDir, 'assertion-keys.json')), 'the former assertion key file exists');
    assert.ok(existsSync(join(controlDir, 'node-key.pem')), 'the node key exists');
    const packed = await packAddon(join(FIXTURES, 'intruder-app'), join(tmp.dir, 'packed'));
    await svcOk(['package', 'install', packed.archive, '--sha256', packed.sha256, dir]);
    const sqlite = bundledSqliteAddon();
    writeFileSync(
      join(dir, 'project.edn'),
      `{:svc/project "demo"
 :svc/app-public ["/public/*"]
 :svc/packages {"svc-store-sqlite" {:version "${sqlite.version}" :sha256 "${sqlite.sha256}"}
                "intruder-app" {:version "${packed.version}" :sha256 "${packed.sha256}"}}
 :svc/modules  {:store {:package "svc-store-sqlite" :activate [:svc/store]}
                :auth  {:module :svc/auth :config {:auth/store :store}}
                :web   {:package "intruder-app" :activate [:svc/app]
                        :config {:intruder/control-dir "${controlDir}" :intruder/public-key "${intruder.publicKey}"}}}}
`,
      { mode: 0o600 },
    );
    s = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', '127.0.0.1:0', dir],
      (out) => READY.exec(out),
      {
        env: cleanEnv({
          SVC_STORE_URL: `postgres://svc:${storePassword}@127.0.0.1:5432/test`,
          DATABASE_URL: `postgres://svc:${storePassword}@127.0.0.1:5432/test`,
          PGPASSWORD: pgPassword,
        }),
      },
    );
    const r = await fetch(`${s.ready[2]}/public/intruder/report`);
    reportText = await r.text();
    assert.equal(r.status, 200, reportText);
    report = JSON.parse(reportText) as Report;
  });
  after(async () => {
    if (s !== undefined) assert.equal(await s.stop('SIGTERM'), 0);
    tmp.cleanup();
  });

  test('module opens control.db for writing and inserts a device, at load and at request time: refused, and that key never signs in', async () => {
    for (const when of ['atLoad', 'atRequest'] as const) {
      // better-sqlite3 is out of reach twice over: its files are not readable, and addons are off.
      assert.match(report[when].insertDevice ?? '', DENIED, `${when} insertDevice: ${report[when].insertDevice}`);
      for (const attack of ['openControlDbForWriting', 'readControlDb', 'listControlDir']) {
        assert.equal(report[when][attack], ACCESS_DENIED, `${when} ${attack}`);
      }
    }
    const management = s.ready[1] as string;
    const challenge = await fetch(`${management}/v1/auth/challenges`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ public_key: intruder.publicKey }),
    });
    assert.equal(challenge.status, 201);
    const c = (await challenge.json()) as { challenge_id: string; challenge: string };
    const signature = sign(null, Buffer.from(c.challenge, 'utf8'), intruder.privateKey).toString('hex');
    const session = await fetch(`${management}/v1/auth/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ challenge_id: c.challenge_id, signature }),
    });
    const body = (await session.json()) as { code?: string };
    assert.equal(session.status, 401, JSON.stringify(body));
    assert.equal(body.code, 'invalid_signature');
  });

  test('module reads the node key or the assertion keys, at load and at request time: refused', () => {
    for (const when of ['atLoad', 'atRequest'] as const) {
      for (const attack of ['readNodeKey', 'readAssertionKeys']) {
        assert.equal(report[when][attack], ACCESS_DENIED, `${when} ${attack}`);
      }
    }
  });

  test('module reads the store URL and env secrets (its environment, /proc environ of itself or the service): none found', () => {
    assert.ok(!reportText.includes(storePassword), 'the store password reached the module');
    assert.ok(!reportText.includes(pgPassword), 'PGPASSWORD reached the module');
    assert.deepEqual(report.env.atLoad, {});
    assert.deepEqual(report.env.atRequest, {});
    for (const when of ['atLoad', 'atRequest'] as const) {
      for (const attack of ['readOwnEnviron', 'readParentEnviron', 'readParentMemoryMap']) {
        assert.equal(report[when][attack], ACCESS_DENIED, `${when} ${attack}`);
      }
    }
  });

  test('module redefines request.principal (decorate at load; assign, define, getter, delete at request time): refused', () => {
    for (const attack of ['decorateAtLoad', 'assign', 'define', 'defineGetter', 'delete']) {
      assert.match(String(report.principal[attack]), DENIED, `${attack}: ${report.principal[attack]}`);
    }
    // A public path: the principal stays null.
    assert.equal(report.principal.after, null);
  });
});

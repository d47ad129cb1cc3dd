import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { tempDir } from './helpers.js';
// In process: init, enroll and audit are offline commands on the project; the one test that
// needs the API over a socket is in real/init-and-bootstrap.test.ts.
import {
  initProjectInProcess as initProject,
  keygenInProcess as keygen,
  svcInProcess as svc,
  svcOkInProcess as svcOk,
} from './in-process.js';

async function auditTypes(dir: string): Promise<string[]> {
  const out = (await svcOk(['auth', 'audit', dir, '--json'])).stdout.trim().split('\n');
  return out.map((l) => (JSON.parse(l) as { type: string }).type);
}

function codeOf(stderr: string): string | undefined {
  return /\(([a-z_]+)\)/.exec(stderr)?.[1];
}

describe('init and the bootstrap token', () => {
  const tmp = tempDir();
  after(() => tmp.cleanup());

  test('a re-init before enrollment supersedes the old token, which then is invalid_bootstrap_token', async () => {
    const dir = join(tmp.dir, 'supersede');
    const first = await initProject(dir);
    const second = await initProject(dir);
    assert.notEqual(first.bootstrap_token, second.bootstrap_token);
    const pub = await keygen(join(tmp.dir, 'supersede.pem'));
    const r = await svc(['auth', 'enroll', first.bootstrap_token, pub, dir]);
    assert.equal(r.code, 1);
    assert.equal(codeOf(r.stderr), 'invalid_bootstrap_token');
    await svcOk(['auth', 'enroll', second.bootstrap_token, pub, dir]);
  });

  test('init is refused while an admin is enrolled; --recover issues a new token, audited', async () => {
    const dir = join(tmp.dir, 'recover');
    const init = await initProject(dir);
    await svcOk(['auth', 'enroll', init.bootstrap_token, await keygen(join(tmp.dir, 'admin1.pem')), dir]);
    const refused = await svc(['auth', 'init', dir, '--json']);
    assert.equal(refused.code, 1);
    assert.equal(refused.stdout, '');
    assert.match(refused.stderr, /--recover/);
    const before = await auditTypes(dir);
    const recovered = await initProject(dir, { recover: true });
    const events = (await svcOk(['auth', 'audit', dir, '--json'])).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(events.length, before.length + 1);
    const last = events.at(-1);
    assert.equal(last.type, 'bootstrap.issued');
    assert.equal(last.data.reason, 'recovery');
    // The recovery token enrolls a second admin.
    await svcOk(['auth', 'enroll', recovered.bootstrap_token, await keygen(join(tmp.dir, 'admin2.pem')), dir]);
    const devices = JSON.parse((await svcOk(['auth', 'devices', dir, '--json'])).stdout).devices;
    assert.equal(devices.length, 2);
  });

  test('a bootstrap token is single use through the CLI', async () => {
    const dir = join(tmp.dir, 'single-cli');
    const init = await initProject(dir);
    await svcOk(['auth', 'enroll', init.bootstrap_token, await keygen(join(tmp.dir, 'c1.pem')), dir]);
    const again = await svc(['auth', 'enroll', init.bootstrap_token, await keygen(join(tmp.dir, 'c2.pem')), dir]);
    assert.equal(again.code, 1);
    assert.equal(codeOf(again.stderr), 'bootstrap_token_used');
    assert.equal(again.stderr.trim().split('\n').length, 1);
  });

  test('enroll refuses a malformed public key with invalid_request as a usage error (exit 2)', async () => {
    const dir = join(tmp.dir, 'bad-key');
    const init = await initProject(dir);
    const r = await svc(['auth', 'enroll', init.bootstrap_token, 'abcd', dir]);
    assert.equal(r.code, 2);
    assert.equal(codeOf(r.stderr), 'invalid_request');
  });
});

import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { bash, run, tempDir } from '../helpers.js';
import { REPO_ROOT } from '../repo.js';

const REPO = REPO_ROOT;

/**
 * The environment of a user's shell outside the checkout: `PATH` holds the install prefix's
 * `bin`, node and the system tools, and nothing of this repository (no `node_modules/.bin`);
 * npm points at an unreachable registry, so an install that needed it fails loudly instead of
 * fetching a stranger's `svc`.
 */
function userEnv(prefix: string, home: string): NodeJS.ProcessEnv {
  return {
    HOME: home,
    PATH: [join(prefix, 'bin'), dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'].join(delimiter),
    LANG: 'C.UTF-8',
    npm_config_registry: 'http://127.0.0.1:9/',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
    npm_config_update_notifier: 'false',
  };
}

describe('svc on PATH: the documented install, then the hints run from outside the checkout', () => {
  const tmp = tempDir('svc-global-install-');
  after(() => tmp.cleanup());
  let installedSvc: string | undefined;

  test('npm install -g ./packages/cli puts a working svc on PATH; init, keygen and the enroll hint work in a directory of its own', async () => {
    const prefix = join(tmp.dir, 'prefix');
    const env = userEnv(prefix, join(tmp.dir, 'home'));
    // The command docs/cli.md and README show, run from the checkout.
    const installed = await run('npm', ['install', '-g', '--prefix', prefix, './packages/cli'], { env, cwd: REPO });
    assert.equal(installed.code, 0, `npm install -g failed: ${installed.stderr}`);

    const work = join(tmp.dir, 'elsewhere');
    const where = await bash(`mkdir -p "${work}" && cd "${work}" && command -v svc`, { env });
    assert.equal(where.code, 0, `svc is not on PATH: ${where.stderr}`);
    assert.equal(where.stdout.trim(), join(prefix, 'bin', 'svc'), 'the installed svc, not one of the checkout');

    const init = await bash('svc auth init demo', { env, cwd: work });
    assert.equal(init.code, 0, init.stderr);
    // The hint init prints is the command that works next.
    const hint = /^ {2}(svc auth enroll - demo)$/m.exec(init.stdout)?.[1];
    assert.equal(hint, 'svc auth enroll - demo', init.stdout);

    const keygen = await bash('svc auth keygen', { env, cwd: work });
    assert.equal(keygen.code, 0, keygen.stderr);
    const enrolled = await bash(`svc auth init demo --token-only | ${hint} --json`, { env, cwd: work });
    assert.equal(enrolled.code, 0, enrolled.stderr);
    const { device } = JSON.parse(enrolled.stdout) as { device: { id: string; public_key: string } };
    assert.equal(device.public_key, keygen.stdout.split('\n')[0]?.trim());

    const devices = await bash('svc auth devices demo && svc auth audit verify demo', { env, cwd: work });
    assert.equal(devices.code, 0, devices.stderr);
    assert.match(devices.stdout, new RegExp(device.id));
    installedSvc = join(prefix, 'bin', 'svc');
  });

  test("docs/deployment.md's systemd unit is valid for systemd-analyze, with the installed svc", async (t) => {
    const analyze = await run('sh', ['-c', 'command -v systemd-analyze'], { env: process.env });
    if (analyze.code !== 0) {
      // .ci/run installs it; a CI run without it must not pass by skipping the check.
      assert.ok(process.env.CI === undefined, 'systemd-analyze is not installed (Debian package systemd): .ci/run installs it');
      t.skip('systemd-analyze is not installed here');
      return;
    }
    assert.ok(installedSvc, 'the install test ran first and installed svc');
    const doc = readFileSync(join(REPO, 'docs', 'deployment.md'), 'utf8');
    const unit = /`\/etc\/systemd\/system\/svc-auth\.service`:\n\n```ini\n([\s\S]*?)```/.exec(doc)?.[1];
    assert.ok(unit, 'docs/deployment.md shows the unit file');
    assert.match(unit, /^ExecStart=\/usr\/local\/bin\/svc serve /m);
    const file = join(tmp.dir, 'svc-auth.service');
    // The documented path of the installed svc, as this test installed it.
    writeFileSync(file, unit.replace('/usr/local/bin/svc', installedSvc));
    const verified = await run(analyze.stdout.trim(), ['verify', file], { env: process.env });
    assert.equal(verified.code, 0, verified.stderr);
    assert.equal(verified.stderr.trim(), '', 'no warning about the unit');
  });
});

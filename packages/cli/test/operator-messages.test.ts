import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { tempDir } from './helpers.js';
// In process: what svc says is what `main` prints; the closed pipe, which needs a real one, is
// in real/operator-messages.test.ts.
import { enrolledProjectInProcess as enrolledProject, initProjectInProcess as initProject, svcInProcess as svc } from './in-process.js';
import { BUNDLED_ADDONS_DIR, bundledSha256 } from './support/store-projects.js';

/** The one JSON problem `svc ... --json` writes on stderr when it fails. */
function problemOf(stderr: string): Record<string, unknown> {
  const lines = stderr.trim().split('\n');
  assert.equal(lines.length, 1, `one line on stderr, got: ${stderr}`);
  return JSON.parse(lines[0] as string) as Record<string, unknown>;
}

describe('what svc says to an operator (issue #26.11)', () => {
  const tmp = tempDir();
  let project: Awaited<ReturnType<typeof enrolledProject>>;
  before(async () => {
    project = await enrolledProject(tmp.dir);
  });
  after(() => tmp.cleanup());

  test('svc auth init "" is a usage error (exit 2) and turns no directory into a project', async () => {
    const cwd = join(tmp.dir, 'cwd');
    mkdirSync(cwd);
    const r = await svc(['auth', 'init', ''], { cwd });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^svc auth init: <PROJECT> is empty/);
    assert.equal(existsSync(join(cwd, 'project.edn')), false);
    assert.equal(existsSync(join(cwd, '.svc')), false);
  });

  test('package install NAME with a wrong or malformed --sha256 says the digest is the problem, not the name', async () => {
    const sha = bundledSha256('svc-store-sqlite');
    const wrong = sha.replace(/^./, (c) => (c === '0' ? '1' : '0'));
    const r = await svc(['package', 'install', 'svc-store-sqlite', '--sha256', wrong, project.dir]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /digest is wrong/);
    assert.doesNotMatch(r.stderr, /package spec/);
    const malformed = await svc(['package', 'install', 'svc-store-sqlite', '--sha256', 'WRONG', project.dir]);
    assert.equal(malformed.code, 2);
    assert.match(malformed.stderr, /--sha256 digest is malformed/);
    assert.doesNotMatch(malformed.stderr, /package spec/);
  });

  test('a provider package with a wrong digest is called a provider package, not a store addon', async () => {
    const archive = join(BUNDLED_ADDONS_DIR, 'svc-provider-oidc-0.1.0.tgz');
    const r = await svc(['package', 'install', archive, '--sha256', bundledSha256('svc-store-sqlite'), project.dir]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /provider package .* failed verification \(archive_digest\)/);
    assert.doesNotMatch(r.stderr, /store addon/);
  });

  test('already_enrolled says so once, and what to do', async () => {
    const init = await initProject(project.dir, { recover: true });
    const r = await svc(['auth', 'enroll', init.bootstrap_token, project.publicKey, project.dir]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /\(already_enrolled\)/);
    assert.equal(r.stderr.match(/already enrolled/g)?.length, 1, r.stderr);
    assert.match(r.stderr, /svc auth login/);

    // With --json, the same refusal is a JSON problem with the HTTP code's status and title.
    const again = await initProject(project.dir, { recover: true });
    const json = await svc(['auth', 'enroll', again.bootstrap_token, project.publicKey, project.dir, '--json']);
    assert.equal(json.code, 1);
    const problem = problemOf(json.stderr);
    assert.deepEqual(Object.keys(problem).sort(), ['code', 'detail', 'status', 'title', 'type']);
    assert.equal(problem.code, 'already_enrolled');
    assert.equal(problem.status, 409);
    assert.equal(problem.title, 'Conflict');
  });

  test('with --json, failures and usage errors are JSON problems on stderr', async () => {
    const failure = await svc(['auth', 'devices', join(tmp.dir, 'missing'), '--json']);
    assert.equal(failure.code, 1);
    const problem = problemOf(failure.stderr);
    assert.equal(problem.type, 'about:blank');
    assert.equal(problem.code, 'project_not_found', 'the runtime names what is missing: no project there');
    assert.equal(problem.status, undefined, 'no HTTP status for a failure that was no HTTP answer');
    assert.match(String(problem.detail), /no project at .*missing/);
    assert.equal(failure.stdout, '');

    const usage = await svc(['auth', 'devices', project.dir, '--json', '--bogus']);
    assert.equal(usage.code, 2);
    assert.equal(problemOf(usage.stderr).code, 'usage_error');
  });

  test('svc help auth pair shows the options of pair, then its sub-command', async () => {
    const r = await svc(['help', 'auth', 'pair']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /--node-url/);
    assert.match(r.stdout, /--device-key/);
    assert.match(r.stdout, /svc auth pair complete/);
  });

  test('a JSON-shaped project.edn is named as JSON, at its line and column, without parser internals', async () => {
    const dir = join(tmp.dir, 'json-shaped');
    mkdirSync(dir);
    writeFileSync(join(dir, 'project.edn'), '{\n  "svc/project": "demo",\n  "svc/modules": {}\n}\n');
    const r = await svc(['auth', 'devices', dir]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /project\.edn:2:16: this looks like JSON, not EDN/);
    assert.doesNotMatch(r.stderr, /\{"key"|"sym"|"map"/);
  });

  test('an EDN syntax error is reported as file:line:col: what', async () => {
    const cases: [string, RegExp][] = [
      ['{:svc/project "demo"\n :svc/modules {:a #{1 2]}}\n', /project\.edn:2:24: expected \} to close the set opened at 2:19, found \]/],
      ['{:svc/project "demo"\n :svc/modules }\n', /project\.edn:1:1: the map opened here has a key without a value/],
      ['{:svc/project "demo\n', /project\.edn:1:15: the string that starts here is never closed/],
      ['{:svc/project "demo"\n :svc/modules {:a 1}\n', /project\.edn:1:1: the map opened here is never closed/],
      [';; a fragment, not a map\n:svc/project "demo"\n', /project\.edn:2:1: expected the map that holds the whole file/],
    ];
    for (const [i, [text, expected]] of cases.entries()) {
      const dir = join(tmp.dir, `syntax-${i}`);
      mkdirSync(dir);
      writeFileSync(join(dir, 'project.edn'), text);
      const r = await svc(['auth', 'devices', dir]);
      assert.equal(r.code, 1, text);
      assert.match(r.stderr, expected);
    }
  });
});

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cleanEnv, type ServerProcess, startServer, tempDir } from '../helpers.js';
// The service is the installed `svc`, spawned; the operator's commands, whose process boundary
// is not the subject here, run in process (svcInProcess).
import {
  enrolledProjectInProcess as enrolledProject,
  initProjectInProcess as initProject,
  keygenInProcess as keygen,
  svcInProcess as svc,
  svcOkInProcess as svcOk,
} from '../in-process.js';
import { currentCredentials } from '../support/credentials-file.js';

/** The `code` in a CLI error line `... (code): ...`. */
function codeOf(stderr: string): string | undefined {
  return /\(([a-z_]+)\)/.exec(stderr)?.[1];
}

describe('devices, sessions and audit over the management API with the saved session', () => {
  const tmp = tempDir();
  const creds = join(tmp.dir, 'creds.json');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: creds });
  let server: ServerProcess | undefined;
  let p: Awaited<ReturnType<typeof enrolledProject>>;

  before(async () => {
    p = await enrolledProject(tmp.dir, { env });
    server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', p.dir], { env });
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.url], { env });
  });
  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('devices, sessions and audit over the API print the same rows as offline on the project, text and JSON', async () => {
    for (const command of [
      ['auth', 'devices'],
      ['auth', 'sessions'],
      ['auth', 'audit'],
    ]) {
      for (const extra of [[], ['--json'], ...(command[1] === 'audit' ? [] : [['--realm', 'management']])]) {
        const online = await svcOk([...command, ...extra], { env });
        const offline = await svcOk([...command, p.dir, ...extra], { env });
        assert.equal(online.stdout, offline.stdout, `svc ${command.join(' ')} ${extra.join(' ')}`);
        assert.notEqual(online.stdout.trim(), '');
      }
    }
  });

  test('devices and sessions print a table with a header row, one row per item', async () => {
    const devices = (await svcOk(['auth', 'devices'], { env })).stdout.trimEnd().split('\n');
    assert.match(devices[0] ?? '', /^ID\s+REALM\s+SUBJECT\s+CREATED\s+PUBLIC KEY\s+NAME$/);
    assert.equal(devices.length, 2);
    assert.ok(devices[1]?.startsWith(p.deviceId));
    // Columns line up: the NAME column starts at the same offset in the header and the row.
    assert.equal(devices[0]?.indexOf('NAME'), devices[1]?.lastIndexOf('admin'));

    const saved = currentCredentials(creds) as { session_id: string };
    const sessions = (await svcOk(['auth', 'sessions'], { env })).stdout.trimEnd().split('\n');
    assert.match(sessions[0] ?? '', /^ID\s+REALM\s+SUBJECT\s+DEVICE\s+CREATED\s+EXPIRES\s+GENERATION\s+ADDRESS\s+USER AGENT$/);
    assert.match(sessions[1] ?? '', /\s127\.0\.0\.1\s+svc\/\d+\.\d+\.\d+ \(node v\d+/, 'the address and the CLI it signed in with');
    assert.equal(sessions.length, 2);
    assert.ok(sessions[1]?.startsWith(saved.session_id));
  });

  test('sessions revoke and devices remove work over the API with --json, audited as the signed-in device', async () => {
    assert.ok(server);
    const other = join(tmp.dir, 'other.pem');
    const boot = await initProject(p.dir, { env, recover: true });
    const device = JSON.parse(
      (await svcOk(['auth', 'enroll', boot.bootstrap_token, await keygen(other, { env }), p.dir, '--json', '--name', 'other'], { env }))
        .stdout,
    ).device as { id: string };
    const otherCreds = join(tmp.dir, 'other-creds.json');
    await svcOk(['auth', 'login', '--key', other, '--url', server.url, '--credentials', otherCreds], { env });
    const otherSession = (currentCredentials(otherCreds) as { session_id: string }).session_id;

    const revoked = JSON.parse((await svcOk(['auth', 'sessions', 'revoke', otherSession, '--json'], { env })).stdout);
    assert.deepEqual(revoked, { session_id: otherSession, revoked: true });
    const last = JSON.parse((await svcOk(['auth', 'audit', '--json'], { env })).stdout.trimEnd().split('\n').at(-1) ?? '{}');
    assert.equal(last.type, 'session.revoked');
    assert.equal(last.data.reason, 'revoked_by_admin');
    assert.equal(last.data.by_session, (currentCredentials(creds) as { session_id: string }).session_id);

    const removed = JSON.parse((await svcOk(['auth', 'devices', 'remove', device.id, '--json'], { env })).stdout);
    assert.equal(removed.device_id, device.id);
    assert.equal(removed.revoked_sessions, 0);
    const gone = await svc(['auth', 'devices', 'remove', device.id], { env });
    assert.equal(gone.code, 1);
    assert.equal(codeOf(gone.stderr), 'not_found');
    // The last management device is a refusal (exit 1), over the API as offline.
    for (const args of [
      ['auth', 'devices', 'remove', p.deviceId],
      ['auth', 'devices', 'remove', p.deviceId, p.dir],
    ]) {
      const last = await svc(args, { env });
      assert.equal(last.code, 1, last.stderr);
      assert.equal(codeOf(last.stderr), 'invalid_request');
    }
  });

  test('whoami and refresh take --url, the option their unreachable-API hint names, and print --json', async () => {
    assert.ok(server);
    const dead = await svc(['auth', 'whoami', '--url', 'http://127.0.0.1:1'], { env });
    assert.equal(dead.code, 1);
    assert.match(dead.stderr, /cannot reach the management API at http:\/\/127\.0\.0\.1:1.*\(--url\)/);
    const me = JSON.parse((await svcOk(['auth', 'whoami', '--url', server.url, '--json'], { env })).stdout);
    assert.equal(me.realm, 'management');
    const rotated = JSON.parse((await svcOk(['auth', 'refresh', '--url', server.url, '--json'], { env })).stdout);
    assert.equal(rotated.session_id, me.session);
  });

  test('without a <PROJECT> and without saved credentials or a reachable API, devices, sessions and audit fail with one line (exit 1)', async () => {
    const nobody = cleanEnv({ HOME: join(tmp.dir, 'nobody'), SVC_CREDENTIALS: join(tmp.dir, 'nobody', 'creds.json') });
    for (const command of [
      ['auth', 'devices'],
      ['auth', 'sessions'],
      ['auth', 'audit'],
    ]) {
      const r = await svc(command, { env: nobody });
      assert.equal(r.code, 1, r.stderr);
      assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, /not signed in.*svc auth login --key FILE.*<PROJECT>/);
    }
    // Signed in, but the API is not there: the same one line names --url and the offline way.
    const dead = await svc(['auth', 'devices', '--url', 'http://127.0.0.1:1'], { env });
    assert.equal(dead.code, 1, dead.stderr);
    assert.equal(dead.stderr.trimEnd().split('\n').length, 1, dead.stderr);
    assert.match(dead.stderr, /cannot reach the management API at http:\/\/127\.0\.0\.1:1.*\(--url\).*<PROJECT>/);
  });

  test('usage errors exit 2 and refusals 1: a bad URL, a malformed id, options of the other mode', async () => {
    const badUrl = await svc(['auth', 'whoami', '--url', 'not a url'], { env });
    assert.equal(badUrl.code, 2, badUrl.stderr);
    assert.match(badUrl.stderr, /--url/);
    const ftp = await svc(['auth', 'login', '--key', p.keyFile, '--url', 'ftp://127.0.0.1:21'], { env });
    assert.equal(ftp.code, 2, ftp.stderr);
    assert.equal((await svc(['auth', 'devices', 'remove', 'laptop'], { env })).code, 2);
    assert.equal((await svc(['auth', 'sessions', 'revoke', 'ses_nope', p.dir], { env })).code, 2);
    assert.equal((await svc(['auth', 'devices', p.dir, '--url', 'http://127.0.0.1:1'], { env })).code, 2);
    assert.equal((await svc(['auth', 'audit', '--profile', 'dev'], { env })).code, 2);
  });

  test('--mine lists the signed-in subject’s own sessions and devices; revoke --others signs out everywhere else and keeps this session', async () => {
    assert.ok(server);
    const saved = (currentCredentials(creds) as { session_id: string }).session_id;
    // The same key signed in a second time (another terminal), with its own credentials file.
    const secondCreds = join(tmp.dir, 'second-creds.json');
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.url, '--credentials', secondCreds], { env });
    const second = (currentCredentials(secondCreds) as { session_id: string }).session_id;

    const mine = JSON.parse((await svcOk(['auth', 'sessions', '--mine', '--json'], { env })).stdout).sessions as {
      id: string;
      device_id: string;
      user_agent: string;
      client_address: string;
    }[];
    assert.deepEqual(mine.map((s) => s.id).sort(), [saved, second].sort());
    for (const s of mine) {
      assert.equal(s.device_id, p.deviceId);
      assert.equal(s.client_address, '127.0.0.1');
      assert.match(s.user_agent, /^svc\/\d+\.\d+\.\d+ \(node v/);
    }
    const devices = JSON.parse((await svcOk(['auth', 'devices', '--mine', '--json'], { env })).stdout).devices as { id: string }[];
    assert.deepEqual(
      devices.map((d) => d.id),
      [p.deviceId],
    );

    const revoked = JSON.parse((await svcOk(['auth', 'sessions', 'revoke', '--others', '--json'], { env })).stdout);
    assert.deepEqual(revoked, { revoked: [second] });
    await svcOk(['auth', 'whoami'], { env });
    const gone = await svc(['auth', 'whoami', '--credentials', secondCreds], { env });
    assert.equal(gone.code, 1, gone.stderr);
    assert.equal((await svcOk(['auth', 'sessions', 'revoke', '--others'], { env })).stdout, 'no other sessions to revoke\n');

    // Both need the signed-in subject: not offline, and --others names no session.
    assert.equal((await svc(['auth', 'sessions', '--mine', p.dir], { env })).code, 2);
    assert.equal((await svc(['auth', 'devices', '--mine', p.dir], { env })).code, 2);
    assert.equal((await svc(['auth', 'sessions', 'revoke', '--others', saved], { env })).code, 2);
    assert.equal((await svc(['auth', 'sessions', 'revoke'], { env })).code, 2);
  });

  test('a printed follow-up command quotes a project path with spaces', async () => {
    const spaced = join(tmp.dir, 'my project');
    mkdirSync(spaced);
    const r = await svc(['auth', 'devices', spaced], { env });
    assert.equal(r.code, 1);
    assert.ok(r.stderr.includes(`run \`svc auth init '${spaced}'\` first`), r.stderr);
  });
});

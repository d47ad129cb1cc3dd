import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cleanEnv, tempDir } from './helpers.js';
import { keygenInProcess, svcInProcess, svcOkInProcess } from './in-process.js';
import { currentCredentials } from './support/credentials-file.js';
import { type MemoryService, startMemoryService } from './support/memory-service.js';

/** The one JSON problem `svc ... --json` writes on stderr when it fails. */
function problemOf(stderr: string): Record<string, unknown> {
  const lines = stderr.trim().split('\n');
  assert.equal(lines.length, 1, `one line on stderr, got: ${stderr}`);
  return JSON.parse(lines[0] as string) as Record<string, unknown>;
}

describe('svc auth users / svc auth groups (in process, against the management API over the memory store)', () => {
  const tmp = tempDir();
  let service: MemoryService;
  let env: NodeJS.ProcessEnv;
  let adminSubject: string;
  const run = (args: string[]) => svcInProcess(args, { env });
  const ok = (args: string[]) => svcOkInProcess(args, { env });
  before(async () => {
    service = await startMemoryService();
    env = cleanEnv({ SVC_CREDENTIALS: join(tmp.dir, 'credentials.json'), SVC_MANAGEMENT_URL: service.url });
    const keyFile = join(tmp.dir, 'admin.pem');
    await keygenInProcess(keyFile, { env });
    await service.enrollAdmin(keyFile);
    await ok(['auth', 'login', '--key', keyFile, '--url', service.url]);
    adminSubject = JSON.parse((await ok(['auth', 'whoami', '--json'])).stdout).subject;
  });
  after(async () => {
    await service?.close();
    tmp.cleanup();
  });

  test('disabling or removing the only administrator is refused (exit 1, last_management_user, with what to do)', async () => {
    for (const action of ['disable', 'remove']) {
      const r = await run(['auth', 'users', action, adminSubject]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /\(last_management_user\)/);
      assert.match(r.stderr, /another administrator/);
      assert.equal(r.stderr.trim().split('\n').length, 1, 'one line');
    }
    const json = await run(['auth', 'users', 'disable', adminSubject, '--json']);
    assert.equal(json.code, 1);
    assert.equal(problemOf(json.stderr).code, 'last_management_user');
    assert.equal(problemOf(json.stderr).status, 409);
  });

  test('add, show, list, filter, set and clear a user; list the groups; as tables and as JSON', async () => {
    const added = await ok([
      'auth',
      'users',
      'add',
      '--realm',
      'application',
      '--name',
      'Ada Lovelace',
      '--email',
      'ada@example.com',
      '--email-verified',
      '--groups',
      'ops, dev',
      '--json',
    ]);
    const { user } = JSON.parse(added.stdout);
    assert.match(user.subject, /^sub_/);
    assert.deepEqual(user.groups, ['dev', 'ops']);
    assert.equal(user.email_verified, true);
    const human = await ok(['auth', 'users', 'add', '--realm', 'application', '--name', 'Bob']);
    const bob = /^added user (sub_\S+) \(application\)$/.exec(human.stdout.trim())?.[1];
    assert.ok(bob !== undefined, human.stdout);

    const shown = await ok(['auth', 'users', 'show', user.subject]);
    assert.match(shown.stdout, /^FIELD\s+VALUE$/m);
    assert.match(shown.stdout, /^email\s+ada@example\.com \(verified\) \(from operator\)$/m);
    assert.match(shown.stdout, /^groups\s+dev,ops \(from operator\)$/m);
    assert.deepEqual(JSON.parse((await ok(['auth', 'users', 'show', user.subject, '--json'])).stdout), { user });

    const table = await ok(['auth', 'users', '--realm', 'application']);
    const lines = table.stdout.trim().split('\n');
    assert.match(lines[0] as string, /^SUBJECT\s+REALM\s+STATUS\s+NAME\s+EMAIL\s+GROUPS\s+LAST SIGN-IN$/);
    assert.ok(lines.some((l) => l.startsWith(user.subject) && l.includes('Ada Lovelace') && l.includes('dev,ops')));
    assert.ok(lines.some((l) => l.startsWith(bob)));
    const filtered = JSON.parse((await ok(['auth', 'users', '--filter', 'lovelace', '--json'])).stdout);
    assert.deepEqual(
      filtered.users.map((u: { subject: string }) => u.subject),
      [user.subject],
    );
    assert.equal(filtered.next, null);
    const byGroup = JSON.parse((await ok(['auth', 'users', '--group', 'ops', '--status', 'active', '--json'])).stdout);
    assert.deepEqual(
      byGroup.users.map((u: { subject: string }) => u.subject),
      [user.subject],
    );
    const paged = await ok(['auth', 'users', '--limit', '1']);
    assert.match(paged.stdout, /^more: svc auth users --after sub_\S+/m, 'a page that is not the last says how to read the next');
    const next = JSON.parse((await ok(['auth', 'users', '--limit', '1', '--json'])).stdout).next;
    const second = JSON.parse((await ok(['auth', 'users', '--limit', '1', '--after', next, '--json'])).stdout);
    assert.equal(second.users.length, 1);
    assert.notEqual(second.users[0].subject, next);

    const set = JSON.parse(
      (await ok(['auth', 'users', 'set', user.subject, '--name', 'Ada King', '--clear-groups', '--email-unverified', '--json'])).stdout,
    );
    assert.equal(set.user.name, 'Ada King');
    assert.deepEqual(set.user.groups, []);
    assert.equal(set.user.email_verified, false);
    const setHuman = await ok(['auth', 'users', 'set', bob, '--groups', 'ops', '--email', 'bob@example.com']);
    assert.equal(setHuman.stdout.trim(), `changed user ${bob}`);

    const groups = JSON.parse((await ok(['auth', 'groups', '--realm', 'application', '--json'])).stdout);
    assert.deepEqual(groups, { groups: [{ realm: 'application', name: 'ops', id: null, members: 1 }] });
    const groupTable = await ok(['auth', 'groups']);
    assert.match(groupTable.stdout, /^REALM\s+NAME\s+MEMBERS\s+ID$/m);
    assert.match(groupTable.stdout, /^application\s+ops\s+1\s+-$/m);
  });

  test('disable, enable and remove an application user, as text and as JSON', async () => {
    const keyFile = join(tmp.dir, 'carol.pem');
    await keygenInProcess(keyFile, { env });
    const carol = await service.pairApplication(keyFile);
    const disabled = await ok(['auth', 'users', 'disable', carol.subject]);
    assert.equal(disabled.stdout.trim(), `disabled user ${carol.subject}; revoked 0 session(s)`);
    const enabled = JSON.parse((await ok(['auth', 'users', 'enable', carol.subject, '--json'])).stdout);
    assert.equal(enabled.user.status, 'active');
    assert.equal(enabled.revoked_sessions, 0);
    const disabledJson = JSON.parse((await ok(['auth', 'users', 'disable', carol.subject, '--json'])).stdout);
    assert.equal(disabledJson.user.status, 'disabled');
    assert.equal(JSON.parse((await ok(['auth', 'users', '--status', 'disabled', '--json'])).stdout).users[0].subject, carol.subject);
    const removed = JSON.parse((await ok(['auth', 'users', 'remove', carol.subject, '--json'])).stdout);
    assert.deepEqual(removed, { subject: carol.subject, removed: true, revoked_sessions: 0, removed_devices: 1, removed_links: 0 });
    const gone = await run(['auth', 'users', 'show', carol.subject]);
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /\(not_found\)/);
    const again = await run(['auth', 'users', 'remove', carol.subject]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /^svc auth users remove: user removal refused \(not_found\)/);
  });

  test('bad arguments are one clear line and exit 2, before any request; a bad attribute the API refuses is exit 2 too', async () => {
    const usage: [string[], RegExp][] = [
      [['auth', 'users', 'show', 'dev_1'], /<SUBJECT> must be a subject id/],
      [['auth', 'users', 'show'], /expected <SUBJECT>/],
      [['auth', 'users', 'add'], /--realm REALM is required/],
      [['auth', 'users', 'add', '--realm', 'elsewhere'], /--realm must be management or application/],
      [['auth', 'users', 'add', '--realm', 'application', '--email-verified'], /--email-verified needs --email/],
      [['auth', 'users', '--limit', '0'], /--limit must be a whole number/],
      [['auth', 'users', '--limit', 'lots'], /--limit must be a whole number/],
      [['auth', 'users', '--status', 'gone'], /--status must be active or disabled/],
      [['auth', 'users', '--after', 'nope'], /must be a subject id/],
      [['auth', 'users', 'set', adminSubject], /nothing to change/],
      [['auth', 'users', 'set', adminSubject, '--name', 'x', '--clear-name'], /give --name or --clear-name, not both/],
      [['auth', 'users', 'set', adminSubject, '--email-verified', '--email-unverified'], /not both/],
      [['auth', 'groups', '--realm', 'x'], /--realm must be management or application/],
      [['auth', 'users', 'disable', '--forever', adminSubject], /unknown option/],
      [
        ['auth', 'users', 'add', '--realm', 'application', '--email', 'not-an-email'],
        /^svc auth users add: adding the user refused \(invalid_request\)/,
      ],
      [
        ['auth', 'users', 'add', '--realm', 'application', '--groups', 'Not A Group'],
        /^svc auth users add: adding the user refused \(invalid_request\)/,
      ],
    ];
    for (const [args, message] of usage) {
      const r = await run(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message, args.join(' '));
      assert.equal(r.stderr.trim().split('\n').length, 1, `${args.join(' ')}: one line`);
      assert.equal(r.stdout, '');
    }
    const json = await run(['auth', 'users', 'show', 'nope', '--json']);
    assert.equal(json.code, 2);
    assert.equal(problemOf(json.stderr).code, 'usage_error');
  });

  test('a typo of a user command is answered with the closest one', async () => {
    const r = await run(['auth', 'usrs']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /Did you mean `svc auth users`\?/);
    const help = await ok(['--help']);
    for (const words of [
      'auth users show',
      'auth users add',
      'auth users set',
      'auth users disable',
      'auth users enable',
      'auth users remove',
      'auth groups',
    ]) {
      assert.match(help.stdout, new RegExp(`svc ${words}\\b`), words);
    }
  });
});

describe('self-service with an application login: svc auth sessions --mine, devices --mine, sessions revoke --others', () => {
  const tmp = tempDir();
  let service: MemoryService;
  let env: NodeJS.ProcessEnv;
  before(async () => {
    service = await startMemoryService();
    env = cleanEnv({ SVC_CREDENTIALS: join(tmp.dir, 'credentials.json') });
  });
  after(async () => {
    await service?.close();
    tmp.cleanup();
  });

  test('an application user lists its own sessions and devices and signs out everywhere else, through the gateway', async () => {
    const keyFile = join(tmp.dir, 'app.pem');
    await keygenInProcess(keyFile, { env });
    const paired = await service.pairApplication(keyFile);
    const login = ['auth', 'login', '--realm', 'application', '--url', service.appUrl, '--key', keyFile];
    await svcOkInProcess([...login, '--context', 'phone'], { env });
    const phone = currentCredentials(join(tmp.dir, 'credentials.json')).session_id as string;
    await svcOkInProcess([...login, '--context', 'laptop'], { env });
    const laptop = currentCredentials(join(tmp.dir, 'credentials.json')).session_id as string;

    const sessions = JSON.parse((await svcOkInProcess(['auth', 'sessions', '--mine', '--json'], { env })).stdout);
    assert.deepEqual(
      sessions.sessions.map((s: { id: string }) => s.id),
      [laptop, phone],
    );
    assert.ok(
      sessions.sessions.every((s: { subject: string; realm: string }) => s.subject === paired.subject && s.realm === 'application'),
    );
    const table = await svcOkInProcess(['auth', 'sessions', '--mine'], { env });
    assert.match(table.stdout, /^ID\s+REALM\s+SUBJECT/m);
    const devices = JSON.parse((await svcOkInProcess(['auth', 'devices', '--mine', '--json'], { env })).stdout);
    assert.deepEqual(
      devices.devices.map((d: { id: string }) => d.id),
      [paired.deviceId],
    );

    const revoked = JSON.parse((await svcOkInProcess(['auth', 'sessions', 'revoke', '--others', '--json'], { env })).stdout);
    assert.deepEqual(revoked, { revoked: [phone] });
    const phoneNow = await svcInProcess(['auth', 'whoami', '--context', 'phone'], { env });
    assert.equal(phoneNow.code, 1, 'the other session is revoked');
    assert.match(phoneNow.stderr, /invalid_refresh_token|invalid_token/);
    const mine = JSON.parse((await svcOkInProcess(['auth', 'sessions', '--mine', '--json'], { env })).stdout);
    assert.deepEqual(
      mine.sessions.map((s: { id: string }) => s.id),
      [laptop],
    );
    const none = await svcOkInProcess(['auth', 'sessions', 'revoke', '--others'], { env });
    assert.equal(none.stdout.trim(), 'no other sessions to revoke');
  });

  test('an operator listing (without --mine) still needs a management login', async () => {
    const r = await svcInProcess(['auth', 'sessions'], { env });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /not a management session/);
  });
});

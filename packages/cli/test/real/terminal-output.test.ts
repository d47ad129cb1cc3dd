import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { auditDraft } from '@svc/core';
import Database from 'better-sqlite3';
import { openSqliteStore } from 'svc-store-sqlite';
import { cleanEnv, type ServerProcess, startServer, tempDir } from '../helpers.js';
// What the CLI prints is the subject, read from its stdout and stderr, not the process boundary:
// the commands run in process (svcInProcess); the service (`auth serve`) is the installed `svc`, spawned.
import {
  enrolledProjectInProcess as enrolledProject,
  initProjectInProcess as initProject,
  keygenInProcess as keygen,
  svcInProcess as svc,
  svcOkInProcess as svcOk,
} from '../in-process.js';
import { currentCredentials } from '../support/credentials-file.js';

/** Characters that must never reach the terminal raw. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding raw control characters is the point
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

/** The `code` in a CLI error line `... (code): ...`. */
function codeOf(stderr: string): string | undefined {
  return /\(([a-z_]+)\)/.exec(stderr)?.[1];
}

describe('nothing stored or received writes into the operator terminal', () => {
  const tmp = tempDir();
  const creds = join(tmp.dir, 'creds.json');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: creds });
  let server: ServerProcess | undefined;
  let p: Awaited<ReturnType<typeof enrolledProject>>;
  let controlDb = '';

  before(async () => {
    p = await enrolledProject(tmp.dir, { env });
    controlDb = join(p.dir, '.svc', 'control', 'control.db');
    server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', p.dir], { env });
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.url], { env });
  });
  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('an audit event with an injected ANSI sequence and a fake newline prints escaped', async () => {
    assert.ok(server);
    const injected = '\u001b[2J\u001b[H\n#1 2026-01-01T00:00:00.000Z audit.ok \u202efake'.padEnd(64, 'x');
    // The HTTP door refuses such an id before the audit (issue 9, item 6) ...
    const res = await fetch(`${server.url}/v1/auth/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ challenge_id: injected, signature: '00'.repeat(64) }),
    });
    assert.equal(res.status, 400);
    // ... so the hostile event is planted in the store, as a trail written before ids were
    // checked (or by anyone who can write the database) would hold it: the printer is the last line.
    const store = await openSqliteStore({ file: join(p.dir, '.svc', 'control', 'control.db') });
    try {
      const clock = { now: Date.now };
      await store.appendAuditEvent(
        auditDraft({ clock, random: randomBytes }, 'signin.failed', {
          realm: 'management',
          data: { reason: 'unknown_challenge', challenge_id: injected },
        }),
      );
    } finally {
      await store.close();
    }

    for (const args of [
      ['auth', 'audit', p.dir],
      ['auth', 'audit'],
    ]) {
      const out = (await svcOk(args, { env })).stdout;
      assert.doesNotMatch(out, RAW_CONTROL, `svc ${args.join(' ')} printed a raw control character`);
      const lines = out.trimEnd().split('\n');
      assert.ok(
        lines.every((l) => /^#\d+ /.test(l)),
        'every line is an event line',
      );
      const failed = lines.filter((l) => l.includes('signin.failed'));
      assert.equal(failed.length, 1);
      assert.ok(failed[0]?.includes('challenge_id=\\x1b[2J\\x1b[H\\x0a#1 2026-01-01T00:00:00.000Z audit.ok \\u202efake'), failed[0]);
      assert.equal(lines.filter((l) => l.includes('audit.ok')).length, 1, 'the fake event is inside the real line, not a line of its own');
    }

    for (const args of [
      ['auth', 'audit', p.dir, '--json'],
      ['auth', 'audit', '--json'],
    ]) {
      const out = (await svcOk(args, { env })).stdout;
      assert.doesNotMatch(out, RAW_CONTROL, `svc ${args.join(' ')} printed a raw control character`);
      const events = out
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as { type: string; data: Record<string, unknown> });
      assert.equal(events.find((e) => e.type === 'signin.failed')?.data.challenge_id, injected, 'JSON escapes keep the exact value');
    }
  });

  test('a device name with a bidi override is refused at enrollment', async () => {
    assert.ok(server);
    const spoof = 'invoice\u202egpj.exe';
    // The offline door: svc auth enroll --name is a usage error naming the code.
    const boot = await initProject(p.dir, { env, recover: true });
    const key = await keygen(join(tmp.dir, 'bidi.pem'), { env });
    const cli = await svc(['auth', 'enroll', boot.bootstrap_token, key, p.dir, '--name', spoof], { env });
    assert.equal(cli.code, 2, cli.stderr);
    assert.equal(codeOf(cli.stderr), 'invalid_request');
    // The API door: 400 invalid_request, for a bidi isolate and for a C1 control (CSI) alike.
    for (const name of [spoof, 'lap\u2066top', 'lap\u009b2Jtop']) {
      const res = await fetch(`${server.url}/v1/auth/enroll`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ bootstrap_token: boot.bootstrap_token, public_key: key, name }),
      });
      assert.equal(res.status, 400, name);
      assert.equal(((await res.json()) as { code: string }).code, 'invalid_request');
    }
    // Nothing was enrolled and the token is still good for a clean name.
    await svcOk(['auth', 'enroll', boot.bootstrap_token, key, p.dir, '--name', 'second admin'], { env });
  });

  test('a device name with ANSI and bidi characters stored before names were checked prints escaped in devices', async () => {
    // A row written before this release (or by hand): the printers must still escape it.
    const db = new Database(controlDb);
    try {
      db.prepare('UPDATE devices SET name = ? WHERE id = ?').run('adm\u001b]0;pwned\u0007in\u202e\u009b31m\nfake', p.deviceId);
    } finally {
      db.close();
    }
    const count = (JSON.parse((await svcOk(['auth', 'devices', p.dir, '--json'], { env })).stdout) as { devices: unknown[] }).devices
      .length;
    for (const args of [
      ['auth', 'devices', p.dir],
      ['auth', 'devices'],
      ['auth', 'devices', p.dir, '--json'],
      ['auth', 'devices', '--json'],
    ]) {
      const out = (await svcOk(args, { env })).stdout;
      assert.doesNotMatch(out, RAW_CONTROL, `svc ${args.join(' ')} printed a raw control character`);
      if (args.includes('--json')) {
        const { devices } = JSON.parse(out) as { devices: { id: string; name: string }[] };
        assert.equal(devices.find((d) => d.id === p.deviceId)?.name, 'adm\u001b]0;pwned\u0007in\u202e\u009b31m\nfake');
      } else {
        assert.ok(out.includes('adm\\x1b]0;pwned\\x07in\\u202e\\x9b31m\\x0afake'), out);
        assert.equal(out.trimEnd().split('\n').length, 1 + count, 'a header and one line per device');
      }
    }
  });

  test('an unknown option carrying an ANSI sequence is echoed escaped in the usage error', async () => {
    const r = await svc(['auth', 'devices', p.dir, '--\u001b[2Jx'], { env });
    assert.equal(r.code, 2);
    assert.doesNotMatch(r.stderr, RAW_CONTROL);
    assert.match(r.stderr, /\\x1b\[2Jx/);
  });

  test('a management API answering with ANSI sequences and a fake line in its problem detail cannot write into the terminal', async () => {
    const hostile: Server = createServer((_req, res) => {
      res.writeHead(401, { 'content-type': 'application/problem+json' });
      res.end(JSON.stringify({ status: 401, code: 'invalid_token', detail: 'nope\u001b[2J\nsvc auth whoami: all good\u202e' }));
    });
    await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
    try {
      // Credentials saved against that server (a login to the wrong URL, or a server turned hostile).
      const url = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
      const hostileCreds = join(tmp.dir, 'hostile-creds.json');
      writeFileSync(hostileCreds, JSON.stringify({ ...currentCredentials(creds), url }), { mode: 0o600 });
      const r = await svc(['auth', 'whoami', '--credentials', hostileCreds], { env });
      assert.equal(r.code, 1);
      assert.doesNotMatch(r.stderr, RAW_CONTROL);
      assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, /nope\\x1b\[2J\\x0asvc auth whoami: all good\\u202e/);
    } finally {
      await new Promise((resolve) => hostile.close(resolve));
    }
  });

  test('a node answering a pairing preparation with ANSI and bidi sequences in its fields cannot write into the terminal', async () => {
    const hostile: Server = createServer((_req, res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          intent_id: 'int_\u001b[2J',
          realm: 'management',
          subject: 'sub_\u009b31m',
          name: 'kiosk\u001b]0;owned\u0007\u202e',
          public_key: 'ab'.repeat(32),
          code: 'ABCD-EFGH',
          expires_at: '2026-11-22T10:05:00.000Z',
          expires_in: 300,
          node_id: 'node\u2066',
        }),
      );
    });
    await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
      const r = await svc(['auth', 'pair', '--node-url', url, '--device-key', 'ab'.repeat(32)], { env });
      assert.equal(r.code, 0, r.stderr);
      assert.doesNotMatch(r.stdout, RAW_CONTROL);
      assert.match(r.stdout, /name: kiosk\\x1b\]0;owned\\x07\\u202e/);
    } finally {
      await new Promise((resolve) => hostile.close(resolve));
    }
  });
});

import assert from 'node:assert/strict';
import { chmodSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cleanEnv, type ServerProcess, startServer, svc, tempDir } from '../helpers.js';
import { enrolledProjectInProcess, svcInProcess, svcOkInProcess } from '../in-process.js';

const mode = (p: string) => statSync(p).mode & 0o777;

// A mode read by the command itself (the refusals below) is checked by a spawned `svc`, the
// process that would be started on those files; a mode the CLI writes is checked here on disk.
describe('owner-only modes', () => {
  const tmp = tempDir();
  const credsDir = join(tmp.dir, 'fresh-config', 'svc');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(credsDir, 'credentials.json') });
  let server: ServerProcess | undefined;
  let dir = '';

  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('control dir 0700, db/wal/shm 0600, node key 0600, keygen output 0600, credentials 0600 in a 0700 dir', async () => {
    // The modes are the files' on disk, stat'ed here, whichever process wrote them (the CLI sets
    // them explicitly, and a child would inherit this process's umask anyway): the operator's
    // commands run in process; the service is the installed `svc`, spawned.
    const p = await enrolledProjectInProcess(tmp.dir, { env });
    dir = p.dir;
    const control = join(dir, '.svc', 'control');
    server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', dir], { env });
    await svcOkInProcess(['auth', 'login', '--key', p.keyFile, '--url', server.url], { env });
    assert.equal(mode(control), 0o700);
    for (const f of ['control.db', 'control.db-wal', 'control.db-shm', 'node-key.pem']) assert.equal(mode(join(control, f)), 0o600, f);
    assert.equal(mode(p.keyFile), 0o600);
    assert.equal(mode(join(credsDir, 'credentials.json')), 0o600);
    assert.equal(mode(credsDir), 0o700);
    assert.equal(await server.stop('SIGTERM'), 0);
    server = undefined;
  });

  test('auth serve refuses (exit 1) a control database readable by others', async () => {
    const db = join(dir, '.svc', 'control', 'control.db');
    chmodSync(db, 0o644);
    try {
      const r = await svc(['auth', 'serve', '--listen', '127.0.0.1:0', dir], { env });
      assert.equal(r.code, 1);
      assert.equal(r.stdout.includes('listening'), false);
      assert.equal(r.stderr.trim().split('\n').length, 1, 'one line');
    } finally {
      chmodSync(db, 0o600);
    }
  });

  test('a group-writable project.edn (umask 002) is refused before the control store is opened', async () => {
    const file = join(dir, 'project.edn');
    const before = mode(file);
    chmodSync(file, 0o664);
    try {
      const r = await svc(['auth', 'devices', dir], { env });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /refusing to load project\.edn .* lets its group change it/);
    } finally {
      chmodSync(file, before);
    }
  });

  test('auth serve refuses (exit 1) a control directory readable by others', async () => {
    const control = join(dir, '.svc', 'control');
    chmodSync(control, 0o755);
    try {
      const r = await svc(['auth', 'serve', '--listen', '127.0.0.1:0', dir], { env });
      assert.equal(r.code, 1);
      assert.equal(r.stdout.includes('listening'), false);
      assert.equal(r.stderr.trim().split('\n').length, 1, 'one line');
    } finally {
      chmodSync(control, 0o700);
    }
  });

  test('svc serve refuses (exit 1) a node key readable by others', async () => {
    const key = join(dir, '.svc', 'control', 'node-key.pem');
    chmodSync(key, 0o640);
    try {
      const r = await svc(['serve', '--management-listen', '127.0.0.1:0', dir], { env });
      assert.equal(r.code, 1);
      assert.equal(r.stdout.includes('listening'), false);
    } finally {
      chmodSync(key, 0o600);
    }
  });

  test('keygen refuses to overwrite an existing key without --force', async () => {
    const key = join(tmp.dir, 'k.pem');
    const first = (await svcOkInProcess(['auth', 'keygen', '--out', key], { env })).stdout.trim();
    assert.equal((await svcInProcess(['auth', 'keygen', '--out', key], { env })).code, 1);
    assert.equal((await svcOkInProcess(['auth', 'pubkey', '--key', key], { env })).stdout.trim(), first);
    const second = (await svcOkInProcess(['auth', 'keygen', '--out', key, '--force'], { env })).stdout.trim();
    assert.notEqual(second, first);
    assert.equal(mode(key), 0o600);
  });
});

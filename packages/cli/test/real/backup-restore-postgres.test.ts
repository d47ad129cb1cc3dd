import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { bash, cleanEnv, problemCode, type ServerProcess, startServer, tempDir } from '../helpers.js';
// The service is the installed `svc`, spawned; the operator's commands, whose process boundary
// is not the subject here, run in process (svcInProcess).
import { enrolledProjectInProcess as enrolledProject, svcInProcess as svc, svcOkInProcess as svcOk } from '../in-process.js';
import { REPO_ROOT } from '../repo.js';
import { createSchemas, loginOverHttp, me, PG_URL, revoke, writePostgresProject } from '../support/store-projects.js';

const DEPLOYMENT_MD = join(REPO_ROOT, 'docs/deployment.md');

/** The placeholders the documented commands use, replaced by the test's database, schema and file. */
const DOC_URL = 'postgres://svc@db.internal:5432/svc';
const DOC_SCHEMA = 'svc_auth';
const DOC_DUMP = '/backups/svc_auth.dump';

/**
 * The `sh` blocks of docs/deployment.md's "Backup and restore" → "Many nodes (PostgreSQL)"
 * section, in order: [backup, restore]. The test runs exactly these, so the docs cannot drift.
 */
function documentedCommands(): [string, string] {
  const text = readFileSync(DEPLOYMENT_MD, 'utf8');
  const start = text.indexOf('## Backup and restore');
  const pg = text.indexOf('### Many nodes (PostgreSQL)', start);
  const end = text.indexOf('\n## ', pg);
  assert.ok(start >= 0 && pg > start && end > pg, 'docs/deployment.md has the PostgreSQL backup section');
  const blocks = [...text.slice(pg, end).matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] as string);
  assert.equal(blocks.length, 2, 'a backup block and a restore block');
  return blocks as [string, string];
}

function instantiate(block: string, schema: string, dump: string): string {
  return block.replaceAll(DOC_URL, PG_URL).replaceAll(DOC_DUMP, dump).replaceAll(DOC_SCHEMA, schema);
}

describe('PostgreSQL store: the documented pg_dump/pg_restore backup and restore', () => {
  const tmp = tempDir('svc-pg-backup-');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json') });
  const schemas = createSchemas();
  const servers: ServerProcess[] = [];
  after(async () => {
    for (const s of servers) await s.stop('SIGKILL');
    try {
      await schemas.dispose();
    } finally {
      tmp.cleanup();
    }
  });

  test('a pg_dump taken while serving, restored with pg_restore into a dropped schema, brings back the sessions as at dump time', async () => {
    const [backupCmd, restoreCmd] = documentedCommands();
    const schema = schemas.fresh();
    const dump = join(tmp.dir, 'svc_auth.dump');
    await writePostgresProject(tmp.dir, { schema, env });
    const { dir, keyFile, publicKey } = await enrolledProject(tmp.dir, { env });
    let server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', dir], { env });
    servers.push(server);
    for (const command of ['backup', 'restore']) {
      const r = await svc(['auth', command, dir, join(tmp.dir, `${command}.db`)], { env });
      assert.equal(r.code, 1, `svc auth ${command} on a PostgreSQL project exits 1`);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, /not the embedded SQLite store; back it up and restore it with pg_dump\/pg_restore/);
    }
    const kept = await loginOverHttp(server.url, keyFile, publicKey);
    const revokedLater = await loginOverHttp(server.url, keyFile, publicKey);

    const dumped = await bash(instantiate(backupCmd, schema, dump), { env });
    assert.equal(dumped.code, 0, dumped.stderr);

    assert.equal((await revoke(server.url, revokedLater.access_token)).status, 200);
    const newer = await loginOverHttp(server.url, keyFile, publicKey);
    assert.equal(await server.stop('SIGTERM'), 0);

    const restored = await bash(instantiate(restoreCmd, schema, dump), { env });
    assert.equal(restored.code, 0, restored.stderr);

    server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', dir], { env });
    servers.push(server);
    assert.equal((await me(server.url, kept.access_token)).status, 200, 'a session live at dump time is live');
    assert.equal((await me(server.url, revokedLater.access_token)).status, 200, 'a session revoked after the dump is live again');
    const gone = await me(server.url, newer.access_token);
    assert.equal(gone.status, 401, 'a session created after the dump does not exist');
    assert.equal(await problemCode(gone), 'invalid_token');
    const again = await loginOverHttp(server.url, keyFile, publicKey);
    assert.equal((await me(server.url, again.access_token)).status, 200, 'the enrolled device signs in after the restore');
    assert.match((await svcOk(['auth', 'audit', 'verify', dir], { env })).stdout, /^audit chain ok: \d+ events/);
    await server.stop('SIGTERM');
  });
});

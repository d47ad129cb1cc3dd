import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ownerOnlyTempDir } from '../temp-dir.js';

const SIGN_INS = 300;
const child = fileURLToPath(new URL('../workers/spill-writes.ts', import.meta.url));
const stores = await ownerOnlyTempDir();
const system = await ownerOnlyTempDir('svc-sqlite-tmpdir-');
after(async () => {
  await stores.remove();
  await system.remove();
});

describe('the control store keeps its pages in its own directory', () => {
  // SQLite journals the pages a savepoint changes, so a batch can roll one write back alone.
  // Past 64 KiB that journal spilled into a file of the system's temporary directory: pages of
  // the store (token digests, the audit trail) outside its owner-only directory, and two extra
  // system calls per page.
  test(`store-pages-spilled-to-the-system-temp-directory: a device's removal revoking ${SIGN_INS} sessions, in a batch whose other write fails, creates no file there`, async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', child, stores.dir, String(SIGN_INS)], {
      env: { ...process.env, SQLITE_TMPDIR: system.dir },
      timeout: 60_000,
    });
    const report = JSON.parse(stdout.trim()) as { signedIn: number; twice: string; revoked: number | string; seen: string[] };
    assert.equal(report.signedIn, SIGN_INS, 'every sign-in got its session');
    assert.equal(report.twice, 'rejected', 'the challenge stored twice was refused');
    assert.equal(report.revoked, SIGN_INS, 'the removal in the same batch still committed, with every session revoked');
    assert.deepEqual(report.seen, [], `files created or removed in ${system.dir} (SQLITE_TMPDIR) while the store wrote`);
  });
});

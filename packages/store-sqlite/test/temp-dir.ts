import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fresh owner-only (0700) temporary directory, and a way to remove it. */
export async function ownerOnlyTempDir(prefix = 'svc-store-sqlite-'): Promise<{ readonly dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  // mkdtemp already makes 0700 on Linux; being explicit keeps the test independent of that.
  await chmod(dir, 0o700);
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Runs `npm pack [spec] --pack-destination <dest>` and returns the absolute path of the
 * archive it wrote. Lifecycle scripts are not run: packing must neither build nor execute
 * anything from a package that has not been verified yet, and a build step would make the
 * archive depend on the moment it ran.
 *
 * @example
 * const file = await npmPack({ cwd: 'packages/store-sqlite', dest: '/tmp/out' });
 * const fetched = await npmPack({ cwd: tmp, dest: tmp, spec: 'svc-store-sqlite@0.1.0' });
 */
export async function npmPack(opts: { cwd: string; dest: string; spec?: string }): Promise<string> {
  const args = ['pack', ...(opts.spec === undefined ? [] : [opts.spec]), '--pack-destination', opts.dest, '--json', '--ignore-scripts'];
  const env = { ...process.env, npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false' };
  let stdout: string;
  try {
    ({ stdout } = await run('npm', args, { cwd: opts.cwd, env, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 }));
  } catch (error) {
    const e = error as Error & { stderr?: string };
    const detail = (e.stderr ?? '').trim().split('\n').filter(Boolean).slice(-3).join(' ') || e.message;
    throw new Error(`npm pack ${opts.spec ?? opts.cwd} failed: ${detail}`);
  }
  // npm prints one JSON array describing what it packed; anything before it is noise.
  const start = stdout.indexOf('[');
  let filename: unknown;
  try {
    filename = (JSON.parse(stdout.slice(start)) as { filename?: unknown }[])[0]?.filename;
  } catch {
    filename = undefined;
  }
  if (start < 0 || typeof filename !== 'string') throw new Error(`npm pack ${opts.spec ?? opts.cwd} did not report the archive it wrote`);
  // Scoped packages are reported as "@scope/name-1.0.0.tgz" by some npm versions but written flat.
  return join(opts.dest, filename.replace(/^@/, '').replace('/', '-'));
}

// Runs every test file under packages/*/test with node's test runner. Node 20's `--test`
// does not expand globs itself, so this finds the files and hands them over.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('../', import.meta.url).pathname;
const only = process.argv.slice(2);
const files = [];
for (const pkg of readdirSync(join(root, 'packages')).sort()) {
  if (only.length > 0 && !only.includes(pkg)) continue;
  const dir = join(root, 'packages', pkg, 'test');
  let entries = [];
  try {
    entries = readdirSync(dir, { recursive: true });
  } catch {
    continue;
  }
  for (const f of entries.map(String).sort()) if (f.endsWith('.test.ts')) files.push(join('packages', pkg, 'test', f));
}
// The longest file (a fresh clone installed three times, then the README walkthrough, about 7 of
// the suite's 13 minutes) starts first, so that the others run beside it instead of after it.
const LONGEST_FIRST = ['packages/cli/test/readme-fresh-clone.test.ts'];
files.sort((a, b) => Number(LONGEST_FIRST.includes(b)) - Number(LONGEST_FIRST.includes(a)));
if (files.length === 0) {
  console.error('run-tests: no test files found');
  process.exit(1);
}
const concurrency = process.env.TEST_CONCURRENCY ?? '4';
// Node 20 applies --test-timeout to each FILE as well as to each test: the fresh-clone file
// (npm ci three times, then the walkthrough) needs far more than a test's 5 minutes on a busy
// 2-core machine; its tests carry their own timeouts, as do the other slow ones.
const result = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, '--test-timeout=1800000', ...files],
  { cwd: root, stdio: 'inherit' },
);
process.exit(result.status ?? 1);

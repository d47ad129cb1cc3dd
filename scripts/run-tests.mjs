// Runs the test files under packages/*/test with node's test runner. Node 20's `--test` does
// not expand globs itself, so this finds the files and hands them over.
//
//   node scripts/run-tests.mjs [--tier fast|real|all] [package...]
//
// A file under a `real/` folder of a package's `test/` is in the real tier (spawned `svc`
// processes, real sockets where the socket is the subject, real stores, Chromium); every other
// `*.test.ts` is in the fast tier (in-process, the memory store, Fastify's inject()). The
// default is every tier, as `npm test` runs it; `npm run test:fast` is the loop to run on each
// change, on a built tree.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join, sep } from 'node:path';

const TIERS = ['fast', 'real', 'all'];
const root = new URL('../', import.meta.url).pathname;
let tier = 'all';
const only = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--tier' || a.startsWith('--tier=')) {
    tier = a === '--tier' ? argv[++i] : a.slice('--tier='.length);
    if (!TIERS.includes(tier)) {
      console.error(`run-tests: --tier takes one of ${TIERS.join(', ')}, not ${tier === undefined ? 'nothing' : JSON.stringify(tier)}`);
      process.exit(2);
    }
  } else if (a.startsWith('-')) {
    console.error(`run-tests: unknown option ${a}; usage: node scripts/run-tests.mjs [--tier fast|real|all] [package...]`);
    process.exit(2);
  } else only.push(a);
}

/** Whether `rel` (a path below a package's `test/`) is in the real tier: under a `real/` folder. */
function isReal(rel) {
  return rel.split(sep).slice(0, -1).includes('real');
}

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
  for (const f of entries.map(String).sort()) {
    if (!f.endsWith('.test.ts') || f.split(sep).includes('node_modules')) continue;
    const inTier = tier === 'all' || (tier === 'real') === isReal(f);
    if (inTier) files.push(join('packages', pkg, 'test', f));
  }
}
// The longest files start first, longest first, so that the short ones fill the slots beside
// them instead of one long file starting last and running alone at the end. The order is
// measured (per-file durations of `--tier real` with the TAP reporter, on a loaded 2-core
// machine, 2026-11-27): the fresh clone (installed three times, then the README walkthrough),
// then the files that start several nodes, PostgreSQL clusters or an OIDC provider and Chromium.
// A file missing from the list keeps its place after them; a listed file that no longer exists
// is ignored.
const LONGEST_FIRST = [
  'packages/cli/test/real/readme-fresh-clone.test.ts',
  'packages/cli/test/real/multi-node-postgres.test.ts',
  'packages/cli/test/real/provider-oidc-serve.test.ts',
  'packages/cli/test/real/pairing-serve.test.ts',
  'packages/cli/test/real/provider-oidc-users.test.ts',
  'packages/cli/test/real/provider-oidc-faults.test.ts',
  'packages/cli/test/real/postgres-failover.test.ts',
  'packages/cli/test/real/postgres-faults.test.ts',
  'packages/cli/test/real/backup-restore.test.ts',
  'packages/cli/test/real/docker-entrypoint.test.ts',
  'packages/cli/test/real/provider-signing.test.ts',
  'packages/cli/test/real/audit-shipping.test.ts',
  'packages/cli/test/real/metrics.test.ts',
  'packages/cli/test/real/app-gateway-serve.test.ts',
  'packages/cli/test/real/cluster-assertion-keys.test.ts',
  'packages/cli/test/real/load-balancer.test.ts',
  'packages/cli/test/real/provider-amr.test.ts',
];
const rank = (f) => {
  const i = LONGEST_FIRST.indexOf(f);
  return i < 0 ? LONGEST_FIRST.length : i;
};
files.sort((a, b) => rank(a) - rank(b));
if (files.length === 0) {
  console.error(`run-tests: no test files found (tier ${tier}${only.length > 0 ? `, packages ${only.join(' ')}` : ''})`);
  process.exit(1);
}
const concurrency = process.env.TEST_CONCURRENCY ?? (tier === 'fast' ? '2' : '4');
const started = Date.now();
// Node 20 applies --test-timeout to each FILE as well as to each test: the fresh-clone file
// (npm ci three times, then the walkthrough) needs far more than a test's 5 minutes on a busy
// 2-core machine; its tests carry their own timeouts, as do the other slow ones. The fast tier
// has no such file: a minute is already far more than any of its files needs.
const timeout = tier === 'fast' ? '120000' : '1800000';
// Not `node --test FILE...`: node 20 sorts those files by name before it starts them, which
// undid the order above (the fresh-clone file started some 40 minutes into a real-tier run).
// scripts/test-files-in-order.mjs hands the same files, concurrency and timeout to node:test's
// run(), which starts them in the order given, each in a process of its own as before.
const result = spawnSync(
  process.execPath,
  ['--import', 'tsx', `--test-timeout=${timeout}`, join(root, 'scripts', 'test-files-in-order.mjs'), concurrency, ...files],
  { cwd: root, stdio: 'inherit' },
);
const real = files.filter((f) => isReal(f.split(sep).slice(3).join(sep))).length;
const seconds = ((Date.now() - started) / 1000).toFixed(1);
console.log(`run-tests: tier ${tier}: ${files.length} files (${files.length - real} fast, ${real} real) in ${seconds} s`);
process.exit(result.status ?? 1);

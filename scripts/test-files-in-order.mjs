// Runs the test files given on the command line with node:test's run(), in the order given.
// `node --test FILE...` (node 20) sorts its files by name before starting them, so an order
// chosen by scripts/run-tests.mjs (the longest files first) was lost; run() keeps it. Started
// by scripts/run-tests.mjs as
//
//   node --import tsx --test-timeout=MS scripts/test-files-in-order.mjs CONCURRENCY FILE...
//
// Each file still runs in a process of its own, with this process's --import tsx and
// --test-timeout; the report is node's default one (spec on a terminal, TAP otherwise). After
// it, every failed test is named again with its file and the first line of its error: a CI log
// is often read from its end, and a failure 2,000 tests up is otherwise lost there.
import { relative } from 'node:path';
import { run } from 'node:test';
import { spec, tap } from 'node:test/reporters';

const [concurrency, ...files] = process.argv.slice(2);
const timeoutArg = process.execArgv.find((a) => a.startsWith('--test-timeout='));
const timeout = timeoutArg === undefined ? Number.POSITIVE_INFINITY : Number(timeoutArg.slice('--test-timeout='.length));
const stream = run({ files, concurrency: Number(concurrency), timeout });
/** @type {string[]} */
const failures = [];
stream.on('test:fail', (event) => {
  // A file's own failure and each failed test set the exit code, as `node --test` does.
  if (event.todo !== undefined && event.todo !== false) return;
  process.exitCode = 1;
  const error = event.details?.error;
  // A suite fails when a test in it fails; the test is what to name.
  if (error?.failureType === 'subtestsFailed') return;
  const cause = error?.cause ?? error;
  const message = String(cause?.message ?? cause ?? 'failed').split('\n')[0];
  const file = event.file === undefined ? '' : `${relative(process.cwd(), event.file)}: `;
  failures.push(`  ${file}${event.name}\n      ${message}`);
});
const reporter = process.stdout.isTTY ? stream.compose(new spec()) : stream.compose(tap);
reporter.pipe(process.stdout, { end: false });
reporter.on('end', () => {
  if (failures.length === 0) return;
  process.stdout.write(`\n${failures.length} failed:\n${failures.join('\n')}\n`);
});

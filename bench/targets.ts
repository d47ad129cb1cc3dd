// The targets of `npm run bench` (issues #12 and #14) in one table at the end of every run:
// each figure as the ratio the issue sets a goal for, whether it is met, what it cost the
// server in CPU microseconds, and how it moved against the reference run committed in
// bench/reference.json. A ratio more than 10% below the reference is flagged REGRESSION.
import { generateKeyPairSync, sign, verify } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { root } from './harness.js';

/** One figure with a goal: `ratio` against its baseline of the same run. */
export interface TargetFigure {
  /** Stable key, e.g. `sqlite.bearer`: how a run finds the same figure in the reference. */
  readonly id: string;
  /** What was measured, against what. */
  readonly what: string;
  readonly ratio: number;
  /** The goal (`ratio >= goal`), or null for a figure reported without one. */
  readonly goal: number | null;
  /** Server CPU microseconds per request or operation, when measured. */
  readonly cpuUs?: number;
}

/** A reference run: its machine and its figures by id. */
interface Reference {
  readonly machine: string;
  readonly started_at: string;
  readonly figures: Readonly<Record<string, { readonly ratio: number; readonly cpu_us?: number }>>;
}

/** How far below the reference a ratio may fall before the run calls it a regression. */
export const REGRESSION_TOLERANCE = 0.1;

const REFERENCE_FILE = join(root, 'bench/reference.json');

/** The machine a run is on, as the README and the reference name it. */
export function machineLine(): string {
  const cpu = cpus()[0]?.model.trim() ?? 'unknown CPU';
  return `${cpus().length} cores (${cpu}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.versions.node}`;
}

/**
 * Raw Ed25519 verifications per second on one core of this process, for `ms`
 * milliseconds: the baseline of the login figure (a login verifies one signature).
 *
 * @example
 * const perSecond = ed25519VerifyRate(1000);
 */
export function ed25519VerifyRate(ms = 1000): number {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const message = Buffer.from('svc-auth-v1 challenge prj_bench application chl_bench 0123456789abcdef 1700000000');
  const signature = sign(null, message, privateKey);
  const start = process.hrtime.bigint();
  const end = start + BigInt(ms) * 1_000_000n;
  let n = 0;
  let now = start;
  while (now < end) {
    for (let i = 0; i < 64; i++) if (!verify(null, message, publicKey, signature)) throw new Error('ed25519 self-test failed');
    n += 64;
    now = process.hrtime.bigint();
  }
  return n / (Number(now - start) / 1e9);
}

function readReference(): Reference | null {
  if (!existsSync(REFERENCE_FILE)) return null;
  return JSON.parse(readFileSync(REFERENCE_FILE, 'utf8')) as Reference;
}

/**
 * Prints the targets table and returns how many figures regressed. With `save`, the run
 * becomes the new reference (`BENCH_SAVE_REFERENCE=1`; a partial run keeps the figures it did
 * not measure).
 *
 * @example
 * const regressions = reportTargets(targets, report, { save: process.env.BENCH_SAVE_REFERENCE === '1', startedAt });
 */
export function reportTargets(
  targets: readonly TargetFigure[],
  report: (line: string) => void,
  opts: { readonly save: boolean; readonly startedAt: string },
): number {
  const reference = readReference();
  report('');
  report(`targets (this run: ${machineLine()})`);
  report(
    reference === null
      ? '  no reference run (bench/reference.json): save one with BENCH_SAVE_REFERENCE=1'
      : `  against the reference run of ${reference.started_at} (${reference.machine}); a ratio more than ${REGRESSION_TOLERANCE * 100}% below it is a REGRESSION`,
  );
  // A ratio cancels most of a machine's speed, not all of it (another CPU's Ed25519, its
  // syscalls, its neighbours): say so where the reference ran elsewhere.
  if (reference !== null && reference.machine !== machineLine()) {
    report('  the reference ran on another machine: a REGRESSION there may be the machine; rerun both builds here to tell');
  }
  let regressions = 0;
  for (const t of targets) {
    const status = t.goal === null ? '          ' : t.ratio >= t.goal ? 'met       ' : 'NOT MET   ';
    const goal = t.goal === null ? '' : ` (goal >= ${t.goal}x)`;
    const cpu = t.cpuUs === undefined ? '' : `, ${t.cpuUs.toFixed(0)} µs CPU`;
    const before = reference?.figures[t.id];
    let versus = '';
    if (before !== undefined) {
      const change = t.ratio / before.ratio - 1;
      const regressed = change < -REGRESSION_TOLERANCE;
      if (regressed) regressions++;
      versus = `   reference ${before.ratio.toFixed(3)}x (${change >= 0 ? '+' : ''}${(change * 100).toFixed(0)}%)${regressed ? '  REGRESSION' : ''}`;
    }
    report(`  ${status}${t.id.padEnd(26)} ${t.ratio.toFixed(3)}x${goal}${cpu}   ${t.what}${versus}`);
  }
  if (opts.save) {
    const figures: Record<string, { ratio: number; cpu_us?: number }> = { ...(reference?.figures ?? {}) };
    for (const t of targets) figures[t.id] = t.cpuUs === undefined ? { ratio: t.ratio } : { ratio: t.ratio, cpu_us: t.cpuUs };
    const next: Reference = { machine: machineLine(), started_at: opts.startedAt, figures };
    writeFileSync(REFERENCE_FILE, `${JSON.stringify(next, null, 2)}\n`);
    report('  saved as the new reference (bench/reference.json)');
  }
  return regressions;
}

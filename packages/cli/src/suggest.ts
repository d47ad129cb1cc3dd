/**
 * The optimal-string-alignment distance between two strings: insertions, deletions,
 * substitutions and swaps of two neighbours each cost one (so `initt`, `int` and `inti` are
 * all one away from `init`).
 *
 * @example
 * editDistance('sesions', 'sessions'); // 1
 */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[] = new Array(rows * cols).fill(0);
  for (let i = 0; i < rows; i++) d[i * cols] = i;
  for (let j = 0; j < cols; j++) d[j] = j;
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min((d[(i - 1) * cols + j] ?? 0) + 1, (d[i * cols + j - 1] ?? 0) + 1, (d[(i - 1) * cols + j - 1] ?? 0) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, (d[(i - 2) * cols + j - 2] ?? 0) + 1);
      d[i * cols + j] = best;
    }
  }
  return d[rows * cols - 1] ?? 0;
}

/**
 * The candidate closest to `typed`, if it is close enough to be a typo (at most two edits,
 * and fewer than half the letters); null otherwise.
 *
 * @example
 * closest('--jsn', ['--json', '--name']); // '--json'
 */
export function closest(typed: string, candidates: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const c of candidates) {
    const distance = editDistance(typed, c);
    if (distance < bestDistance) {
      best = c;
      bestDistance = distance;
    }
  }
  const limit = Math.min(2, Math.floor(typed.length / 2));
  return best !== null && bestDistance > 0 && bestDistance <= limit ? best : null;
}

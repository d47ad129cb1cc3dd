/** An RFC 3339 UTC timestamp with milliseconds, as the contract's `*_at` fields use. */
export function rfc3339(ms: number): string {
  return new Date(ms).toISOString();
}

/** Whole seconds from `now` until `at`, never negative: the contract's `*_in` fields. */
export function secondsUntil(at: number, now: number): number {
  return Math.max(0, Math.floor((at - now) / 1000));
}

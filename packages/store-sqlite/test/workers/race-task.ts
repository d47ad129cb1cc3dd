/** What the main thread asks each racing worker to do. */
export interface RaceTask {
  readonly file: string;
  readonly attempts: number;
  /** The fake clock's time in every worker, so nothing expires on a slow machine. */
  readonly now: number;
  /** Int32 slots: [0] workers ready, [1] go flag. */
  readonly barrier: SharedArrayBuffer;
  readonly scenario:
    | { readonly kind: 'bootstrap'; readonly token: string }
    | { readonly kind: 'challenge'; readonly challengeId: string; readonly signature: string }
    | { readonly kind: 'refresh'; readonly refreshToken: string; readonly graceMs: number };
}

/** What a worker posts back: that it booted, a round's results, or why a round failed. */
export type RacerMessage = { readonly booted: true } | { readonly results: RacerResult[] } | { readonly error: string };

/** One attempt's result: `ok`, a rotation outcome, or an error code; the minted access token if any. */
export interface RacerResult {
  readonly outcome: string;
  readonly accessToken?: string;
}

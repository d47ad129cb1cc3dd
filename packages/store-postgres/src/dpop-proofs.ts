// The PostgreSQL store's DPoP proof records: the proofs of one event-loop turn recorded in one
// statement (see `DpopProofs`).
import type { PgContext } from './context.js';
import { sweepExpired } from './sessions.js';
import { callsGoAlone, type Named, writtenRows } from './sql.js';
import { TurnBatch, type Waiting } from './turn-batch.js';

/** The most proofs one statement records; a busier turn sends several. */
const PROOF_BATCH_MAX = 256;

type UseInput = { readonly key: string; readonly expiresAt: number; readonly now: number };

/**
 * Records proof `$1` until `$2`, unless a record of it is live at `$3`: the INSERT, or the UPDATE
 * of an expired record of the key, returns a row for exactly one of N concurrent callers on any
 * node (a loser waits on the winner's row, then its ON CONFLICT sees a live record and changes
 * nothing).
 */
const USE_PROOF: Named = {
  name: 'svc_use_dpop_proof',
  text: `INSERT INTO dpop_proofs (proof_key, expires_at) VALUES ($1, $2)
   ON CONFLICT (proof_key) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE dpop_proofs.expires_at <= $3
   RETURNING proof_key`,
};

/** The same for many distinct proofs (`$1`, `$2`: one array per column), all at time `$3`. */
const USE_PROOFS: Named = {
  name: 'svc_use_dpop_proofs',
  text: `INSERT INTO dpop_proofs (proof_key, expires_at) SELECT * FROM unnest($1::text[], $2::bigint[])
   ON CONFLICT (proof_key) DO UPDATE SET expires_at = EXCLUDED.expires_at WHERE dpop_proofs.expires_at <= $3
   RETURNING proof_key`,
};

/**
 * `useDpopProof` of the PostgreSQL store: every DPoP-checked request records its proof (a
 * refresh records its own in its rotation's statement, store contract 12), one statement that was a round trip of its own per request
 * (docs/performance.md, 2026-11-29). Now the proofs of one event-loop turn share one statement
 * (see `TurnBatch`):
 * - the batch's proofs are recorded at the earliest `now` of its calls: an expired record is
 *   taken over only if it had expired by then. A call refused there whose own time is later
 *   goes again alone at its own time, so each call is decided at its own `now`, as the store
 *   contract says;
 * - calls naming the same proof (a replay racing its request) share one row: the batch's first
 *   call of it goes in the statement; when it is recorded, every later one is refused, as if it
 *   had come second, and when it is not, they are decided alone, in order, each at its own time;
 * - the proofs go in key order, so two nodes' batches take their rows in one order;
 * - when the statement fails for a row (SQLSTATE 22, 23) or its locks (class 40, 55P03), nothing
 *   was recorded and each call goes alone; any other error (an outage) is every call's own.
 *
 * @example
 * const fresh = await new DpopProofs(ctx).use({ key, expiresAt, now });
 */
export class DpopProofs {
  readonly #ctx: PgContext;
  readonly #uses: TurnBatch<UseInput, boolean>;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
    this.#uses = new TurnBatch(PROOF_BATCH_MAX, (batch) => this.#use(batch));
  }

  /** Records the proof `input.key`; false when a record of it is live at `input.now` (a replay). */
  async use(input: UseInput): Promise<boolean> {
    const used = await this.#uses.add(input);
    // Expired records are swept after the write; the record just written is live, so it is never among them.
    await sweepExpired(this.#ctx, 'dpop_proofs', input.now);
    return used;
  }

  async #useOne(w: Waiting<UseInput, boolean>): Promise<void> {
    try {
      const used = await writtenRows(this.#ctx.pool, USE_PROOF, [w.input.key, w.input.expiresAt, w.input.now]);
      w.resolve(used.length === 1);
    } catch (error) {
      w.reject(error);
    }
  }

  async #use(batch: readonly Waiting<UseInput, boolean>[]): Promise<void> {
    if (batch.length === 1) return this.#useOne(batch[0] as Waiting<UseInput, boolean>);
    // The calls of each proof, in the batch's order: the first goes in the statement.
    const byKey = new Map<string, Waiting<UseInput, boolean>[]>();
    for (const w of batch) byKey.set(w.input.key, [...(byKey.get(w.input.key) ?? []), w]);
    // In key order, so two nodes' batches of the same proofs take their rows in one order.
    const firsts = [...byKey.values()]
      .map((calls) => calls[0] as Waiting<UseInput, boolean>)
      .sort((x, y) => (x.input.key < y.input.key ? -1 : 1));
    const earliest = Math.min(...firsts.map((w) => w.input.now));
    let recorded: Set<string>;
    try {
      const used = await writtenRows<{ proof_key: string }>(this.#ctx.pool, USE_PROOFS, [
        firsts.map((w) => w.input.key),
        firsts.map((w) => w.input.expiresAt),
        earliest,
      ]);
      recorded = new Set(used.map((r) => r.proof_key));
    } catch (error) {
      if (!callsGoAlone(error)) throw error;
      await Promise.all([...byKey.values()].map((calls) => this.#oneByOne(calls)));
      return;
    }
    await Promise.all(
      [...byKey.values()].map(async ([first, ...replays]) => {
        if (first === undefined) return;
        if (recorded.has(first.input.key)) {
          // Recorded for the first: every later call of the proof is its replay.
          first.resolve(true);
          for (const w of replays) w.resolve(false);
          return;
        }
        // Refused at the batch's earliest time. A call whose own time is later decides at its
        // own (a record that expired within the batch's few milliseconds), one after another in
        // the batch's order, as one call at a time would have. Nothing of them was written.
        if (first.input.now === earliest) first.resolve(false);
        else replays.unshift(first);
        await this.#oneByOne(replays);
      }),
    );
  }

  /** Each of `calls` (of one proof) alone, one after another. */
  async #oneByOne(calls: readonly Waiting<UseInput, boolean>[]): Promise<void> {
    for (const w of calls) await this.#useOne(w);
  }
}

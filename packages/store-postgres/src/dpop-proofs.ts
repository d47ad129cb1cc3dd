// The PostgreSQL store's DPoP proof records: the proofs of one event-loop turn recorded in one
// statement (see `DpopProofs`).
import type { PgContext } from './context.js';
import { sweepExpired } from './sessions.js';
import { lockFailed, type Named, rowRefused, rows } from './sql.js';
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
 * `useDpopProof` of the PostgreSQL store: every DPoP-checked request (and every refresh of a
 * bound session) records its proof, one statement that was a round trip of its own per request
 * (docs/performance.md, 2026-11-29). Now the proofs of one event-loop turn share one statement
 * (see `TurnBatch`):
 * - the batch's proofs are recorded at the earliest `now` of its calls: an expired record is
 *   taken over only if it had expired by then. A call refused there whose own time is later
 *   goes again alone at its own time, so each call is decided at its own `now`, as the store
 *   contract says;
 * - calls naming the same proof (a replay racing its request) share one row: the batch's first
 *   call of it is recorded, every other one is refused, as if it had come second;
 * - when the statement fails for a row (SQLSTATE 22, 23) or its locks (class 40), nothing was
 *   recorded and each call goes alone; any other error (an outage, a timeout) is every call's own.
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
      const used = await rows(this.#ctx.pool, USE_PROOF, [w.input.key, w.input.expiresAt, w.input.now]);
      w.resolve(used.length === 1);
    } catch (error) {
      w.reject(error);
    }
  }

  async #use(batch: readonly Waiting<UseInput, boolean>[]): Promise<void> {
    if (batch.length === 1) return this.#useOne(batch[0] as Waiting<UseInput, boolean>);
    // The first call of each proof; the others of the batch are its replays.
    const firsts = new Map<string, Waiting<UseInput, boolean>>();
    for (const w of batch) if (!firsts.has(w.input.key)) firsts.set(w.input.key, w);
    const calls = [...firsts.values()];
    const earliest = Math.min(...calls.map((w) => w.input.now));
    let recorded: Set<string>;
    try {
      const used = await rows<{ proof_key: string }>(this.#ctx.pool, USE_PROOFS, [
        calls.map((w) => w.input.key),
        calls.map((w) => w.input.expiresAt),
        earliest,
      ]);
      recorded = new Set(used.map((r) => r.proof_key));
    } catch (error) {
      if (!rowRefused(error) && !lockFailed(error)) throw error;
      await Promise.all(batch.map((w) => this.#useOne(w)));
      return;
    }
    const again: Waiting<UseInput, boolean>[] = [];
    for (const w of batch) {
      if (firsts.get(w.input.key) !== w) w.resolve(false);
      else if (recorded.has(w.input.key)) w.resolve(true);
      // Refused at the batch's earliest time, which is not this call's own: its own decides (a
      // record that expired within the batch's few milliseconds). Nothing of it was written.
      else if (w.input.now !== earliest) again.push(w);
      else w.resolve(false);
    }
    await Promise.all(again.map((w) => this.#useOne(w)));
  }
}

/** A call waiting for its turn's statement: settle it with `resolve` or `reject`. */
export interface Waiting<I, O> {
  readonly input: I;
  readonly resolve: (output: O) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * The calls of one event-loop turn, gathered for one statement: each call waits for the turn's
 * check phase (`setImmediate`), and then `send` gets the turn's calls (in order, at most `max`
 * at a time) and settles each. Every PostgreSQL round trip costs the node a socket write that
 * wakes a sleeping backend and its reply's parsing: under load, the calls of a turn share them.
 * A call `send` leaves unsettled when it throws or rejects is rejected with that error.
 *
 * @example
 * const inserts = new TurnBatch<Row, void>(256, async (batch) => { await insertAll(batch.map((w) => w.input)); for (const w of batch) w.resolve(); });
 * await inserts.add(row);
 */
export class TurnBatch<I, O> {
  readonly #max: number;
  readonly #send: (batch: readonly Waiting<I, O>[]) => Promise<void>;
  #waiting: Waiting<I, O>[] = [];

  constructor(max: number, send: (batch: readonly Waiting<I, O>[]) => Promise<void>) {
    this.#max = max;
    this.#send = send;
  }

  /** Queues `input` for this turn's statement; answers what `send` settles it with. */
  add(input: I): Promise<O> {
    return new Promise((resolve, reject) => {
      if (this.#waiting.length === 0) setImmediate(this.#flush);
      this.#waiting.push({ input, resolve, reject });
    });
  }

  readonly #flush = (): void => {
    const all = this.#waiting;
    this.#waiting = [];
    for (let i = 0; i < all.length; i += this.#max) void this.#run(all.slice(i, i + this.#max));
  };

  async #run(batch: readonly Waiting<I, O>[]): Promise<void> {
    try {
      await this.#send(batch);
    } catch (error) {
      // A promise settles once: the calls `send` answered keep their answers.
      for (const w of batch) w.reject(error);
    }
  }
}

/**
 * The named statements of one lookup by a list of keys, one per arity: `render(list)` with
 * `list` the placeholders `$first, ..., $(first + n - 1)` for n = 2, 4, 8, ... up to `max`.
 * A batch of k keys uses the smallest n of at least k, its list padded with repeats of its
 * first key (an index scan reads each key once). Not `= ANY($1::text[])`: PostgreSQL's generic
 * plan of that assumes ten elements, costlier than a custom plan of the one or two a batch
 * usually holds, so on a table of some thousands of rows it planned the statement anew on every
 * execution (docs/performance.md, 2026-11-28 at 16:00); with n parameters the generic plan costs
 * what a custom plan does, and each connection keeps it.
 *
 * @example
 * const byArity = statementsByArity('svc_sessions_for_access', 256, 1, (list) => `SELECT ... WHERE s.id IN (${list})`);
 */
export function statementsByArity(
  name: string,
  max: number,
  first: number,
  render: (list: string) => string,
): ReadonlyMap<number, { readonly name: string; readonly text: string }> {
  return new Map(
    Array.from({ length: Math.log2(max) }, (_, i) => {
      const arity = 2 ** (i + 1);
      const list = Array.from({ length: arity }, (_, j) => `$${first + j}`).join(', ');
      return [arity, { name: `${name}_${arity}`, text: render(list) }];
    }),
  );
}

/** `keys` (distinct, at least two) padded to the arity of its statement in `byArity` (see {@link statementsByArity}). */
export function paddedKeys<S>(
  byArity: ReadonlyMap<number, S>,
  keys: readonly string[],
): { readonly statement: S; readonly values: readonly string[] } {
  const arity = 2 ** Math.ceil(Math.log2(keys.length));
  const statement = byArity.get(arity);
  if (statement === undefined) throw new RangeError(`a batch holds at most ${Math.max(...byArity.keys())} keys, not ${keys.length}`);
  return { statement, values: [...keys, ...Array<string>(arity - keys.length).fill(keys[0] as string)] };
}

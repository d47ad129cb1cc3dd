// The PostgreSQL store's sign-in challenges: stored and used up in batches, the calls of one
// event-loop turn sharing one statement (see `Challenges`).
import { CHALLENGE_COLUMNS, consumableChallengeSql } from '@svc/core/sql-rows';
import {
  type ChallengeRecord,
  type ChallengeRow,
  type ConsumedChallenge,
  consumedChallenge,
  type DeviceRow,
  latestTrustedTime,
  toChallenge,
  toDevice,
} from '@svc/core/store';
import type { PgContext } from './context.js';
import { sweepExpired } from './sessions.js';
import { callsGoAlone, type Named, rows, runReplicated, writtenRows } from './sql.js';
import { paddedKeys, statementsByArity, TurnBatch, type Waiting } from './turn-batch.js';

/** The most challenges one statement stores or uses up; a busier turn sends several. */
const CHALLENGE_BATCH_MAX = 256;

const CREATE_CHALLENGE: Named = {
  name: 'svc_create_challenge',
  text: `INSERT INTO challenges (${CHALLENGE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)`,
};

// Many rows as one statement: one array per column. No condition, so no plan to choose.
const CREATE_CHALLENGES: Named = {
  name: 'svc_create_challenges',
  text: `INSERT INTO challenges (${CHALLENGE_COLUMNS})
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[])`,
};

/**
 * Uses up the challenges `idCondition` names in one conditional DELETE ... RETURNING (`use`; or
 * reads them by the same condition, without using them up), each with
 * the active device of its key (at most one: the active keys are unique), `$1` the time and `$2`
 * the latest creation time it trusts. The first caller takes a row away; every concurrent one
 * blocks on it, finds it deleted when the winner commits and matches nothing. A used challenge
 * can only ever be refused, so it is not kept until it expires: the table holds the challenges
 * still open and nothing else (at 400 sign-ins a second and the default 60 s, it held 24,000
 * used rows, which every challenge's prune scanned while the table's statistics were those of an
 * empty one). A challenge dated in the future (a clock stepped back) cannot be aged: refused.
 */
function consumeSql(idCondition: string, use = true): string {
  const condition = `${idCondition} AND ${consumableChallengeSql('$1', '$2')}`;
  return `WITH found AS (
       ${use ? `DELETE FROM challenges WHERE ${condition} RETURNING ${CHALLENGE_COLUMNS}` : `SELECT ${CHALLENGE_COLUMNS} FROM challenges WHERE ${condition}`}
     )
     SELECT found.*, d.id AS d_id, d.realm AS d_realm, d.subject AS d_subject, d.name AS d_name, d.created_at AS d_created_at
       FROM found LEFT JOIN devices d ON d.public_key = found.public_key AND d.removed_at IS NULL`;
}

/** The statements that use challenges up (`use`) or read them as using them up would find them (`read`): one id, then 2 to {@link CHALLENGE_BATCH_MAX} (see `statementsByArity`). */
const STATEMENTS = {
  use: {
    one: { name: 'svc_consume_challenge', text: consumeSql('id = $3') } as Named,
    many: statementsByArity('svc_consume_challenges', CHALLENGE_BATCH_MAX, 3, (list) => consumeSql(`id IN (${list})`)),
  },
  read: {
    one: { name: 'svc_read_challenge', text: consumeSql('id = $3', false) } as Named,
    many: statementsByArity('svc_read_challenges', CHALLENGE_BATCH_MAX, 3, (list) => consumeSql(`id IN (${list})`, false)),
  },
} as const;
type Verb = keyof typeof STATEMENTS;

/** A used challenge's row with the active device of its key (`d_` columns, all null without one). */
type ConsumedChallengeRow = ChallengeRow & {
  d_id: string | null;
  d_realm: DeviceRow['realm'] | null;
  d_subject: string | null;
  d_name: string | null;
  d_created_at: number | null;
};

function toConsumed(row: ConsumedChallengeRow): ConsumedChallenge {
  const device =
    row.d_id === null
      ? null
      : toDevice({
          id: row.d_id,
          public_key: row.public_key,
          realm: row.d_realm as DeviceRow['realm'],
          subject: row.d_subject as string,
          name: row.d_name as string,
          created_at: row.d_created_at as number,
          removed_at: null,
        });
  return consumedChallenge(toChallenge(row), device);
}

type UseInput = { readonly id: string; readonly now: number };

/**
 * `createChallenge`, `consumeChallenge` and `readChallenge` of the PostgreSQL store. A sign-in
 * writes a challenge and later reads it (a refused one uses it up; a session uses it up in its
 * own statement, see `NewSessions`); each of those was a statement of its own, and every round
 * trip costs the node a socket write that wakes a sleeping backend, and the reply's parsing
 * (docs/performance.md, 2026-11-28 at 22:00). Now the calls of one event-loop turn share one
 * statement (see `TurnBatch`), so under load a busy node sends one for several sign-ins:
 * - challenges are inserted as one multi-row INSERT, which commits all or none of them: when it
 *   fails, each is inserted again alone, so a row the table refuses (an id stored twice) fails
 *   its own call and never another's;
 * - challenges are used up by one DELETE of every id of the batch, decided at the latest `now`
 *   of its calls and trusting creation times up to the earliest one's bound (`latestTrustedTime`):
 *   never a challenge one of them alone would have refused. A call refused there whose own time
 *   differs goes again alone at its own time, so each call is decided at its own `now`, as the
 *   store contract says. Calls naming the same id (a replay racing its sign-in) share one row:
 *   the first call of the batch gets it, every other one gets nothing, as if it had come
 *   second. When the statement fails for its locks (a deadlock with another node's batch, a lock
 *   timeout), each call goes alone (`callsGoAlone`);
 * - challenges are read (a sign-in's, before its signature is checked) by one SELECT of every id
 *   of the batch, on the primary, with the same rule for times; every call naming an id gets its
 *   row (a read uses nothing up).
 *
 * @example
 * const challenges = new Challenges(ctx);
 * await challenges.create(record);
 * const used = await challenges.consume({ id: record.id, now });
 */
export class Challenges {
  readonly #ctx: PgContext;
  readonly #creates: TurnBatch<ChallengeRecord, void>;
  readonly #uses: TurnBatch<UseInput, ConsumedChallenge | null>;
  readonly #reads: TurnBatch<UseInput, ConsumedChallenge | null>;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
    this.#creates = new TurnBatch(CHALLENGE_BATCH_MAX, (batch) => this.#insert(batch));
    this.#uses = new TurnBatch(CHALLENGE_BATCH_MAX, (batch) => this.#use(batch, 'use'));
    this.#reads = new TurnBatch(CHALLENGE_BATCH_MAX, (batch) => this.#use(batch, 'read'));
  }

  async create(challenge: ChallengeRecord): Promise<void> {
    await this.#creates.add(challenge);
    await sweepExpired(this.#ctx, 'challenges', challenge.createdAt);
  }

  consume(input: UseInput): Promise<ConsumedChallenge | null> {
    return this.#uses.add(input);
  }

  read(input: UseInput): Promise<ConsumedChallenge | null> {
    return this.#reads.add(input);
  }

  /** Runs a statement of `verb`: a use on the primary, replicated like every write; a read on the primary. */
  #run(verb: Verb, statement: Named, values: readonly unknown[]): Promise<ConsumedChallengeRow[]> {
    return verb === 'use'
      ? writtenRows<ConsumedChallengeRow>(this.#ctx.pool, statement, values)
      : rows<ConsumedChallengeRow>(this.#ctx.pool, statement, values);
  }

  async #insertOne(w: Waiting<ChallengeRecord, void>): Promise<void> {
    const c = w.input;
    try {
      await runReplicated(this.#ctx.pool, CREATE_CHALLENGE, [c.id, c.publicKey, c.realm, c.challenge, c.createdAt, c.expiresAt]);
      w.resolve();
    } catch (error) {
      w.reject(error);
    }
  }

  async #insert(batch: readonly Waiting<ChallengeRecord, void>[]): Promise<void> {
    if (batch.length === 1) return this.#insertOne(batch[0] as Waiting<ChallengeRecord, void>);
    const all = batch.map((w) => w.input);
    try {
      await runReplicated(this.#ctx.pool, CREATE_CHALLENGES, [
        all.map((c) => c.id),
        all.map((c) => c.publicKey),
        all.map((c) => c.realm),
        all.map((c) => c.challenge),
        all.map((c) => c.createdAt),
        all.map((c) => c.expiresAt),
      ]);
    } catch (error) {
      // Nothing of the batch was stored (a row the table refused, say): each goes again alone
      // and fails, if it does, alone.
      if (!callsGoAlone(error)) throw error;
      await Promise.all(batch.map((w) => this.#insertOne(w)));
      return;
    }
    for (const w of batch) w.resolve();
  }

  /** Uses up (or reads) one challenge at its own call's time (the single statement). */
  async #useOne(w: Waiting<UseInput, ConsumedChallenge | null>, verb: Verb): Promise<void> {
    try {
      const [row] = await this.#run(verb, STATEMENTS[verb].one, [w.input.now, latestTrustedTime(w.input.now), w.input.id]);
      w.resolve(row === undefined ? null : toConsumed(row));
    } catch (error) {
      w.reject(error);
    }
  }

  async #use(batch: readonly Waiting<UseInput, ConsumedChallenge | null>[], verb: Verb): Promise<void> {
    if (batch.length === 1) return this.#useOne(batch[0] as Waiting<UseInput, ConsumedChallenge | null>, verb);
    const ids = [...new Set(batch.map((w) => w.input.id))];
    const nows = batch.map((w) => w.input.now);
    const [latestNow, earliestBound] = [Math.max(...nows), latestTrustedTime(Math.min(...nows))];
    let found: ConsumedChallengeRow[];
    try {
      if (ids.length === 1) {
        found = await this.#run(verb, STATEMENTS[verb].one, [latestNow, earliestBound, ids[0]]);
      } else {
        const { statement, values } = paddedKeys(STATEMENTS[verb].many, ids);
        found = await this.#run(verb, statement, [latestNow, earliestBound, ...values]);
      }
    } catch (error) {
      // The statement rolled back (a lock wait that ended in a deadlock or a timeout, on a row
      // another node holds): nothing was used up, and each call goes alone, as it did before.
      if (!callsGoAlone(error)) throw error;
      await Promise.all(batch.map((w) => this.#useOne(w, verb)));
      return;
    }
    const byId = new Map(found.map((row) => [row.id, row]));
    const again: Waiting<UseInput, ConsumedChallenge | null>[] = [];
    for (const w of batch) {
      const row = byId.get(w.input.id);
      // One row, one sign-in: the batch's first call of an id takes it (a read takes nothing).
      if (verb === 'use') byId.delete(w.input.id);
      if (row === undefined) {
        // Refused at the batch's strictest time, which is not this call's own: its own decides
        // (a challenge that expired, or became trusted, within the batch's few milliseconds).
        // A row the batch used up is gone, so this never uses one twice.
        if (w.input.now !== latestNow || latestTrustedTime(w.input.now) !== earliestBound) again.push(w);
        else w.resolve(null);
        continue;
      }
      // A row that cannot be read fails its own call, never the others of the batch.
      try {
        w.resolve(toConsumed(row));
      } catch (error) {
        w.reject(error);
      }
    }
    await Promise.all(again.map((w) => this.#useOne(w, verb)));
  }
}

// The PostgreSQL store's new sessions: the sign-ins of one event-loop turn create theirs, and use
// their challenges up, in one statement (see `NewSessions`).
import type { AuditEventDraft } from '@svc/core';
import { consumableChallengeSql, NEW_SESSION_COLUMNS, newSessionValues } from '@svc/core/sql-rows';
import type { SessionCreation, SessionRecord, TokenPairDigests } from '@svc/core/store';
import { PENDING_COLUMNS, pendingValues } from './audit-sealer.js';
import type { PgContext } from './context.js';
import { challengeUse, createSession } from './sessions.js';
import { callsGoAlone, type Named, writtenRows } from './sql.js';
import { TurnBatch, type Waiting } from './turn-batch.js';

/** The most sessions one statement creates; a busier turn sends several. */
const SESSION_BATCH_MAX = 256;

type Created = SessionCreation;
type NewSession = {
  readonly session: SessionRecord;
  readonly pair: TokenPairDigests;
  readonly event: AuditEventDraft;
  readonly challenge: { readonly id: string; readonly now: number } | undefined;
};

/**
 * The array types of {@link NEW_SESSION_COLUMNS}' values, then of {@link PENDING_COLUMNS}'
 * (`newSessionValues`, `pendingValues`), then of the sign-in's challenge (`challengeUse`).
 */
const ARRAY_TYPES = [
  ...['text', 'text', 'text', 'text', 'bigint', 'bigint', 'text', 'bigint', 'text', 'bigint', 'int', 'bigint', 'bigint'],
  ...['text', 'text', 'text', 'text', 'text'],
  ...['text', 'bigint', 'text', 'text', 'text', 'text', 'text', 'text'],
  ...['text', 'bigint', 'bigint'],
];
const PENDING = PENDING_COLUMNS.split(', ').map((c) => `e_${c}`);

/**
 * Many sessions as one statement, with one array per value: what `createSession` (sessions.ts)
 * does for one, for each row of `input`. Each sign-in's challenge is used up at its own time
 * (`c_now`, `c_latest`); a challenge named twice in the batch (a replay racing its sign-in) is
 * the first row's, decided at its time (a later row refused at another time goes again alone,
 * at its own), and a row whose challenge was not used up writes nothing. Every device of the
 * batch is share-locked first, in id order, and then every user that signs in, in subject order:
 * the order `changeUser` and `removeDevice` take them, so a batch never waits on them in a cycle.
 * A removed device or a disabled user that committed before its lock was granted is re-read by it
 * and matches nothing, as with one session. A user signing in twice in one batch records the
 * later time. Answers each row, in order, with whether its session was created, its device was
 * active and its challenge (if any) was used up.
 */
const CREATE_SESSIONS: Named = {
  name: 'svc_create_sessions',
  text: `WITH input AS (
       SELECT * FROM unnest(${ARRAY_TYPES.map((t, i) => `$${i + 1}::${t}[]`).join(', ')}) WITH ORDINALITY
         AS i(${NEW_SESSION_COLUMNS}, ${PENDING.join(', ')}, c_id, c_now, c_latest, ord)
     ), firsts AS (
       SELECT DISTINCT ON (c_id) c_id, c_now, c_latest, ord FROM input WHERE c_id IS NOT NULL ORDER BY c_id, ord
     ), used AS (
       DELETE FROM challenges AS c USING firsts AS f
        WHERE c.id = f.c_id AND ${consumableChallengeSql('f.c_now', 'f.c_latest', 'c.')}
       RETURNING f.ord
     ), usable AS (
       SELECT * FROM input WHERE c_id IS NULL OR ord IN (SELECT ord FROM used)
     ), live AS (
       SELECT id FROM devices WHERE id IN (SELECT device_id FROM input) AND removed_at IS NULL ORDER BY id FOR SHARE
     ), known AS (
       SELECT subject FROM users WHERE subject IN (SELECT subject FROM input)
     ), signing AS (
       SELECT subject, max(created_at) AS at FROM usable WHERE device_id IN (SELECT id FROM live) GROUP BY subject
     ), locked AS (
       SELECT subject FROM users WHERE subject IN (SELECT subject FROM signing) AND status <> 'disabled'
        ORDER BY subject COLLATE "C" FOR NO KEY UPDATE
     ), signed AS (
       UPDATE users AS u SET last_sign_in_at = s.at FROM signing AS s
        WHERE u.subject = s.subject AND u.subject IN (SELECT subject FROM locked) AND u.status <> 'disabled'
       RETURNING u.subject
     ), created AS (
       INSERT INTO sessions (${NEW_SESSION_COLUMNS})
       SELECT ${NEW_SESSION_COLUMNS} FROM usable
        WHERE device_id IN (SELECT id FROM live)
          AND (subject IN (SELECT subject FROM signed) OR subject NOT IN (SELECT subject FROM known))
        ORDER BY ord
       RETURNING id
     ), audited AS (
       INSERT INTO audit_pending (${PENDING_COLUMNS})
       SELECT ${PENDING.join(', ')} FROM input WHERE id IN (SELECT id FROM created) ORDER BY ord
     )
     SELECT id IN (SELECT id FROM created) AS created, device_id IN (SELECT id FROM live) AS live,
            ord IN (SELECT ord FROM usable) AS usable
       FROM input ORDER BY ord`,
};

/**
 * `createSession` of the PostgreSQL store. Every sign-in creates a session, one statement that
 * was a round trip of its own per sign-in: the one a sign-in waited longest for, after the node
 * wrote it to a sleeping backend (docs/performance.md, 2026-11-29). Now the sign-ins of one
 * event-loop turn share one statement (see `TurnBatch`), which commits all of them or none:
 * - each gets its own answer: `created`, or refused for its own challenge (`challenge_used`),
 *   its own device (`device_inactive`) or its own user (`user_disabled`), decided on the rows as
 *   their locks found them;
 * - when the statement fails for a row (SQLSTATE classes 22 and 23: a session or event id
 *   stored twice) or for its locks (a deadlock or serialization failure with another node's
 *   writes, class 40, or one call's row held past `lock_timeout`, 55P03), nothing of the batch
 *   was written and each goes again alone, so it fails,
 *   if it does, alone. Any other error (an outage, a timeout, a connection lost, perhaps after
 *   the commit) is every call's own, as it was with one statement each.
 *
 * @example
 * const created = await new NewSessions(ctx).create({ session, pair, event, challenge: { id: challengeId, now } });
 */
export class NewSessions {
  readonly #ctx: PgContext;
  readonly #creates: TurnBatch<NewSession, Created>;

  constructor(ctx: PgContext) {
    this.#ctx = ctx;
    this.#creates = new TurnBatch(SESSION_BATCH_MAX, (batch) => this.#create(batch));
  }

  create(input: NewSession): Promise<Created> {
    return this.#creates.add(input);
  }

  async #createOne(w: Waiting<NewSession, Created>): Promise<void> {
    try {
      w.resolve(await createSession(this.#ctx, w.input.session, w.input.pair, w.input.event, w.input.challenge));
    } catch (error) {
      w.reject(error);
    }
  }

  async #create(batch: readonly Waiting<NewSession, Created>[]): Promise<void> {
    if (batch.length === 1) return this.#createOne(batch[0] as Waiting<NewSession, Created>);
    const values = batch.map((w) => [
      ...newSessionValues(w.input.session, w.input.pair),
      ...pendingValues(w.input.event),
      ...challengeUse(w.input.challenge),
    ]);
    let answered: { created: boolean; live: boolean; usable: boolean }[];
    try {
      answered = await writtenRows(
        this.#ctx.pool,
        CREATE_SESSIONS,
        ARRAY_TYPES.map((_, i) => values.map((v) => v[i])),
      );
    } catch (error) {
      if (!callsGoAlone(error)) throw error;
      await Promise.all(batch.map((w) => this.#createOne(w)));
      return;
    }
    if (answered.some((a) => a.created)) this.#ctx.scheduleSeal();
    // A challenge named by several rows was decided at its first row's time (`firsts`).
    const firstUse = new Map<string, number>();
    for (const w of batch)
      if (w.input.challenge !== undefined && !firstUse.has(w.input.challenge.id)) firstUse.set(w.input.challenge.id, w.input.challenge.now);
    const again: Waiting<NewSession, Created>[] = [];
    batch.forEach((w, i) => {
      const a = answered[i];
      const c = w.input.challenge;
      if (a === undefined) w.reject(new Error(`svc_create_sessions answered ${answered.length} rows for ${batch.length} sessions`));
      // Refused at another row's time, not its own: its own decides, alone (a row the batch used
      // up is gone, so this never uses one twice).
      else if (!a.usable && c !== undefined && firstUse.get(c.id) !== c.now) again.push(w);
      else w.resolve(a.created ? 'created' : !a.usable ? 'challenge_used' : a.live ? 'user_disabled' : 'device_inactive');
    });
    await Promise.all(again.map((w) => this.#createOne(w)));
  }
}

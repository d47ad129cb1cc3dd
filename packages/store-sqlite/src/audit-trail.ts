// The SQLite store's operations on the audit trail (see `SqliteStore`, whose methods call these).
import { type AuditEvent, type AuditEventDraft, GENESIS_HASH, sealAuditEvent } from '@svc/core';
import { EVENT_COLUMNS } from '@svc/core/sql-rows';
import { auditPage, type EventRow, toEvent } from '@svc/core/store';
import type Database from 'better-sqlite3';
import type { SqliteContext } from './context.js';
import type { EventInsert } from './rows.js';

/** The statements of this module, prepared once per connection. */
function prepare(db: Database.Database) {
  // Each statement declares its parameters and row, so reads need no casts.
  const p = <Params extends unknown[] | object = [], Row = unknown>(sql: string) => db.prepare<Params, Row>(sql);
  return {
    // [seq, hash]: an array, not an object with named fields (cheaper to build, read by every batch's first append).
    auditHead: p<[], [seq: number, hash: string]>('SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1').raw(true),
    // Positional, in EVENT_COLUMNS' order: named parameters are looked up on an object one by one.
    insertEvent: p<EventInsert>(`INSERT INTO audit_events (${EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    listEvents: p<[number, number], EventRow>(`SELECT ${EVENT_COLUMNS} FROM audit_events WHERE seq > ? ORDER BY seq LIMIT ?`),
    countEvent: p<[string]>('INSERT INTO audit_counts (type, n) VALUES (?, 1) ON CONFLICT (type) DO UPDATE SET n = n + 1'),
  };
}

/** The SQLite store's operations on the audit trail, on the store's connection. */
export class SqliteAuditTrail {
  readonly #ctx: SqliteContext;
  readonly #s: ReturnType<typeof prepare>;

  constructor(ctx: SqliteContext) {
    this.#ctx = ctx;
    this.#s = prepare(ctx.db);
  }

  /** Seals `draft` after the current head and appends it. Call only inside a write transaction. */
  append(draft: AuditEventDraft): AuditEvent {
    let head = this.#ctx.writes.head;
    if (head === undefined) {
      const row = this.#s.auditHead.get();
      if (row !== undefined) head = { seq: row[0], hash: row[1] };
    }
    const event = sealAuditEvent(draft, head?.seq ?? 0, head?.hash ?? GENESIS_HASH);
    this.#s.insertEvent.run(
      event.seq,
      event.id,
      event.at,
      event.type,
      event.realm,
      event.subject,
      event.deviceId,
      event.sessionId,
      JSON.stringify(event.data),
      event.prevHash,
      event.hash,
    );
    this.#s.countEvent.run(event.type);
    this.#ctx.writes.head = { seq: event.seq, hash: event.hash };
    return event;
  }

  async appendAuditEvent(event: AuditEventDraft): Promise<AuditEvent> {
    return this.#ctx.writes.run(() => this.#ctx.append(event));
  }

  async listAuditEvents(input: { readonly afterSeq: number; readonly limit: number }): Promise<readonly AuditEvent[]> {
    const page = auditPage(input);
    const rows = this.#s.listEvents.all(page.afterSeq, page.limit);
    return rows.map(toEvent);
  }

  async auditHead(): Promise<{ readonly seq: number; readonly hash: string } | null> {
    const head = this.#s.auditHead.get();
    return head === undefined ? null : { seq: head[0], hash: head[1] };
  }
}

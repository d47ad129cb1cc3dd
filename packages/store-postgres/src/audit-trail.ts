// The PostgreSQL store's operations on the audit trail (see `PostgresStore`, whose methods call these).
import type { AuditEvent, AuditEventDraft } from '@svc/core';
import { EVENT_COLUMNS } from '@svc/core/sql-rows';
import { auditPage, type EventRow, toEvent } from '@svc/core/store';
import type { PgContext } from './context.js';
import { first, rows } from './sql.js';

export async function appendAuditEvent(ctx: PgContext, event: AuditEventDraft): Promise<AuditEvent> {
  await ctx.tx((c) => ctx.append(c, event));
  // The caller gets the event as chained: sealed now (with whatever else is pending).
  await ctx.sealPending();
  const row = await first<EventRow>(ctx.pool, `SELECT ${EVENT_COLUMNS} FROM audit_events WHERE id = $1`, [event.id]);
  if (row === undefined) throw new Error(`audit event ${event.id} was not chained`);
  return toEvent(row);
}

export async function listAuditEvents(
  ctx: PgContext,
  input: { readonly afterSeq: number; readonly limit: number },
): Promise<readonly AuditEvent[]> {
  await ctx.sealPending();
  const page = auditPage(input);
  const list = await rows<EventRow>(ctx.pool, `SELECT ${EVENT_COLUMNS} FROM audit_events WHERE seq > $1 ORDER BY seq LIMIT $2`, [
    page.afterSeq,
    page.limit,
  ]);
  return list.map(toEvent);
}

export async function auditHead(ctx: PgContext): Promise<{ readonly seq: number; readonly hash: string } | null> {
  await ctx.sealPending();
  const head = await first<{ seq: number; hash: string }>(ctx.pool, 'SELECT seq, hash FROM audit_head');
  return head === undefined || head.seq === 0 ? null : { seq: head.seq, hash: head.hash };
}

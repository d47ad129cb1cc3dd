import type { AuditEvent } from '@svc/core';
import type { Store } from '@svc/core/store';

const PAGE = 1000;

/**
 * Every audit event of the store, in order, read page by page.
 *
 * @example
 * for await (const event of allAuditEvents(store)) console.log(event.type);
 */
export async function* allAuditEvents(store: Store): AsyncGenerator<AuditEvent> {
  let after = 0;
  for (;;) {
    const page = await store.listAuditEvents({ afterSeq: after, limit: PAGE });
    for (const event of page) yield event;
    const last = page.at(-1);
    if (page.length < PAGE || last === undefined) return;
    after = last.seq;
  }
}

import type { AuditData, AuditEventDraft, AuditEventType } from '../audit.js';
import type { AuthDeps } from '../deps.js';
import { newId } from '../ids.js';
import type { Realm } from '../realm.js';

/** Builds an audit event draft stamped with the deps' clock. */
export function auditDraft(
  deps: Pick<AuthDeps, 'clock' | 'random'>,
  type: AuditEventType,
  fields: {
    realm?: Realm | null;
    subject?: string | null;
    deviceId?: string | null;
    sessionId?: string | null;
    data?: AuditData;
    at?: number;
  },
): AuditEventDraft {
  return {
    id: newId('event', deps.clock, deps.random),
    at: fields.at ?? deps.clock.now(),
    type,
    realm: fields.realm ?? null,
    subject: fields.subject ?? null,
    deviceId: fields.deviceId ?? null,
    sessionId: fields.sessionId ?? null,
    data: fields.data ?? {},
  };
}

// The rows and named parameters of the SQLite store's statements.
import type { AuditEvent } from '@svc/core';
import type { SessionRecord, TokenPairDigests } from '@svc/core/store';

export interface BootstrapRow {
  used_at: number | null;
  superseded_at: number | null;
  expires_at: number;
}

export interface ProjectRow {
  project_id: string;
  created_at: number;
}

/** The named parameters of the session INSERT: the record with its first pair's digests. */
export type SessionInsert = Omit<SessionRecord, 'amr' | 'jkt' | 'parentId'> &
  Pick<TokenPairDigests, 'accessDigest' | 'refreshDigest'> & { amr: string; jkt: string | null; parentId: string | null };

/** The named parameters of a rotation's UPDATE. */
export interface PairUpdate {
  id: string;
  accessDigest: string;
  accessExpiresAt: number;
  refreshDigest: string;
  refreshExpiresAt: number;
  prevRefreshDigest: string;
  prevRotatedAt: number;
  prevSuccessor: string;
  now: number;
}

/** The named parameters of an audit event's INSERT. */
export type EventInsert = Omit<AuditEvent, 'data'> & { data: string };

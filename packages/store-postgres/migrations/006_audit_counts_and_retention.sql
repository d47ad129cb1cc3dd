-- Diagnostics counted audit events with GROUP BY over the whole trail: a cost that grew with
-- every event. The counts are now kept, one row per event type, updated in the transaction
-- that appends the event (after the audit_head lock, so appends stay serialised in one order).
CREATE TABLE audit_counts (
  type TEXT PRIMARY KEY,
  n    BIGINT NOT NULL
);
INSERT INTO audit_counts (type, n) SELECT type, COUNT(*) FROM audit_events GROUP BY type;

-- Retention deletes sessions and pairing intents some time after they ended: found by these
-- indexes instead of a scan of every row.
CREATE INDEX sessions_expires_at ON sessions (expires_at);
CREATE INDEX sessions_revoked_at ON sessions (revoked_at) WHERE revoked_at IS NOT NULL;
CREATE INDEX pairing_intents_expires_at ON pairing_intents (expires_at);

-- Batched sealing (issue #14). A write no longer locks audit_head: it inserts its event here,
-- in the same transaction as the change (no event lost, none for a change that did not
-- happen), and concurrent writers of every node commit side by side, so group commit batches
-- their WAL flushes. A sealer (any node, under the audit_head lock) moves these rows into the
-- chain in batches, in `pos` order, within milliseconds, and always before the trail, its head
-- or its counts are read.
CREATE TABLE audit_pending (
  pos        BIGSERIAL PRIMARY KEY,
  id         TEXT NOT NULL UNIQUE,
  at         BIGINT NOT NULL,
  type       TEXT NOT NULL,
  realm      TEXT,
  subject    TEXT,
  device_id  TEXT,
  session_id TEXT,
  data       TEXT NOT NULL
);

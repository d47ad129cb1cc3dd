-- The gateway's assertion key set is the cluster's (store contract 9): one row, its key set as
-- JSON text (private halves sealed under the nodes' key-encryption key when one is configured;
-- the store never reads it) and a version every save raises by one, compared and set by each
-- save so that of two rotations from one version exactly one wins.
CREATE TABLE assertion_keys (
  singleton  INTEGER PRIMARY KEY CHECK (singleton = 1),
  version    INTEGER NOT NULL CHECK (version >= 1),
  key_set    TEXT NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;

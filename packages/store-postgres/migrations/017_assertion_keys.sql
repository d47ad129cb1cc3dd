-- The gateway's assertion key set is the cluster's (store contract 9): one row shared by every
-- node, its key set as JSON text whose private halves are sealed (AES-256-GCM) under the nodes'
-- key-encryption key, which this database never holds: a dump of it reveals no private key.
-- `version` is raised by one on every save, and each save is conditional on the version it read
-- (compare-and-set), so of two nodes rotating at once exactly one wins.
CREATE TABLE assertion_keys (
  singleton  SMALLINT PRIMARY KEY CHECK (singleton = 1),
  version    BIGINT NOT NULL CHECK (version >= 1),
  key_set    TEXT NOT NULL,
  updated_at BIGINT NOT NULL
);

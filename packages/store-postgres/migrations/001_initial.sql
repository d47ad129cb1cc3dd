-- svc auth control store on PostgreSQL, schema version 1.
-- Runs with search_path set to the store's schema, inside the migration transaction.
-- Times are BIGINT milliseconds since the Unix epoch; digests and keys are lowercase hex TEXT.
-- Tokens are never stored: only their SHA-256 digests.

CREATE TABLE project (
  singleton  BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
  project_id TEXT NOT NULL,
  created_at BIGINT NOT NULL
);

CREATE TABLE devices (
  id         TEXT PRIMARY KEY,
  public_key TEXT NOT NULL,
  realm      TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  subject    TEXT NOT NULL,
  name       TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  removed_at BIGINT
);
-- A key may be enrolled again after its device was removed, but only once at a time. This
-- index is also the arbiter of concurrent enrolments of one key from several nodes.
CREATE UNIQUE INDEX devices_active_public_key ON devices (public_key) WHERE removed_at IS NULL;
CREATE INDEX devices_active_realm ON devices (realm, created_at) WHERE removed_at IS NULL;

CREATE TABLE bootstrap_tokens (
  id            TEXT PRIMARY KEY,
  digest        TEXT NOT NULL UNIQUE,
  created_at    BIGINT NOT NULL,
  expires_at    BIGINT NOT NULL,
  used_at       BIGINT,
  superseded_at BIGINT,
  device_id     TEXT REFERENCES devices (id) DEFERRABLE INITIALLY DEFERRED
);

CREATE TABLE challenges (
  id         TEXT PRIMARY KEY,
  public_key TEXT NOT NULL,
  realm      TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  challenge  TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  used_at    BIGINT
);
CREATE INDEX challenges_expires_at ON challenges (expires_at);

CREATE TABLE sessions (
  id                  TEXT PRIMARY KEY,
  realm               TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  subject             TEXT NOT NULL,
  device_id           TEXT NOT NULL REFERENCES devices (id),
  created_at          BIGINT NOT NULL,
  expires_at          BIGINT NOT NULL,
  -- The current pair. access_digest is the hot path of every authenticated request.
  access_digest       TEXT NOT NULL UNIQUE,
  access_expires_at   BIGINT NOT NULL,
  refresh_digest      TEXT NOT NULL UNIQUE,
  refresh_expires_at  BIGINT NOT NULL,
  -- The immediately previous refresh token, the only one a grace rotation accepts.
  prev_refresh_digest TEXT UNIQUE,
  prev_rotated_at     BIGINT,
  generation          INTEGER NOT NULL DEFAULT 0,
  last_rotated_at     BIGINT,
  revoked_at          BIGINT,
  revoked_reason      TEXT
);
CREATE INDEX sessions_device ON sessions (device_id);
CREATE INDEX sessions_created ON sessions (created_at);

-- Refresh tokens retired for good: presenting one is reuse.
CREATE TABLE retired_refresh_tokens (
  digest     TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions (id),
  retired_at BIGINT NOT NULL
);
CREATE INDEX retired_refresh_tokens_session ON retired_refresh_tokens (session_id);

CREATE TABLE pairing_intents (
  id           TEXT PRIMARY KEY,
  realm        TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  subject      TEXT NOT NULL,
  name         TEXT,
  code_digest  TEXT NOT NULL,
  created_at   BIGINT NOT NULL,
  expires_at   BIGINT NOT NULL,
  created_by   TEXT NOT NULL,
  failures     INTEGER NOT NULL DEFAULT 0,
  completed_at BIGINT,
  burned_at    BIGINT,
  device_id    TEXT REFERENCES devices (id) DEFERRABLE INITIALLY DEFERRED
);

-- The hash chain: seq is the position, hash covers the event and prev_hash. `data` is the
-- exact JSON text of the event's data (TEXT, not JSONB: JSONB refuses some strings JSON allows,
-- such as "\u0000", and the chain must reproduce every value exactly).
CREATE TABLE audit_events (
  seq        BIGINT PRIMARY KEY,
  id         TEXT NOT NULL UNIQUE,
  at         BIGINT NOT NULL,
  type       TEXT NOT NULL,
  realm      TEXT,
  subject    TEXT,
  device_id  TEXT,
  session_id TEXT,
  data       TEXT NOT NULL,
  prev_hash  TEXT NOT NULL,
  hash       TEXT NOT NULL
);
CREATE INDEX audit_events_type ON audit_events (type);

-- The one row every append locks (SELECT ... FOR UPDATE): it serialises the chain across all
-- nodes, so sequence numbers have no gaps and the chain never forks.
CREATE TABLE audit_head (
  singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
  seq       BIGINT NOT NULL,
  hash      TEXT NOT NULL
);
INSERT INTO audit_head (singleton, seq, hash) VALUES (TRUE, 0, '0000000000000000000000000000000000000000000000000000000000000000');

-- svc auth control store, schema version 1.
-- Times are INTEGER milliseconds since the Unix epoch; digests and keys are lowercase hex TEXT.
-- Tokens are never stored: only their SHA-256 digests.

-- Marks the file as a svc auth control store ("svca"), so opening some other SQLite file fails loudly.
PRAGMA application_id = 1937138529;

CREATE TABLE project (
  singleton  INTEGER PRIMARY KEY CHECK (singleton = 1),
  project_id TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE devices (
  id         TEXT PRIMARY KEY,
  public_key TEXT NOT NULL,
  realm      TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  subject    TEXT NOT NULL,
  name       TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  removed_at INTEGER
) STRICT;
-- A key may be enrolled again after its device was removed, but only once at a time.
CREATE UNIQUE INDEX devices_active_public_key ON devices (public_key) WHERE removed_at IS NULL;
CREATE INDEX devices_active_realm ON devices (realm, created_at) WHERE removed_at IS NULL;

CREATE TABLE bootstrap_tokens (
  id            TEXT PRIMARY KEY,
  digest        TEXT NOT NULL UNIQUE,
  created_at    INTEGER NOT NULL,
  expires_at    INTEGER NOT NULL,
  used_at       INTEGER,
  superseded_at INTEGER,
  device_id     TEXT REFERENCES devices (id)
) STRICT;

CREATE TABLE challenges (
  id         TEXT PRIMARY KEY,
  public_key TEXT NOT NULL,
  realm      TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  challenge  TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  used_at    INTEGER
) STRICT;
CREATE INDEX challenges_expires_at ON challenges (expires_at);

CREATE TABLE sessions (
  id                  TEXT PRIMARY KEY,
  realm               TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  subject             TEXT NOT NULL,
  device_id           TEXT NOT NULL REFERENCES devices (id),
  created_at          INTEGER NOT NULL,
  expires_at          INTEGER NOT NULL,
  -- The current pair. access_digest is the hot path of every authenticated request.
  access_digest       TEXT NOT NULL UNIQUE,
  access_expires_at   INTEGER NOT NULL,
  refresh_digest      TEXT NOT NULL UNIQUE,
  refresh_expires_at  INTEGER NOT NULL,
  -- The immediately previous refresh token, the only one a grace rotation accepts.
  prev_refresh_digest TEXT UNIQUE,
  prev_rotated_at     INTEGER,
  generation          INTEGER NOT NULL DEFAULT 0,
  last_rotated_at     INTEGER,
  revoked_at          INTEGER,
  revoked_reason      TEXT
) STRICT;
CREATE INDEX sessions_device ON sessions (device_id);
CREATE INDEX sessions_created ON sessions (created_at);

-- Refresh tokens retired for good: presenting one is reuse.
CREATE TABLE retired_refresh_tokens (
  digest     TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions (id),
  retired_at INTEGER NOT NULL
) STRICT;
CREATE INDEX retired_refresh_tokens_session ON retired_refresh_tokens (session_id);

CREATE TABLE pairing_intents (
  id           TEXT PRIMARY KEY,
  realm        TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  subject      TEXT NOT NULL,
  name         TEXT,
  code_digest  TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  expires_at   INTEGER NOT NULL,
  created_by   TEXT NOT NULL,
  failures     INTEGER NOT NULL DEFAULT 0,
  completed_at INTEGER,
  burned_at    INTEGER,
  device_id    TEXT REFERENCES devices (id)
) STRICT;

-- The hash chain: seq is the position, hash covers the event and prev_hash.
CREATE TABLE audit_events (
  seq        INTEGER PRIMARY KEY,
  id         TEXT NOT NULL UNIQUE,
  at         INTEGER NOT NULL,
  type       TEXT NOT NULL,
  realm      TEXT,
  subject    TEXT,
  device_id  TEXT,
  session_id TEXT,
  data       TEXT NOT NULL,
  prev_hash  TEXT NOT NULL,
  hash       TEXT NOT NULL
) STRICT;
CREATE INDEX audit_events_type ON audit_events (type);

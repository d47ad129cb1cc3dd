-- Provider links and flows (docs/providers.md §3). A link ties an external identity (an OIDC
-- issuer and subject, or a passkey's credential id) to a subject of one realm; a session it
-- signs in names the link id where a device session names its device. A flow is a provider
-- ceremony in progress: single use, short lived.

CREATE TABLE links (
  id               TEXT PRIMARY KEY,
  realm            TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  subject          TEXT NOT NULL,
  provider         TEXT NOT NULL,
  issuer           TEXT NOT NULL,
  external_subject TEXT NOT NULL,
  -- The provider's own data about the credential (a passkey's public key), JSON text; opaque here.
  credential_data  TEXT,
  -- A passkey's signature counter, kept strictly increasing; NULL for a credential without one.
  counter          INTEGER,
  name             TEXT NOT NULL,
  created_at       INTEGER NOT NULL,
  last_used_at     INTEGER,
  removed_at       INTEGER
) STRICT;
-- An identity may be linked again after its link was removed, but only once at a time per realm.
CREATE UNIQUE INDEX links_live_identity ON links (realm, issuer, external_subject) WHERE removed_at IS NULL;
CREATE INDEX links_subject ON links (subject, realm) WHERE removed_at IS NULL;

CREATE TABLE flows (
  id                TEXT PRIMARY KEY,
  provider          TEXT NOT NULL,
  realm             TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  intent            TEXT NOT NULL CHECK (intent IN ('signin', 'link', 'signup')),
  subject           TEXT,
  pairing_intent_id TEXT,
  state             TEXT NOT NULL,
  created_at        INTEGER NOT NULL,
  expires_at        INTEGER NOT NULL,
  consumed_at       INTEGER
) STRICT;
CREATE INDEX flows_expires_at ON flows (expires_at);

-- A session's device_id may now name a link: its foreign key to devices goes. SQLite cannot drop
-- a constraint, so sessions (and retired_refresh_tokens, which references it) are rebuilt, as in
-- migration 003, with every column, index and the WITHOUT ROWID layout kept. The reference is
-- still enforced, by the triggers below: a session names an existing device or link. A session
-- also records how it was made (amr, RFC 8176 values space-separated): every existing session
-- was made by a device key.
CREATE TABLE sessions_v9 (
  id                  TEXT PRIMARY KEY,
  realm               TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  subject             TEXT NOT NULL,
  device_id           TEXT NOT NULL,
  created_at          INTEGER NOT NULL,
  expires_at          INTEGER NOT NULL,
  access_digest       TEXT NOT NULL,
  access_expires_at   INTEGER NOT NULL,
  refresh_digest      TEXT NOT NULL,
  refresh_expires_at  INTEGER NOT NULL,
  prev_refresh_digest TEXT,
  prev_rotated_at     INTEGER,
  generation          INTEGER NOT NULL DEFAULT 0,
  last_rotated_at     INTEGER,
  revoked_at          INTEGER,
  revoked_reason      TEXT,
  prev_successor      TEXT,
  client_address      TEXT,
  user_agent          TEXT,
  amr                 TEXT NOT NULL DEFAULT 'ed25519'
) STRICT, WITHOUT ROWID;
INSERT INTO sessions_v9 (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at,
  refresh_digest, refresh_expires_at, prev_refresh_digest, prev_rotated_at, generation, last_rotated_at, revoked_at, revoked_reason,
  prev_successor, client_address, user_agent)
SELECT id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at,
  refresh_digest, refresh_expires_at, prev_refresh_digest, prev_rotated_at, generation, last_rotated_at, revoked_at, revoked_reason,
  prev_successor, client_address, user_agent
FROM sessions;

CREATE TABLE retired_refresh_tokens_v9 (
  session_id TEXT NOT NULL REFERENCES sessions_v9 (id),
  digest     TEXT NOT NULL,
  retired_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, digest)
) STRICT, WITHOUT ROWID;
INSERT INTO retired_refresh_tokens_v9 (session_id, digest, retired_at)
SELECT session_id, digest, retired_at FROM retired_refresh_tokens;

-- The child goes first, so dropping the old sessions table breaks no reference; renaming
-- sessions_v9 rewrites the reference in retired_refresh_tokens_v9 to the new name.
DROP TABLE retired_refresh_tokens;
DROP TABLE sessions;
ALTER TABLE sessions_v9 RENAME TO sessions;
ALTER TABLE retired_refresh_tokens_v9 RENAME TO retired_refresh_tokens;

CREATE INDEX sessions_device ON sessions (device_id);
CREATE INDEX sessions_created ON sessions (created_at);
CREATE INDEX sessions_expires_at ON sessions (expires_at);
CREATE INDEX sessions_revoked_at ON sessions (revoked_at) WHERE revoked_at IS NOT NULL;
CREATE INDEX sessions_subject ON sessions (subject, realm);
CREATE INDEX retired_refresh_tokens_retired_at ON retired_refresh_tokens (retired_at);

-- What the foreign key did: a session names a device or a link that exists (neither is ever deleted).
CREATE TRIGGER sessions_device_or_link_insert BEFORE INSERT ON sessions
WHEN NOT EXISTS (SELECT 1 FROM devices WHERE id = NEW.device_id) AND NOT EXISTS (SELECT 1 FROM links WHERE id = NEW.device_id)
BEGIN
  SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: sessions.device_id names no device or link');
END;
CREATE TRIGGER sessions_device_or_link_update BEFORE UPDATE OF device_id ON sessions
WHEN NOT EXISTS (SELECT 1 FROM devices WHERE id = NEW.device_id) AND NOT EXISTS (SELECT 1 FROM links WHERE id = NEW.device_id)
BEGIN
  SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: sessions.device_id names no device or link');
END;

-- Split session tokens: an access or refresh token now carries its session id (the selector)
-- before its 256-bit secret, so a token is found by the session's primary key and its digest
-- compared in constant time. The digest columns need no index any more: three random-keyed
-- unique indexes that every rotation rewrote are gone. Retired refresh-token digests are kept
-- per session. Tokens minted before this change have no selector and are refused as unknown
-- (their devices sign in again); the sessions themselves are kept, for listing and revocation.
-- Sessions are now a WITHOUT ROWID table: the row lives in its primary key's B-tree, so a
-- lookup by id is one descent instead of two (the id index, then the rowid table).

CREATE TABLE sessions_v3 (
  id                  TEXT PRIMARY KEY,
  realm               TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  subject             TEXT NOT NULL,
  device_id           TEXT NOT NULL REFERENCES devices (id),
  created_at          INTEGER NOT NULL,
  expires_at          INTEGER NOT NULL,
  -- The current pair, compared with a presented token's digest after the lookup by id.
  access_digest       TEXT NOT NULL,
  access_expires_at   INTEGER NOT NULL,
  refresh_digest      TEXT NOT NULL,
  refresh_expires_at  INTEGER NOT NULL,
  -- The immediately previous refresh token, the only one a grace rotation accepts.
  prev_refresh_digest TEXT,
  prev_rotated_at     INTEGER,
  generation          INTEGER NOT NULL DEFAULT 0,
  last_rotated_at     INTEGER,
  revoked_at          INTEGER,
  revoked_reason      TEXT
) STRICT, WITHOUT ROWID;
INSERT INTO sessions_v3 (id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at,
  refresh_digest, refresh_expires_at, prev_refresh_digest, prev_rotated_at, generation, last_rotated_at, revoked_at, revoked_reason)
SELECT id, realm, subject, device_id, created_at, expires_at, access_digest, access_expires_at,
  refresh_digest, refresh_expires_at, prev_refresh_digest, prev_rotated_at, generation, last_rotated_at, revoked_at, revoked_reason
FROM sessions;

-- Refresh tokens retired for good, per session: presenting one is reuse.
CREATE TABLE retired_refresh_tokens_v3 (
  session_id TEXT NOT NULL REFERENCES sessions_v3 (id),
  digest     TEXT NOT NULL,
  retired_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, digest)
) STRICT, WITHOUT ROWID;
INSERT INTO retired_refresh_tokens_v3 (session_id, digest, retired_at)
SELECT session_id, digest, retired_at FROM retired_refresh_tokens;

-- The child goes first, so dropping the old sessions table breaks no reference; renaming
-- sessions_v3 rewrites the reference in retired_refresh_tokens_v3 to the new name.
DROP TABLE retired_refresh_tokens;
DROP TABLE sessions;
ALTER TABLE sessions_v3 RENAME TO sessions;
ALTER TABLE retired_refresh_tokens_v3 RENAME TO retired_refresh_tokens;

CREATE INDEX sessions_device ON sessions (device_id);
CREATE INDEX sessions_created ON sessions (created_at);
-- Pruning deletes retired refresh-token digests older than a refresh-token lifetime.
CREATE INDEX retired_refresh_tokens_retired_at ON retired_refresh_tokens (retired_at);

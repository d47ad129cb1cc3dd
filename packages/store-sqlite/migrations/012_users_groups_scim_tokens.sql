-- Users, groups and SCIM tokens (store contract 8). A user is one per subject, in its realm: who
-- the person is (name, email, groups, each with the source that set it) and whether they may sign
-- in (status). The bearer check reads a session's user with it (sessions LEFT JOIN users on the
-- primary key), so every authenticated request sees the current attributes.
CREATE TABLE users (
  subject         TEXT PRIMARY KEY,
  realm           TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  -- The directory's (SCIM) userName and externalId.
  user_name       TEXT,
  external_id     TEXT,
  name            TEXT,
  name_source     TEXT,
  email           TEXT,
  email_verified  INTEGER NOT NULL DEFAULT 0 CHECK (email_verified IN (0, 1)),
  email_source    TEXT,
  -- A JSON array of group names, sorted and unique.
  groups          TEXT NOT NULL DEFAULT '[]',
  groups_source   TEXT,
  status          TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  last_sign_in_at INTEGER,
  disabled_at     INTEGER
) STRICT, WITHOUT ROWID;
-- A userName names one user of a realm (also between processes: the index decides).
CREATE UNIQUE INDEX users_realm_user_name ON users (realm, user_name) WHERE user_name IS NOT NULL;
CREATE INDEX users_realm_email ON users (realm, email);
CREATE INDEX users_realm_external_id ON users (realm, external_id) WHERE external_id IS NOT NULL;

-- Named groups kept on their own (the directory creates groups before it fills them). A user
-- carries the names in `users.groups`; a name may also exist only there.
CREATE TABLE groups (
  id          TEXT PRIMARY KEY,
  realm       TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  name        TEXT NOT NULL,
  external_id TEXT,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX groups_realm_name ON groups (realm, name);

-- The directory's bearer tokens: the SHA-256 digest only (the token is shown once).
CREATE TABLE scim_tokens (
  id           TEXT PRIMARY KEY,
  digest       TEXT NOT NULL UNIQUE,
  name         TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  created_by   TEXT,
  last_used_at INTEGER,
  revoked_at   INTEGER
) STRICT;

-- Every subject that holds (or held) a device or a link gets its user: active, no attributes,
-- created when its first credential was. Its realm is that credential's.
INSERT INTO users (subject, realm, groups, status, email_verified, created_at, updated_at)
SELECT subject, realm, '[]', 'active', 0, MIN(created_at), MIN(created_at)
FROM (
  SELECT subject, realm, created_at FROM devices
  UNION ALL
  SELECT subject, realm, created_at FROM links
)
GROUP BY subject;

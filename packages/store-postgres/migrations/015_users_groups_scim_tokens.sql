-- Users (store contract 8): one per subject, in its realm, with the attributes that say who the
-- person is and where each came from (`*_source`, NULL while unset); group records kept on
-- their own (the directory creates groups before it fills them); SCIM bearer tokens, by digest.
-- Plain tables and indexes only: the role that owns the schema needs no right on the database.
CREATE TABLE users (
  subject         TEXT PRIMARY KEY,
  realm           TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  -- The SCIM userName, unique in the realm (the partial index below).
  user_name       TEXT,
  external_id     TEXT,
  name            TEXT,
  name_source     TEXT,
  email           TEXT,
  email_verified  BOOLEAN NOT NULL DEFAULT FALSE,
  email_source    TEXT,
  -- The groups as JSON text, a sorted array of names, as on SQLite (core's groupsText / groupsOf).
  groups          TEXT NOT NULL DEFAULT '[]',
  groups_source   TEXT,
  status          TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
  created_at      BIGINT NOT NULL,
  updated_at      BIGINT NOT NULL,
  last_sign_in_at BIGINT,
  disabled_at     BIGINT
);
CREATE UNIQUE INDEX users_realm_user_name ON users (realm, user_name) WHERE user_name IS NOT NULL;
CREATE INDEX users_realm_email ON users (realm, email);

CREATE TABLE groups (
  id          TEXT PRIMARY KEY,
  realm       TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  name        TEXT NOT NULL,
  external_id TEXT,
  created_at  BIGINT NOT NULL,
  updated_at  BIGINT NOT NULL,
  CONSTRAINT groups_realm_name UNIQUE (realm, name)
);

CREATE TABLE scim_tokens (
  id           TEXT PRIMARY KEY,
  digest       TEXT NOT NULL,
  name         TEXT NOT NULL,
  created_at   BIGINT NOT NULL,
  created_by   TEXT,
  last_used_at BIGINT,
  revoked_at   BIGINT,
  CONSTRAINT scim_tokens_digest UNIQUE (digest)
);

-- Every subject that already holds (or held) a device or a link gets its user: active, no
-- attributes, created when its first credential was (its realm is that credential's).
INSERT INTO users (subject, realm, created_at, updated_at)
SELECT DISTINCT ON (subject) subject, realm, created_at, created_at
  FROM (SELECT subject, realm, created_at FROM devices
        UNION ALL
        SELECT subject, realm, created_at FROM links) AS credentials
 ORDER BY subject, created_at, realm;

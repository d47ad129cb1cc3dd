-- The index SQLite's migration 012 has and 015 left out: a SCIM `externalId eq` filter (and the
-- directory's look-up of a user by its externalId) reads one realm's users by external_id.
CREATE INDEX users_realm_external_id ON users (realm, external_id) WHERE external_id IS NOT NULL;

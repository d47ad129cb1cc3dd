-- The sealed grace pair (prev_successor, migration 005) answers the previous refresh token within
-- the grace interval only. Kept longer, a copy of the database plus that retired token would
-- open the live pair without the reuse ever reaching the service (issue #24.13). Revoking a
-- session now erases it, and the retention pass erases every pair whose grace has ended; this
-- index lets that pass find them without reading every session, and the update below erases
-- what revoked sessions kept before this migration.
CREATE INDEX sessions_grace_pair ON sessions (prev_rotated_at) WHERE prev_successor IS NOT NULL;
UPDATE sessions SET prev_successor = NULL WHERE prev_successor IS NOT NULL AND revoked_at IS NOT NULL;

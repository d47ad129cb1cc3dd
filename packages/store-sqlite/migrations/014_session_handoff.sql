-- One sign-in across route hosts (:svc/app-auth-origin). A route host's session records the
-- sign-in session it was handed off from (parent_id): one logout revokes the sign-in session and
-- every session handed off from it, in one transaction. A handoff code is kept as its digest
-- only: single use (used_at), short lived, bound to the route origin it is for, to the sign-in
-- session it hands off, and to the digest of the route host's state value in the browser.
ALTER TABLE sessions ADD COLUMN parent_id TEXT;
CREATE INDEX sessions_parent ON sessions (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE handoff_codes (
  digest         TEXT PRIMARY KEY,
  session_id     TEXT NOT NULL,
  origin         TEXT NOT NULL,
  binding_digest TEXT NOT NULL,
  created_at     INTEGER NOT NULL,
  expires_at     INTEGER NOT NULL,
  used_at        INTEGER
) STRICT, WITHOUT ROWID;
CREATE INDEX handoff_codes_expires_at ON handoff_codes (expires_at);

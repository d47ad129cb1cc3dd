-- Pages of `svc auth users` at a million users (#31): every filter the listing offers is read
-- through an index in subject order, so a page reads about as many rows as it returns, never a
-- scan of the table. (The name, email and userName substring filter has no index: it scans.)
--
-- Group members: `users.groups` (a JSON array) cannot be indexed by its elements, so this table
-- holds one row per (group name, member), kept by the triggers below from every INSERT, UPDATE
-- of groups and DELETE of a user, in the same transaction, whoever writes the row. Derived
-- state: a move between stores copies `users` and the triggers refill it.
CREATE TABLE user_groups (
  name    TEXT NOT NULL,
  subject TEXT NOT NULL,
  PRIMARY KEY (name, subject)
) STRICT, WITHOUT ROWID;

INSERT OR IGNORE INTO user_groups (name, subject) SELECT g.value, u.subject FROM users u, json_each(u.groups) g;

CREATE TRIGGER user_groups_after_insert AFTER INSERT ON users BEGIN
  INSERT OR IGNORE INTO user_groups (name, subject) SELECT value, NEW.subject FROM json_each(NEW.groups);
END;

CREATE TRIGGER user_groups_after_update AFTER UPDATE OF subject, groups ON users
WHEN NEW.groups IS NOT OLD.groups OR NEW.subject IS NOT OLD.subject BEGIN
  DELETE FROM user_groups WHERE subject = OLD.subject AND name IN (SELECT value FROM json_each(OLD.groups));
  INSERT OR IGNORE INTO user_groups (name, subject) SELECT value, NEW.subject FROM json_each(NEW.groups);
END;

CREATE TRIGGER user_groups_after_delete AFTER DELETE ON users BEGIN
  DELETE FROM user_groups WHERE subject = OLD.subject AND name IN (SELECT value FROM json_each(OLD.groups));
END;

-- One realm's or one status's users in subject order (`--realm`, `--status`).
CREATE INDEX users_realm_subject ON users (realm, subject);
CREATE INDEX users_status_subject ON users (status, subject);

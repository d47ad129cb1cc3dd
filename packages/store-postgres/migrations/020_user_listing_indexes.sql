-- Pages of `svc auth users` at a million users (#31): the listing orders and pages by subject in
-- code-point order (COLLATE "C", whatever the database's collation), which the primary key's
-- index (the database's collation) cannot serve: without these, every page sorted the whole
-- table. Each filter of the listing is served in that order, or by an index of its own.
CREATE INDEX users_subject_c ON users (subject COLLATE "C");
CREATE INDEX users_realm_subject_c ON users (realm, subject COLLATE "C");
CREATE INDEX users_status_subject_c ON users (status, subject COLLATE "C");
-- `--email` without a realm (the (realm, email) index needs the realm first).
CREATE INDEX users_email ON users (email);
-- `--group`: the members of a group, by the JSON array's elements (`groups::jsonb ? name`).
CREATE INDEX users_groups ON users USING gin ((groups::jsonb));

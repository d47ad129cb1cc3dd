-- A session records the client it was created from (the address and User-Agent the server
-- saw; nothing else is tracked), and a principal lists its own sessions and devices: found by
-- subject through these indexes instead of a scan.
ALTER TABLE sessions ADD COLUMN client_address TEXT;
ALTER TABLE sessions ADD COLUMN user_agent TEXT;
CREATE INDEX sessions_subject ON sessions (subject, realm);
CREATE INDEX devices_subject ON devices (subject, realm) WHERE removed_at IS NULL;

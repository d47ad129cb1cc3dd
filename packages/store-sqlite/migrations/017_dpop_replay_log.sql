-- The DPoP replay cache as an append-only log (#31). `dpop_proofs` was keyed by the proof's key,
-- a SHA-256 digest: each use wrote into a random leaf of its B-tree and the deletion of an expired
-- record into another, about two 4 KiB pages into the WAL per DPoP-checked request. Rows appended
-- in order share their pages. Each process keeps the live keys in memory and, inside its write
-- transaction, first reads the rows other processes appended since (`seq` only grows:
-- AUTOINCREMENT never hands out a committed number again). The live records move over, so a proof used just before
-- the upgrade is still refused just after it.
CREATE TABLE dpop_replay_log (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  proof_key  TEXT NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT;
-- Expired rows are found by their expiry, wherever they are in the log (a clock stepped back
-- leaves live rows at its start). Expiries grow with time: this index too is written at its end.
CREATE INDEX dpop_replay_log_expiry ON dpop_replay_log (expires_at);
INSERT INTO dpop_replay_log (proof_key, expires_at) SELECT proof_key, expires_at FROM dpop_proofs ORDER BY expires_at;
DROP TABLE dpop_proofs;
-- The control state's export and import (core's CONTROL_STATE_TABLES) still see `dpop_proofs`:
-- one row per key, its latest expiry; a row imported into it is appended to the log.
CREATE VIEW dpop_proofs AS
  SELECT proof_key, max(expires_at) AS expires_at FROM dpop_replay_log GROUP BY proof_key;
CREATE TRIGGER dpop_proofs_import INSTEAD OF INSERT ON dpop_proofs
BEGIN
  INSERT INTO dpop_replay_log (proof_key, expires_at) VALUES (NEW.proof_key, NEW.expires_at);
END;

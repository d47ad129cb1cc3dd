-- Sender-constrained sessions (DPoP, RFC 9449): a session records the RFC 7638 thumbprint of the
-- device key its tokens are bound to (NULL: a bearer session, as every session made before), and
-- each proof's jti is used once while the proof is fresh, across every node sharing this store
-- (the replay cache: one row per proof, pruned by expiry).
ALTER TABLE sessions ADD COLUMN jkt TEXT;
CREATE TABLE dpop_proofs (
  proof_key  TEXT PRIMARY KEY,
  expires_at BIGINT NOT NULL
);
CREATE INDEX dpop_proofs_expiry ON dpop_proofs (expires_at);

-- Refresh grace redesign: the immediately previous refresh token, presented again within the
-- grace interval, is answered with the SAME pair its rotation issued instead of a new one, so
-- concurrent refreshes (two tabs) all end holding the one live pair. That pair is kept here
-- only sealed (AES-256-GCM) under a key derived from the previous refresh token, which the
-- store never holds: the database alone opens nothing. Rows rotated before this migration have
-- none, and their previous token gets no grace (it is judged like any retired one).
ALTER TABLE sessions ADD COLUMN prev_successor TEXT;

-- Budgets of failed attempts shared by every node on this schema: one fixed window per key
-- (a client's address unit, a session, a pairing intent), holding the attempts that failed in
-- it and those still running. A sign-in attempt reserves a slot before it runs, whichever node
-- it reaches, so N nodes cannot each grant the whole budget. Rows of windows that ended are
-- pruned as reservations go; running attempts of a node that died vanish with their window.
CREATE TABLE attempt_budget (
  key          TEXT PRIMARY KEY,
  window_start BIGINT NOT NULL,
  failures     INTEGER NOT NULL,
  pending      INTEGER NOT NULL
);
CREATE INDEX attempt_budget_window_start ON attempt_budget (window_start);

-- Refresh grace redesign: the immediately previous refresh token, presented again within the
-- grace interval, is answered with the SAME pair its rotation issued instead of a new one, so
-- concurrent refreshes (two tabs) all end holding the one live pair. That pair is kept here
-- only sealed (AES-256-GCM) under a key derived from the previous refresh token, which the
-- store never holds: the database alone opens nothing. Rows rotated before this migration have
-- none, and their previous token gets no grace (it is judged like any retired one).
ALTER TABLE sessions ADD COLUMN prev_successor TEXT;

-- Running attempts are held on a lease (issue #26.5): a node killed mid-attempt never settles
-- its reservations, and their slots stayed taken until the window ended (29 of 30: the
-- survivor ran one sign-in at a time for up to 60 s). `pending_since` dates the lease period of
-- a row's `pending` attempts; core's `decideAttemptWindow` drops them once the lease is over.
-- Existing rows get 0: whatever they hold as running is dropped by the next reservation.
ALTER TABLE attempt_budget ADD COLUMN pending_since BIGINT NOT NULL DEFAULT 0;

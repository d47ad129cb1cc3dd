-- Split session tokens: an access or refresh token now carries its session id (the selector)
-- before its 256-bit secret, so a token is found by the session's primary key and its digest
-- compared in constant time. The digest columns need no unique index any more: three
-- random-keyed indexes that every rotation rewrote are gone. Retired refresh-token digests are
-- kept per session. Tokens minted before this change have no selector and are refused as
-- unknown (their devices sign in again); the sessions themselves are kept.
ALTER TABLE sessions DROP CONSTRAINT sessions_access_digest_key;
ALTER TABLE sessions DROP CONSTRAINT sessions_refresh_digest_key;
ALTER TABLE sessions DROP CONSTRAINT sessions_prev_refresh_digest_key;

ALTER TABLE retired_refresh_tokens DROP CONSTRAINT retired_refresh_tokens_pkey;
ALTER TABLE retired_refresh_tokens ADD PRIMARY KEY (session_id, digest);
-- The primary key now starts with session_id.
DROP INDEX retired_refresh_tokens_session;

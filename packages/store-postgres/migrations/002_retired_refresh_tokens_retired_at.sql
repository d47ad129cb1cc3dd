-- Pruning deletes retired refresh-token digests older than a refresh-token lifetime.
CREATE INDEX retired_refresh_tokens_retired_at ON retired_refresh_tokens (retired_at);

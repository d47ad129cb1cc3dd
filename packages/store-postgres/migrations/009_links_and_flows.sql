-- Provider links and flows (docs/providers.md §3). A link ties an external identity (an OIDC
-- issuer and subject, or a passkey's credential id) to a subject of one realm; a session it
-- signs in names the link id where a device session names its device. A flow is a provider
-- ceremony in progress: single use, short lived.

CREATE TABLE links (
  id               TEXT PRIMARY KEY,
  realm            TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  subject          TEXT NOT NULL,
  provider         TEXT NOT NULL,
  issuer           TEXT NOT NULL,
  external_subject TEXT NOT NULL,
  -- The provider's own data about the credential (a passkey's public key), JSON text; opaque here.
  credential_data  TEXT,
  -- A passkey's signature counter, kept strictly increasing; NULL for a credential without one.
  counter          BIGINT,
  name             TEXT NOT NULL,
  created_at       BIGINT NOT NULL,
  last_used_at     BIGINT,
  removed_at       BIGINT
);
-- An identity may be linked again after its link was removed, but only once at a time per realm.
CREATE UNIQUE INDEX links_live_identity ON links (realm, issuer, external_subject) WHERE removed_at IS NULL;
CREATE INDEX links_subject ON links (subject, realm) WHERE removed_at IS NULL;

CREATE TABLE flows (
  id                TEXT PRIMARY KEY,
  provider          TEXT NOT NULL,
  realm             TEXT NOT NULL CHECK (realm IN ('management', 'application')),
  intent            TEXT NOT NULL CHECK (intent IN ('signin', 'link', 'signup')),
  subject           TEXT,
  pairing_intent_id TEXT,
  state             TEXT NOT NULL,
  created_at        BIGINT NOT NULL,
  expires_at        BIGINT NOT NULL,
  consumed_at       BIGINT
);
CREATE INDEX flows_expires_at ON flows (expires_at);

-- A session's device_id may now name a link: its foreign key to devices goes. The reference is
-- still enforced, by the trigger below: a session names an existing device or link (neither is
-- ever deleted). A session also records how it was made (amr, RFC 8176 values space-separated):
-- every existing session was made by a device key.
ALTER TABLE sessions DROP CONSTRAINT sessions_device_id_fkey;
ALTER TABLE sessions ADD COLUMN amr TEXT NOT NULL DEFAULT 'ed25519';

-- SET search_path FROM CURRENT: the function reads this schema's tables whoever calls it.
CREATE FUNCTION sessions_device_or_link() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM devices WHERE id = NEW.device_id) AND NOT EXISTS (SELECT 1 FROM links WHERE id = NEW.device_id) THEN
    RAISE EXCEPTION 'sessions.device_id % names no device or link', NEW.device_id USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NEW;
END;
$$;
CREATE TRIGGER sessions_device_or_link BEFORE INSERT OR UPDATE OF device_id ON sessions
  FOR EACH ROW EXECUTE FUNCTION sessions_device_or_link();

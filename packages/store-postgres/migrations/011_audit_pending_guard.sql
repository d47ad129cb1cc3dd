-- An event id already in the chain is refused by the insert of its pending row itself (issue
-- #14: fewer statements per write). Until now each write asked `WHERE NOT EXISTS (... audit_events
-- ...)` and rolled back its own transaction on a miss, which kept the event a statement of its own;
-- raised here, the refusal aborts whichever statement inserts the row, so a change and its event
-- can be one statement (a data-modifying WITH) and still never commit apart. A duplicate must
-- never reach the sealer, whose batch it would stop. The id's own UNIQUE covers the pending table.
CREATE FUNCTION audit_pending_refuse_chained() RETURNS trigger
  LANGUAGE plpgsql
  -- The store's schema, fixed when the function is created: never the caller's search_path.
  SET search_path FROM CURRENT
AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM audit_events WHERE id = NEW.id) THEN
    RAISE EXCEPTION 'audit event % is already in the chain', NEW.id USING ERRCODE = 'unique_violation';
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER audit_pending_refuse_chained BEFORE INSERT ON audit_pending
  FOR EACH ROW EXECUTE FUNCTION audit_pending_refuse_chained();

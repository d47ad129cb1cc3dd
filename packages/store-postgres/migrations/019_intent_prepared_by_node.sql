-- Which node prepared a pairing intent (its node id), so that a completion on another node of
-- the cluster can say both; null for an intent prepared before this column, or off a node surface.
ALTER TABLE pairing_intents ADD COLUMN prepared_by_node TEXT;

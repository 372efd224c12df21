-- The watcher's reads (`generations`, `generations_mark`, every few ms) and the round's list of
-- names come from this index alone: without it each read walks every row, plan text included.
CREATE INDEX migrations_generations ON migrations (name, generation);

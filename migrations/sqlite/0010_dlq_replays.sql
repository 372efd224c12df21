-- The replay ledger: every dead letter `migrate dlq replay` claimed before publishing it, per
-- queue and destination. A run writes the row (state 'sending') before it publishes the entry,
-- marks it 'sent' once the broker (or the output) confirmed it, and deletes it when the entry
-- was certainly not sent. A re-run skips what is 'sent' and does not send again what is still
-- 'sending' (a run killed or failed between the two: in doubt) unless told to.
-- Times are milliseconds since the Unix epoch (UTC).
CREATE TABLE dlq_replays (
    queue            TEXT NOT NULL,
    -- migration:NAME, file:/absolute/path or stdout
    destination      TEXT NOT NULL,
    -- a digest of the whole envelope
    entry            TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('sending', 'sent')),
    run              TEXT NOT NULL,
    dead_lettered_at TEXT NOT NULL,
    dead_lettered_ms INTEGER NOT NULL,
    -- claimed, then settled
    at               INTEGER NOT NULL,
    PRIMARY KEY (queue, destination, entry)
);
CREATE INDEX dlq_replays_by_age ON dlq_replays (dead_lettered_ms);

-- Dead letters: recorded decisions about groups, and the signatures seen so far.
-- Times are milliseconds since the Unix epoch (UTC).

-- One row per decision: a group closed for a reason from the closed list, or replayed to the
-- end. Matched by signature (the latest decision of a signature counts).
CREATE TABLE dlq_dispositions (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    queue             TEXT NOT NULL,
    signature         TEXT NOT NULL,
    signature_version TEXT NOT NULL DEFAULT 'v1',
    error_class       TEXT NOT NULL,
    consumer_version  TEXT NOT NULL,
    action            TEXT NOT NULL CHECK (action IN ('close', 'replay')),
    reason            TEXT CHECK (reason IN ('entity_deleted', 'window_expired',
                          'producer_retired', 'already_processed', 'fixed_in_code')),
    affected_count    INTEGER,
    -- the group's firstSeen / lastSeen (firstAttemptAt strings) when decided
    first_seen        TEXT,
    last_seen         TEXT,
    decided_by        TEXT NOT NULL,
    decided_at        INTEGER NOT NULL,
    note              TEXT,
    CHECK ((action = 'close') = (reason IS NOT NULL))
);
CREATE INDEX dlq_dispositions_by_queue ON dlq_dispositions (queue, decided_at, id);

-- Every signature `migrate dlq watch` has seen, for the "never seen before" signal.
CREATE TABLE dlq_signatures (
    queue            TEXT NOT NULL,
    signature        TEXT NOT NULL,
    error_class      TEXT NOT NULL,
    consumer_version TEXT NOT NULL,
    first_seen_at    INTEGER NOT NULL,
    last_seen_at     INTEGER NOT NULL,
    PRIMARY KEY (queue, signature)
);

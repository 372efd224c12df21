-- Dead letters (the same schema as migrations/sqlite/0002_dlq.sql and 0010_dlq_replays.sql):
-- recorded decisions about groups, the signatures seen so far, and the replay ledger.
-- Times are milliseconds since the Unix epoch (UTC), as BIGINT.

-- One row per decision: a group closed for a reason from the closed list, or replayed to the
-- end. Matched by signature (the latest decision of a signature counts).
CREATE TABLE dlq_dispositions (
    id                BIGSERIAL PRIMARY KEY,
    queue             TEXT NOT NULL,
    signature         TEXT NOT NULL,
    signature_version TEXT NOT NULL DEFAULT 'v1',
    error_class       TEXT NOT NULL,
    consumer_version  TEXT NOT NULL,
    action            TEXT NOT NULL CHECK (action IN ('close', 'replay')),
    reason            TEXT CHECK (reason IN ('entity_deleted', 'window_expired',
                          'producer_retired', 'already_processed', 'fixed_in_code')),
    affected_count    BIGINT,
    -- the group's firstSeen / lastSeen (firstAttemptAt strings) when decided
    first_seen        TEXT,
    last_seen         TEXT,
    decided_by        TEXT NOT NULL,
    decided_at        BIGINT NOT NULL,
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
    first_seen_at    BIGINT NOT NULL,
    last_seen_at     BIGINT NOT NULL,
    PRIMARY KEY (queue, signature)
);

-- The replay ledger: every dead letter `migrate dlq replay` claimed before publishing it, per
-- queue and destination ('sending' before the publish, 'sent' once confirmed, deleted when
-- certainly not sent). A re-run skips what is 'sent' and does not send again what is still
-- 'sending' (in doubt) unless told to.
CREATE TABLE dlq_replays (
    queue            TEXT NOT NULL,
    -- migration:NAME, file:/absolute/path or stdout
    destination      TEXT NOT NULL,
    -- a digest of the whole envelope
    entry            TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('sending', 'sent')),
    run              TEXT NOT NULL,
    dead_lettered_at TEXT NOT NULL,
    dead_lettered_ms BIGINT NOT NULL,
    -- claimed, then settled
    at               BIGINT NOT NULL,
    PRIMARY KEY (queue, destination, entry)
);
CREATE INDEX dlq_replays_by_age ON dlq_replays (dead_lettered_ms);

-- queue-migrate state store, PostgreSQL (the same schema as migrations/sqlite/0001_init.sql).
-- Times are milliseconds since the Unix epoch (UTC), as BIGINT. Every integer is BIGINT (Rust
-- i64), every flag BOOLEAN, every measured value DOUBLE PRECISION.

CREATE TABLE migrations (
    name                 TEXT PRIMARY KEY,
    plan_yaml            TEXT NOT NULL,
    plan_path            TEXT NOT NULL,
    plan_hash            TEXT NOT NULL,
    state                TEXT NOT NULL,
    step                 BIGINT,
    paused               BOOLEAN NOT NULL DEFAULT FALSE,
    -- optimistic concurrency: every write is `... WHERE version = expected`
    version              BIGINT NOT NULL,
    -- routing generation: increases with every transition
    generation           BIGINT NOT NULL,
    -- generation last written to the plan's routing publishers
    published_generation BIGINT NOT NULL DEFAULT 0,
    -- why the last publication failed (NULL once every publisher has the current generation)
    publish_error        TEXT,
    -- when the current state was entered (pause/resume keep it)
    entered_at           BIGINT NOT NULL,
    -- when the last transition happened
    updated_at           BIGINT NOT NULL,
    created_at           BIGINT NOT NULL
);

-- Append-only: every transition with who, why and the readings that justified it.
CREATE TABLE journal (
    id          BIGSERIAL PRIMARY KEY,
    migration   TEXT NOT NULL REFERENCES migrations(name),
    seq         BIGINT NOT NULL,
    at          BIGINT NOT NULL,
    command     TEXT NOT NULL,
    from_state  TEXT NOT NULL,
    from_step   BIGINT,
    from_paused BOOLEAN NOT NULL,
    to_state    TEXT NOT NULL,
    to_step     BIGINT,
    to_paused   BOOLEAN NOT NULL,
    actor       TEXT NOT NULL,
    reason      TEXT,
    forced      BOOLEAN NOT NULL DEFAULT FALSE,
    -- JSON text, as in SQLite (the store reads it back with serde_json)
    evidence    TEXT NOT NULL,
    generation  BIGINT NOT NULL,
    UNIQUE (migration, seq)
);

CREATE FUNCTION journal_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the journal is append-only (% refused)', TG_OP;
END;
$$;
CREATE TRIGGER journal_is_append_only BEFORE UPDATE OR DELETE ON journal
    FOR EACH ROW EXECUTE FUNCTION journal_is_append_only();
-- TRUNCATE bypasses row triggers: refuse it too.
CREATE TRIGGER journal_is_append_only_truncate BEFORE TRUNCATE ON journal
    FOR EACH STATEMENT EXECUTE FUNCTION journal_is_append_only();

-- Every gate evaluation; the latest row of a gate in a step carries its memory
-- (held_since: the "held since" mark of `for:` gates; samples; peak).
CREATE TABLE gate_evaluations (
    id            BIGSERIAL PRIMARY KEY,
    migration     TEXT NOT NULL REFERENCES migrations(name),
    step_entered  BIGINT NOT NULL,
    state         TEXT NOT NULL,
    step          BIGINT,
    gate          TEXT NOT NULL,
    kind          TEXT NOT NULL,
    query         TEXT NOT NULL,
    value         DOUBLE PRECISION,
    old_value     DOUBLE PRECISION,
    samples       BIGINT NOT NULL,
    verdict       TEXT NOT NULL,
    reason        TEXT NOT NULL,
    held_since    BIGINT,
    peak          DOUBLE PRECISION,
    at            BIGINT NOT NULL
);
CREATE INDEX gate_evaluations_latest ON gate_evaluations (migration, step_entered, gate, kind, id);

-- Samples kept from scrape sources, to compute rate() and increase() between runs.
CREATE TABLE scrape_points (
    migration TEXT NOT NULL,
    source    TEXT NOT NULL,
    series    TEXT NOT NULL,
    metric    TEXT NOT NULL,
    labels    TEXT NOT NULL,
    at        BIGINT NOT NULL,
    value     DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (migration, source, series, at)
);

-- When each scrape happened (a scrape that matched no series still counts).
CREATE TABLE scrape_times (
    migration TEXT NOT NULL,
    source    TEXT NOT NULL,
    at        BIGINT NOT NULL,
    PRIMARY KEY (migration, source, at)
);

-- One active controller per store: the daemon holding a lease acts, the others stand by.
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);

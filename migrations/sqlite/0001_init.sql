-- queue-migrate state store, SQLite.
-- Times are milliseconds since the Unix epoch (UTC).

CREATE TABLE migrations (
    name                 TEXT PRIMARY KEY,
    plan_yaml            TEXT NOT NULL,
    plan_path            TEXT NOT NULL,
    plan_hash            TEXT NOT NULL,
    state                TEXT NOT NULL,
    step                 INTEGER,
    paused               INTEGER NOT NULL DEFAULT 0,
    -- optimistic concurrency: every write is `... WHERE version = expected`
    version              INTEGER NOT NULL,
    -- routing generation: increases with every transition
    generation           INTEGER NOT NULL,
    -- generation last written to the plan's routing publishers
    published_generation INTEGER NOT NULL DEFAULT 0,
    -- why the last publication failed (NULL once every publisher has the current generation)
    publish_error        TEXT,
    -- when the current state was entered (pause/resume keep it)
    entered_at           INTEGER NOT NULL,
    -- when the last transition happened
    updated_at           INTEGER NOT NULL,
    created_at           INTEGER NOT NULL
);

-- Append-only: every transition with who, why and the readings that justified it.
CREATE TABLE journal (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    migration   TEXT NOT NULL REFERENCES migrations(name),
    seq         INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    command     TEXT NOT NULL,
    from_state  TEXT NOT NULL,
    from_step   INTEGER,
    from_paused INTEGER NOT NULL,
    to_state    TEXT NOT NULL,
    to_step     INTEGER,
    to_paused   INTEGER NOT NULL,
    actor       TEXT NOT NULL,
    reason      TEXT,
    forced      INTEGER NOT NULL DEFAULT 0,
    evidence    TEXT NOT NULL,
    generation  INTEGER NOT NULL,
    UNIQUE (migration, seq)
);

CREATE TRIGGER journal_is_append_only_update BEFORE UPDATE ON journal
BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
CREATE TRIGGER journal_is_append_only_delete BEFORE DELETE ON journal
BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;

-- Every gate evaluation; the latest row of a gate in a step carries its memory
-- (held_since: the "held since" mark of `for:` gates; samples; peak).
CREATE TABLE gate_evaluations (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    migration     TEXT NOT NULL REFERENCES migrations(name),
    step_entered  INTEGER NOT NULL,
    state         TEXT NOT NULL,
    step          INTEGER,
    gate          TEXT NOT NULL,
    kind          TEXT NOT NULL,
    query         TEXT NOT NULL,
    value         REAL,
    old_value     REAL,
    samples       INTEGER NOT NULL,
    verdict       TEXT NOT NULL,
    reason        TEXT NOT NULL,
    held_since    INTEGER,
    peak          REAL,
    at            INTEGER NOT NULL
);
CREATE INDEX gate_evaluations_latest ON gate_evaluations (migration, step_entered, gate, kind, id);

-- Samples kept from scrape sources, to compute rate() and increase() between runs.
CREATE TABLE scrape_points (
    migration TEXT NOT NULL,
    source    TEXT NOT NULL,
    series    TEXT NOT NULL,
    metric    TEXT NOT NULL,
    labels    TEXT NOT NULL,
    at        INTEGER NOT NULL,
    value     REAL NOT NULL,
    PRIMARY KEY (migration, source, series, at)
);

-- When each scrape happened (a scrape that matched no series still counts).
CREATE TABLE scrape_times (
    migration TEXT NOT NULL,
    source    TEXT NOT NULL,
    at        INTEGER NOT NULL,
    PRIMARY KEY (migration, source, at)
);

-- One active controller per store: the daemon holding a lease acts, the others stand by.
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);

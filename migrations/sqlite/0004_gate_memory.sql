-- The newest evaluation of each gate of each migration in each step: all that a tick reads
-- back (its memory: "held since", samples, peak). gate_evaluations stays the whole append-only
-- history; without its index, a round's rows go at the end of the table instead of into one
-- index page per gate of every migration (an index as large as the history).
CREATE TABLE gate_memory (
    migration     TEXT NOT NULL REFERENCES migrations(name),
    gate          TEXT NOT NULL,
    kind          TEXT NOT NULL,
    step_entered  INTEGER NOT NULL,
    state         TEXT NOT NULL,
    step          INTEGER,
    query         TEXT NOT NULL,
    value         REAL,
    old_value     REAL,
    samples       INTEGER NOT NULL,
    verdict       TEXT NOT NULL,
    reason        TEXT NOT NULL,
    held_since    INTEGER,
    peak          REAL,
    at            INTEGER NOT NULL,
    PRIMARY KEY (migration, step_entered, gate, kind)
);

INSERT INTO gate_memory (migration, gate, kind, step_entered, state, step, query, value,
                         old_value, samples, verdict, reason, held_since, peak, at)
SELECT migration, gate, kind, step_entered, state, step, query, value,
       old_value, samples, verdict, reason, held_since, peak, at
FROM gate_evaluations
WHERE id IN (SELECT MAX(id) FROM gate_evaluations GROUP BY migration, step_entered, gate, kind);

DROP INDEX gate_evaluations_latest;

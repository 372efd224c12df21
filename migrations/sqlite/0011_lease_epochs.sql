-- Fenced leadership (issue 42): the lease carries an epoch, raised on every change of holder (a
-- renewal by the same holder keeps it). Every write a leader makes proves, in its own
-- transaction, that the lease row still has its holder and epoch, unexpired on the database's
-- clock. Times are milliseconds since the Unix epoch (UTC) on the DATABASE's clock.
ALTER TABLE leases ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;

-- Append-only: every acquisition of a lease, with the database's time it was taken at.
CREATE TABLE lease_epochs (
    lease       TEXT NOT NULL,
    epoch       INTEGER NOT NULL,
    holder      TEXT NOT NULL,
    acquired_at INTEGER NOT NULL,
    PRIMARY KEY (lease, epoch)
);

-- The epoch each journal entry was written under (NULL: a command run without a lease).
ALTER TABLE journal ADD COLUMN epoch INTEGER;

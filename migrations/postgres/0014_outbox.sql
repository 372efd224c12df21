-- A transactional outbox (issue 54, item 4): every transition committed (and every plan apply
-- that republishes the routing) writes a row here in the same transaction as its journal entry.
-- Whoever leads delivers the undelivered rows (the transition's webhook event) at least once,
-- then marks them delivered in a write fenced by its own lease epoch: a leader paused or killed
-- between its commit and its announcement leaves the row to the next leader. Journal entries
-- written before this migration have no row (they were announced, or not, as before).
-- Times are milliseconds since the Unix epoch on the DATABASE's clock.
CREATE TABLE outbox (
    migration       TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    delivered_at    BIGINT,
    delivered_epoch BIGINT,
    PRIMARY KEY (migration, seq)
);

-- What a leader reads at every delivery: the undelivered rows, oldest first.
CREATE INDEX outbox_undelivered ON outbox (created_at) WHERE delivered_at IS NULL;

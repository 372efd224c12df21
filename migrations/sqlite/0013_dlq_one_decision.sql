-- One decision per dead-letter group (issue 54): a group (queue, class, version, signature) has
-- one chain of decisions, each naming the one it supersedes (`supersedes`, 0 for the first), and
-- the database refuses two rows superseding the same one: two `dlq close` at once, or a close
-- racing a replay, cannot both be recorded whatever their reasons.
--
-- `state` is 'decided' for a decision, or 'replaying' while a replay holds the group: it is
-- taken before the replay sends the group's first message, by the run `run`, and becomes the
-- `replay` decision when every message of the group went out, or is deleted when the run stops
-- short. A close of a group held so is refused; a replay of a closed group sends nothing.
ALTER TABLE dlq_dispositions ADD COLUMN supersedes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dlq_dispositions ADD COLUMN state TEXT NOT NULL DEFAULT 'decided'
    CHECK (state IN ('decided', 'replaying'));
ALTER TABLE dlq_dispositions ADD COLUMN run TEXT;

-- Rows written before: each supersedes the row of its group just before it (two rows of one
-- group recorded at once before this schema stay, as a chain).
UPDATE dlq_dispositions SET supersedes = COALESCE((
    SELECT MAX(p.id) FROM dlq_dispositions p
    WHERE p.queue = dlq_dispositions.queue AND p.error_class = dlq_dispositions.error_class
      AND p.consumer_version = dlq_dispositions.consumer_version
      AND p.signature = dlq_dispositions.signature AND p.id < dlq_dispositions.id), 0);

CREATE UNIQUE INDEX dlq_dispositions_one_per_group
    ON dlq_dispositions (queue, error_class, consumer_version, signature, supersedes);

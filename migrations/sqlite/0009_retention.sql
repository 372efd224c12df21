-- Retention (`migrate run --retain`, `migrate prune`): the gate evaluations by time, so that a
-- prune seeks to the oldest rows and deletes a batch of them instead of walking the whole
-- history. Rows are appended in time order: each insert goes to the index's right edge.
CREATE INDEX gate_evaluations_at ON gate_evaluations (at);

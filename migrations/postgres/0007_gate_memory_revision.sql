-- A revision on each gate's memory, incremented by every write: a writer remembers the one it
-- read and writes over the row as it is only if it is still that one; otherwise another writer
-- committed meanwhile and the two are merged conservatively (a reset wins, a mark never moves
-- earlier: see src/store/memory.rs). A transition decided on the memory commits only while the
-- revisions it read are unchanged. Rows written before this column start at 1 (0 is "no row").
ALTER TABLE gate_memory ADD COLUMN revision BIGINT NOT NULL DEFAULT 1;

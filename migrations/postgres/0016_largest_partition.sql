-- A gate on a `kafka_lag` source (issue 57): the largest partition's lag among those its query
-- selects, and which, as JSON (`{"topic":"orders","partition":3,"lag":900}`,
-- `src/indicators/kafka_lag.rs`, `LargestPartition`), shown beside the gate's value by
-- `status`, the console and `/metrics`. NULL for the other gates and for rows written before
-- this column.
ALTER TABLE gate_evaluations ADD COLUMN largest_partition TEXT;
ALTER TABLE gate_memory ADD COLUMN largest_partition TEXT;

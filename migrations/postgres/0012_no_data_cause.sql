-- Why a NO DATA verdict had no data (issue 44): `source_down` (the source could not be read),
-- `empty` (it answered with no series), `too_few_samples` (it answered, with too few samples for
-- the query yet), `unusable` (it answered with no usable number). NULL for the other verdicts,
-- and for rows written before this column: they read as before (a no-data row without a value
-- counts toward a blind source, see src/standing.rs).
ALTER TABLE gate_evaluations ADD COLUMN no_data_cause TEXT;
ALTER TABLE gate_memory ADD COLUMN no_data_cause TEXT;

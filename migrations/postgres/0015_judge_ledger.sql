-- A `judge` gate's ledger (issue 55): where the last interval it weighed ended, both tests'
-- wealths and the counts of its budget, as JSON (`src/judge/betting.rs`, `Ledger`). Each
-- reading weighs only the interval since that baseline, so the ledger is what carries the test
-- from one reading to the next. NULL for the other gates and for rows written before this
-- column: a judge without one starts a new count (on a smaller share of the step's budget when
-- its row shows it was counting already).
ALTER TABLE gate_evaluations ADD COLUMN judge_ledger TEXT;
ALTER TABLE gate_memory ADD COLUMN judge_ledger TEXT;

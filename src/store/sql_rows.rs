//! Rows of either backend read into the store's records (migrations, journal entries, gate
//! evaluations), written once for both: what differs is how a flag is stored (an integer on
//! SQLite, a boolean on PostgreSQL) and how a count that does not fit is answered.

use sqlx::Row;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use super::{GateRecord, JournalEntry, MigrationRecord, Result, StoreError, parse_state};
use crate::machine::Snapshot;

/// A row of either backend, read into a record.
pub(super) trait Rows {
    /// The flag in column `col`.
    fn flag(&self, col: &str) -> Result<bool>;
    /// A gate row's sample count.
    fn samples(&self) -> Result<u32>;
    fn migration(&self) -> Result<MigrationRecord>;
    fn journal(&self) -> Result<JournalEntry>;
    fn gate(&self) -> Result<GateRecord>;
    /// A row of two counts, `n` and `total`.
    fn counts(&self) -> Result<(i64, i64)>;
}

/// The records of [`Rows`], the same text for both rows.
macro_rules! records {
    () => {
        fn migration(&self) -> Result<MigrationRecord> {
            Ok(MigrationRecord {
                name: self.try_get("name")?,
                plan_yaml: self.try_get("plan_yaml")?,
                plan_path: self.try_get("plan_path")?,
                plan_hash: self.try_get("plan_hash")?,
                state: parse_state(self.try_get("state")?, self.try_get("step")?)?,
                paused: self.flag("paused")?,
                version: self.try_get("version")?,
                generation: self.try_get("generation")?,
                published_generation: self.try_get("published_generation")?,
                publish_error: self.try_get("publish_error")?,
                entered_at_ms: self.try_get("entered_at")?,
                updated_at_ms: self.try_get("updated_at")?,
                created_at_ms: self.try_get("created_at")?,
            })
        }

        fn journal(&self) -> Result<JournalEntry> {
            let evidence: String = self.try_get("evidence")?;
            Ok(JournalEntry {
                seq: self.try_get("seq")?,
                at_ms: self.try_get("at")?,
                command: self.try_get("command")?,
                from: Snapshot {
                    state: parse_state(self.try_get("from_state")?, self.try_get("from_step")?)?,
                    paused: self.flag("from_paused")?,
                },
                to: Snapshot {
                    state: parse_state(self.try_get("to_state")?, self.try_get("to_step")?)?,
                    paused: self.flag("to_paused")?,
                },
                actor: self.try_get("actor")?,
                reason: self.try_get("reason")?,
                forced: self.flag("forced")?,
                evidence: serde_json::from_str(&evidence)
                    .map_err(|e| StoreError::Corrupt(format!("journal evidence: {e}")))?,
                generation: self.try_get("generation")?,
                epoch: self.try_get("epoch")?,
            })
        }

        fn gate(&self) -> Result<GateRecord> {
            Ok(GateRecord {
                step_entered_ms: self.try_get("step_entered")?,
                state: parse_state(self.try_get("state")?, self.try_get("step")?)?,
                gate: self.try_get("gate")?,
                kind: self.try_get("kind")?,
                query: self.try_get("query")?,
                value: self.try_get("value")?,
                old_value: self.try_get("old_value")?,
                samples: self.samples()?,
                verdict: self.try_get("verdict")?,
                reason: self.try_get("reason")?,
                no_data_cause: self.try_get("no_data_cause")?,
                held_since_ms: self.try_get("held_since")?,
                revision: Some(self.try_get("revision")?),
                peak: self.try_get("peak")?,
                judge_ledger: self.try_get("judge_ledger")?,
                largest_partition: self.try_get("largest_partition")?,
                at_ms: self.try_get("at")?,
            })
        }

        fn counts(&self) -> Result<(i64, i64)> {
            Ok((self.try_get("n")?, self.try_get("total")?))
        }
    };
}

impl Rows for SqliteRow {
    fn flag(&self, col: &str) -> Result<bool> {
        Ok(self.try_get::<i64, _>(col)? != 0)
    }

    fn samples(&self) -> Result<u32> {
        Ok(u32::try_from(self.try_get::<i64, _>("samples")?).unwrap_or(0))
    }

    records!();
}

impl Rows for PgRow {
    fn flag(&self, col: &str) -> Result<bool> {
        Ok(self.try_get(col)?)
    }

    fn samples(&self) -> Result<u32> {
        let samples: i64 = self.try_get("samples")?;
        u32::try_from(samples)
            .map_err(|_| StoreError::Corrupt(format!("gate evaluation with {samples} samples")))
    }

    records!();
}

pub(super) fn migration_row(row: &impl Rows) -> Result<MigrationRecord> {
    row.migration()
}

pub(super) fn journal_row(row: &impl Rows) -> Result<JournalEntry> {
    row.journal()
}

pub(super) fn gate_row(row: &impl Rows) -> Result<GateRecord> {
    row.gate()
}

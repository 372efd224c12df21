//! The SQLite backend's rows read into the store's records (migrations, journal entries, gate
//! evaluations).

use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::{GateRecord, JournalEntry, MigrationRecord, Result, StoreError, parse_state};
use crate::machine::Snapshot;

pub(super) fn migration_row(row: &SqliteRow) -> Result<MigrationRecord> {
    Ok(MigrationRecord {
        name: row.try_get("name")?,
        plan_yaml: row.try_get("plan_yaml")?,
        plan_path: row.try_get("plan_path")?,
        plan_hash: row.try_get("plan_hash")?,
        state: parse_state(row.try_get("state")?, row.try_get("step")?)?,
        paused: row.try_get::<i64, _>("paused")? != 0,
        version: row.try_get("version")?,
        generation: row.try_get("generation")?,
        published_generation: row.try_get("published_generation")?,
        publish_error: row.try_get("publish_error")?,
        entered_at_ms: row.try_get("entered_at")?,
        updated_at_ms: row.try_get("updated_at")?,
        created_at_ms: row.try_get("created_at")?,
    })
}

pub(super) fn journal_row(row: &SqliteRow) -> Result<JournalEntry> {
    let evidence: String = row.try_get("evidence")?;
    Ok(JournalEntry {
        seq: row.try_get("seq")?,
        at_ms: row.try_get("at")?,
        command: row.try_get("command")?,
        from: Snapshot {
            state: parse_state(row.try_get("from_state")?, row.try_get("from_step")?)?,
            paused: row.try_get::<i64, _>("from_paused")? != 0,
        },
        to: Snapshot {
            state: parse_state(row.try_get("to_state")?, row.try_get("to_step")?)?,
            paused: row.try_get::<i64, _>("to_paused")? != 0,
        },
        actor: row.try_get("actor")?,
        reason: row.try_get("reason")?,
        forced: row.try_get::<i64, _>("forced")? != 0,
        evidence: serde_json::from_str(&evidence)
            .map_err(|e| StoreError::Corrupt(format!("journal evidence: {e}")))?,
        generation: row.try_get("generation")?,
        epoch: row.try_get("epoch")?,
    })
}

pub(super) fn gate_row(row: &SqliteRow) -> Result<GateRecord> {
    Ok(GateRecord {
        step_entered_ms: row.try_get("step_entered")?,
        state: parse_state(row.try_get("state")?, row.try_get("step")?)?,
        gate: row.try_get("gate")?,
        kind: row.try_get("kind")?,
        query: row.try_get("query")?,
        value: row.try_get("value")?,
        old_value: row.try_get("old_value")?,
        samples: u32::try_from(row.try_get::<i64, _>("samples")?).unwrap_or(0),
        verdict: row.try_get("verdict")?,
        reason: row.try_get("reason")?,
        no_data_cause: row.try_get("no_data_cause")?,
        held_since_ms: row.try_get("held_since")?,
        revision: Some(row.try_get("revision")?),
        peak: row.try_get("peak")?,
        at_ms: row.try_get("at")?,
    })
}

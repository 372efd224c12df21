//! What a round of evaluation writes: the evaluations (the gates' memory) as rows, with the
//! samples their scrapes read, committed now or left in a daemon's round.

use std::collections::HashMap;

use crate::store::{GateRecord, MigrationRecord, RoundRecord, Store, StoreError};

use super::gather::{KeptSource, Scraped, Scrapes};
use super::report::GateReport;
use crate::controller::histories::{Histories, Kept, Taken};
use crate::controller::round::RoundBatch;

/// What [`super::evaluate_phase`] does with the evaluations and the samples it read.
#[derive(Debug, Clone, Copy)]
pub enum Recording<'a> {
    /// Nothing is written (a dry run).
    DryRun,
    /// Committed before it returns (a command on one migration).
    Commit,
    /// Left in a daemon's round, committed with the rest of the fleet's at the round's end.
    Round(&'a RoundBatch),
}

/// The stored row of each report: the gate's memory of the step `rec` is in, at `now_ms`.
fn rows(rec: &MigrationRecord, reports: &[GateReport], now_ms: i64) -> Vec<GateRecord> {
    reports
        .iter()
        .map(|r| GateRecord {
            step_entered_ms: rec.entered_at_ms,
            state: rec.state,
            gate: r.name.clone(),
            kind: r.kind.as_str().to_string(),
            query: r.query.clone(),
            value: r.eval.value,
            old_value: r.eval.old_value,
            samples: r.eval.memory.samples,
            verdict: r.eval.verdict.as_str().to_string(),
            // Every stored text bounded (the one text rule's cap).
            reason: crate::outgoing::cap(&r.eval.reason, crate::outgoing::REASON_MAX).into_owned(),
            no_data_cause: r.eval.cause.map(|c| c.as_str().to_string()),
            held_since_ms: r.eval.memory.held_since_ms,
            peak: r.eval.memory.peak,
            judge_ledger: r
                .eval
                .memory
                .judge
                .and_then(|l| serde_json::to_string(&l).ok()),
            largest_partition: r
                .largest_partition
                .as_ref()
                .and_then(|l| serde_json::to_string(l).ok()),
            at_ms: now_ms,
            revision: r.memory_read,
        })
        .collect()
}

/// The scrape histories to keep for the next round: each source scraped this round whose
/// scrape was usable.
fn kept(
    rec: &MigrationRecord,
    mut histories: HashMap<String, Scraped>,
    kept: Vec<KeptSource>,
    now_ms: i64,
) -> Vec<Kept> {
    kept.into_iter()
        .filter_map(|k| match histories.remove(&k.source) {
            Some(Ok(history)) => Some(Kept {
                migration: rec.name.clone(),
                source: k.source,
                entry: Taken {
                    history,
                    through_ms: now_ms,
                    rounds: k.rounds,
                    samples_from_ms: k.samples_from_ms,
                },
            }),
            _ => None,
        })
        .collect()
}

/// Store `reports` (the evaluations of `rec`'s step at `now_ms`) with the samples of
/// `scrapes`, as `recording` says; the histories scraped are kept in `histories` once committed.
///
/// # Guarantees
/// The evaluations and the samples they read commit together; the gates' memory only while the
/// migration still has the plan they were evaluated under (a `plan apply` committed meanwhile
/// forgot the memory of the gates it changed: it must stay forgotten).
///
/// # Errors
/// Store failures (a commit of its own only: a round's is the round's).
pub(super) async fn persist<S: Store>(
    store: &S,
    rec: &MigrationRecord,
    reports: &[GateReport],
    scrapes: Scrapes,
    recording: Recording<'_>,
    histories: Option<&Histories>,
    now_ms: i64,
) -> Result<(), StoreError> {
    let batch = match recording {
        Recording::DryRun => return Ok(()),
        Recording::Commit => None,
        Recording::Round(batch) => Some(batch),
    };
    let Scrapes {
        histories: scraped,
        taken,
        kept: kept_sources,
    } = scrapes;
    let kept = kept(rec, scraped, kept_sources, now_ms);
    let round = RoundRecord {
        name: rec.name.clone(),
        plan_hash: Some(rec.plan_hash.clone()),
        records: rows(rec, reports, now_ms),
        sources: taken,
    };
    match batch {
        None => {
            store.record_rounds(std::slice::from_ref(&round)).await?;
            if let Some(histories) = histories {
                histories.keep(kept);
            }
        }
        Some(batch) => batch.push(round, kept),
    }
    Ok(())
}

//! One round of gate evaluation for a migration's current phase.
//!
//! - [`gather`] — the IO: each scrape source is scraped once per round and each Prometheus
//!   query asked once (once for the whole fleet when the fetcher is a round's: see
//!   [`Fetcher::for_round`]); the step's memory (held-since marks, sample counts, peaks) read
//!   from the store.
//! - [`judge`] — the pure judgment: the [`gate`](crate::gate) functions turn the observations
//!   into verdicts, with that memory.
//! - `stale` — the built-in stale-producer guard's note naming the producers (pure).
//! - [`persist`] — the evaluations (the new memory) and the samples they read, written back.

mod gather;
pub(crate) mod judge;
mod judge_counters;
mod persist;
mod report;
mod stale;

use crate::indicators::fetch::Fetcher;
use crate::store::{Store, StoreError};

use crate::controller::histories::Histories;
use crate::controller::loaded::Loaded;

pub(crate) use judge::{Item, StepTimes, judge, phase_items};
pub use persist::Recording;
pub use report::GateReport;

/// Evaluate every gate of the migration's current phase at `now_ms`.
/// The evaluations (and their memory) are stored as `recording` says; a dry run only reads.
/// The gates' memory is [`Loaded::memory`] when it was read with the record
/// ([`crate::store::JournalStore::fleet`]), else read from the store.
///
/// # Errors
/// Only store failures: a source that fails makes its gates hold, it is not an error.
pub async fn evaluate_phase<S: Store>(
    store: &S,
    fetcher: &Fetcher,
    loaded: &Loaded,
    now_ms: i64,
    recording: Recording<'_>,
    histories: Option<&Histories>,
) -> Result<Vec<GateReport>, StoreError> {
    let rec = &loaded.record;
    // A dry run leaves memory as it is: its sample of now is not stored.
    let histories = histories.filter(|_| !matches!(recording, Recording::DryRun));
    let Some(kind) = rec.state.phase() else {
        return Ok(Vec::new());
    };
    let Some(phase) = loaded.plan.phase(kind) else {
        return Ok(Vec::new());
    };
    let items = phase_items(phase);
    let gather::Gathered {
        readings,
        memory,
        scrapes,
    } = gather::gather(store, fetcher, loaded, &items, now_ms, histories).await?;
    let memory = memory
        .as_deref()
        .or(loaded.memory.as_deref())
        .unwrap_or_default();
    let step = judge::Step {
        phase: kind.as_str(),
        entered_ms: rec.entered_at_ms,
        counting_from_ms: crate::judge::counting_from(rec.entered_at_ms, rec.updated_at_ms),
    };
    let reports = judge::judge_phase(&items, readings, memory, step, now_ms);
    persist::persist(store, rec, &reports, scrapes, recording, histories, now_ms).await?;
    Ok(reports)
}

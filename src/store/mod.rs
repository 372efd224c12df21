//! The state store: migrations, the append-only journal, gate evaluations, scrape history.
//!
//! One trait, [`Store`], on one SQL store ([`SqlStore`]) over either database, each query
//! written once (`store/sql_store.rs`; [`any::open`] picks the database from the state URL),
//! each database with its own schema under `migrations/<database>/` ([`sqlite`], [`postgres`]). Every write that changes a migration is conditional on
//! the version the caller read (optimistic concurrency): two controllers racing on one migration
//! never both apply, the loser gets [`StoreError::Conflict`].
//!
//! # Guarantees
//! - A transition (state update + journal entry) commits in one transaction or not at all; so
//!   does a plan replaced under a migration ([`JournalStore::replace_plan`]).
//! - The journal is append-only (both schemas refuse UPDATE and DELETE on it with triggers).
//! - A round of evaluations and the scrape samples it took commit together or not at all
//!   ([`EvaluationStore::record_round`]); each gate's newest evaluation is kept apart from the history,
//!   so that reading it back does not grow with the history. A round evaluated under a plan its
//!   migration no longer has (a `plan apply` committed meanwhile) writes no gate memory
//!   ([`EvaluationStore::record_rounds`]).

#[macro_use]
mod sql;
pub mod any;
mod dialect;
pub mod dispositions;
mod dispositions_sql;
pub mod dlq_rows;
mod error;
pub mod fence;
mod held;
pub mod lease_keeper;
mod memory;
pub mod outbox;
mod pg_session;
pub mod postgres;
mod records;
pub mod retention;
mod scrape_text;
mod scrapes;
mod sql_rows;
mod sql_store;
pub mod sqlite;
mod sqlite_bits;
pub mod traits;

pub use error::{Result, StoreError};
pub use records::*;
pub use scrapes::{MAX_HISTORY_BYTES, MAX_SCRAPE_ROW_BYTES, kept_bytes};
pub use sql::SqlStore;
pub use traits::{DecisionStore, EvaluationStore, JournalStore, LeaseStore, ScrapeStore, Store};

use crate::machine::State;

/// The bound of `at > ?` that selects the samples after `after_ms` and at or after
/// `samples_from_ms`.
pub(crate) fn samples_after(after_ms: i64, samples_from_ms: i64) -> i64 {
    after_ms.max(samples_from_ms.saturating_sub(1))
}

/// The integers of a list separated by commas, as SQLite's `group_concat` writes them (in
/// full: exact). An empty list (no rows) is empty.
///
/// # Errors
/// [`StoreError::Corrupt`], naming `what`, for an item that is not an integer.
pub(crate) fn parse_list(list: &str, what: &str) -> Result<Vec<i64>> {
    if list.is_empty() {
        return Ok(Vec::new());
    }
    list.split(',')
        .map(|item| {
            item.parse().map_err(|_| {
                StoreError::Corrupt(format!(
                    "{what}: {item:?} in a stored list is not an integer"
                ))
            })
        })
        .collect()
}

/// The step stored beside a state (the inverse of [`parse_state`]).
pub(crate) fn step_of(state: State) -> Option<i64> {
    state.step().and_then(|s| i64::try_from(s).ok())
}

/// Map a stored (state, step) pair back to a [`State`].
pub(crate) fn parse_state(name: &str, step: Option<i64>) -> Result<State> {
    let step = step
        .map(usize::try_from)
        .transpose()
        .map_err(|_| StoreError::Corrupt(format!("negative step for state {name}")))?;
    State::from_parts(name, step)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown state {name:?} (step {step:?})")))
}

/// The error of a state URL its driver could not parse (`e`, from `from_str`): the input's
/// fault, not the database's.
fn malformed(url: &str, e: &sqlx::Error) -> StoreError {
    StoreError::MalformedUrl {
        url: crate::redact::url(url),
        why: crate::redact::text(&e.to_string()),
    }
}

#[cfg(test)]
mod tests;

//! A daemon's round written in one transaction: each migration's tick leaves its gate
//! evaluations and scrape samples here instead of committing them itself, and the round commits
//! them all at its end (one commit for the fleet instead of one per migration).
//!
//! # Guarantees
//! - All or nothing: a failed commit loses the round's evaluations and samples of every
//!   migration (each then reads, next round, the memory of the round before, as if this one had
//!   not run), and no history taken out for the round goes back into memory.
//! - Decisions do not wait for it: a transition made during the round carries the gates it
//!   rests on in its own journal entry.

use std::sync::{Mutex, PoisonError};

use crate::store::{RoundRecord, Store, StoreError};

use super::histories::{Histories, Kept};

/// The rounds of a daemon's round of ticks, waiting for their commit.
#[derive(Debug, Default)]
pub struct RoundBatch {
    pending: Mutex<Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    rounds: Vec<RoundRecord>,
    kept: Vec<Kept>,
}

impl RoundBatch {
    /// Add one migration's round and the histories it read.
    pub fn push(&self, round: RoundRecord, kept: Vec<Kept>) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.rounds.push(round);
        pending.kept.extend(kept);
    }

    /// Add every round and history of `other` (a migration's own batch, ticked apart).
    pub fn absorb(&self, other: RoundBatch) {
        let other = other
            .pending
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.rounds.extend(other.rounds);
        pending.kept.extend(other.kept);
    }

    /// Whether no round waits for the commit.
    pub fn is_empty(&self) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .rounds
            .is_empty()
    }

    /// The rounds waiting for the commit, in the order they were pushed.
    pub fn rounds(&self) -> Vec<RoundRecord> {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .rounds
            .clone()
    }

    /// Write every round in one transaction, then keep the histories in `histories`. Returns how
    /// many migrations' rounds were written.
    ///
    /// # Errors
    /// The store's: nothing of the round is written then.
    pub async fn commit<S: Store>(
        self,
        store: &S,
        histories: Option<&Histories>,
    ) -> Result<usize, StoreError> {
        let pending = self
            .pending
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        if pending.rounds.is_empty() {
            return Ok(0);
        }
        store.record_rounds(&pending.rounds).await?;
        if let Some(histories) = histories {
            histories.keep(pending.kept);
        }
        Ok(pending.rounds.len())
    }

    /// [`RoundBatch::commit`]; but when the one transaction could not take a migration's lock
    /// (`locked` says which errors mean that: another session, an ex-leader's, holds it), each
    /// migration's round is written alone, and those whose lock is still held are skipped and
    /// named. The histories are kept only when every round was written.
    ///
    /// # Errors
    /// The store's, other than a lock not taken.
    pub async fn commit_or_skip_locked<S: Store>(
        self,
        store: &S,
        histories: Option<&Histories>,
        locked: impl Fn(&StoreError) -> bool,
    ) -> Result<Vec<String>, StoreError> {
        let pending = self
            .pending
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        if pending.rounds.is_empty() {
            return Ok(Vec::new());
        }
        match store.record_rounds(&pending.rounds).await {
            Ok(()) => {
                if let Some(histories) = histories {
                    histories.keep(pending.kept);
                }
                Ok(Vec::new())
            }
            Err(e) if locked(&e) => {
                let mut skipped = Vec::new();
                for round in &pending.rounds {
                    match store.record_rounds(std::slice::from_ref(round)).await {
                        Ok(()) => {}
                        Err(e) if locked(&e) => skipped.push(round.name.clone()),
                        Err(e) => return Err(e),
                    }
                }
                Ok(skipped)
            }
            Err(e) => Err(e),
        }
    }
}

//! Fencing tokens: a write made as the holder of a lease commits only while that lease is still
//! held, by the same holder, with the same epoch, unexpired on the database's clock.
//!
//! A daemon arms its store with a [`FenceCell`] ([`super::LeaseStore::fenced`]) and sets the epoch
//! its lease renewals answer. Every write the store then makes (transitions and their journal,
//! round batches, publish marks, retention deletes, dead-letter decisions) runs, in its own
//! transaction, a conditional write against the lease row ([`PROVE_PG`], [`PROVE_SQLITE`], run by `Tx::prove` of the SQL store); when
//! it changes no row the transaction is rolled back and the write is refused
//! ([`StoreError::Fenced`]), logged at WARN with the word "fenced" and counted
//! ([`FenceCell::refused`]). A store without a cell (the CLI) is not fenced.
//!
//! A round runs inside [`in_round`] with the epoch it started under: a write of that round
//! after the lease changed hands and came back (a new epoch) is refused too, so that no decision
//! commits under a lease other than the one it was made under.
//!
//! # Guarantees
//! - An armed store without an epoch (no lease held) refuses every write, before any statement.
//! - The proof is the last statement before `COMMIT`: the lease row is locked (PostgreSQL) for
//!   the commit only, and a takeover that committed before it makes it fail.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Result, StoreError};

/// The database's clock, in ms since the Unix epoch, as PostgreSQL reads it in a statement
/// (`clock_timestamp()`: the time of the statement, not of the transaction's start).
pub const NOW_MS_PG: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";
/// The same on SQLite (its clock, read once per statement).
pub const NOW_MS_SQLITE: &str = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";

/// [`NOW_MS_PG`] as a query.
pub const SELECT_NOW_PG: &str = "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";
/// [`NOW_MS_SQLITE`] as a query.
pub const SELECT_NOW_SQLITE: &str =
    "SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";

/// The proof on PostgreSQL: `$1` lease, `$2` holder, `$3` epoch; one row changed or none.
pub const PROVE_PG: &str = "UPDATE leases SET holder = holder WHERE name = $1 AND holder = $2 \
     AND epoch = $3 AND expires_at > (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";
/// The proof on SQLite.
pub const PROVE_SQLITE: &str = "UPDATE leases SET holder = holder WHERE name = ?1 AND holder = ?2 \
     AND epoch = ?3 AND expires_at > CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";

/// What a fenced write proves: this lease, held by this holder, at this epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub lease: String,
    pub holder: String,
    pub epoch: i64,
}

#[derive(Debug)]
struct Armed {
    lease: String,
    holder: String,
    epoch: Mutex<Option<i64>>,
    refused: AtomicU64,
}

/// The fence of a store's writes, shared by the clones of an armed store. The default is
/// unarmed: writes are not fenced.
#[derive(Debug, Clone, Default)]
pub struct FenceCell(Option<Arc<Armed>>);

tokio::task_local! {
    /// The epoch the round being run started under (see [`in_round`]).
    static ROUND_EPOCH: Option<i64>;
}

/// Run `f` (a round) as one started under `epoch`: its fenced writes must prove that epoch,
/// even if the cell's moved meanwhile.
pub async fn in_round<F: Future>(epoch: Option<i64>, f: F) -> F::Output {
    ROUND_EPOCH.scope(epoch, f).await
}

impl FenceCell {
    /// A cell for `holder` of `lease`, holding no epoch yet (writes refused until one is set).
    pub fn armed(lease: &str, holder: &str) -> FenceCell {
        FenceCell(Some(Arc::new(Armed {
            lease: lease.to_string(),
            holder: holder.to_string(),
            epoch: Mutex::new(None),
            refused: AtomicU64::new(0),
        })))
    }

    /// Whether writes are fenced.
    pub fn is_armed(&self) -> bool {
        self.0.is_some()
    }

    /// The epoch of the lease now held (`None`: none is).
    pub fn set_epoch(&self, epoch: Option<i64>) {
        if let Some(a) = &self.0 {
            *a.epoch.lock().unwrap_or_else(PoisonError::into_inner) = epoch;
        }
    }

    /// The epoch held now, if any.
    pub fn epoch(&self) -> Option<i64> {
        self.0
            .as_ref()
            .and_then(|a| *a.epoch.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The epoch a decision being made now is made under: the round's ([`in_round`]) when
    /// inside one, else the one held now. What an event about that decision carries: a round
    /// whose commit went through before the lease was lost announces it under the epoch that
    /// commit proved, not under none.
    pub fn decided_under(&self) -> Option<i64> {
        self.0.as_ref()?;
        ROUND_EPOCH
            .try_with(|e| *e)
            .unwrap_or_else(|_| self.epoch())
    }

    /// How many writes were refused since the cell was armed.
    pub fn refused(&self) -> u64 {
        self.0
            .as_ref()
            .map_or(0, |a| a.refused.load(Ordering::Relaxed))
    }

    /// What a write of `what` must prove: `None` when not fenced.
    ///
    /// # Errors
    /// [`StoreError::Fenced`] (logged, counted) when armed without an epoch, or when the round
    /// running started under another epoch than the one held now.
    pub fn demand(&self, what: &str) -> Result<Option<Fence>> {
        let Some(a) = &self.0 else { return Ok(None) };
        let held = self.epoch();
        let round = ROUND_EPOCH.try_with(|e| *e).unwrap_or(held);
        match held {
            Some(epoch) if round == Some(epoch) => Ok(Some(Fence {
                lease: a.lease.clone(),
                holder: a.holder.clone(),
                epoch,
            })),
            _ => Err(self.refuse(what, round.or(held))),
        }
    }

    /// Refuse a write of `what` made under `epoch`: logged at WARN, counted.
    pub fn refuse(&self, what: &str, epoch: Option<i64>) -> StoreError {
        let (lease, holder) = self.0.as_ref().map_or((String::new(), String::new()), |a| {
            (a.lease.clone(), a.holder.clone())
        });
        if let Some(a) = &self.0 {
            a.refused.fetch_add(1, Ordering::Relaxed);
        }
        let epoch = epoch.map_or_else(|| "none".to_string(), |e| e.to_string());
        tracing::warn!(
            lease = %lease, holder = %holder, epoch = %epoch,
            "fenced: {what} refused and rolled back: the lease is no longer held by this holder with this epoch"
        );
        StoreError::Fenced {
            lease,
            holder,
            epoch,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_decision_is_made_under_the_epoch_its_round_started_with() {
        assert_eq!(FenceCell::default().decided_under(), None);
        let cell = FenceCell::armed("controller", "a");
        cell.set_epoch(Some(3));
        assert_eq!(cell.decided_under(), Some(3));
        in_round(Some(3), async {
            // The lease lost, or held again under another epoch, during the round.
            cell.set_epoch(None);
            assert_eq!(cell.decided_under(), Some(3));
            cell.set_epoch(Some(4));
            assert_eq!(cell.decided_under(), Some(3));
            assert!(cell.demand("a write").is_err());
        })
        .await;
        assert_eq!(cell.decided_under(), Some(4));
    }
}

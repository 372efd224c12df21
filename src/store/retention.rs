//! Retention: what [`EvaluationStore::prune`](super::EvaluationStore::prune) may delete, and what it never does.
//!
//! Four tables grow with time: the gate evaluations (one row per gate per tick), the gates'
//! memory (one row per gate per step entered), the scrapes (one row per source per tick) and
//! the outbox (one row per transition committed: [`super::outbox`]).
//! A prune deletes from them only what no reader needs any more; the rules are the same on every
//! backend and for the daemon's `--retain` and `migrate prune --older-than`.
//!
//! # Guarantees
//! - **Never pruned**: the journal (append-only: the record of every transition, with the gate
//!   readings that justified it), the migrations, the leases, the dead-letter decisions and
//!   signatures.
//! - `gate_evaluations` (the history): rows evaluated before [`Prune::before_ms`]. No reader of
//!   the controller reads them back (a tick reads each gate's memory); they are the record of
//!   every evaluation for people who query the database.
//! - `gate_memory`: only the rows of a step the migration has left (their step is not the one
//!   its record is in) and last evaluated before [`Prune::before_ms`]. The memory of the step a
//!   migration is in is never deleted, whatever its age: it holds an open `for:` span's "held
//!   since" mark, a step's peak (`require_peak`), the sample count and the last evaluation's time
//!   (what `for_max_gap` is measured from). A step is identified by the instant it was entered:
//!   a step left and entered again (a rollback, then an advance) is a new step with a memory of
//!   its own, so the memory of a step left is never read again.
//! - `scrapes`: only those of migrations in `complete` (never evaluated again) taken before
//!   [`Prune::before_ms`]. The scrapes of every other migration are what its gates' windows read;
//!   a daemon's rounds already keep them to twice the longest window (at least 20 minutes), so
//!   they do not grow with time.
//! - `outbox`: only the rows a leader marked **delivered**, committed (`created_at`, the
//!   journal entry's instant) before [`Prune::before_ms`]. An undelivered row is never deleted,
//!   whatever its age: it is what the next leader still has to announce. A delivered row is
//!   read by nobody (the journal keeps the transition).
//! - Each statement deletes at most [`Prune::batch`] rows of one table (oldest first), so that a
//!   prune never holds a lock long; a caller repeats it until nothing is left
//!   ([`Pruned::total`] is 0) or spreads the batches over a daemon's rounds.

use serde::Serialize;

/// What to prune (see the module doc for what each table loses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prune {
    /// Rows older than this instant (ms since the epoch) may go.
    pub before_ms: i64,
    /// Only this migration's rows (`None`: every migration's).
    pub migration: Option<String>,
    /// Most rows one statement deletes (at least 1).
    pub batch: i64,
}

/// Rows deleted (or, for a dry run, that would be), per table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Pruned {
    pub gate_evaluations: u64,
    pub gate_memory: u64,
    pub scrapes: u64,
    pub outbox: u64,
}

impl Pruned {
    /// Rows of every table.
    pub fn total(&self) -> u64 {
        self.gate_evaluations + self.gate_memory + self.scrapes + self.outbox
    }

    /// Whether a batch of `batch` rows per table was full for some table (more may be left).
    pub fn full(&self, batch: i64) -> bool {
        let batch = u64::try_from(batch).unwrap_or(0);
        batch > 0
            && (self.gate_evaluations >= batch
                || self.gate_memory >= batch
                || self.scrapes >= batch
                || self.outbox >= batch)
    }

    /// Each table's count, with its name, in a fixed order.
    pub fn tables(&self) -> [(&'static str, u64); 4] {
        [
            ("gate_evaluations", self.gate_evaluations),
            ("gate_memory", self.gate_memory),
            ("scrapes", self.scrapes),
            ("outbox", self.outbox),
        ]
    }
}

impl std::ops::AddAssign for Pruned {
    fn add_assign(&mut self, other: Pruned) {
        self.gate_evaluations += other.gate_evaluations;
        self.gate_memory += other.gate_memory;
        self.scrapes += other.scrapes;
        self.outbox += other.outbox;
    }
}

#[cfg(test)]
mod tests {
    use super::Pruned;

    #[test]
    fn a_batch_is_full_when_any_table_filled_it() {
        let p = Pruned {
            gate_evaluations: 10,
            gate_memory: 0,
            scrapes: 3,
            outbox: 0,
        };
        assert!(p.full(10));
        assert!(!p.full(11));
        assert!(!p.full(0));
        assert_eq!(p.total(), 13);
        let mut sum = p;
        sum += p;
        assert_eq!(sum.tables()[0], ("gate_evaluations", 20));
        let outbox = Pruned {
            outbox: 10,
            ..Pruned::default()
        };
        assert!(outbox.full(10));
        assert_eq!(outbox.total(), 10);
        assert_eq!(outbox.tables()[3], ("outbox", 10));
    }
}

//! Scrape histories kept in memory between a daemon's rounds, so that a round reads from the
//! store only the samples stored since the previous one instead of the whole history (and
//! decodes only those).
//!
//! # Guarantees
//! - The store stays the record: an entry is put back only after the round that built it
//!   committed its samples, so memory never holds a sample the store lacks for long.
//! - A history read whole (a daemon's first round, or after a check found it differs) holds
//!   every scrape instant the store keeps, but only the samples its queries can reach: those
//!   of the longest window, at least the staleness limit, back from the round's instant. The
//!   store keeps more (twice the retention, at least 20 minutes, plus up to a step of
//!   [`PRUNE_STEP_MS`]: see [`prune_from`]), which no query reads.
//! - Samples another process stores (a `migrate advance` from the CLI, a previous leader) are
//!   read at the next round when they are newer than the entry. One stored late, at an instant
//!   older than the entry's newest and not among its instants, is found when the entry is
//!   checked, every [`ROUNDS_BEFORE_CHECK`] rounds at most
//!   (see [`rounds_before_check`]): the store's scrape instants through the entry's (their
//!   number and sum, one row) are compared with the entry's, and an entry that differs is read
//!   whole again.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::indicators::history::History;

/// Rounds an entry serves at most before it is checked against the store.
pub const ROUNDS_BEFORE_CHECK: u32 = 100;

/// Rounds the entry of `source` for `migration` serves before it is checked: from half of
/// [`ROUNDS_BEFORE_CHECK`] to all of it, fixed for the pair. Entries read whole in one round (a
/// daemon's first) are then checked, and read whole again if they must be, spread over many
/// rounds, not all in one.
pub fn rounds_before_check(migration: &str, source: &str) -> u32 {
    let half = ROUNDS_BEFORE_CHECK / 2;
    let spread = u64::from(ROUNDS_BEFORE_CHECK - half + 1);
    half + u32::try_from(pair_hash(migration, source) % spread).unwrap_or(0)
}

/// The store drops a source's scrapes older than an instant at most once per this many
/// milliseconds of that instant (see [`prune_from`]).
pub const PRUNE_STEP_MS: i64 = 30_000;

/// Where the history of `source` for `migration` starts once the scrapes older than
/// `keep_from_ms` may go: `keep_from_ms` moved back to the last of the pair's steps of
/// [`PRUNE_STEP_MS`], so it moves once per step instead of at every round, and the store
/// deletes a step's scrapes in one round, each pair at its own offset, so that the fleet's
/// deletes spread over the rounds.
///
/// # Guarantees
/// - `keep_from_ms - PRUNE_STEP_MS < prune_from(..) <= keep_from_ms`: at most one step more of
///   history is kept.
/// - It never moves back when `keep_from_ms` moves forward.
pub fn prune_from(migration: &str, source: &str, keep_from_ms: i64) -> i64 {
    let offset =
        i64::try_from(pair_hash(migration, source) % PRUNE_STEP_MS.unsigned_abs()).unwrap_or(0);
    keep_from_ms.saturating_sub(
        keep_from_ms
            .saturating_sub(offset)
            .rem_euclid(PRUNE_STEP_MS),
    )
}

/// A hash of the pair fixed for a build (`DefaultHasher::new` has fixed keys).
fn pair_hash(migration: &str, source: &str) -> u64 {
    let mut h = DefaultHasher::new();
    (migration, source).hash(&mut h);
    h.finish()
}

/// Each (migration, scrape source)'s history as of its last committed round.
#[derive(Debug, Default)]
pub struct Histories {
    /// By migration, then by source (looked up by `&str`, a migration forgotten at once).
    entries: Mutex<HashMap<String, HashMap<String, Taken>>>,
}

/// A history to keep in memory once its round is committed: the entry of `source` for
/// `migration`, complete through the round's instant, its `rounds` counting that round.
#[derive(Debug)]
pub struct Kept {
    pub migration: String,
    pub source: String,
    pub entry: Taken,
}

/// A history kept between rounds, or taken out for one.
#[derive(Debug)]
pub struct Taken {
    pub history: History,
    /// Everything the store held up to this instant is in `history`: read only what it holds
    /// after.
    pub through_ms: i64,
    /// Rounds it served since it was read whole or checked.
    pub rounds: u32,
    /// It holds every stored sample from this instant on: a round whose queries reach further
    /// back reads it whole again.
    pub samples_from_ms: i64,
}

impl Taken {
    /// Whether it must be checked against the store before it serves `source` of `migration`
    /// again (it served its [`rounds_before_check`]).
    pub fn due(&self, migration: &str, source: &str) -> bool {
        self.rounds >= rounds_before_check(migration, source)
    }
}

impl Histories {
    /// Take the kept history of `source` for `migration`, or `None` when none is kept. A round
    /// running meanwhile for the same pair finds none and reads the store.
    pub fn take(&self, migration: &str, source: &str) -> Option<Taken> {
        self.entries().get_mut(migration)?.remove(source)
    }

    /// Keep `taken` for `source` of `migration` after its round committed.
    pub fn put(&self, migration: &str, source: &str, taken: Taken) {
        self.entries()
            .entry(migration.to_string())
            .or_default()
            .insert(source.to_string(), taken);
    }

    /// Keep histories whose rounds are committed.
    pub fn keep(&self, kept: impl IntoIterator<Item = Kept>) {
        for k in kept {
            self.put(&k.migration, &k.source, k.entry);
        }
    }

    /// Forget every history of `migration` (it is complete: no round reads its sources again).
    pub fn forget(&self, migration: &str) {
        self.entries().remove(migration);
    }

    /// The entries; each is replaced whole, so a panic elsewhere leaves them usable.
    fn entries(&self) -> MutexGuard<'_, HashMap<String, HashMap<String, Taken>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(through_ms: i64, rounds: u32) -> Taken {
        Taken {
            history: History::new(),
            through_ms,
            rounds,
            samples_from_ms: i64::MIN,
        }
    }

    #[test]
    fn an_entry_is_taken_once_and_due_for_a_check_after_its_rounds() {
        let h = Histories::default();
        assert!(h.take("m", "app").is_none());
        h.put("m", "app", entry(1_000, 0));
        let taken = h.take("m", "app").expect("kept");
        assert_eq!((taken.through_ms, taken.rounds), (1_000, 0));
        assert!(
            h.take("m", "app").is_none(),
            "a concurrent round reads the store"
        );
        let mut previous = taken;
        for round in 1..rounds_before_check("m", "app") {
            h.put(
                "m",
                "app",
                entry(1_000 + i64::from(round), previous.rounds + 1),
            );
            previous = h.take("m", "app").expect("kept");
            assert_eq!(previous.rounds, round);
            assert!(!previous.due("m", "app"), "round {round}");
        }
        h.put("m", "app", entry(9_999, previous.rounds + 1));
        let due = h.take("m", "app").expect("kept");
        assert!(due.due("m", "app"));
    }

    /// Regression: every entry read whole in a daemon's first round was read whole again in one
    /// round, 100 rounds later: the whole stored history of the fleet (3.5 M samples for 1,000
    /// sources 17 minutes old) in one tick, every 100 ticks.
    #[test]
    fn entries_read_whole_together_are_checked_over_many_rounds() {
        let limits: std::collections::BTreeSet<u32> = (0..1_000)
            .map(|i| rounds_before_check(&format!("migration-{i}"), "app"))
            .collect();
        let (Some(least), Some(most)) = (limits.first(), limits.last()) else {
            panic!("no limit");
        };
        assert!(*least >= ROUNDS_BEFORE_CHECK / 2 && *most <= ROUNDS_BEFORE_CHECK);
        assert!(limits.len() > 40, "{limits:?}");
        assert_eq!(
            rounds_before_check("m", "app"),
            rounds_before_check("m", "app")
        );
    }

    /// Regression: every round deleted the scrape that aged out of each source's history, one
    /// statement per source per round (a tenth of the store's time in a round of 1,000 sources).
    #[test]
    fn a_history_starts_one_step_at_a_time_each_pair_at_its_own_offset() {
        let mut moves = 0;
        let mut previous = prune_from("m", "app", 0);
        for keep_from in (1..=300_000).step_by(1_000) {
            let from = prune_from("m", "app", keep_from);
            assert!(
                from <= keep_from && from > keep_from - PRUNE_STEP_MS,
                "{keep_from}: {from}"
            );
            assert!(from >= previous, "{keep_from}: {from} < {previous}");
            moves += usize::from(from != previous);
            previous = from;
        }
        // 300 s of bounds, 1 s apart: ten steps of 30 s, nine when the pair's offset falls
        // before the first bound or after the last.
        assert!((9..=10).contains(&moves), "{moves} moves over 300 s");
        let offsets: std::collections::BTreeSet<i64> = (0..1_000)
            .map(|i| prune_from(&format!("migration-{i}"), "app", 1_000_000_000))
            .collect();
        assert!(offsets.len() > 900, "{}", offsets.len());
        assert_eq!(prune_from("m", "app", i64::MIN), i64::MIN);
        assert!(prune_from("m", "app", i64::MAX) > i64::MAX - PRUNE_STEP_MS);
    }

    #[test]
    fn forget_drops_every_source_of_one_migration() {
        let h = Histories::default();
        h.put("m", "a", entry(1, 0));
        h.put("m", "b", entry(1, 0));
        h.put("n", "a", entry(1, 0));
        h.forget("m");
        assert!(h.take("m", "a").is_none());
        assert!(h.take("m", "b").is_none());
        assert!(h.take("n", "a").is_some());
    }
}

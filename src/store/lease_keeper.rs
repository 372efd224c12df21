//! The one lease policy of everything that must act alone over a store: the daemon (lease
//! `controller`) and a bridge (lease `bridge:MIGRATION`).
//!
//! A [`LeaseKeeper`] takes, renews and gives back one lease for one holder, and says until when
//! the holder may act. It logs nothing and keeps no state: the caller keeps the instant its lease
//! runs out (`until_ms`, from [`Renewal::Held`]) and says what happened in its own words.
//!
//! # Guarantees
//! - A holder acts only until a margin of a fifth of the TTL before its lease would run out
//!   unrenewed ([`LeaseKeeper::acts_until`], [`LeaseKeeper::acts`], [`LeaseKeeper::left`]), so that
//!   work stopped at that instant is over before a standby may take the lease.
//! - Renewals are due every third of the TTL ([`LeaseKeeper::renew_every`],
//!   [`LeaseKeeper::renewals`]): a renewal that fails leaves time for the next one before the
//!   margin.
//! - [`LeaseKeeper::renew`] waits for the store at most the time it is given: a store that does
//!   not answer is [`Renewal::Unanswered`], never a wait past the lease.
//! - A renewal that finds another holder is [`Renewal::Taken`]: the caller stops at once. A failed
//!   renewal ([`Renewal::Failed`], [`Renewal::Unanswered`]) extends nothing: the caller keeps
//!   acting only on the lease it already holds.
//! - No wall clock is read here: callers pass the instant `now_ms` (ms since the epoch, on the
//!   database's clock as they follow it: [`crate::time::DbClock`]); only tokio's clock bounds a
//!   renewal. SQL stores take, renew and expire leases on the database's clock in the statement.
//! - A lease is held by a process instance, not by a name: a holder is `ID#INSTANCE`
//!   ([`instance_holder`]), the operator's `--id` and a random id drawn once per run
//!   ([`new_instance`]). Two processes started with one `--id` are two holders: the second
//!   stands by until the first releases its lease or lets it expire, and each acquisition raises
//!   the epoch, so that a paused process resumed behind its same-`--id` replacement proves an
//!   epoch that is no longer the lease's and every write of it is refused ([`super::fence`]).

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{Lease, LeaseStore, StoreError};

/// The separator of an `--id` and its instance in a lease's holder.
pub const INSTANCE_SEPARATOR: char = '#';

/// A fresh random instance id (12 hex digits): drawn once per run of a daemon or a bridge, so
/// that two processes with one `--id` hold the lease as two holders.
///
/// # Guarantees
/// Two calls, in one process or in two, give different ids but with a chance of about 2^-48
/// per pair: the bits come from the OS-seeded keys of [`std::hash::RandomState`] (a new key per
/// call), hashed with the process id, the wall clock's nanoseconds and a per-process counter.
pub fn new_instance() -> String {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut h = std::hash::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
    if let Ok(since) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(since.as_nanos());
    }
    format!("{:012x}", h.finish() & 0xffff_ffff_ffff)
}

/// The holder a lease is held as by instance `instance` of `id`: `ID#INSTANCE` (`id` alone when
/// `instance` is empty: a caller that names its own holders, such as a test).
pub fn instance_holder(id: &str, instance: &str) -> String {
    if instance.is_empty() {
        id.to_string()
    } else {
        format!("{id}{INSTANCE_SEPARATOR}{instance}")
    }
}

/// A holder's `--id` and instance (`None`: a holder named without one).
pub fn split_holder(holder: &str) -> (&str, Option<&str>) {
    match holder.rsplit_once(INSTANCE_SEPARATOR) {
        Some((id, instance)) => (id, Some(instance)),
        None => (holder, None),
    }
}

/// What asking for the lease answered.
#[derive(Debug)]
pub enum Renewal {
    /// The lease is this holder's until `until_ms` (the database's clock, ms).
    Held {
        /// When the lease runs out unless renewed.
        until_ms: i64,
        /// The lease's epoch (raised on every change of holder).
        epoch: i64,
        /// The database's clock when it answered.
        db_now_ms: i64,
    },
    /// Another holder has it: stop acting at once.
    Taken {
        /// Who holds it.
        holder: String,
        /// The database's clock when it answered (a standby measures its skew by it too).
        db_now_ms: i64,
        /// When the holder's lease runs out unless renewed (the database's clock, ms).
        expires_at_ms: i64,
        /// The epoch it holds it under.
        epoch: i64,
    },
    /// The store failed: nothing is extended.
    Failed(StoreError),
    /// The store did not answer within the time given: nothing is extended.
    Unanswered,
}

/// One lease of one holder over one store, with its TTL. See the module's guarantees.
#[derive(Debug, Clone, Copy)]
pub struct LeaseKeeper<'a, S> {
    store: &'a S,
    name: &'a str,
    holder: &'a str,
    ttl: Duration,
}

/// How long after the instant a standby may take the lease another holder holds it asks for it
/// ([`LeaseKeeper::ask_again`], [`crate::lease::Lease::takeable_in`]): the database's clock has
/// moved past the lease's end by then, whatever the rounding of its milliseconds.
pub const EXPIRY_MARGIN: Duration = Duration::from_millis(20);

impl<'a, S: LeaseStore> LeaseKeeper<'a, S> {
    /// The lease `name` for `holder` in `store`, lasting `ttl` without renewal.
    pub fn new(store: &'a S, name: &'a str, holder: &'a str, ttl: Duration) -> Self {
        LeaseKeeper {
            store,
            name,
            holder,
            ttl,
        }
    }

    /// The lease's name.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The TTL in ms (saturating).
    pub fn ttl_ms(&self) -> i64 {
        i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)
    }

    /// How long before the lease runs out the holder stops acting: a fifth of the TTL, in ms.
    pub fn margin_ms(&self) -> i64 {
        self.ttl_ms() / 5
    }

    /// How often the lease is renewed: a third of the TTL.
    pub fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    /// A renewal schedule: ticks at once, then every [`LeaseKeeper::renew_every`]; a tick missed
    /// (a renewal that took long) is delayed, not bunched.
    pub fn renewals(&self) -> tokio::time::Interval {
        let mut every = tokio::time::interval(self.renew_every());
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every
    }

    /// When a standby that may take the lease `left` from now asks again: [`EXPIRY_MARGIN`]
    /// after that, when it comes before the next renewal of the schedule
    /// ([`LeaseKeeper::renewals`]); `None` otherwise (that renewal asks).
    pub fn ask_again(&self, left: Duration) -> Option<Duration> {
        let wait = left + EXPIRY_MARGIN;
        (wait < self.renew_every()).then_some(wait)
    }

    /// Until when (wall clock, ms) a holder whose lease runs out at `until_ms` acts.
    pub fn acts_until(&self, until_ms: i64) -> i64 {
        until_ms - self.margin_ms()
    }

    /// Whether a holder whose lease runs out at `until_ms` acts at `now_ms`.
    pub fn acts(&self, now_ms: i64, until_ms: i64) -> bool {
        now_ms < self.acts_until(until_ms)
    }

    /// How long, from `now_ms`, a holder whose lease runs out at `until_ms` acts yet (zero once
    /// past).
    pub fn left(&self, now_ms: i64, until_ms: i64) -> Duration {
        Duration::from_millis(u64::try_from(self.acts_until(until_ms) - now_ms).unwrap_or(0))
    }

    /// Take or renew the lease at `now_ms`, waiting for the store as long as it takes (a standby
    /// that holds nothing yet).
    pub async fn acquire(&self, now_ms: i64) -> Renewal {
        let asked = self
            .store
            .acquire_lease(self.name, self.holder, now_ms, self.ttl_ms())
            .await;
        self.judge(asked)
    }

    /// Take or renew the lease at `now_ms`, waiting for the store at most `within`.
    pub async fn renew(&self, now_ms: i64, within: Duration) -> Renewal {
        let asked = self
            .store
            .acquire_lease(self.name, self.holder, now_ms, self.ttl_ms());
        match tokio::time::timeout(within, asked).await {
            Ok(answer) => self.judge(answer),
            Err(_) => Renewal::Unanswered,
        }
    }

    /// Give the lease back (if this holder has it), so that a standby takes over at once.
    ///
    /// # Errors
    /// The store's.
    pub async fn release(&self) -> Result<(), StoreError> {
        self.store.release_lease(self.name, self.holder).await
    }

    fn judge(&self, answer: Result<Lease, StoreError>) -> Renewal {
        match answer {
            Ok(l) if l.holder == self.holder => Renewal::Held {
                until_ms: l.expires_at_ms,
                epoch: l.epoch,
                db_now_ms: l.db_now_ms,
            },
            Ok(l) => Renewal::Taken {
                holder: l.holder,
                db_now_ms: l.db_now_ms,
                expires_at_ms: l.expires_at_ms,
                epoch: l.epoch,
            },
            Err(e) => Renewal::Failed(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A one-lease store whose answers take `delay` (tokio time) and may fail.
    #[derive(Default)]
    struct FakeStore {
        lease: Mutex<Option<Lease>>,
        delay: Duration,
        fail: bool,
    }

    impl LeaseStore for FakeStore {
        async fn acquire_lease(
            &self,
            _lease: &str,
            holder: &str,
            now_ms: i64,
            ttl_ms: i64,
        ) -> Result<Lease, StoreError> {
            tokio::time::sleep(self.delay).await;
            if self.fail {
                return Err(StoreError::Corrupt("the store is down".into()));
            }
            let mut held = self.lease.lock().unwrap_or_else(|e| e.into_inner());
            match &*held {
                Some(l) if l.holder != holder && l.expires_at_ms > now_ms => Ok(l.clone()),
                _ => {
                    let l = Lease {
                        holder: holder.to_string(),
                        expires_at_ms: now_ms + ttl_ms,
                        epoch: 1,
                        db_now_ms: now_ms,
                    };
                    *held = Some(l.clone());
                    Ok(l)
                }
            }
        }

        async fn release_lease(&self, _lease: &str, holder: &str) -> Result<(), StoreError> {
            let mut held = self.lease.lock().unwrap_or_else(|e| e.into_inner());
            if held.as_ref().is_some_and(|l| l.holder == holder) {
                *held = None;
            }
            Ok(())
        }
    }

    const TTL: Duration = Duration::from_secs(15);

    #[test]
    fn every_instance_is_a_holder_of_its_own() {
        let (a, b) = (new_instance(), new_instance());
        assert_ne!(a, b);
        assert_eq!(a.len(), 12);
        let holder = instance_holder("node-1", &a);
        assert_eq!(holder, format!("node-1#{a}"));
        assert_eq!(split_holder(&holder), ("node-1", Some(a.as_str())));
        assert_eq!(instance_holder("node-1", ""), "node-1");
        assert_eq!(split_holder("node-1"), ("node-1", None));
    }

    /// Regression (issue 54, item 3): the lease's holder was the `--id` alone, so a
    /// replacement started with the same `--id` renewed the lease of the process it replaced
    /// (both led, under one epoch). Two instances of one `--id` are two holders: the second is
    /// told who holds the lease, and takes it only once it is given back.
    #[tokio::test(start_paused = true)]
    async fn a_second_instance_of_one_id_stands_by_until_the_lease_is_given_back() {
        let store = FakeStore::default();
        let (first, second) = (
            instance_holder("node-1", &new_instance()),
            instance_holder("node-1", &new_instance()),
        );
        let a = LeaseKeeper::new(&store, "l", &first, TTL);
        let b = LeaseKeeper::new(&store, "l", &second, TTL);
        assert!(matches!(a.acquire(1_000).await, Renewal::Held { .. }));
        match b.acquire(2_000).await {
            Renewal::Taken { holder, .. } => assert_eq!(holder, first),
            other => panic!("the second instance must stand by: {other:?}"),
        }
        a.release().await.unwrap();
        assert!(matches!(b.acquire(3_000).await, Renewal::Held { .. }));
    }

    #[test]
    fn the_holder_acts_until_a_fifth_of_the_ttl_before_the_lease_runs_out() {
        let store = FakeStore::default();
        let k = LeaseKeeper::new(&store, "l", "a", TTL);
        assert_eq!(k.margin_ms(), 3_000);
        assert_eq!(k.renew_every(), Duration::from_secs(5));
        assert_eq!(k.acts_until(100_000), 97_000);
        assert!(k.acts(96_999, 100_000));
        assert!(!k.acts(97_000, 100_000));
        assert_eq!(k.left(90_000, 100_000), Duration::from_secs(7));
        assert_eq!(k.left(99_000, 100_000), Duration::ZERO);
        // A holder that holds nothing (0) never acts.
        assert!(!k.acts(1, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_holds_the_lease_and_another_holder_is_told_who_has_it() {
        let store = FakeStore::default();
        let a = LeaseKeeper::new(&store, "l", "a", TTL);
        let b = LeaseKeeper::new(&store, "l", "b", TTL);
        assert!(matches!(
            a.acquire(1_000).await,
            Renewal::Held {
                until_ms: 16_000,
                ..
            }
        ));
        match b.renew(2_000, a.renew_every()).await {
            Renewal::Taken { holder, .. } => assert_eq!(holder, "a"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            a.renew(6_000, a.renew_every()).await,
            Renewal::Held {
                until_ms: 21_000,
                ..
            }
        ));
        // Given back: the standby takes it at once.
        a.release().await.unwrap();
        assert!(matches!(
            b.acquire(7_000).await,
            Renewal::Held {
                until_ms: 22_000,
                ..
            }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_store_that_does_not_answer_in_time_is_an_unanswered_renewal() {
        let store = FakeStore {
            delay: Duration::from_secs(6),
            ..FakeStore::default()
        };
        let k = LeaseKeeper::new(&store, "l", "a", TTL);
        let started = tokio::time::Instant::now();
        assert!(matches!(
            k.renew(0, k.renew_every()).await,
            Renewal::Unanswered
        ));
        // It waited the time it was given, no more.
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        // Given longer, the same store answers.
        assert!(matches!(
            k.renew(0, Duration::from_secs(7)).await,
            Renewal::Held { .. }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_renewal_extends_nothing() {
        let store = FakeStore {
            fail: true,
            ..FakeStore::default()
        };
        let k = LeaseKeeper::new(&store, "l", "a", TTL);
        assert!(matches!(
            k.renew(0, k.renew_every()).await,
            Renewal::Failed(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_tick_at_once_then_every_third_of_the_ttl_delayed_when_missed() {
        let store = FakeStore::default();
        let k = LeaseKeeper::new(&store, "l", "a", TTL);
        let mut every = k.renewals();
        let start = tokio::time::Instant::now();
        every.tick().await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        every.tick().await;
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        // A renewal that took 7 s: the next is 5 s after the late tick, not at once twice.
        tokio::time::sleep(Duration::from_secs(12)).await;
        every.tick().await;
        assert_eq!(start.elapsed(), Duration::from_secs(17));
        every.tick().await;
        assert_eq!(start.elapsed(), Duration::from_secs(22));
    }

    /// The standby's ask out of the schedule: a margin after the instant it may take the lease,
    /// when that comes before the next renewal.
    #[test]
    fn a_standby_asks_again_a_margin_after_it_may_take_the_lease_if_before_the_next_renewal() {
        let store = FakeStore::default();
        let k = LeaseKeeper::new(&store, "l", "b", TTL);
        // TTL 15 s: renewals every 5 s.
        assert_eq!(
            k.ask_again(Duration::from_secs(2)),
            Some(Duration::from_secs(2) + EXPIRY_MARGIN)
        );
        assert_eq!(k.ask_again(Duration::ZERO), Some(EXPIRY_MARGIN));
        assert_eq!(k.ask_again(Duration::from_secs(5)), None);
        assert_eq!(k.ask_again(Duration::from_secs(10)), None);
    }
}

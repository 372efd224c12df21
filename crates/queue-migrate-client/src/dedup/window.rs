//! The window mode: a bounded in-memory cache of business keys with a time-to-live, behind the same
//! [`LeaseDedup`] interface as the Redis mode, for high volume where duplicates arrive within
//! minutes (a broker redelivery, a producer retry).
//!
//! # Guarantees, and what it does not guarantee
//! - Within one process: two deliveries of one key inside the window apply the effect once; a key
//!   being processed is held by a lease (default 30 s) that a crashed task does not keep forever.
//! - **A duplicate older than the window is not detected**
//!   (`docs/design.md#idempotent-consumers-and-the-dedup-window`). A deliberate reprocess of last week
//!   applies every effect again. [`window_warning`] is what `plan check` says when the plan's
//!   reprocess margin exceeds the window; if the system has any reprocess procedure, use the
//!   durable mode ([`super::sql`]).
//! - Nothing survives a restart, and other processes do not see this cache: several consumer
//!   instances need Redis or SQL.
//! - Bounded: at most `capacity` keys. When full, expired keys go first, wherever they are; then
//!   the oldest completed keys (counted by [`WindowDedup::evicted_before_expiry`]: each one
//!   shortens the effective window); never a live lease. Only a cache that holds nothing but live
//!   leases refuses new keys ([`WindowError::Full`]) rather than evict a key being processed: a
//!   key still being processed does not hold back the completed or expired keys after it. Leases
//!   and completed keys are kept in two queues, each in the order of expiry, so that a new key
//!   costs O(1) amortized whatever the capacity. The order assumes the `now_ms` passed in does not
//!   go backwards; if it does, by `d`, an entry expired behind a live one of its kind goes up to
//!   `d` late.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use queue_migrate_client::dedup::window::WindowDedup;
//! use queue_migrate_client::dedup::{BusinessKey, PayloadHash, Processed, process_once};
//! use queue_migrate_client::time;
//!
//! let dedup = WindowDedup::new(Duration::from_secs(600), 100_000); // 10 minutes, 100k keys
//! let key = BusinessKey::new("order.paid", "4711", "v3")?;
//! let hash = PayloadHash::of_bytes(br#"{"orderId":"4711","version":3}"#);
//! let applied = std::cell::Cell::new(0);
//! for delivery in 0..3 {
//!     let done = process_once(&dedup, &key, &hash, time::now_ms, || async {
//!         applied.set(applied.get() + 1); // the effect
//!         Ok::<_, std::io::Error>(())
//!     })
//!     .await?;
//!     // count done.outcome(): processed once, then duplicate_blocked
//!     assert_eq!(done, if delivery == 0 { Processed::Applied(()) } else { Processed::Duplicate });
//! }
//! assert_eq!(applied.get(), 1);
//! # Ok(()) }
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::{Begin, BusinessKey, DEFAULT_LEASE, Lease, LeaseDedup, Millis, PayloadHash, millis};

/// Errors of the window mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WindowError {
    /// Every slot holds a live lease: retry the message later (or raise the capacity).
    #[error("dedup window full: {capacity} keys, all being processed")]
    Full {
        /// The configured capacity.
        capacity: usize,
    },
    /// The lease expired and another consumer took the key before this one completed.
    #[error("lease on {key} was lost: it expired and another consumer took the key")]
    LeaseLost {
        /// The key.
        key: String,
    },
}

#[derive(Debug)]
struct Entry {
    hash: PayloadHash,
    token: String,
    completed: bool,
    until_ms: i64,
    seq: u64,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<String, Entry>,
    /// Keys being processed, in the order of their last begin or extend. Here and in `completed`,
    /// an item whose `seq` is no longer its entry's (the key was extended, completed, released,
    /// evicted or taken again since) is stale and skipped.
    ///
    /// Every lease lasts `lease_ms` and every completed key `window_ms` from its push, so as long as
    /// `now_ms` does not go backwards each queue is in the order of expiry: the expired entries
    /// of a kind are all at its front, whatever the other kind holds.
    leases: VecDeque<(u64, String)>,
    /// Completed keys, in the order of their completion (the oldest first: the next to evict).
    completed: VecDeque<(u64, String)>,
    next_seq: u64,
    next_token: u64,
}

/// Drop the expired entries and stale items at the front of `queue`.
fn sweep_front(
    queue: &mut VecDeque<(u64, String)>,
    entries: &mut HashMap<String, Entry>,
    now_ms: Millis,
) {
    while let Some((seq, key)) = queue.front() {
        match entries.get(key) {
            Some(e) if e.seq == *seq && e.until_ms > now_ms => break,
            Some(e) if e.seq == *seq => {
                entries.remove(key);
            }
            _ => {}
        }
        queue.pop_front();
    }
}

impl State {
    /// Put `key` at the back of the leases (`completed: false`) or of the completed keys.
    fn push(&mut self, key: &str, completed: bool) -> u64 {
        self.next_seq += 1;
        let queue = if completed {
            &mut self.completed
        } else {
            &mut self.leases
        };
        queue.push_back((self.next_seq, key.to_string()));
        self.next_seq
    }

    /// Drop the expired entries (the fronts of both queues) and the stale items there.
    fn sweep(&mut self, now_ms: Millis) {
        sweep_front(&mut self.leases, &mut self.entries, now_ms);
        sweep_front(&mut self.completed, &mut self.entries, now_ms);
        // Extends, completions and releases leave stale items behind; keep the queues
        // proportional (a pass over them, in order, once per 3 × entries + 64 stale items).
        if self.leases.len() + self.completed.len() > 4 * self.entries.len() + 64 {
            let entries = &self.entries;
            let current =
                |(seq, key): &(u64, String)| entries.get(key).is_some_and(|e| e.seq == *seq);
            self.leases.retain(current);
            self.completed.retain(current);
        }
    }

    /// Make room for one more key: the expired entries first, wherever they are; then the oldest
    /// completed keys (counted in `evicted`); never a live lease. `Full` when every entry is a
    /// live lease.
    fn make_room(
        &mut self,
        now_ms: Millis,
        capacity: usize,
        evicted: &AtomicU64,
    ) -> Result<(), WindowError> {
        self.sweep(now_ms);
        while self.entries.len() >= capacity {
            let Some((seq, key)) = self.completed.pop_front() else {
                return Err(WindowError::Full { capacity });
            };
            if let Some(e) = self.entries.get(&key)
                && e.seq == seq
            {
                if e.until_ms > now_ms {
                    evicted.fetch_add(1, Ordering::Relaxed);
                }
                self.entries.remove(&key);
            }
        }
        Ok(())
    }
}

/// The in-memory window mode.
#[derive(Debug)]
pub struct WindowDedup {
    state: Mutex<State>,
    window_ms: i64,
    lease_ms: i64,
    capacity: usize,
    evicted: AtomicU64,
}

impl WindowDedup {
    /// A cache that remembers completed keys for `window`, holding at most `capacity` keys (size it
    /// to at least peak messages per second × window). Leases last [`DEFAULT_LEASE`].
    pub fn new(window: Duration, capacity: usize) -> WindowDedup {
        WindowDedup {
            state: Mutex::new(State::default()),
            window_ms: millis(window),
            lease_ms: millis(DEFAULT_LEASE),
            capacity: capacity.max(1),
            evicted: AtomicU64::new(0),
        }
    }

    /// The same with another lease duration.
    pub fn with_lease(mut self, lease: Duration) -> WindowDedup {
        self.lease_ms = millis(lease);
        self
    }

    /// The window.
    pub fn window(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.window_ms).unwrap_or(0))
    }

    /// Keys held now (completed or in progress, including expired ones not yet swept).
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Completed keys evicted before their window ended because the cache was full: each one is a
    /// duplicate that could go undetected. Export it; it should stay 0.
    pub fn evicted_before_expiry(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn begin_now(
        &self,
        key: &BusinessKey,
        hash: &PayloadHash,
        now_ms: Millis,
    ) -> Result<Begin, WindowError> {
        let mut st = self.lock();
        st.sweep(now_ms);
        if let Some(e) = st.entries.get(key.as_str())
            && e.until_ms > now_ms
        {
            if e.hash != *hash {
                tracing::warn!(key = %key, stored = %e.hash, got = %hash, "dedup conflict: same key, different payload");
                return Ok(Begin::Conflict {
                    stored_hash: e.hash,
                });
            }
            return Ok(if e.completed {
                Begin::Duplicate
            } else {
                Begin::InProgress
            });
        }
        st.entries.remove(key.as_str());
        st.make_room(now_ms, self.capacity, &self.evicted)?;
        st.next_token += 1;
        let token = st.next_token.to_string();
        let seq = st.push(key.as_str(), false);
        st.entries.insert(
            key.as_str().to_string(),
            Entry {
                hash: *hash,
                token: token.clone(),
                completed: false,
                until_ms: now_ms.saturating_add(self.lease_ms),
                seq,
            },
        );
        Ok(Begin::Fresh(Lease::new(key.clone(), *hash, token)))
    }

    fn complete_now(&self, lease: &Lease, now_ms: Millis) -> Result<(), WindowError> {
        let mut st = self.lock();
        let key = lease.key().as_str();
        let ours = match st.entries.get(key) {
            Some(e) => (!e.completed && e.token == lease.token()) || e.until_ms <= now_ms,
            // Expired and swept, and nobody took it since.
            None => true,
        };
        if !ours {
            return Err(WindowError::LeaseLost {
                key: key.to_string(),
            });
        }
        if !st.entries.contains_key(key) {
            st.make_room(now_ms, self.capacity, &self.evicted)?;
        }
        let seq = st.push(key, true);
        st.entries.insert(
            key.to_string(),
            Entry {
                hash: *lease.hash(),
                token: lease.token().to_string(),
                completed: true,
                until_ms: now_ms.saturating_add(self.window_ms),
                seq,
            },
        );
        Ok(())
    }

    fn release_now(&self, lease: &Lease) -> bool {
        let mut st = self.lock();
        let key = lease.key().as_str();
        match st.entries.get(key) {
            Some(e) if !e.completed && e.token == lease.token() => {
                st.entries.remove(key);
                true
            }
            _ => false,
        }
    }

    fn extend_now(&self, lease: &Lease, now_ms: Millis) -> bool {
        let mut st = self.lock();
        let key = lease.key().as_str();
        let ours =
            matches!(st.entries.get(key), Some(e) if !e.completed && e.token == lease.token());
        if !ours {
            return false;
        }
        let seq = st.push(key, false);
        if let Some(e) = st.entries.get_mut(key) {
            e.until_ms = now_ms.saturating_add(self.lease_ms);
            e.seq = seq;
        }
        true
    }
}

impl LeaseDedup for WindowDedup {
    type Error = WindowError;

    async fn begin(
        &self,
        key: &BusinessKey,
        hash: &PayloadHash,
        now_ms: Millis,
    ) -> Result<Begin, WindowError> {
        self.begin_now(key, hash, now_ms)
    }

    async fn complete(&self, lease: &Lease, now_ms: Millis) -> Result<(), WindowError> {
        self.complete_now(lease, now_ms)
    }

    async fn release(&self, lease: &Lease) -> Result<bool, WindowError> {
        Ok(self.release_now(lease))
    }

    async fn extend(&self, lease: &Lease, now_ms: Millis) -> Result<bool, WindowError> {
        Ok(self.extend_now(lease, now_ms))
    }
}

/// What `plan check` says when the window mode cannot cover the plan's reprocess margin: `None`
/// when `reprocess_margin <= window`.
pub fn window_warning(window: Duration, reprocess_margin: Duration) -> Option<String> {
    if reprocess_margin <= window {
        return None;
    }
    let (w, m) = (human(window), human(reprocess_margin));
    Some(format!(
        "dedup window {w} is shorter than reprocess_margin {m}: a message replayed more than {w} \
         after it was first processed is not detected by the window (in-memory) mode and its effect \
         is applied again; use the durable mode (keys in SQL, kept longer than {m}) or widen the window"
    ))
}

/// `90d`, `1h30m`, `45s`, `250ms`: the largest units, no zero parts.
fn human(d: Duration) -> String {
    let mut secs = d.as_secs();
    if secs == 0 {
        return format!("{}ms", d.subsec_millis());
    }
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    fn key(n: u32) -> BusinessKey {
        BusinessKey::new("order.paid", &format!("order-{n}"), "e1").unwrap()
    }

    fn h(s: &str) -> PayloadHash {
        PayloadHash::of_bytes(s.as_bytes())
    }

    fn fresh(b: Begin) -> Lease {
        match b {
            Begin::Fresh(l) => l,
            other => panic!("expected Fresh, got {other:?}"),
        }
    }

    #[test]
    fn five_deliveries_within_the_window_apply_once() {
        let w = WindowDedup::new(Duration::from_secs(600), 100);
        let mut effects = 0;
        for i in 0..5 {
            match w.begin_now(&key(1), &h("a"), i * MIN).unwrap() {
                Begin::Fresh(lease) => {
                    effects += 1;
                    w.complete_now(&lease, i * MIN).unwrap();
                }
                Begin::Duplicate => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(effects, 1);
    }

    #[test]
    fn a_duplicate_older_than_the_window_is_not_detected() {
        // The documented weaker guarantee.
        let w = WindowDedup::new(Duration::from_secs(600), 100);
        let lease = fresh(w.begin_now(&key(1), &h("a"), 0).unwrap());
        w.complete_now(&lease, 0).unwrap();
        assert_eq!(
            w.begin_now(&key(1), &h("a"), 10 * MIN - 1).unwrap(),
            Begin::Duplicate
        );
        assert!(matches!(
            w.begin_now(&key(1), &h("a"), 10 * MIN).unwrap(),
            Begin::Fresh(_)
        ));
    }

    #[test]
    fn in_progress_then_lease_expiry_lets_another_take_the_key() {
        let w = WindowDedup::new(Duration::from_secs(600), 100).with_lease(Duration::from_secs(30));
        let crashed = fresh(w.begin_now(&key(1), &h("a"), 0).unwrap());
        assert_eq!(
            w.begin_now(&key(1), &h("a"), 29_999).unwrap(),
            Begin::InProgress
        );
        let second = fresh(w.begin_now(&key(1), &h("a"), 30_000).unwrap());
        // The crashed holder comes back: it cannot complete or release the other's claim.
        assert_eq!(
            w.complete_now(&crashed, 31_000),
            Err(WindowError::LeaseLost {
                key: key(1).to_string()
            })
        );
        assert!(!w.release_now(&crashed));
        w.complete_now(&second, 31_000).unwrap();
        assert_eq!(
            w.begin_now(&key(1), &h("a"), 32_000).unwrap(),
            Begin::Duplicate
        );
    }

    #[test]
    fn release_after_a_failed_effect_lets_the_retry_apply() {
        let w = WindowDedup::new(Duration::from_secs(600), 100);
        let lease = fresh(w.begin_now(&key(1), &h("a"), 0).unwrap());
        assert!(w.release_now(&lease));
        assert!(!w.release_now(&lease));
        let retry = fresh(w.begin_now(&key(1), &h("a"), 1).unwrap());
        w.complete_now(&retry, 2).unwrap();
        assert_eq!(w.begin_now(&key(1), &h("a"), 3).unwrap(), Begin::Duplicate);
    }

    #[test]
    fn extend_keeps_a_long_effect_s_lease() {
        let w = WindowDedup::new(Duration::from_secs(600), 100).with_lease(Duration::from_secs(30));
        let lease = fresh(w.begin_now(&key(1), &h("a"), 0).unwrap());
        assert!(w.extend_now(&lease, 25_000));
        assert_eq!(
            w.begin_now(&key(1), &h("a"), 50_000).unwrap(),
            Begin::InProgress
        );
        w.complete_now(&lease, 52_000).unwrap();
        assert!(!w.extend_now(&lease, 53_000));
    }

    #[test]
    fn a_different_payload_is_a_conflict() {
        let w = WindowDedup::new(Duration::from_secs(600), 100);
        let lease = fresh(w.begin_now(&key(1), &h("a"), 0).unwrap());
        assert_eq!(
            w.begin_now(&key(1), &h("b"), 1).unwrap(),
            Begin::Conflict {
                stored_hash: h("a")
            }
        );
        w.complete_now(&lease, 2).unwrap();
        assert_eq!(
            w.begin_now(&key(1), &h("b"), 3).unwrap(),
            Begin::Conflict {
                stored_hash: h("a")
            }
        );
    }

    #[test]
    fn bounded_expired_first_then_oldest_completed_never_a_live_lease() {
        let w = WindowDedup::new(Duration::from_secs(60), 3).with_lease(Duration::from_secs(10));
        for n in 0..3 {
            let l = fresh(w.begin_now(&key(n), &h("a"), 0).unwrap());
            w.complete_now(&l, 0).unwrap();
        }
        // Expired keys make room without counting as early evictions.
        for n in 3..6 {
            let l = fresh(w.begin_now(&key(n), &h("a"), 61_000).unwrap());
            w.complete_now(&l, 61_000).unwrap();
        }
        assert_eq!(w.len(), 3);
        assert_eq!(w.evicted_before_expiry(), 0);
        // Full of live completed keys: the oldest goes, and it is counted.
        let _held = fresh(w.begin_now(&key(6), &h("a"), 62_000).unwrap());
        assert_eq!(w.evicted_before_expiry(), 1);
        assert!(matches!(
            w.begin_now(&key(3), &h("a"), 62_000).unwrap(),
            Begin::Fresh(_)
        ));
        assert_eq!(w.evicted_before_expiry(), 2);
        let _held2 = w.begin_now(&key(7), &h("a"), 62_000).unwrap();
        assert_eq!(w.len(), 3);
        // Only live leases left: refuse rather than evict one.
        assert_eq!(
            w.begin_now(&key(8), &h("a"), 62_000),
            Err(WindowError::Full { capacity: 3 })
        );
    }

    #[test]
    fn a_live_lease_at_the_front_does_not_refuse_new_keys() {
        // The oldest entry is a key still being processed; a completed key sits behind it. The
        // completed key goes (counted), not a refusal of every new key for the lease's duration.
        let w = WindowDedup::new(Duration::from_secs(600), 2).with_lease(Duration::from_secs(30));
        let _a = fresh(w.begin_now(&key(1), &h("a"), 0).unwrap());
        let b = fresh(w.begin_now(&key(2), &h("a"), 1).unwrap());
        w.complete_now(&b, 2).unwrap();
        let _c = fresh(w.begin_now(&key(3), &h("a"), 3).unwrap());
        assert_eq!(w.evicted_before_expiry(), 1);
        assert_eq!(w.len(), 2);
        assert_eq!(w.begin_now(&key(1), &h("a"), 4).unwrap(), Begin::InProgress);
        // Only live leases now: refused, and nothing is evicted.
        assert_eq!(
            w.begin_now(&key(4), &h("a"), 5),
            Err(WindowError::Full { capacity: 2 })
        );
        assert_eq!(w.evicted_before_expiry(), 1);
    }

    #[test]
    fn an_expired_key_behind_a_live_lease_makes_room() {
        // A window shorter than the lease: the completed key behind the lease expires first.
        let w = WindowDedup::new(Duration::from_secs(5), 2).with_lease(Duration::from_secs(30));
        let _a = fresh(w.begin_now(&key(1), &h("a"), 0).unwrap());
        let b = fresh(w.begin_now(&key(2), &h("a"), 1).unwrap());
        w.complete_now(&b, 1).unwrap();
        let _c = fresh(w.begin_now(&key(3), &h("a"), 10_000).unwrap());
        assert_eq!(w.evicted_before_expiry(), 0);
        assert_eq!(
            w.begin_now(&key(1), &h("a"), 10_000).unwrap(),
            Begin::InProgress
        );
    }

    #[test]
    fn expired_entries_are_evicted_before_live_completed_ones() {
        // A completed key (window 60 s) at the front, a crashed holder's lease (10 s) behind it:
        // once the lease has expired, it is what goes, and the completed key is still a duplicate.
        let w = WindowDedup::new(Duration::from_secs(60), 2).with_lease(Duration::from_secs(10));
        let a = fresh(w.begin_now(&key(1), &h("a"), 0).unwrap());
        w.complete_now(&a, 0).unwrap();
        let _crashed = fresh(w.begin_now(&key(2), &h("a"), 1).unwrap());
        let _c = fresh(w.begin_now(&key(3), &h("a"), 20_000).unwrap());
        assert_eq!(w.evicted_before_expiry(), 0);
        assert_eq!(
            w.begin_now(&key(1), &h("a"), 20_000).unwrap(),
            Begin::Duplicate
        );
        // The same with an extended lease expired behind a completed key.
        let w = WindowDedup::new(Duration::from_secs(60), 2).with_lease(Duration::from_secs(10));
        let held = fresh(w.begin_now(&key(2), &h("a"), 0).unwrap());
        let a = fresh(w.begin_now(&key(1), &h("a"), 1).unwrap());
        w.complete_now(&a, 1).unwrap();
        assert!(w.extend_now(&held, 2));
        let _c = fresh(w.begin_now(&key(3), &h("a"), 30_000).unwrap());
        assert_eq!(w.evicted_before_expiry(), 0);
        assert_eq!(
            w.begin_now(&key(1), &h("a"), 30_000).unwrap(),
            Begin::Duplicate
        );
    }

    /// The documented policy, naively (a scan per eviction): what [`WindowDedup`] must do.
    #[derive(Debug, Default)]
    struct Model {
        /// key -> (hash, the lease holding it or `None` when completed, until, completion order)
        entries: std::collections::BTreeMap<u32, (bool, Option<usize>, i64, u64)>,
        completions: u64,
        evicted: u64,
    }

    impl Model {
        fn sweep(&mut self, now: i64) {
            self.entries.retain(|_, e| e.2 > now);
        }

        /// Expired entries first, wherever they are; then the oldest completed; never a lease.
        fn make_room(&mut self, now: i64, capacity: usize) -> Result<(), ()> {
            self.sweep(now);
            while self.entries.len() >= capacity {
                let oldest = self
                    .entries
                    .iter()
                    .filter(|(_, e)| e.1.is_none())
                    .min_by_key(|(_, e)| e.3)
                    .map(|(k, _)| *k)
                    .ok_or(())?;
                self.entries.remove(&oldest);
                self.evicted += 1;
            }
            Ok(())
        }
    }

    proptest::proptest! {
        #[test]
        fn any_sequence_follows_the_documented_eviction_policy(
            capacity in 1usize..5,
            window in 1i64..40,
            lease in 1i64..40,
            ops in proptest::collection::vec(
                (0u8..4, 0u32..6, proptest::bool::ANY, 0usize..16, 0i64..12),
                1..80,
            ),
        ) {
            let w = WindowDedup::new(Duration::from_millis(window as u64), capacity)
                .with_lease(Duration::from_millis(lease as u64));
            let mut m = Model::default();
            // The leases handed out, with the model's key and hash for each.
            let mut leases: Vec<(Lease, u32, bool)> = Vec::new();
            let mut now = 0i64;
            let hash = |b: bool| h(if b { "b" } else { "a" });
            for (op, k, hb, pick, dt) in ops {
                now += dt;
                match op {
                    0 => {
                        let got = w.begin_now(&key(k), &hash(hb), now);
                        m.sweep(now);
                        let want = match m.entries.get(&k) {
                            Some(e) if e.0 != hb => Ok(Begin::Conflict { stored_hash: hash(e.0) }),
                            Some(e) if e.1.is_none() => Ok(Begin::Duplicate),
                            Some(_) => Ok(Begin::InProgress),
                            None => match m.make_room(now, capacity) {
                                Err(()) => Err(WindowError::Full { capacity }),
                                Ok(()) => {
                                    m.entries.insert(k, (hb, Some(leases.len()), now + lease, 0));
                                    Ok(Begin::Fresh(Lease::new(key(k), hash(hb), String::new())))
                                }
                            },
                        };
                        match (got, want) {
                            (Ok(Begin::Fresh(l)), Ok(Begin::Fresh(_))) => leases.push((l, k, hb)),
                            (got, want) => proptest::prop_assert_eq!(got, want),
                        }
                    }
                    _ if leases.is_empty() => {}
                    1 => {
                        let id = pick % leases.len();
                        let (l, k, hb) = &leases[id];
                        let got = w.complete_now(l, now);
                        let ours = m.entries.get(k).is_none_or(|e| e.1 == Some(id) || e.2 <= now);
                        let want = if !ours {
                            Err(WindowError::LeaseLost { key: key(*k).to_string() })
                        } else if !m.entries.contains_key(k) && m.make_room(now, capacity).is_err() {
                            Err(WindowError::Full { capacity })
                        } else {
                            m.completions += 1;
                            m.entries.insert(*k, (*hb, None, now + window, m.completions));
                            Ok(())
                        };
                        proptest::prop_assert_eq!(got, want);
                    }
                    2 => {
                        let id = pick % leases.len();
                        let k = leases[id].1;
                        let got = w.release_now(&leases[id].0);
                        let want = m.entries.get(&k).is_some_and(|e| e.1 == Some(id));
                        if want {
                            m.entries.remove(&k);
                        }
                        proptest::prop_assert_eq!(got, want);
                    }
                    _ => {
                        let id = pick % leases.len();
                        let k = leases[id].1;
                        let got = w.extend_now(&leases[id].0, now);
                        let e = m.entries.get_mut(&k).filter(|e| e.1 == Some(id));
                        let want = e.is_some();
                        if let Some(e) = e {
                            e.2 = now + lease;
                        }
                        proptest::prop_assert_eq!(got, want);
                    }
                }
                proptest::prop_assert_eq!(w.len(), m.entries.len());
                proptest::prop_assert_eq!(w.evicted_before_expiry(), m.evicted);
            }
        }
    }

    #[test]
    fn memory_stays_bounded_under_churn() {
        let w = WindowDedup::new(Duration::from_secs(1), 50).with_lease(Duration::from_millis(100));
        for i in 0..10_000u32 {
            let now = i64::from(i) * 10;
            if let Begin::Fresh(l) = w.begin_now(&key(i % 500), &h("a"), now).unwrap() {
                assert!(w.extend_now(&l, now));
                w.complete_now(&l, now).unwrap();
            }
        }
        assert!(w.len() <= 50);
        let st = w.lock();
        assert!(st.leases.len() + st.completed.len() <= 4 * 50 + 64 + 3);
    }

    #[test]
    fn warning_when_the_margin_exceeds_the_window() {
        let d = |s| Duration::from_secs(s);
        assert_eq!(window_warning(d(600), d(600)), None);
        assert_eq!(window_warning(d(90 * 86_400), d(30 * 86_400)), None);
        let w = window_warning(d(3600), d(7 * 86_400)).unwrap();
        assert!(
            w.starts_with("dedup window 1h is shorter than reprocess_margin 7d"),
            "{w}"
        );
        assert!(w.contains("durable mode"));
        assert_eq!(human(d(5400)), "1h30m");
        assert_eq!(human(Duration::from_millis(250)), "250ms");
        assert_eq!(human(d(90 * 86_400 + 61)), "90d1m1s");
    }

    #[tokio::test]
    async fn process_once_through_the_trait() {
        use crate::dedup::{ProcessError, Processed, process_once};
        let w = WindowDedup::new(Duration::from_secs(600), 10);
        let clock = || 1_000;
        let mut applied = 0;
        for _ in 0..5 {
            let r = process_once(&w, &key(1), &h("a"), clock, || {
                applied += 1;
                async { Ok::<_, std::io::Error>(()) }
            })
            .await
            .unwrap();
            assert!(matches!(r, Processed::Applied(()) | Processed::Duplicate));
        }
        assert_eq!(applied, 1);
        // A failing effect releases: the retry applies.
        let failed = process_once(&w, &key(2), &h("a"), clock, || async {
            Err::<(), _>(std::io::Error::other("downstream 503"))
        })
        .await;
        assert!(matches!(failed, Err(ProcessError::Effect(_))));
        let retried = process_once(&w, &key(2), &h("a"), clock, || async {
            Ok::<_, std::io::Error>(7)
        })
        .await
        .unwrap();
        assert_eq!(retried, Processed::Applied(7));
    }
}

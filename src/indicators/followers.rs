//! Who follows the routing document: each producer the daemon saw on the routing long-poll, the
//! generation it said it applied and when it was last seen, per migration (in memory).
//!
//! The daemon's routing endpoint [`Followers::record`]s every poll that names its producer
//! (`?producer=ID&applied=GENERATION`); a round reads a migration's followers
//! ([`Followers::of`]) for its `routing_applied` gates ([`crate::gate::routing_applied`]); the API
//! and the console list them.
//!
//! # Guarantees
//! - Bounded: at most the cap given to [`Followers::new`] producers are kept across all
//!   migrations; one more evicts the one seen longest ago, and each eviction is counted
//!   ([`Followers::evicted`], [`Followers::evicted_at_ms`]: a `routing_applied` gate whose window
//!   saw an eviction is no data, since the producer forgotten may be the one that lags).
//! - An id is kept as [`crate::outgoing`]'s rule makes it (redacted, no control character, at most
//!   [`PRODUCER_ID_MAX`] bytes): it came from the network.
//! - In memory of the daemon that answers the polls: a daemon that starts (a new leader, a
//!   restart) knows nobody until each producer polls again, within one long-poll (30 s by
//!   default); until then a `routing_applied` gate sees fewer producers, or none (no data).
//! - A producer that reports a lower generation than it did before is believed (it restarted,
//!   or it is stuck on an old replica): the gate must see that, not the best it ever reported.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

/// One producer as the daemon last saw it on the routing long-poll (what a `routing_applied`
/// gate judges: [`crate::gate::routing_applied`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Follower {
    /// The id it reports (through [`producer_id`] at intake).
    pub producer: String,
    /// The generation it says it applied (0: none yet, the safe default).
    pub applied: u64,
    /// When the daemon last saw it poll (the gates' clock, ms since the epoch).
    pub seen_ms: i64,
}

/// The longest producer id kept, in bytes; a longer one is cut ([`crate::outgoing::cap`]).
pub const PRODUCER_ID_MAX: usize = 128;

/// How many producers a daemon keeps by default, across all its migrations.
pub const DEFAULT_MAX_FOLLOWERS: usize = 10_000;

/// The key of one follower: (migration, producer).
type Key = (String, String);

#[derive(Debug, Default)]
struct Inner {
    /// Each follower, with its sequence number in `order`.
    seen: HashMap<Key, (Follower, u64)>,
    /// Followers by the sequence of their last poll: the first is the one seen longest ago.
    order: BTreeMap<u64, Key>,
    next: u64,
    evicted: u64,
    /// When the last eviction happened (the gates' clock, ms).
    evicted_at_ms: Option<i64>,
}

/// The followers of every migration this daemon serves.
#[derive(Debug)]
pub struct Followers {
    cap: usize,
    inner: Mutex<Inner>,
}

impl Default for Followers {
    fn default() -> Self {
        Followers::new(DEFAULT_MAX_FOLLOWERS)
    }
}

/// A producer id as the daemon keeps it: [`crate::outgoing`]'s rule, one line, at most
/// [`PRODUCER_ID_MAX`] bytes; `None` when nothing is left of it.
pub fn producer_id(raw: &str) -> Option<String> {
    let id = crate::outgoing::text(
        raw.trim(),
        &crate::outgoing::Secrets::none(),
        crate::outgoing::Shape::Line,
        PRODUCER_ID_MAX,
    );
    (!id.is_empty()).then_some(id)
}

impl Followers {
    /// Followers kept up to `cap` producers (at least one).
    pub fn new(cap: usize) -> Followers {
        Followers {
            cap: cap.max(1),
            inner: Mutex::default(),
        }
    }

    /// `producer` of `migration` polled at `now_ms` (the gates' clock) having applied
    /// `applied`. The id is taken through [`producer_id`]; an empty one is not recorded.
    pub fn record(&self, migration: &str, producer: &str, applied: u64, now_ms: i64) {
        let Some(producer) = producer_id(producer) else {
            return;
        };
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let seq = inner.next;
        inner.next += 1;
        let key = (migration.to_string(), producer.clone());
        let follower = Follower {
            producer,
            applied,
            seen_ms: now_ms,
        };
        if let Some((_, old_seq)) = inner.seen.insert(key.clone(), (follower, seq)) {
            inner.order.remove(&old_seq);
        }
        inner.order.insert(seq, key);
        while inner.seen.len() > self.cap {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            inner.seen.remove(&oldest);
            inner.evicted += 1;
            inner.evicted_at_ms = Some(now_ms);
        }
    }

    /// The followers of `migration`, by id.
    pub fn of(&self, migration: &str) -> Vec<Follower> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<Follower> = inner
            .seen
            .iter()
            .filter(|((m, _), _)| m == migration)
            .map(|(_, (f, _))| f.clone())
            .collect();
        out.sort_by(|a, b| a.producer.cmp(&b.producer));
        out
    }

    /// Producers kept now, by migration.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = BTreeMap::new();
        for (m, _) in inner.seen.keys() {
            *out.entry(m.clone()).or_insert(0) += 1;
        }
        out
    }

    /// Producers kept now, across all migrations.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .seen
            .len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Producers evicted to keep the cap, since the daemon started.
    pub fn evicted(&self) -> u64 {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .evicted
    }

    /// When a producer was last forgotten to keep the cap (the gates' clock, ms); `None`: never.
    /// A `routing_applied` gate cannot vouch for every producer within a window that saw one.
    pub fn evicted_at_ms(&self) -> Option<i64> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .evicted_at_ms
    }

    /// The cap given to [`Followers::new`].
    pub fn cap(&self) -> usize {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_poll_wins_even_a_lower_generation() {
        let f = Followers::new(10);
        f.record("orders", "p-1", 5, 100);
        f.record("orders", "p-1", 3, 200);
        assert_eq!(
            f.of("orders"),
            vec![Follower {
                producer: "p-1".into(),
                applied: 3,
                seen_ms: 200
            }]
        );
        assert!(f.of("payments").is_empty());
    }

    #[test]
    fn past_the_cap_the_one_seen_longest_ago_is_evicted_and_counted() {
        let f = Followers::new(2);
        f.record("orders", "a", 1, 1);
        f.record("orders", "b", 1, 2);
        f.record("orders", "a", 2, 3); // a is now the most recent
        f.record("payments", "c", 1, 4);
        let ids: Vec<String> = f.of("orders").into_iter().map(|x| x.producer).collect();
        assert_eq!(ids, ["a"]);
        assert_eq!(f.of("payments").len(), 1);
        assert_eq!(f.evicted(), 1);
        assert_eq!(f.evicted_at_ms(), Some(4));
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn ids_from_the_network_go_through_the_outgoing_rule() {
        let f = Followers::new(10);
        f.record("orders", "evil\u{1b}[31m\nid", 1, 1);
        f.record("orders", "   ", 1, 1);
        f.record("orders", &"x".repeat(1000), 1, 1);
        let got = f.of("orders");
        assert_eq!(got.len(), 2, "{got:?}");
        for x in &got {
            assert!(!x.producer.chars().any(char::is_control), "{x:?}");
            assert!(x.producer.len() <= PRODUCER_ID_MAX, "{x:?}");
        }
    }
}

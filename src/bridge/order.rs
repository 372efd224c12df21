//! Per-key order: one key is never in flight twice.
//!
//! The bridge forwards messages of different keys concurrently, but the messages of one key one
//! at a time, in the order the ingress delivered them: the next one starts only when the previous
//! one was confirmed by its destination. [`KeyedQueue`] is that bookkeeping, pure.
//!
//! # Guarantees
//! - [`KeyedQueue::push`] hands an item back (to start now) only when no item of its key is in
//!   flight; otherwise it is queued behind the others of its key.
//! - [`KeyedQueue::complete`] hands back the next item of that key, in push order, or frees the key.
//! - Items of a key come out in the order they were pushed; items of other keys are never held up.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// How many items a caller following [`KeyedQueue::admits`] holds at most (in flight and
/// waiting behind their key), in multiples of its window.
pub const HELD_PER_WINDOW: u16 = 2;

/// Waiting items by key; a key present in the map has one item in flight.
#[derive(Debug)]
pub struct KeyedQueue<K, T> {
    waiting: HashMap<K, VecDeque<T>>,
    queued: usize,
}

impl<K: Eq + Hash + Clone, T> Default for KeyedQueue<K, T> {
    fn default() -> Self {
        KeyedQueue {
            waiting: HashMap::new(),
            queued: 0,
        }
    }
}

impl<K: Eq + Hash + Clone, T> KeyedQueue<K, T> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// An item arrived: `Some(item)` to start it now (its key is free, and is now busy), `None` when
    /// it waits behind an item of the same key.
    pub fn push(&mut self, key: K, item: T) -> Option<T> {
        match self.waiting.get_mut(&key) {
            Some(queue) => {
                queue.push_back(item);
                self.queued += 1;
                None
            }
            None => {
                self.waiting.insert(key, VecDeque::new());
                Some(item)
            }
        }
    }

    /// The item in flight for `key` is done: the next item of that key to start, if any (the key
    /// stays busy), else the key is free.
    pub fn complete(&mut self, key: &K) -> Option<T> {
        let queue = self.waiting.get_mut(key)?;
        match queue.pop_front() {
            Some(next) => {
                self.queued -= 1;
                Some(next)
            }
            None => {
                self.waiting.remove(key);
                None
            }
        }
    }

    /// Keys with an item in flight.
    pub fn busy(&self) -> usize {
        self.waiting.len()
    }

    /// Items waiting behind one of their key.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Items held: in flight plus waiting.
    pub fn len(&self) -> usize {
        self.busy() + self.queued()
    }

    /// Room for one more arrival, for a caller that has at most `window` items in flight:
    /// fewer than `window` keys busy (an arrival may start one more), and fewer than
    /// [`HELD_PER_WINDOW`] `× window` items held in all (items waiting behind their key take no
    /// place in flight, so a few busy keys do not shrink the window of items in flight).
    pub fn admits(&self, window: usize) -> bool {
        self.busy() < window && self.len() < window.saturating_mul(usize::from(HELD_PER_WINDOW))
    }

    /// Nothing in flight, nothing waiting.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Forget everything (the subscription was lost: every unacked message comes back).
    pub fn clear(&mut self) {
        self.waiting.clear();
        self.queued = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_second_item_of_a_key_waits_for_the_first() {
        let mut q = KeyedQueue::new();
        assert_eq!(q.push("a", 1), Some(1));
        assert_eq!(q.push("a", 2), None);
        assert_eq!(q.push("b", 3), Some(3));
        assert_eq!(q.push("a", 4), None);
        assert_eq!((q.busy(), q.queued(), q.len()), (2, 2, 4));
        assert_eq!(q.complete(&"a"), Some(2));
        assert_eq!(q.complete(&"b"), None);
        assert_eq!(q.complete(&"a"), Some(4));
        assert_eq!(q.complete(&"a"), None);
        assert!(q.is_empty());
        // A key that is free again starts at once.
        assert_eq!(q.push("a", 5), Some(5));
    }

    #[test]
    fn items_waiting_behind_their_key_take_no_place_in_flight() {
        let mut q = KeyedQueue::new();
        // A window of 2: one key busy with three items behind it still admits another key.
        assert_eq!(q.push("a", 1), Some(1));
        assert_eq!(q.push("a", 2), None);
        assert_eq!(q.push("a", 3), None);
        assert!(q.admits(2), "a busy key shrank the window");
        assert_eq!(q.push("b", 4), Some(4));
        assert!(!q.admits(2), "two keys in flight fill a window of 2");
        // Held items are bounded too: twice the window.
        let mut q = KeyedQueue::new();
        for n in 0..4 {
            assert!(q.admits(2), "refused with {n} held");
            q.push("a", n);
        }
        assert!(!q.admits(2), "more than twice the window held");
    }

    #[test]
    fn completing_an_unknown_key_changes_nothing() {
        let mut q: KeyedQueue<&str, u32> = KeyedQueue::new();
        assert_eq!(q.complete(&"x"), None);
        assert!(q.is_empty());
    }

    proptest! {
        /// Whatever the interleaving of arrivals and completions: at most one item per key in
        /// flight, per-key order kept, nothing lost or doubled.
        #[test]
        fn per_key_order_and_nothing_lost(
            ops in proptest::collection::vec((0u8..4, any::<bool>()), 1..200)
        ) {
            let mut q = KeyedQueue::new();
            let mut in_flight: Vec<(u8, u32)> = Vec::new();
            let mut started: HashMap<u8, Vec<u32>> = HashMap::new();
            let mut pushed: HashMap<u8, Vec<u32>> = HashMap::new();
            for (i, (key, arrive)) in ops.into_iter().enumerate() {
                let seq = u32::try_from(i).unwrap();
                if arrive || in_flight.is_empty() {
                    pushed.entry(key).or_default().push(seq);
                    if let Some(item) = q.push(key, seq) {
                        prop_assert!(in_flight.iter().all(|(k, _)| *k != key));
                        in_flight.push((key, item));
                        started.entry(key).or_default().push(item);
                    }
                } else {
                    let (k, _) = in_flight.remove(0);
                    if let Some(next) = q.complete(&k) {
                        in_flight.push((k, next));
                        started.entry(k).or_default().push(next);
                    }
                }
            }
            while let Some((k, _)) = (!in_flight.is_empty()).then(|| in_flight.remove(0)) {
                if let Some(next) = q.complete(&k) {
                    in_flight.push((k, next));
                    started.entry(k).or_default().push(next);
                }
            }
            prop_assert!(q.is_empty());
            prop_assert_eq!(started, pushed);
        }

        /// A caller that takes an arrival only when `admits(window)` never has more than
        /// `window` items in flight nor more than `2 × window` held.
        #[test]
        fn admits_bounds_what_is_in_flight_and_held(
            window in 1usize..6,
            ops in proptest::collection::vec((0u8..8, any::<bool>()), 1..300)
        ) {
            let mut q = KeyedQueue::new();
            let mut in_flight: Vec<u8> = Vec::new();
            for (key, arrive) in ops {
                if arrive && q.admits(window) {
                    if q.push(key, ()).is_some() {
                        in_flight.push(key);
                    }
                } else if !in_flight.is_empty() {
                    let k = in_flight.remove(0);
                    if q.complete(&k).is_some() {
                        in_flight.push(k);
                    }
                }
                prop_assert!(q.busy() <= window, "{} in flight, window {window}", q.busy());
                prop_assert!(q.len() <= 2 * window, "{} held, window {window}", q.len());
            }
        }
    }
}

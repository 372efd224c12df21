//! Ack coalescing for one AMQP channel, pure: which deliveries to ack on the wire, and how.
//!
//! A caller that settles deliveries out of order (the bridge: one key in flight at a time, so a
//! message of a busy key is confirmed after later ones) would send one `basic.ack` per delivery,
//! out of delivery order, which costs RabbitMQ a walk of the channel's unacked list per ack.
//! [`AckWindow`] records settled deliveries and hands back one `basic.ack(multiple=true)` for the
//! lowest contiguous run of them instead.
//!
//! # Guarantees
//! - A delivery is covered by a wire ack only once the caller settled it: a multiple ack names
//!   the highest tag of the leading run of settled deliveries, and every delivery tag below it
//!   that is still unacked on the broker is in that run (tags are registered in delivery order,
//!   and an entry leaves the window only when it went on the wire).
//! - No tag goes on the wire twice (an entry is removed when handed back).
//! - Settled deliveries held behind an unsettled one (a gap) are bounded: past `limit` of them,
//!   or once one has waited `max_hold`, they are handed back to be acked one by one.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What to send for one channel.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WireAck<H> {
    /// `basic.ack(tag, multiple=true)` with the handle of the highest delivery of the run.
    UpTo(H),
    /// `basic.ack(tag, multiple=false)`.
    One(H),
}

#[derive(Debug)]
enum Entry<H> {
    Open(H),
    Settled { handle: H, since: Instant },
}

/// The deliveries of one channel not yet acked or nacked on the wire, by delivery tag.
#[derive(Debug)]
pub(crate) struct AckWindow<H> {
    entries: BTreeMap<u64, Entry<H>>,
    settled: usize,
    limit: usize,
    max_hold: Duration,
}

impl<H> AckWindow<H> {
    /// At most `limit` settled deliveries wait behind an unsettled one, none longer than
    /// `max_hold`.
    pub(crate) fn new(limit: usize, max_hold: Duration) -> Self {
        AckWindow {
            entries: BTreeMap::new(),
            settled: 0,
            limit: limit.max(1),
            max_hold,
        }
    }

    /// A delivery arrived (tags must be registered in delivery order).
    pub(crate) fn delivered(&mut self, tag: u64, handle: H) {
        self.entries.insert(tag, Entry::Open(handle));
    }

    /// The caller is done with `tag`: it may be acked. `false` for a tag not open here.
    pub(crate) fn settle(&mut self, tag: u64, now: Instant) -> bool {
        match self.entries.remove(&tag) {
            Some(Entry::Open(handle)) => {
                self.entries
                    .insert(tag, Entry::Settled { handle, since: now });
                self.settled += 1;
                true
            }
            Some(settled) => {
                self.entries.insert(tag, settled);
                false
            }
            None => false,
        }
    }

    /// Takes `tag` out (to nack it on the wire now); `None` when it is not open here.
    pub(crate) fn take_open(&mut self, tag: u64) -> Option<H> {
        match self.entries.remove(&tag) {
            Some(Entry::Open(handle)) => Some(handle),
            Some(settled) => {
                self.entries.insert(tag, settled);
                None
            }
            None => None,
        }
    }

    /// What to send now: one multiple ack for the leading run of settled deliveries, then single
    /// acks for settled deliveries held behind a gap when there are more than `limit` of them
    /// or the oldest waited `max_hold`. The order matters only in that each op stands alone.
    pub(crate) fn flush(&mut self, now: Instant) -> Vec<WireAck<H>> {
        self.take(Some(now))
    }

    /// Everything settled, gaps or not (the caller is about to close the channel).
    pub(crate) fn flush_all(&mut self) -> Vec<WireAck<H>> {
        self.take(None)
    }

    fn take(&mut self, now: Option<Instant>) -> Vec<WireAck<H>> {
        let mut out = Vec::new();
        let mut last = None;
        while let Some(entry) = self.entries.first_entry() {
            if !matches!(entry.get(), Entry::Settled { .. }) {
                break;
            }
            if let Entry::Settled { handle, .. } = entry.remove() {
                last = Some(handle);
                self.settled -= 1;
            }
        }
        if let Some(handle) = last {
            out.push(WireAck::UpTo(handle));
        }
        if self.settled == 0 {
            return out;
        }
        let all = now.is_none() || self.settled > self.limit;
        let due: Vec<u64> = self
            .entries
            .iter()
            .filter_map(|(tag, e)| match e {
                Entry::Settled { since, .. }
                    if all || now.is_some_and(|now| now >= *since + self.max_hold) =>
                {
                    Some(*tag)
                }
                _ => None,
            })
            .collect();
        for tag in due {
            if let Some(Entry::Settled { handle, .. }) = self.entries.remove(&tag) {
                self.settled -= 1;
                out.push(WireAck::One(handle));
            }
        }
        out
    }

    /// When the oldest settled delivery behind a gap is due (`None`: nothing waits).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        if self.settled == 0 {
            return None;
        }
        self.entries
            .values()
            .filter_map(|e| match e {
                Entry::Settled { since, .. } => Some(*since + self.max_hold),
                Entry::Open(_) => None,
            })
            .min()
    }

    /// Settled deliveries whose ack is not on the wire yet.
    #[cfg(test)]
    pub(crate) fn settled(&self) -> usize {
        self.settled
    }

    /// Deliveries not acked on the wire (open or settled).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HOLD: Duration = Duration::from_secs(1);

    fn window(tags: std::ops::RangeInclusive<u64>, limit: usize) -> AckWindow<u64> {
        let mut w = AckWindow::new(limit, HOLD);
        for t in tags {
            w.delivered(t, t);
        }
        w
    }

    #[test]
    fn in_order_settles_become_one_multiple_ack() {
        let now = Instant::now();
        let mut w = window(1..=5, 10);
        for t in 1..=4 {
            assert!(w.settle(t, now));
        }
        assert_eq!(w.flush(now), [WireAck::UpTo(4)]);
        assert_eq!((w.len(), w.settled()), (1, 0));
        assert_eq!(w.flush(now), []);
    }

    #[test]
    fn a_gap_holds_the_run_until_it_is_settled() {
        let now = Instant::now();
        let mut w = window(1..=5, 10);
        for t in [2, 3, 5] {
            w.settle(t, now);
        }
        assert_eq!(w.flush(now), []);
        assert_eq!(w.deadline(), Some(now + HOLD));
        w.settle(1, now);
        assert_eq!(w.flush(now), [WireAck::UpTo(3)]);
        w.settle(4, now);
        assert_eq!(w.flush(now), [WireAck::UpTo(5)]);
        assert_eq!((w.len(), w.deadline()), (0, None));
    }

    #[test]
    fn held_settles_go_one_by_one_past_the_limit_or_the_hold() {
        let now = Instant::now();
        let mut w = window(1..=6, 2);
        for t in [2, 3] {
            w.settle(t, now);
        }
        assert_eq!(w.flush(now), []);
        w.settle(5, now);
        // Three held behind tag 1, limit 2: all three go singly.
        assert_eq!(
            w.flush(now),
            [WireAck::One(2), WireAck::One(3), WireAck::One(5)]
        );
        w.settle(6, now);
        assert_eq!(w.flush(now + HOLD / 2), []);
        assert_eq!(w.flush(now + HOLD), [WireAck::One(6)]);
        // Tag 1 settles: it alone goes (a multiple ack naming 1 covers nothing else unacked).
        w.settle(1, now);
        assert_eq!(w.flush(now), [WireAck::UpTo(1)]);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn flush_all_sends_what_waits_behind_a_gap() {
        let now = Instant::now();
        let mut w = window(1..=4, 10);
        for t in [1, 3, 4] {
            w.settle(t, now);
        }
        assert_eq!(
            w.flush_all(),
            [WireAck::UpTo(1), WireAck::One(3), WireAck::One(4)]
        );
        assert_eq!((w.len(), w.settled()), (1, 0));
    }

    #[test]
    fn a_nacked_tag_leaves_the_window_and_does_not_hold_the_run() {
        let now = Instant::now();
        let mut w = window(1..=3, 10);
        w.settle(3, now);
        assert_eq!(w.take_open(2), Some(2));
        assert_eq!(w.take_open(3), None, "settled: not open");
        w.settle(1, now);
        assert_eq!(w.flush(now), [WireAck::UpTo(3)]);
    }

    #[test]
    fn settling_twice_or_unknown_tags_changes_nothing() {
        let now = Instant::now();
        let mut w = window(1..=2, 10);
        assert!(w.settle(2, now));
        assert!(!w.settle(2, now));
        assert!(!w.settle(9, now));
        assert_eq!(w.settled(), 1);
    }

    proptest! {
        /// Whatever the order of settles and flushes: a tag goes on the wire (singly, or covered
        /// by a multiple ack naming a tag at or above it) only after it was settled, exactly
        /// once, and everything settled is on the wire after a final flush with no gap left.
        #[test]
        fn nothing_is_acked_before_it_is_settled_nor_twice(
            order in Just((1u64..=60).collect::<Vec<_>>()).prop_shuffle(),
            flush_every in 1usize..8,
            limit in 1usize..40,
        ) {
            let now = Instant::now();
            let mut w = window(1..=60, limit);
            let mut settled = std::collections::BTreeSet::new();
            let mut broker_unacked: std::collections::BTreeSet<u64> = (1..=60).collect();
            let apply = |ops: Vec<WireAck<u64>>, settled: &std::collections::BTreeSet<u64>,
                             unacked: &mut std::collections::BTreeSet<u64>| {
                for op in ops {
                    match op {
                        WireAck::One(t) => {
                            prop_assert!(settled.contains(&t));
                            prop_assert!(unacked.remove(&t), "tag {} acked twice", t);
                        }
                        WireAck::UpTo(t) => {
                            // The broker acks every unacked tag <= t; t itself must be unacked.
                            prop_assert!(unacked.contains(&t), "multiple ack of a gone tag {}", t);
                            let covered: Vec<u64> = unacked.range(..=t).copied().collect();
                            for c in covered {
                                prop_assert!(settled.contains(&c), "tag {} acked unsettled", c);
                                unacked.remove(&c);
                            }
                        }
                    }
                }
                Ok(())
            };
            for (i, t) in order.iter().enumerate() {
                w.settle(*t, now);
                settled.insert(*t);
                if i % flush_every == 0 {
                    apply(w.flush(now), &settled, &mut broker_unacked)?;
                }
            }
            apply(w.flush(now), &settled, &mut broker_unacked)?;
            prop_assert!(broker_unacked.is_empty());
            prop_assert_eq!(w.len(), 0);
        }
    }
}

//! The stale-producer decision's unit tests.

use super::*;
use crate::routing::{Route, Side};

const T0: Millis = 1_800_000_000_000;
const BOUNDS: Bounds = Bounds {
    grace_ms: 5_000,
    clock_skew_ms: 1_000,
};

/// Slices 0..8 moved at generation 5, published at T0; then 0..16 at generation 6 at T0 + 60 s.
fn ledger(mark: Option<Mark>) -> MoveLedger {
    let mut l = MoveLedger::new();
    l.record(Publish {
        generation: 4,
        slices_migrated: 0,
        published_at_ms: T0 - 600_000,
        old_mark: None,
    });
    l.record(Publish {
        generation: 5,
        slices_migrated: 8,
        published_at_ms: T0,
        old_mark: mark,
    });
    l.record(Publish {
        generation: 6,
        slices_migrated: 16,
        published_at_ms: T0 + 60_000,
        old_mark: None,
    });
    l
}

fn old_stamp(slice: u32, generation: u64, at_ms: Millis) -> RouteStamp {
    let route = Route::new(Side::Old, slice, generation);
    RouteStamp::new(&route, "rabbitmq", "checkout", at_ms).unwrap()
}

fn stale(slice: u32, stamped: u64, moved_at: u64) -> Decision {
    Decision::Stale {
        producer: "checkout".into(),
        slice,
        stamped,
        moved_at,
    }
}

#[test]
fn a_producer_pinned_to_an_old_generation_is_stale_after_the_grace_only() {
    let l = ledger(None);
    let none = Delivery::default();
    // Inside grace + skew (6 s after the publish): propagation.
    let s = old_stamp(3, 4, T0 + 6_000);
    assert_eq!(classify(Some(&s), &l, none, BOUNDS), Decision::InGrace);
    // Beyond it: stale, naming the producer, the slice and both generations.
    let s = old_stamp(3, 4, T0 + 6_001);
    assert_eq!(classify(Some(&s), &l, none, BOUNDS), stale(3, 4, 5));
    // The second move dates slice 12 from generation 6.
    let s = old_stamp(12, 5, T0 + 60_000 + 6_001);
    assert_eq!(classify(Some(&s), &l, none, BOUNDS), stale(12, 5, 6));
    let s = old_stamp(12, 5, T0 + 60_000 + 2_000);
    assert_eq!(classify(Some(&s), &l, none, BOUNDS), Decision::InGrace);
}

#[test]
fn a_backlog_enqueued_before_the_publish_never_trips_by_the_stamps_time() {
    let l = ledger(None);
    // Written by generation 4 before the move (even a skew's worth after it), consumed an hour
    // later: a backlog.
    for at in [T0 - 3_600_000, T0 - 1, T0, T0 + 1_000] {
        let s = old_stamp(3, 4, at);
        assert_eq!(
            classify(Some(&s), &l, Delivery::default(), BOUNDS),
            Decision::Backlog,
            "{at}"
        );
    }
}

#[test]
fn the_brokers_own_position_decides_the_backlog_exactly() {
    let l = ledger(Some(Mark::Position(1_000)));
    // A producer's clock far ahead stamps "late", but the broker enqueued it before the publish.
    let s = old_stamp(3, 4, T0 + 3_600_000);
    let before = Delivery::at_position(1_000);
    assert_eq!(classify(Some(&s), &l, before, BOUNDS), Decision::Backlog);
    // After the publish by position, and beyond the grace by the stamp: stale.
    let after = Delivery::at_position(1_001);
    assert_eq!(classify(Some(&s), &l, after, BOUNDS), stale(3, 4, 5));
    // After the publish, inside the grace by the stamp: propagation.
    let s = old_stamp(3, 4, T0 - 10_000);
    assert_eq!(classify(Some(&s), &l, after, BOUNDS), Decision::InGrace);
}

#[test]
fn the_brokers_enqueue_clock_decides_backlog_and_grace_without_the_skew() {
    // The broker's clock is 10 minutes off the controller's: it is only compared with itself.
    let broker_t0 = T0 + 600_000;
    let l = ledger(Some(Mark::EnqueuedAt(broker_t0)));
    let s = old_stamp(3, 4, T0 + 3_600_000);
    let at = Delivery::enqueued_at;
    assert_eq!(
        classify(Some(&s), &l, at(broker_t0), BOUNDS),
        Decision::Backlog
    );
    assert_eq!(
        classify(Some(&s), &l, at(broker_t0 + 5_000), BOUNDS),
        Decision::InGrace
    );
    assert_eq!(
        classify(Some(&s), &l, at(broker_t0 + 5_001), BOUNDS),
        stale(3, 4, 5)
    );
}

#[test]
fn slices_on_old_current_generations_and_other_routes_are_not_stale() {
    let l = ledger(None);
    let late = T0 + 3_600_000;
    let d = Delivery::default();
    // Slice 20 was never moved.
    assert_eq!(
        classify(Some(&old_stamp(20, 4, late)), &l, d, BOUNDS),
        Decision::Current
    );
    // Generation 5 already moved slice 3: a stamp of 5 or later is not older than the move.
    assert_eq!(
        classify(Some(&old_stamp(3, 5, late)), &l, d, BOUNDS),
        Decision::Current
    );
    // A bridge's or a replay's write is not a producer's direct write to old.
    let bridged = old_stamp(3, 4, late).bridged();
    assert_eq!(classify(Some(&bridged), &l, d, BOUNDS), Decision::Current);
    let replayed = old_stamp(3, 4, late).replayed();
    assert_eq!(classify(Some(&replayed), &l, d, BOUNDS), Decision::Current);
}

#[test]
fn a_slice_moved_back_is_current_and_a_new_move_dates_it_again() {
    let mut l = ledger(None);
    l.record(Publish {
        generation: 7,
        slices_migrated: 8,
        published_at_ms: T0 + 120_000,
        old_mark: None,
    });
    let late = T0 + 3_600_000;
    // Rolled back to 8: slice 12 is on old again.
    assert_eq!(
        classify(
            Some(&old_stamp(12, 5, late)),
            &l,
            Delivery::default(),
            BOUNDS
        ),
        Decision::Current
    );
    l.record(Publish {
        generation: 8,
        slices_migrated: 16,
        published_at_ms: T0 + 180_000,
        old_mark: None,
    });
    // Moved again at 8: a stamp of 7 written in between (when 12 was on old) is a backlog.
    assert_eq!(
        classify(
            Some(&old_stamp(12, 7, T0 + 150_000)),
            &l,
            Delivery::default(),
            BOUNDS
        ),
        Decision::Backlog
    );
    assert_eq!(
        classify(
            Some(&old_stamp(12, 7, late)),
            &l,
            Delivery::default(),
            BOUNDS
        ),
        stale(12, 7, 8)
    );
}

#[test]
fn unstamped_messages_are_counted_apart() {
    let guard = StaleGuard::new(BOUNDS);
    guard.follow(&crate::routing::sample_document(5, 8), T0, None);
    let d = Delivery::default();
    assert_eq!(
        guard.check_headers([("content-type", "application/json")], d),
        Decision::Unstamped
    );
    // A malformed stamp is unreadable: unstamped, not ignored.
    assert_eq!(
        guard.check_headers([("x-qm-slice", "3")], d),
        Decision::Unstamped
    );
    let s = old_stamp(3, 4, T0 + 60_000);
    assert_eq!(guard.check(Some(&s), d), stale(3, 4, 5));
    assert_eq!(
        guard.check_headers(s.headers(), d),
        stale(3, 4, 5),
        "the headers read as the stamp"
    );
    let counts = guard.counts();
    assert_eq!((counts.unstamped(), counts.stale("checkout", 3)), (2, 2));
    let text = guard.render();
    assert!(
        text.contains(
            "queue_migrate_stale_producer_messages_total{producer=\"checkout\",slice=\"3\"} 2\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("queue_migrate_unstamped_messages_total 2\n"),
        "{text}"
    );
}

#[test]
fn the_guards_total_has_a_zero_sample_before_the_first_trip() {
    let text = StaleCounter::default().render();
    assert!(
        text.contains("\nqueue_migrate_stale_messages_total 0\n"),
        "{text}"
    );
    assert!(
        !text.contains("\nqueue_migrate_stale_producer_messages_total"),
        "{text}"
    );
}

#[test]
fn the_ledger_ignores_old_and_repeated_generations() {
    let mut l = ledger(None);
    let before = l.clone();
    assert!(!l.follow(&crate::routing::sample_document(6, 128), T0, None));
    assert!(!l.follow(&crate::routing::sample_document(2, 128), T0, None));
    assert_eq!(l, before);
    assert_eq!(l.latest().map(|p| p.generation), Some(6));
}

/// Partitions 0 and 1 of a Kafka topic ended at 100 and 5 when slices 0..8 moved.
fn ends() -> Mark {
    Mark::PartitionEnds([(0, 100), (1, 5)].into_iter().collect())
}

#[test]
fn each_partition_is_told_by_its_own_end() {
    let l = ledger(Some(ends()));
    // A producer's clock an hour ahead: its stamp says "late" on every partition.
    let s = old_stamp(3, 4, T0 + 3_600_000);
    let at = Delivery::in_partition;
    assert_eq!(classify(Some(&s), &l, at(0, 99), BOUNDS), Decision::Backlog);
    assert_eq!(classify(Some(&s), &l, at(0, 100), BOUNDS), stale(3, 4, 5));
    assert_eq!(classify(Some(&s), &l, at(1, 4), BOUNDS), Decision::Backlog);
    assert_eq!(classify(Some(&s), &l, at(1, 5), BOUNDS), stale(3, 4, 5));
    // Offset 50 is before partition 0's end but after partition 1's: partition 1's decides.
    assert_eq!(classify(Some(&s), &l, at(1, 50), BOUNDS), stale(3, 4, 5));
    // After the end, inside the grace by the stamp: propagation.
    let s = old_stamp(3, 4, T0 + 1_000);
    assert_eq!(classify(Some(&s), &l, at(1, 5), BOUNDS), Decision::InGrace);
}

#[test]
fn a_partition_the_mark_does_not_name_is_told_by_the_stamps_time() {
    let l = ledger(Some(ends()));
    let late = old_stamp(3, 4, T0 + 6_001);
    let early = old_stamp(3, 4, T0 + 1_000);
    let p2 = Delivery::in_partition(2, 0);
    assert_eq!(classify(Some(&late), &l, p2, BOUNDS), stale(3, 4, 5));
    assert_eq!(classify(Some(&early), &l, p2, BOUNDS), Decision::Backlog);
}

#[test]
fn facts_of_another_kind_than_the_mark_are_told_by_the_stamps_time() {
    let late = old_stamp(3, 4, T0 + 3_600_000);
    let early = old_stamp(3, 4, T0 + 1_000);
    // A partitioned delivery against one position, a plain position against partition ends, an
    // enqueue time against a position: nothing to compare, the stamp decides.
    for (mark, delivery) in [
        (Mark::Position(1_000), Delivery::in_partition(0, 1)),
        (ends(), Delivery::at_position(1)),
        (Mark::Position(1_000), Delivery::enqueued_at(T0 - 60_000)),
    ] {
        let l = ledger(Some(mark.clone()));
        assert_eq!(
            classify(Some(&late), &l, delivery, BOUNDS),
            stale(3, 4, 5),
            "{mark:?} {delivery:?}"
        );
        assert_eq!(
            classify(Some(&early), &l, delivery, BOUNDS),
            Decision::Backlog,
            "{mark:?} {delivery:?}"
        );
    }
}

/// The mark is read after the publish (when the consumer first sees the document): a later mark
/// of the same broker never turns a backlog into anything else, and never makes a trip out of a
/// message the earlier mark did not trip on.
#[test]
fn a_later_mark_never_turns_a_backlog_into_a_trip() {
    let rank = |d: &Decision| match d {
        Decision::Backlog => 0,
        Decision::InGrace => 1,
        Decision::Stale { .. } => 2,
        other => panic!("{other:?}"),
    };
    let positions = [0u64, 4, 5, 6, 99, 100, 101, 1_000];
    let times = [T0 - 60_000, T0, T0 + 1, T0 + 5_000, T0 + 5_001, T0 + 9_000];
    let stamps = [T0 - 60_000, T0 + 1_000, T0 + 6_001, T0 + 3_600_000];
    let marks = |step: u64| {
        let ms = i64::try_from(step).unwrap_or(0);
        [
            Mark::Position(5 + step),
            Mark::EnqueuedAt(T0 + ms),
            Mark::PartitionEnds([(0, 5 + step), (1, 100 + step)].into_iter().collect()),
        ]
    };
    let mut compared = 0;
    for (earlier, later) in marks(0).into_iter().zip(marks(3_000)) {
        let (e, l) = (ledger(Some(earlier)), ledger(Some(later)));
        for &p in &positions {
            for &t in &times {
                for delivery in [
                    Delivery::at_position(p),
                    Delivery::enqueued_at(t),
                    Delivery::in_partition(0, p),
                    Delivery::in_partition(1, p),
                ] {
                    for &at in &stamps {
                        let s = old_stamp(3, 4, at);
                        let before = classify(Some(&s), &e, delivery, BOUNDS);
                        let after = classify(Some(&s), &l, delivery, BOUNDS);
                        assert!(
                            rank(&after) <= rank(&before),
                            "{delivery:?} stamped {at}: {before:?} then {after:?}"
                        );
                        compared += 1;
                    }
                }
            }
        }
    }
    assert_eq!(compared, 3 * 8 * 6 * 4 * 4);
}

#[test]
fn marks_not_read_are_counted_and_the_latest_generation_is_known() {
    let guard = StaleGuard::new(BOUNDS);
    assert_eq!(guard.latest_generation(), None);
    guard.mark_unread();
    guard.follow(&crate::routing::sample_document(5, 8), T0, None);
    assert_eq!(guard.latest_generation(), Some(5));
    assert_eq!(guard.counts().marks_unread(), 1);
    let text = guard.render();
    assert!(
        text.contains("\nqueue_migrate_stale_mark_unread_total 1\n"),
        "{text}"
    );
}

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
    let before = Delivery {
        position: Some(1_000),
        enqueued_at_ms: None,
    };
    assert_eq!(classify(Some(&s), &l, before, BOUNDS), Decision::Backlog);
    // After the publish by position, and beyond the grace by the stamp: stale.
    let after = Delivery {
        position: Some(1_001),
        enqueued_at_ms: None,
    };
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
    let at = |t| Delivery {
        position: None,
        enqueued_at_ms: Some(t),
    };
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

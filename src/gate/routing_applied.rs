//! The `routing_applied` gate's reading: did every producer that follows the routing document
//! apply at least the step's generation? Pure: no IO, no clock (the instants are given).
//!
//! The daemon that serves the routing long-poll learns, from each poll, a producer's id and the
//! generation it applied ([`Follower`]); a round hands the followers it knows to the gate as an
//! [`crate::gate::Observation::Followers`]. Only the producers seen within the gate's `window`
//! count: one that stopped polling longer ago is gone (scaled down, or stuck so long that its
//! own health check should say so) and no longer holds the step.
//!
//! # Guarantees
//! - No producer seen within the window is **no data** (cause `empty`), never a pass: nobody
//!   proved they follow.
//! - A producer seen within the window whose applied generation is below the one needed fails
//!   the gate, named with its generation in the reason (at most [`LAGGING_SHOWN`] named, the
//!   rest counted); the reading's value is the number of producers that lag.
//! - A window in which the daemon forgot a producer to keep its cap is **no data** (cause
//!   `unusable`): the one forgotten may be the one that lags.
//! - The ids are shown as given: they went through [`crate::outgoing`]'s rule when the daemon
//!   took them in.

use std::time::Duration;

pub use crate::indicators::cause::{NoDataCause, Unread};
pub use crate::indicators::followers::Follower;

/// How many lagging producers a reason names; the rest are counted.
pub const LAGGING_SHOWN: usize = 10;

/// What the gate read: the producers seen within its window, and those that lag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Producers seen within the window.
    pub seen: usize,
    /// Those below the generation needed, lowest generation first, then by id.
    pub lagging: Vec<Follower>,
}

/// The producers of `followers` seen within `window` before `now_ms`, and those among them that
/// applied less than `need`.
pub fn applied(window: Duration, need: u64, followers: &[Follower], now_ms: i64) -> Applied {
    let window_ms = crate::time::millis(window);
    let recent = followers
        .iter()
        .filter(|f| now_ms.saturating_sub(f.seen_ms) <= window_ms);
    let mut seen = 0;
    let mut lagging = Vec::new();
    for f in recent {
        seen += 1;
        if f.applied < need {
            lagging.push(f.clone());
        }
    }
    lagging.sort_by(|a, b| {
        a.applied
            .cmp(&b.applied)
            .then_with(|| a.producer.cmp(&b.producer))
    });
    Applied { seen, lagging }
}

/// The lagging producers as a reason names them: `p-2 at 4, p-9 at 3` (at most
/// [`LAGGING_SHOWN`], then `and N more`).
pub fn lagging_text(lagging: &[Follower]) -> String {
    let mut parts: Vec<String> = lagging
        .iter()
        .take(LAGGING_SHOWN)
        .map(|f| format!("{} at {}", f.producer, f.applied))
        .collect();
    if lagging.len() > LAGGING_SHOWN {
        parts.push(format!("and {} more", lagging.len() - LAGGING_SHOWN));
    }
    parts.join(", ")
}

/// The reading of a `routing_applied` gate: `(lagging count, holds, description)`, or why there
/// is none (no producer seen within the window).
pub(crate) fn reading(
    window: Duration,
    need: u64,
    followers: &[Follower],
    evicted_at_ms: Option<i64>,
    now_ms: i64,
) -> Result<(f64, bool, String), Unread> {
    if evicted_at_ms.is_some_and(|at| now_ms.saturating_sub(at) <= crate::time::millis(window)) {
        return Err(Unread::new(
            NoDataCause::Unusable,
            format!(
                "the daemon forgot producers in the last {} to stay under --http-max-followers: \
                 the one forgotten may lag, so it cannot say every producer applied generation \
                 {need}",
                crate::time::human(window)
            ),
        ));
    }
    let a = applied(window, need, followers, now_ms);
    if a.seen == 0 {
        return Err(Unread::new(
            NoDataCause::Empty,
            format!(
                "no producer polled the routing document in the last {}: nobody showed it \
                 applied generation {need}",
                crate::time::human(window)
            ),
        ));
    }
    let lag = a.lagging.len();
    let describe = if lag == 0 {
        format!(
            "all {} producers seen in the last {} applied generation {need} or newer",
            a.seen,
            crate::time::human(window)
        )
    } else {
        format!(
            "{lag} of {} producers seen in the last {} lag behind generation {need}: {}",
            a.seen,
            crate::time::human(window),
            lagging_text(&a.lagging)
        )
    };
    Ok((lag as f64, lag == 0, describe))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{Memory, Observation, Verdict, evaluate};
    use crate::plan::{Check, Gate};

    const WINDOW: Duration = Duration::from_secs(120);

    fn gate() -> Gate {
        Gate {
            name: "producers_follow".into(),
            source: crate::plan::ROUTING_SOURCE.into(),
            check: Check::RoutingApplied { window: WINDOW },
            hold_for: None,
            for_max_gap: None,
            min_samples: 1,
        }
    }

    fn f(producer: &str, applied: u64, seen_ms: i64) -> Follower {
        Follower {
            producer: producer.into(),
            applied,
            seen_ms,
        }
    }

    fn eval(need: u64, followers: Vec<Follower>, now_ms: i64) -> crate::gate::Evaluation {
        let obs = Observation::Followers {
            need,
            followers,
            evicted_at_ms: None,
        };
        evaluate(&gate(), &obs, Memory::default(), now_ms)
    }

    #[test]
    fn no_producer_seen_is_no_data_never_a_pass() {
        let e = eval(5, Vec::new(), 1_000_000);
        assert_eq!(e.verdict, Verdict::NoData);
        assert_eq!(e.cause, Some(NoDataCause::Empty));
        assert!(e.reason.contains("no producer polled"), "{}", e.reason);
    }

    #[test]
    fn producers_seen_only_before_the_window_are_no_data() {
        let now = 1_000_000;
        let e = eval(5, vec![f("p-1", 5, now - 120_001)], now);
        assert_eq!(e.verdict, Verdict::NoData);
    }

    #[test]
    fn every_producer_at_or_past_the_generation_passes() {
        let now = 1_000_000;
        let e = eval(5, vec![f("p-1", 5, now), f("p-2", 6, now - 120_000)], now);
        assert_eq!(e.verdict, Verdict::Pass, "{}", e.reason);
        assert_eq!(e.value, Some(0.0));
        assert!(e.reason.contains("all 2 producers"), "{}", e.reason);
    }

    #[test]
    fn one_producer_behind_fails_and_is_named_with_its_generation() {
        let now = 1_000_000;
        let e = eval(
            5,
            vec![
                f("p-1", 5, now),
                f("p-old", 3, now - 1000),
                f("p-gone", 1, now - 200_000),
            ],
            now,
        );
        assert_eq!(e.verdict, Verdict::Fail);
        assert_eq!(e.value, Some(1.0));
        assert!(e.reason.contains("p-old at 3"), "{}", e.reason);
        assert!(e.reason.contains("1 of 2 producers"), "{}", e.reason);
        // Seen before the window: gone, neither counted nor named.
        assert!(!e.reason.contains("p-gone"), "{}", e.reason);
    }

    #[test]
    fn a_long_list_of_laggards_is_cut_and_counted() {
        let now = 0;
        let many: Vec<Follower> = (0..25).map(|i| f(&format!("p-{i:02}"), 1, now)).collect();
        let e = eval(2, many, now);
        assert_eq!(e.verdict, Verdict::Fail);
        assert_eq!(e.value, Some(25.0));
        assert!(e.reason.contains("and 15 more"), "{}", e.reason);
        assert!(!e.reason.contains("p-24"), "{}", e.reason);
    }

    #[test]
    fn laggards_are_listed_lowest_generation_first() {
        let a = applied(
            WINDOW,
            9,
            &[f("b", 7, 0), f("a", 8, 0), f("c", 2, 0), f("d", 9, 0)],
            0,
        );
        let ids: Vec<&str> = a.lagging.iter().map(|f| f.producer.as_str()).collect();
        assert_eq!(ids, ["c", "b", "a"]);
        assert_eq!(a.seen, 4);
    }

    #[test]
    fn an_eviction_within_the_window_is_no_data_never_a_pass() {
        let now = 1_000_000;
        let obs = |evicted_at_ms| Observation::Followers {
            need: 5,
            followers: vec![f("p-1", 5, now)],
            evicted_at_ms,
        };
        let e = evaluate(&gate(), &obs(Some(now - 1000)), Memory::default(), now);
        assert_eq!(e.verdict, Verdict::NoData);
        assert!(e.reason.contains("forgot producers"), "{}", e.reason);
        let e = evaluate(&gate(), &obs(Some(now - 120_001)), Memory::default(), now);
        assert_eq!(e.verdict, Verdict::Pass, "{}", e.reason);
    }

    #[test]
    fn a_routing_applied_gate_given_another_observation_is_no_data() {
        let e = evaluate(&gate(), &Observation::Value(0.0), Memory::default(), 0);
        assert_eq!(e.verdict, Verdict::NoData);
    }
}

use proptest::prelude::*;

use super::*;
use crate::plan::{CmpOp, Gate};

fn threshold(op: CmpOp, value: f64) -> Gate {
    Gate {
        name: "g".into(),
        source: "s".into(),
        check: Check::Threshold {
            query: "q".into(),
            op,
            value,
        },
        hold_for: None,
        for_max_gap: None,
        min_samples: 1,
    }
}

/// A `< 1` gate with `for: <hold_for>`, `for_max_gap: <max_gap>` (minutes).
fn held_for(hold_for: u64, max_gap: u64) -> Gate {
    Gate {
        hold_for: Some(Duration::from_secs(hold_for * 60)),
        for_max_gap: Some(Duration::from_secs(max_gap * 60)),
        ..threshold(CmpOp::Lt, 1.0)
    }
}

fn compare(ratio: f64, absolute: f64) -> Gate {
    Gate {
        check: Check::Compare {
            new: "n".into(),
            old: "o".into(),
            ratio,
            absolute,
        },
        ..threshold(CmpOp::Eq, 0.0)
    }
}

const MIN: i64 = 60_000;

#[test]
fn thresholds_table() {
    use CmpOp::*;
    let table = [
        (Ge, 1.0, 1.0, Verdict::Pass),
        (Ge, 1.0, 0.0, Verdict::Fail),
        (Gt, 1.0, 1.0, Verdict::Fail),
        (Lt, 0.01, 0.001, Verdict::Pass),
        (Le, 0.0, 0.0, Verdict::Pass),
        (Eq, 0.0, 0.0, Verdict::Pass),
        (Eq, 0.0, 3.0, Verdict::Fail),
        (Ne, 0.0, 3.0, Verdict::Pass),
    ];
    for (op, thr, v, want) in table {
        let e = evaluate(
            &threshold(op, thr),
            &Observation::Value(v),
            Memory::default(),
            0,
        );
        assert_eq!(e.verdict, want, "{v} {} {thr}", op.as_str());
    }
}

#[test]
fn unavailable_nan_and_infinite_hold_with_a_reason() {
    let g = threshold(CmpOp::Lt, 1.0);
    for obs in [
        Observation::Unavailable(Unread::down("source prom: connection refused")),
        Observation::Value(f64::NAN),
        Observation::Value(f64::INFINITY),
    ] {
        let e = evaluate(&g, &obs, Memory::default(), 0);
        assert_eq!(e.verdict, Verdict::NoData);
        assert!(!e.reason.is_empty());
    }
}

#[test]
fn compare_uses_the_larger_of_ratio_and_absolute() {
    let g = compare(1.1, 0.001);
    let pass =
        |new, old| evaluate(&g, &Observation::Pair { new, old }, Memory::default(), 0).verdict;
    assert_eq!(pass(0.0105, 0.01), Verdict::Pass); // within 10 %
    assert_eq!(pass(0.0115, 0.01), Verdict::Fail);
    assert_eq!(pass(0.0009, 0.0), Verdict::Pass); // absolute floor when old is 0
    assert_eq!(pass(0.002, 0.0), Verdict::Fail);
}

#[test]
fn for_duration_is_honoured_across_evaluations() {
    // Evaluated sparsely on purpose (19 minutes apart): a gap that long is allowed here, so
    // that what restarts the streak below is the failure and the hold alone.
    let g = Gate {
        hold_for: Some(Duration::from_secs(20 * 60)),
        for_max_gap: Some(Duration::from_secs(20 * 60)),
        ..threshold(CmpOp::Eq, 0.0)
    };
    let zero = Observation::Value(0.0);
    let e1 = evaluate(&g, &zero, Memory::default(), 0);
    assert_eq!(e1.verdict, Verdict::Soaking);
    assert!(e1.reason.contains("held for 0s of 20m"), "{}", e1.reason);
    let e2 = evaluate(&g, &zero, e1.memory, 19 * MIN);
    assert_eq!(e2.verdict, Verdict::Soaking);
    let e3 = evaluate(&g, &zero, e2.memory, 20 * MIN);
    assert_eq!(e3.verdict, Verdict::Pass, "{}", e3.reason);
    // One non-zero reading restarts the clock.
    let e4 = evaluate(&g, &Observation::Value(2.0), e3.memory, 21 * MIN);
    assert_eq!(e4.verdict, Verdict::Fail);
    let e5 = evaluate(&g, &zero, e4.memory, 22 * MIN);
    assert_eq!(e5.verdict, Verdict::Soaking);
    // So does a hold (nobody saw it stay at zero).
    let e6 = evaluate(
        &g,
        &Observation::Unavailable(Unread::down("down")),
        e3.memory,
        21 * MIN,
    );
    assert_eq!(e6.memory.held_since_ms, None);
}

/// A NaN or infinite reading used to keep the "held since" mark: a `for:` gate passed over a
/// span in which its query answered nothing usable.
#[test]
fn a_nan_or_infinite_reading_breaks_a_for_streak() {
    let hold_for = Some(Duration::from_secs(20 * 60));
    // Evaluations 10 minutes apart are allowed: the streak must break on the reading alone.
    let for_max_gap = Some(Duration::from_secs(20 * 60));
    let threshold_gate = Gate {
        hold_for,
        for_max_gap,
        ..threshold(CmpOp::Eq, 0.0)
    };
    let compare_gate = Gate {
        hold_for,
        for_max_gap,
        ..compare(1.1, 0.0)
    };
    let cases = [
        (
            &threshold_gate,
            Observation::Value(0.0),
            Observation::Value(f64::NAN),
        ),
        (
            &threshold_gate,
            Observation::Value(0.0),
            Observation::Value(f64::INFINITY),
        ),
        (
            &compare_gate,
            Observation::Pair { new: 1.0, old: 1.0 },
            Observation::Pair {
                new: f64::NAN,
                old: 1.0,
            },
        ),
        (
            &compare_gate,
            Observation::Pair { new: 1.0, old: 1.0 },
            Observation::Pair {
                new: 1.0,
                old: f64::NEG_INFINITY,
            },
        ),
    ];
    for (gate, good, bad) in cases {
        let e1 = evaluate(gate, &good, Memory::default(), 0);
        let e2 = evaluate(gate, &bad, e1.memory, 10 * MIN);
        assert_eq!(e2.verdict, Verdict::NoData, "{bad:?}");
        assert_eq!(e2.memory.held_since_ms, None, "{bad:?}");
        let e3 = evaluate(gate, &good, e2.memory, 20 * MIN);
        assert_eq!(e3.verdict, Verdict::Soaking, "{bad:?}: {}", e3.reason);
        assert!(e3.reason.contains("held for 0s of 20m"), "{}", e3.reason);
    }
}

/// Evaluations of `gate` reading 0 at each minute of `minutes`, from an empty memory.
fn every(gate: &Gate, minutes: &[i64]) -> Vec<Evaluation> {
    let mut memory = Memory::default();
    let mut out = Vec::new();
    for m in minutes {
        let e = evaluate(gate, &Observation::Value(0.0), memory, m * MIN);
        memory = e.memory;
        out.push(e);
    }
    out
}

#[test]
fn a_for_streak_evaluated_within_its_max_gap_holds_and_passes() {
    let g = held_for(30, 5);
    let evals = every(&g, &[0, 5, 9, 14, 19, 24, 29, 30]);
    let verdicts: Vec<Verdict> = evals.iter().map(|e| e.verdict).collect();
    let mut want = vec![Verdict::Soaking; 7];
    want.push(Verdict::Pass);
    assert_eq!(verdicts, want);
    let last = &evals[7];
    assert!(last.reason.ends_with("; held for 30m"), "{}", last.reason);
    assert_eq!(last.memory.held_since_ms, Some(0));
    assert_eq!(last.memory.evaluated_at_ms, Some(30 * MIN));
}

/// A daemon down for 40 minutes, or a `migrate advance` run rarely: nobody looked in between,
/// so the streak restarts at the evaluation after the gap, and the reason says why.
#[test]
fn a_gap_over_for_max_gap_restarts_the_streak_and_says_why() {
    let g = held_for(30, 5);
    let evals = every(&g, &[0, 40]);
    let after = &evals[1];
    assert_eq!(after.verdict, Verdict::Soaking);
    assert_eq!(
        after.reason,
        "0 < 1; held for 0s of 30m (restarted: no evaluation for 40m, over the 5m allowed \
         between two)"
    );
    assert_eq!(after.memory.held_since_ms, Some(40 * MIN));
    // The streak counts from the restart: 30 minutes of evaluations later it passes.
    let evals = every(&g, &[0, 40, 45, 50, 55, 60, 65, 69]);
    assert_eq!(evals[7].verdict, Verdict::Soaking, "{}", evals[7].reason);
    assert!(
        evals[7].reason.contains("held for 29m of 30m"),
        "{}",
        evals[7].reason
    );
    assert!(
        !evals[7].reason.contains("restarted"),
        "{}",
        evals[7].reason
    );
    let next = evaluate(&g, &Observation::Value(0.0), evals[7].memory, 70 * MIN);
    assert_eq!(next.verdict, Verdict::Pass, "{}", next.reason);
    // A gap long enough to cover the whole `for` never passes it in one go either.
    let once = every(&g, &[0, 30]);
    assert_eq!(once[1].verdict, Verdict::Soaking, "{}", once[1].reason);
}

#[test]
fn a_gap_of_exactly_for_max_gap_keeps_the_streak_one_ms_more_restarts_it() {
    let g = held_for(10, 5);
    let first = evaluate(&g, &Observation::Value(0.0), Memory::default(), 0);
    let at_bound = evaluate(&g, &Observation::Value(0.0), first.memory, 5 * MIN);
    assert_eq!(at_bound.memory.held_since_ms, Some(0));
    assert!(
        !at_bound.reason.contains("restarted"),
        "{}",
        at_bound.reason
    );
    let over = evaluate(&g, &Observation::Value(0.0), first.memory, 5 * MIN + 1);
    assert_eq!(over.memory.held_since_ms, Some(5 * MIN + 1));
    assert!(
        over.reason
            .contains("(restarted: no evaluation for 5m, over the 5m allowed"),
        "{}",
        over.reason
    );
    // At the bound twice over: still one streak, it passes at 10m.
    let passed = evaluate(&g, &Observation::Value(0.0), at_bound.memory, 10 * MIN);
    assert_eq!(passed.verdict, Verdict::Pass, "{}", passed.reason);
}

#[test]
fn the_gap_is_counted_from_any_evaluation_and_the_default_is_five_minutes() {
    // A failure or a hold is an evaluation too: it resets the streak and the gap counts from it.
    let g = held_for(10, 5);
    let failed = evaluate(&g, &Observation::Value(3.0), Memory::default(), 0);
    assert_eq!(failed.memory.evaluated_at_ms, Some(0));
    let unread = evaluate(
        &g,
        &Observation::Unavailable(Unread::down("down")),
        Memory::default(),
        MIN,
    );
    assert_eq!(unread.memory.evaluated_at_ms, Some(MIN));
    // A `for:` gate built without `for_max_gap` (as compile never does) allows 5 minutes.
    let default = Gate {
        for_max_gap: None,
        ..held_for(10, 5)
    };
    assert_eq!(DEFAULT_FOR_MAX_GAP, Duration::from_secs(300));
    assert_eq!(every(&default, &[0, 5])[1].memory.held_since_ms, Some(0));
    assert_eq!(
        every(&default, &[0, 6])[1].memory.held_since_ms,
        Some(6 * MIN)
    );
    // A memory with a mark but no time of its last evaluation counts the gap from the mark.
    let marked = Memory {
        held_since_ms: Some(0),
        samples: 1,
        ..Memory::default()
    };
    let e = evaluate(&g, &Observation::Value(0.0), marked, 6 * MIN);
    assert_eq!(e.memory.held_since_ms, Some(6 * MIN));
    // The reason of a gate still short of its samples says it restarted too.
    let sampled = Gate {
        min_samples: 5,
        ..held_for(10, 5)
    };
    let evals = every(&sampled, &[0, 20]);
    assert!(
        evals[1].reason.ends_with("2 of 5 samples so far (restarted: no evaluation for 20m, over the 5m allowed between two)"),
        "{}",
        evals[1].reason
    );
}

#[test]
fn without_for_the_gap_between_evaluations_does_not_matter() {
    let g = threshold(CmpOp::Lt, 1.0);
    let evals = every(&g, &[0, 40, 600]);
    assert!(evals.iter().all(|e| e.verdict == Verdict::Pass));
    assert!(evals.iter().all(|e| !e.reason.contains("restarted")));
    assert_eq!(evals[2].memory.held_since_ms, Some(0));
}

#[test]
fn min_samples_holds_until_enough_evaluations() {
    let g = Gate {
        min_samples: 3,
        ..threshold(CmpOp::Ge, 1.0)
    };
    let one = Observation::Value(1.0);
    let e1 = evaluate(&g, &one, Memory::default(), 0);
    let e2 = evaluate(&g, &one, e1.memory, 1);
    let e3 = evaluate(&g, &one, e2.memory, 2);
    assert_eq!(
        [e1.verdict, e2.verdict, e3.verdict],
        [Verdict::NoData, Verdict::NoData, Verdict::Pass]
    );
    assert!(e2.reason.contains("2 of 3 samples"));
    assert_eq!(
        [e1.cause, e2.cause, e3.cause],
        [
            Some(NoDataCause::TooFewSamples),
            Some(NoDataCause::TooFewSamples),
            None
        ]
    );
}

/// Issue 44: a NO DATA evaluation keeps its cause, the source's (down, empty, too few samples)
/// or its own (not a finite number); the other verdicts have none.
#[test]
fn no_data_keeps_its_cause() {
    let g = threshold(CmpOp::Lt, 1.0);
    let req = Requirement {
        source: "p".into(),
        query: "q".into(),
        at_least: Some(1.0),
    };
    for cause in NoDataCause::ALL {
        let obs = Observation::Unavailable(Unread::new(cause, "source p: why"));
        let e = evaluate(&g, &obs, Memory::default(), 0);
        assert_eq!((e.verdict, e.cause), (Verdict::NoData, Some(cause)));
        assert_eq!(e.reason, "source p: why");
        assert_eq!(
            evaluate_peak(&req, &obs, Memory::default()).cause,
            Some(cause)
        );
        assert_eq!(evaluate_deploy(&obs, 0).cause, Some(cause));
    }
    let nan = evaluate(&g, &Observation::Value(f64::NAN), Memory::default(), 0);
    assert_eq!(nan.cause, Some(NoDataCause::Unusable));
    let pass = evaluate(&g, &Observation::Value(0.5), Memory::default(), 0);
    assert_eq!((pass.verdict, pass.cause), (Verdict::Pass, None));
}

#[test]
fn peak_is_remembered_through_the_step() {
    let req = Requirement {
        source: "p".into(),
        query: "q".into(),
        at_least: Some(300.0),
    };
    let e1 = evaluate_peak(&req, &Observation::Value(120.0), Memory::default());
    assert_eq!(e1.verdict, Verdict::Fail);
    let e2 = evaluate_peak(&req, &Observation::Value(310.0), e1.memory);
    assert_eq!(e2.verdict, Verdict::Pass);
    let e3 = evaluate_peak(&req, &Observation::Value(40.0), e2.memory);
    assert_eq!(
        e3.verdict,
        Verdict::Pass,
        "the peak was seen: night traffic is fine"
    );
    let e4 = evaluate_peak(
        &req,
        &Observation::Unavailable(Unread::down("down")),
        Memory::default(),
    );
    assert_eq!(e4.verdict, Verdict::NoData);
}

#[test]
fn deploy_must_happen_after_the_step_started() {
    let step_start = 1_700_000_000_000;
    let before = Observation::Value(1_699_999_000.0);
    let after = Observation::Value(1_700_000_100.0);
    assert_eq!(evaluate_deploy(&before, step_start).verdict, Verdict::Fail);
    assert_eq!(evaluate_deploy(&after, step_start).verdict, Verdict::Pass);
}

#[test]
fn advance_needs_every_exit_no_failing_guard_and_the_minimum_time() {
    let pass = evaluate(
        &threshold(CmpOp::Ge, 0.0),
        &Observation::Value(1.0),
        Memory::default(),
        0,
    );
    let fail = evaluate(
        &threshold(CmpOp::Ge, 5.0),
        &Observation::Value(1.0),
        Memory::default(),
        0,
    );
    let held = evaluate(
        &threshold(CmpOp::Ge, 5.0),
        &Observation::Unavailable(Unread::down("x")),
        Memory::default(),
        0,
    );
    let hour = Duration::from_secs(3600);
    assert!(ready_to_advance(&[("a", &pass)], &[], 0, hour, 3_600_000).is_ok());
    assert!(ready_to_advance(&[("a", &pass)], &[], 0, hour, 3_599_999).is_err());
    assert!(ready_to_advance(&[("a", &held)], &[], 0, hour, 9_999_999).is_err());
    assert!(ready_to_advance(&[("a", &pass)], &[("g", &fail)], 0, hour, 9_999_999).is_err());
    assert!(ready_to_advance(&[("a", &pass)], &[("g", &held)], 0, hour, 9_999_999).is_ok());
}

/// The start of the streak the evaluations at `times` (all holding, in order) end with: the
/// earliest one reached going back through gaps of at most `max_gap_ms`.
fn streak_start(times: &[i64], max_gap_ms: i64) -> i64 {
    let mut start = times[times.len() - 1];
    for pair in times.windows(2).rev() {
        if pair[1] - pair[0] > max_gap_ms {
            break;
        }
        start = pair[0];
    }
    start
}

proptest! {
    /// A `for:` gate read holding at every evaluation passes exactly when its evaluations,
    /// none more than `for_max_gap` after the one before, span `for`.
    #[test]
    fn a_for_gate_passes_only_over_evaluations_never_too_far_apart(
        gaps in proptest::collection::vec(0..(12 * MIN), 1..40),
    ) {
        let g = held_for(30, 5);
        let mut times = vec![0];
        for gap in gaps {
            let last = times[times.len() - 1];
            times.push(last + gap);
        }
        let mut memory = Memory::default();
        for (i, now) in times.iter().enumerate() {
            let e = evaluate(&g, &Observation::Value(0.0), memory, *now);
            memory = e.memory;
            let start = streak_start(&times[..=i], 5 * MIN);
            prop_assert_eq!(memory.held_since_ms, Some(start));
            let want = if now - start >= 30 * MIN { Verdict::Pass } else { Verdict::Soaking };
            prop_assert_eq!(e.verdict, want, "{}", e.reason);
        }
    }

    #[test]
    fn a_hold_is_never_a_pass_and_never_a_fail(reason in ".*", v in any::<f64>()) {
        let g = threshold(CmpOp::Lt, 1.0);
        let e = evaluate(&g, &Observation::Unavailable(Unread::down(reason)), Memory::default(), 0);
        prop_assert_eq!(e.verdict, Verdict::NoData);
        let e = evaluate(&g, &Observation::Value(v), Memory::default(), 0);
        if !v.is_finite() { prop_assert_eq!(e.verdict, Verdict::NoData); }
        else if v < 1.0 { prop_assert_eq!(e.verdict, Verdict::Pass); }
        else { prop_assert_eq!(e.verdict, Verdict::Fail); }
    }
}

/// Issue 44: one verdict, HOLD, covered "the source is down" and "true, soaking under `for:`".
#[test]
fn hold_is_split_into_soaking_with_progress_and_no_data() {
    let g = Gate {
        hold_for: Some(Duration::from_secs(20)),
        ..threshold(CmpOp::Lt, 1.0)
    };
    let e1 = evaluate(&g, &Observation::Value(0.0), Memory::default(), 0);
    let e2 = evaluate(&g, &Observation::Value(0.0), e1.memory, 5_000);
    assert_eq!(e2.verdict, Verdict::Soaking);
    assert_eq!(
        e2.soak,
        Some(Soak {
            held_ms: 5_000,
            need_ms: 20_000
        })
    );
    assert_eq!(e2.soak.map(Soak::text).as_deref(), Some("5s of 20s"));
    let e3 = evaluate(&g, &Observation::Value(0.0), e2.memory, 20_000);
    assert_eq!((e3.verdict, e3.soak), (Verdict::Pass, None));
    let down = evaluate(
        &g,
        &Observation::Unavailable(Unread::down("source prom: connection refused")),
        e2.memory,
        6_000,
    );
    assert_eq!((down.verdict, down.soak), (Verdict::NoData, None));
    let failing = evaluate(&g, &Observation::Value(3.0), e2.memory, 6_000);
    assert_eq!((failing.verdict, failing.soak), (Verdict::Fail, None));
    // The evidence says so in the journal.
    let json = serde_json::to_value(&e2).unwrap_or_default();
    assert_eq!(json["verdict"], "soaking");
    assert_eq!(json["soak"]["need_ms"], 20_000);
    assert_eq!(
        serde_json::to_value(&down).unwrap_or_default()["verdict"],
        "no_data"
    );
}

#[test]
fn the_four_verdicts_have_one_stored_name_and_one_label_each() {
    let names: Vec<&str> = Verdict::ALL.iter().map(|v| v.as_str()).collect();
    assert_eq!(names, ["pass", "soaking", "no_data", "fail"]);
    let labels: Vec<&str> = Verdict::ALL.iter().map(|v| v.label()).collect();
    assert_eq!(labels, ["PASS", "SOAKING", "NO DATA", "FAIL"]);
    for v in Verdict::ALL {
        assert_eq!(Verdict::parse(v.as_str()), Some(v));
        let json = serde_json::to_string(&v).unwrap_or_default();
        assert_eq!(json, format!("\"{}\"", v.as_str()));
    }
    assert!(Verdict::Soaking.is_waiting() && Verdict::NoData.is_waiting());
    assert!(!Verdict::Pass.is_waiting() && !Verdict::Fail.is_waiting());
}

/// Rows and journal evidence stored before the split say `hold`: they still read.
#[test]
fn a_stored_hold_reads_as_soaking_or_no_data() {
    assert_eq!(
        Verdict::from_stored("hold", Some(0.0), "0 < 1; held for 5s of 20s"),
        Some(Verdict::Soaking)
    );
    assert_eq!(
        Verdict::from_stored("hold", Some(1.0), "1 >= 1; 2 of 3 samples so far"),
        Some(Verdict::NoData)
    );
    assert_eq!(
        Verdict::from_stored("hold", None, "connection refused"),
        Some(Verdict::NoData)
    );
    assert_eq!(Verdict::from_stored("maybe", None, ""), None);
    let old: Evaluation = serde_json::from_str(
        r#"{"verdict":"hold","value":null,"reason":"source prom: connection refused","samples":0}"#,
    )
    .unwrap_or_else(|e| panic!("old evidence: {e}"));
    assert_eq!(old.verdict, Verdict::NoData);
}

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
        min_samples: 1,
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
        Observation::Unavailable("source prom: connection refused".into()),
        Observation::Value(f64::NAN),
        Observation::Value(f64::INFINITY),
    ] {
        let e = evaluate(&g, &obs, Memory::default(), 0);
        assert_eq!(e.verdict, Verdict::Hold);
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
    let g = Gate {
        hold_for: Some(Duration::from_secs(20 * 60)),
        ..threshold(CmpOp::Eq, 0.0)
    };
    let zero = Observation::Value(0.0);
    let e1 = evaluate(&g, &zero, Memory::default(), 0);
    assert_eq!(e1.verdict, Verdict::Hold);
    assert!(e1.reason.contains("held for 0s of 20m"), "{}", e1.reason);
    let e2 = evaluate(&g, &zero, e1.memory, 19 * MIN);
    assert_eq!(e2.verdict, Verdict::Hold);
    let e3 = evaluate(&g, &zero, e2.memory, 20 * MIN);
    assert_eq!(e3.verdict, Verdict::Pass, "{}", e3.reason);
    // One non-zero reading restarts the clock.
    let e4 = evaluate(&g, &Observation::Value(2.0), e3.memory, 21 * MIN);
    assert_eq!(e4.verdict, Verdict::Fail);
    let e5 = evaluate(&g, &zero, e4.memory, 22 * MIN);
    assert_eq!(e5.verdict, Verdict::Hold);
    // So does a hold (nobody saw it stay at zero).
    let e6 = evaluate(
        &g,
        &Observation::Unavailable("down".into()),
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
    let threshold_gate = Gate {
        hold_for,
        ..threshold(CmpOp::Eq, 0.0)
    };
    let compare_gate = Gate {
        hold_for,
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
        assert_eq!(e2.verdict, Verdict::Hold, "{bad:?}");
        assert_eq!(e2.memory.held_since_ms, None, "{bad:?}");
        let e3 = evaluate(gate, &good, e2.memory, 20 * MIN);
        assert_eq!(e3.verdict, Verdict::Hold, "{bad:?}: {}", e3.reason);
        assert!(e3.reason.contains("held for 0s of 20m"), "{}", e3.reason);
    }
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
        [Verdict::Hold, Verdict::Hold, Verdict::Pass]
    );
    assert!(e2.reason.contains("2 of 3 samples"));
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
        &Observation::Unavailable("down".into()),
        Memory::default(),
    );
    assert_eq!(e4.verdict, Verdict::Hold);
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
        &Observation::Unavailable("x".into()),
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

proptest! {
    #[test]
    fn a_hold_is_never_a_pass_and_never_a_fail(reason in ".*", v in any::<f64>()) {
        let g = threshold(CmpOp::Lt, 1.0);
        let e = evaluate(&g, &Observation::Unavailable(reason), Memory::default(), 0);
        prop_assert_eq!(e.verdict, Verdict::Hold);
        let e = evaluate(&g, &Observation::Value(v), Memory::default(), 0);
        if !v.is_finite() { prop_assert_eq!(e.verdict, Verdict::Hold); }
        else if v < 1.0 { prop_assert_eq!(e.verdict, Verdict::Pass); }
        else { prop_assert_eq!(e.verdict, Verdict::Fail); }
    }
}

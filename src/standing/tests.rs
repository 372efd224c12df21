use super::*;

fn gate(name: &str, kind: GateKind, source: &str, verdict: Verdict) -> GateInput {
    GateInput {
        name: name.into(),
        kind,
        source: source.into(),
        verdict,
        value: match verdict {
            Verdict::NoData => None,
            _ => Some(0.02),
        },
        threshold: Some("< 0.01".into()),
        reason: match verdict {
            Verdict::NoData => "source prom: connection refused".into(),
            _ => "0.02 is not < 0.01".into(),
        },
        evaluated: true,
        soak: None,
    }
}

fn soaking(name: &str, held_ms: i64, need_ms: i64) -> GateInput {
    GateInput {
        soak: Some(Soak { held_ms, need_ms }),
        value: Some(0.0),
        ..gate(name, GateKind::Exit, "prom", Verdict::Soaking)
    }
}

fn unevaluated(name: &str) -> GateInput {
    GateInput {
        evaluated: false,
        reason: "awaiting first evaluation".into(),
        ..gate(name, GateKind::Exit, "prom", Verdict::NoData)
    }
}

fn snap<'a>(gates: &'a [GateInput]) -> Snapshot<'a> {
    Snapshot {
        migration: "orders",
        state: "slices[1]",
        complete: false,
        paused: None,
        gates,
        entered_at_ms: 0,
        min_ms: 60_000,
        next_needs_confirmation: None,
        auto_advance: true,
        now_ms: 120_000,
    }
}

const PAUSE: Pause = Pause {
    command: String::new(),
    reason: None,
    actor: String::new(),
    at_ms: 0,
};

fn pause(command: &str) -> Pause {
    Pause {
        command: command.into(),
        reason: Some("disk alarm on the new broker".into()),
        actor: "ana".into(),
        ..PAUSE
    }
}

/// Every case of issue 44's list, with the sentence each view prints.
#[test]
fn standing_table() {
    use GateKind::{Exit, Guard};
    use Verdict::{Fail, NoData, Pass};
    let passing = [
        gate("errors", Exit, "prom", Pass),
        gate("lag", Guard, "prom", Pass),
    ];
    let paused = pause("pause");
    let aborted = pause("abort");
    let breached = pause("rollback");
    let guard_failing = [
        gate("errors", Exit, "prom", Pass),
        gate("lag", Guard, "prom", Fail),
    ];
    let exit_failing = [
        gate("errors", Exit, "prom", Fail),
        gate("lag", Guard, "prom", Pass),
    ];
    let blind = [
        gate("errors", Exit, "prom", NoData),
        gate("lag", Guard, "prom", NoData),
        gate("depth", Exit, "rabbit", Pass),
    ];
    // One gate of a source without data while another reads it: not blind.
    let one_without_data = [
        gate("errors", Exit, "prom", NoData),
        gate("lag", Guard, "prom", Pass),
    ];
    let soak = [
        soaking("errors", 5_000, 20_000),
        gate("lag", Guard, "prom", Pass),
    ];
    let awaiting = [
        unevaluated("errors"),
        unevaluated("lag"),
        unevaluated("depth"),
    ];
    type Case<'a> = (&'a str, Snapshot<'a>, &'a str, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            "every gate passes",
            snap(&passing),
            "moving",
            "moving: every gate passes",
        ),
        (
            "minimum time",
            Snapshot {
                now_ms: 15_000,
                ..snap(&passing)
            },
            "waiting",
            "waiting: minimum time, 45s left of 1m",
        ),
        (
            "gates awaiting their first evaluation",
            snap(&awaiting),
            "waiting",
            "waiting: awaiting first evaluation of errors, lag, depth",
        ),
        (
            "soaking",
            snap(&soak),
            "soaking",
            "soaking: errors true for 5s of 20s",
        ),
        (
            "the minimum time ends after the soak",
            Snapshot {
                now_ms: 1_000,
                ..snap(&soak)
            },
            "waiting",
            "waiting: minimum time, 59s left of 1m",
        ),
        (
            "an exit gate fails",
            snap(&exit_failing),
            "blocked",
            "blocked: errors: 0.02 vs < 0.01",
        ),
        (
            "a guard fails (alert: not paused)",
            snap(&guard_failing),
            "blocked",
            "blocked: guard lag: 0.02 vs < 0.01",
        ),
        (
            "one gate without data, its source answering another",
            snap(&one_without_data),
            "blocked",
            "blocked: errors: no data (source prom: connection refused)",
        ),
        (
            "the only source down",
            snap(&blind),
            "blind",
            "blind: source prom unreachable (source prom: connection refused): errors, lag hold",
        ),
        (
            "ready for the point of no return",
            Snapshot {
                next_needs_confirmation: Some("complete"),
                ..snap(&passing)
            },
            "needs_person",
            "needs a person: confirm complete, the point of no return",
        ),
        (
            "auto_advance off",
            Snapshot {
                auto_advance: false,
                ..snap(&passing)
            },
            "needs_person",
            "needs a person: ready, auto_advance is off",
        ),
        (
            "paused by a person, no guard failing",
            Snapshot {
                paused: Some(Some(&paused)),
                ..snap(&passing)
            },
            "needs_person",
            "needs a person: paused by ana at 1970-01-01T00:00:00Z: disk alarm on the new \
             broker; no guard fails now",
        ),
        (
            "paused by a breach whose guard still fails",
            Snapshot {
                paused: Some(Some(&breached)),
                ..snap(&guard_failing)
            },
            "needs_person",
            "needs a person: paused by ana at 1970-01-01T00:00:00Z: disk alarm on the new \
             broker; guard lag still fails",
        ),
        (
            "paused with no pause in the journal",
            Snapshot {
                paused: Some(None),
                ..snap(&blind)
            },
            "needs_person",
            "needs a person: paused; no guard fails now",
        ),
        (
            "aborted",
            Snapshot {
                paused: Some(Some(&aborted)),
                ..snap(&guard_failing)
            },
            "aborted",
            "aborted by ana at 1970-01-01T00:00:00Z: disk alarm on the new broker",
        ),
        (
            "complete",
            Snapshot {
                complete: true,
                gates: &[],
                ..snap(&passing)
            },
            "complete",
            "complete: the old broker may be decommissioned",
        ),
    ];
    for (case, s, kind, sentence) in cases {
        let got = standing(&s);
        assert_eq!(got.kind(), kind, "{case}: {got:?}");
        assert_eq!(got.sentence(), sentence, "{case}");
        assert!(Standing::KINDS.contains(&got.kind()), "{case}");
    }
}

#[test]
fn blind_names_every_gate_of_the_source_guards_included() {
    use GateKind::{Exit, Guard};
    let gates = [
        gate("errors", Exit, "prom", Verdict::NoData),
        gate("lag", Guard, "prom", Verdict::NoData),
        gate("depth", Exit, "rabbit", Verdict::Fail),
    ];
    let got = standing(&snap(&gates));
    assert_eq!(
        got,
        Standing::Blind {
            source: "prom".into(),
            reason: "source prom: connection refused".into(),
            gates: vec!["errors".into(), "lag".into()],
        }
    );
}

#[test]
fn the_api_object_has_kind_sentence_and_details() {
    let gates = [soaking("errors", 5_000, 20_000)];
    let json = serde_json::to_value(standing(&snap(&gates)).view()).unwrap_or_default();
    assert_eq!(json["kind"], "soaking");
    assert_eq!(json["sentence"], "soaking: errors true for 5s of 20s");
    assert_eq!(json["gate"], "errors");
    assert_eq!(json["held_ms"], 5_000);
    assert_eq!(json["need_ms"], 20_000);
    let paused = pause("pause");
    let s = Snapshot {
        paused: Some(Some(&paused)),
        ..snap(&gates)
    };
    let json = serde_json::to_value(standing(&s).view()).unwrap_or_default();
    assert_eq!(json["kind"], "needs_person");
    assert_eq!(json["person"]["for"], "paused");
    assert_eq!(json["person"]["by"], "ana");
    assert_eq!(json["person"]["failing_guard"], serde_json::Value::Null);
}

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
        evaluated_at_ms: None,
        soak: None,
        cause: (verdict == Verdict::NoData).then_some(NoDataCause::SourceDown),
    }
}

/// An exit gate of the scrape source `world` without data for `cause`, saying `reason`.
fn without_data(name: &str, kind: GateKind, cause: Option<NoDataCause>, reason: &str) -> GateInput {
    GateInput {
        cause,
        reason: reason.into(),
        ..gate(name, kind, "world", Verdict::NoData)
    }
}

const ONE_SAMPLE: &str = "source world: not enough samples (have 1, need 2 within 1h)";

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
        counting_from_ms: 0,
        min_ms: 60_000,
        next_needs_confirmation: None,
        auto_advance: true,
        drive: None,
        next: None,
        now_ms: 120_000,
    }
}

const PAUSE: Pause = Pause {
    command: String::new(),
    reason: None,
    actor: String::new(),
    at_ms: 0,
    breach: Vec::new(),
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
            cause: NoDataCause::SourceDown,
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

/// Regression (issue 44): a `rate()`/`increase()` window holding one sample of a source that
/// answers gave NO DATA without a value on every gate of the source, and the migration was
/// called blind ("source world unreachable") while its source was up (the demo's
/// `disconnect`). Too few samples only takes time: waiting for data, naming the gate.
#[test]
fn too_few_samples_is_not_blind() {
    use GateKind::{Exit, Guard};
    let gates = [
        without_data(
            "no producer on old for 1h",
            Exit,
            Some(NoDataCause::TooFewSamples),
            ONE_SAMPLE,
        ),
        without_data(
            "old queue drains",
            Guard,
            Some(NoDataCause::TooFewSamples),
            ONE_SAMPLE,
        ),
    ];
    let got = standing(&snap(&gates));
    assert_eq!(got.kind(), "waiting", "{got:?}");
    assert_eq!(
        got.sentence(),
        "waiting for data: no producer on old for 1h: source world: not enough samples (have 1, \
         need 2 within 1h)"
    );
    // Before the minimum time is over too: the gate's wait is what the view names.
    let early = Snapshot {
        now_ms: 1_000,
        ..snap(&gates)
    };
    assert_eq!(
        standing(&early).sentence(),
        "waiting for data: no producer on old for 1h: source world: not enough samples (have 1, \
         need 2 within 1h)"
    );
    // `min_samples` not reached: a value, too few samples.
    let counted = [GateInput {
        value: Some(0.0),
        ..without_data(
            "errors",
            Exit,
            Some(NoDataCause::TooFewSamples),
            "0 < 0.01; 1 of 3 samples so far",
        )
    }];
    assert_eq!(
        standing(&snap(&counted)).sentence(),
        "waiting for data: errors: 0 < 0.01; 1 of 3 samples so far"
    );
    // A guard with too few samples keeps nothing where it is.
    let guard_only = [
        gate("errors", Exit, "prom", Verdict::Pass),
        without_data("lag", Guard, Some(NoDataCause::TooFewSamples), ONE_SAMPLE),
    ];
    assert_eq!(standing(&snap(&guard_only)), Standing::Moving);
    // The API's object names the gate and why.
    let json = serde_json::to_value(standing(&snap(&gates)).view()).unwrap_or_default();
    assert_eq!(json["kind"], "waiting");
    assert_eq!(json["data"]["gate"], "no producer on old for 1h");
}

/// A source that answered with no series, or with no usable number, is not down either: the
/// exit gate that reads it is blocked, saying which.
#[test]
fn an_answer_without_data_blocks_and_says_which() {
    use GateKind::{Exit, Guard};
    let empty = [
        without_data(
            "errors",
            Exit,
            Some(NoDataCause::Empty),
            "source world: no series matching `errors_total` in the latest scrape",
        ),
        without_data(
            "lag",
            Guard,
            Some(NoDataCause::Empty),
            "source world: no series matching `lag` in the latest scrape",
        ),
    ];
    let got = standing(&snap(&empty));
    assert_eq!(got.kind(), "blocked", "{got:?}");
    assert_eq!(
        got.sentence(),
        "blocked: errors: no data, the query returned no series (source world: no series \
         matching `errors_total` in the latest scrape)"
    );
    let nan = [without_data(
        "ratio",
        Exit,
        Some(NoDataCause::Unusable),
        "source world: division by zero",
    )];
    assert_eq!(
        standing(&snap(&nan)).sentence(),
        "blocked: ratio: no data, the source answered with no usable number (source world: \
         division by zero)"
    );
    // Down for one gate, answering another: blocked, as before.
    let mixed = [
        without_data(
            "errors",
            Exit,
            Some(NoDataCause::SourceDown),
            "source world: timed out",
        ),
        without_data("lag", Guard, Some(NoDataCause::TooFewSamples), ONE_SAMPLE),
    ];
    assert_eq!(
        standing(&snap(&mixed)).sentence(),
        "blocked: errors: no data (source world: timed out)"
    );
}

/// Evaluations stored before the cause was kept have none: they read as they did (no data
/// without a value on every gate of a source: blind; with a value: blocked).
#[test]
fn a_stored_no_data_without_a_cause_reads_as_before() {
    use GateKind::{Exit, Guard};
    let legacy = [
        without_data("errors", Exit, None, "source world: connection refused"),
        without_data("lag", Guard, None, "source world: connection refused"),
    ];
    assert_eq!(
        standing(&snap(&legacy)).sentence(),
        "blind: source world unreachable (source world: connection refused): errors, lag hold"
    );
    let with_value = [GateInput {
        value: Some(0.0),
        ..without_data("errors", Exit, None, "0 < 0.01; 1 of 3 samples so far")
    }];
    assert_eq!(
        standing(&snap(&with_value)).sentence(),
        "blocked: errors: no data (0 < 0.01; 1 of 3 samples so far)"
    );
}

/// Regression (issue 56): the daemon stopped; 60 s later `status` still said "moving: every
/// gate passes" from readings taken before. With no lease holder, or an evaluation older than
/// a few intervals, the standing says nothing drives it, how long, and what to do; what the
/// last readings said goes with it.
#[test]
fn not_driven_when_no_daemon_holds_the_lease_or_the_readings_are_stale() {
    use GateKind::{Exit, Guard};
    use Verdict::Pass;
    let passing = [
        gate("errors", Exit, "prom", Pass),
        gate("lag", Guard, "prom", Pass),
    ];
    let stopped = Drive {
        holder: None,
        evaluated_at_ms: Some(60_000),
        since_ms: 0,
        stale_after_ms: 60_000,
    };
    let at = |drive: &Drive| {
        standing(&Snapshot {
            drive: Some(drive),
            ..snap(&passing)
        })
    };
    let s = at(&stopped);
    assert_eq!(s.kind(), "not_driven");
    assert_eq!(
        s.sentence(),
        "not driven: no daemon has evaluated it for 1m; start `migrate run` or advance by hand; \
         its last readings: moving: every gate passes"
    );
    let served = serde_json::to_value(s.view()).unwrap();
    assert_eq!(served["kind"], "not_driven");
    assert_eq!(served["idle_ms"], 60_000);
    assert_eq!(served["readings"]["kind"], "moving");
    // A daemon holds the lease and evaluated it 10 s ago: driven.
    let leading = Drive {
        holder: Some("ctl-a".into()),
        evaluated_at_ms: Some(110_000),
        ..stopped.clone()
    };
    assert_eq!(at(&leading).kind(), "moving");
    // It holds the lease but has not evaluated it for longer than a few intervals: stuck.
    let stuck = Drive {
        evaluated_at_ms: Some(30_000),
        ..leading.clone()
    };
    assert_eq!(
        at(&stuck).sentence(),
        "not driven: ctl-a holds the lease but has not evaluated it for 1m 30s; look at that \
         daemon (its log, /readyz) or advance by hand; its last readings: moving: every gate passes"
    );
    // Never evaluated in the step, nobody leading: said so, without readings.
    let never = Drive {
        evaluated_at_ms: None,
        since_ms: 100_000,
        ..stopped.clone()
    };
    assert_eq!(
        at(&never).sentence(),
        "not driven: no daemon has evaluated it in this step (20s since it began); start \
         `migrate run` or advance by hand"
    );
    // Paused, aborted and complete say what they say: a person acts first.
    let paused = pause("pause");
    let s = standing(&Snapshot {
        paused: Some(Some(&paused)),
        drive: Some(&stopped),
        ..snap(&passing)
    });
    assert_eq!(s.kind(), "needs_person");
}

/// Issue 56: what only takes time says what happens next.
#[test]
fn soaking_and_waiting_say_what_happens_next() {
    use GateKind::Guard;
    use Verdict::Pass;
    let soak = [
        soaking("errors", 5_000, 20_000),
        gate("lag", Guard, "prom", Pass),
    ];
    let passing = [gate("lag", Guard, "prom", Pass)];
    let next = Snapshot {
        next: Some("slices[2]"),
        now_ms: 115_000,
        ..snap(&soak)
    };
    assert_eq!(
        standing(&next).sentence(),
        "soaking: errors true for 5s of 20s; then it advances to slices[2]"
    );
    let waiting = Snapshot {
        gates: &passing,
        now_ms: 5_000,
        ..next.clone()
    };
    assert_eq!(
        standing(&waiting).sentence(),
        "waiting: minimum time, 55s left of 1m; then it advances to slices[2]"
    );
    let by_hand = Snapshot {
        auto_advance: false,
        ..waiting.clone()
    };
    assert!(
        standing(&by_hand)
            .sentence()
            .ends_with("; then a person advances it to slices[2] (auto_advance is off)")
    );
    let served = serde_json::to_value(standing(&waiting).view()).unwrap();
    assert_eq!(served["then"], "it advances to slices[2]");
}

/// Was a bug (issue 56): a source whose answer could not be parsed, or that answered an HTTP
/// error, was called "unreachable" like one that refused every connection.
#[test]
fn a_blind_source_says_unreachable_http_error_or_unparsable() {
    let cases = [
        (
            NoDataCause::SourceDown,
            "source prom: http://p/: cannot connect (is the source up?)",
            "blind: source prom unreachable (",
        ),
        (
            NoDataCause::SourceHttpError,
            "source prom: HTTP 503 Service Unavailable from http://p/metrics",
            "blind: source prom answered HTTP 503 (",
        ),
        (
            NoDataCause::SourceHttpError,
            "source prom: an error page",
            "blind: source prom answered with an HTTP error (",
        ),
        (
            NoDataCause::SourceUnparsable,
            "source prom: unreadable metrics, line 7: column 1: no metric name",
            "blind: source prom's answer could not be parsed (source prom: unreadable metrics, line 7",
        ),
    ];
    for (cause, reason, said) in cases {
        let mut g = gate("errors", GateKind::Exit, "prom", Verdict::NoData);
        g.cause = Some(cause);
        g.reason = reason.into();
        let sentence = standing(&snap(&[g])).sentence();
        assert!(sentence.starts_with(said), "{cause:?}: {sentence}");
        assert_eq!(
            sentence.contains("unreachable"),
            cause == NoDataCause::SourceDown,
            "{sentence}"
        );
    }
}

/// Issue 56: a breach's rollback enters a step whose guards no round has evaluated yet; the
/// sentence said "no guard fails now" while the round that paused it had read the guard at 0.2.
/// The pause's evidence is that round's reading until this step's evaluation is newer.
#[test]
fn a_guard_unevaluated_since_the_breach_is_read_from_the_round_that_paused_it() {
    let evidence = serde_json::json!({
        "breach": ["lag (0.2 is not < 0.05)"],
        "gates": [
            { "name": "errors", "kind": "exit", "verdict": "pass", "value": 0.0,
              "reason": "ok", "evaluated_at_ms": 100_000 },
            { "name": "lag", "kind": "guard", "verdict": "fail", "value": 0.2,
              "reason": "0.2 is not < 0.05", "evaluated_at_ms": 100_000 },
        ],
    });
    let breached = Pause {
        command: "rollback".into(),
        actor: "controller".into(),
        at_ms: 100_000,
        breach: last_round::failing_guards(&evidence),
        ..PAUSE
    };
    let unevaluated_guard = [
        gate("errors", GateKind::Exit, "prom", Verdict::Pass),
        GateInput {
            evaluated: false,
            ..gate("lag", GateKind::Guard, "prom", Verdict::NoData)
        },
    ];
    let s = Snapshot {
        paused: Some(Some(&breached)),
        ..snap(&unevaluated_guard)
    };
    let sentence = standing(&s).sentence();
    assert_eq!(
        sentence,
        "needs a person: paused by controller at 1970-01-01T00:01:40Z; guard lag failed in the \
         round that paused it (0.2 at 1970-01-01T00:01:40Z), not evaluated since"
    );
    let json = serde_json::to_value(standing(&s).view()).unwrap_or_default();
    assert_eq!(json["person"]["failing_guard"], "lag");
    assert_eq!(json["person"]["last_round"]["value"], 0.2);
    // A newer evaluation in this step is the truth: passing now, it says so.
    let passing_since = [GateInput {
        evaluated_at_ms: Some(115_000),
        value: Some(0.001),
        ..gate("lag", GateKind::Guard, "prom", Verdict::Pass)
    }];
    let s = Snapshot {
        paused: Some(Some(&breached)),
        ..snap(&passing_since)
    };
    assert!(
        standing(&s).sentence().ends_with("; no guard fails now"),
        "{}",
        standing(&s).sentence()
    );
    // An evaluation older than the breach (committed with the round before it) is not.
    let older = [GateInput {
        evaluated_at_ms: Some(85_000),
        ..gate("lag", GateKind::Guard, "prom", Verdict::Pass)
    }];
    let s = Snapshot {
        paused: Some(Some(&breached)),
        ..snap(&older)
    };
    assert!(
        standing(&s)
            .sentence()
            .contains("guard lag failed in the round that paused it"),
        "{}",
        standing(&s).sentence()
    );
}

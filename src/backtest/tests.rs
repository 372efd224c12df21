//! The rehearsal on readings given by hand (no server): breaches, their actions, the verdicts.

use super::*;
use crate::machine::State;
use crate::plan::SystemResolve;
use simulate::End;

const MINUTE: i64 = 60_000;
const T0: i64 = 1_795_996_800_000;

fn plan(on_breach: &str, observe: &str) -> Plan {
    let yaml = format!(
        r#"version: 1
name: unit
slices: 8
brokers:
  old: {{ name: old, kind: amqp, url: "amqp://127.0.0.1:5672/%2f", queue: unit }}
  new: {{ name: new, kind: nats, url: "nats://127.0.0.1:4222", stream: UNIT }}
retry: {{ max_backoff: 2m, visibility_timeout: 1m }}
sources:
  prom: {{ prometheus: "http://127.0.0.1:9" }}
phases:
  consume_dual:
    exit:
      - {{ name: connected, source: prom, query: c, pass_if: ">= 1" }}
  slices:
    steps: [4, 8]
    observe: {observe}
    exit:
      - {{ name: x low, source: prom, query: x, pass_if: "< 1" }}
    guard:
      - {{ name: x breach, source: prom, query: x, pass_if: "< 5" }}
    on_breach: {on_breach}
"#
    );
    match crate::plan::compile(&yaml, None, &SystemResolve) {
        Ok(c) => c.plan,
        Err(e) => panic!("{e:?}"),
    }
}

/// `c` at 1 throughout, `x` per minute as `x`.
fn readings(x: &[f64]) -> Readings {
    let instants = Instants::new(T0, T0 + (x.len() as i64 - 1) * MINUTE, MINUTE).expect("window");
    let mut r = Readings::new(instants);
    r.insert("prom", "c", vec![Ok(1.0); x.len()]);
    r.insert("prom", "x", x.iter().map(|v| Ok(*v)).collect());
    r
}

fn moves(r: &Rehearsal) -> Vec<(i64, &'static str, State, State, bool)> {
    r.moves
        .iter()
        .map(|m| ((m.at_ms - T0) / MINUTE, m.command, m.from, m.to, m.paused))
        .collect()
}

#[test]
fn a_breach_that_rolls_back_ends_the_rehearsal_there_and_says_so() {
    let r = rehearse(
        &plan("rollback", "2m"),
        &readings(&[0.0, 0.0, 0.0, 0.0, 10.0, 0.0, 0.0]),
        State::Planned,
    );
    assert_eq!(
        moves(&r),
        vec![
            (0, "advance", State::Planned, State::ConsumeDual, false),
            (1, "advance", State::ConsumeDual, State::Slices(0), false),
            (3, "advance", State::Slices(0), State::Slices(1), false),
            (4, "rollback", State::Slices(1), State::Slices(0), true),
        ]
    );
    assert!(matches!(r.end, End::Stopped { .. }));
    assert_eq!(r.breaches.len(), 1);
    assert!(r.breaches[0].ended);
    let verdict = report::verdict(&r);
    assert!(
        verdict.starts_with("would have stopped in slices[1] after 4m")
            && verdict.contains("rolled back to slices[0] and paused")
            && verdict.contains("x breach (10 is not < 5)"),
        "{verdict}"
    );
    assert_eq!(r.steps[2].last_to_pass.as_deref(), Some("minimum time"));
}

#[test]
fn a_breach_that_pauses_ends_the_rehearsal_in_its_step() {
    let r = rehearse(
        &plan("pause", "2m"),
        &readings(&[0.0, 0.0, 10.0, 0.0]),
        State::Planned,
    );
    assert_eq!(
        moves(&r).last(),
        Some(&(2, "pause", State::Slices(0), State::Slices(0), true))
    );
    assert!(report::verdict(&r).contains("paused in slices[0]"));
}

#[test]
fn an_alert_is_listed_once_per_episode_and_the_rehearsal_goes_on() {
    let mut x = vec![0.0; 13];
    x[7] = 10.0;
    x[8] = 10.0;
    x[10] = 10.0;
    let r = rehearse(&plan("alert", "5m"), &readings(&x), State::Planned);
    let at: Vec<i64> = r.breaches.iter().map(|b| (b.at_ms - T0) / MINUTE).collect();
    assert_eq!(at, vec![7, 10]);
    assert!(r.breaches.iter().all(|b| !b.ended));
    // slices[1] entered at 6; its 5 minutes at 11, when x is quiet again.
    assert_eq!(
        r.end,
        End::Completed {
            at_ms: T0 + 11 * MINUTE
        }
    );
    assert_eq!(
        report::verdict(&r),
        "would have completed in 11m (at 2026-11-30T00:11:00Z)"
    );
}

#[test]
fn a_step_never_left_names_the_gate_that_kept_it() {
    let r = rehearse(
        &plan("rollback", "2m"),
        &readings(&[2.0; 13]),
        State::Planned,
    );
    assert_eq!(
        r.end,
        End::Unfinished {
            state: State::Slices(0),
            since_ms: T0 + MINUTE
        }
    );
    assert_eq!(
        report::verdict(&r),
        "would still be in slices[0] after 12m: `x low` failed 100% of the time in it"
    );
    // A source that cannot answer for the past: its gates hold, as live.
    let mut unavailable = readings(&[0.0; 13]);
    unavailable.source_unavailable("prom", "source prom: gone".into());
    let r = rehearse(&plan("rollback", "2m"), &unavailable, State::Planned);
    assert_eq!(
        report::verdict(&r),
        "would still be in consume_dual after 12m: `connected` had no data 100% of the time in it"
    );
    // ... and the report's verdict says the source, not the plan, is the trouble.
    assert_eq!(
        report::verdict_given(&r, &unavailable.outages()),
        "source prom unreachable from 2026-11-30T00:00:00Z to 2026-11-30T00:12:00Z (source prom: \
         gone): no verdict on the plan for that time (its gates had no data); it got as far as \
         consume_dual"
    );
}

/// Issue 44: the backtest counted SOAKING and NO DATA as one "held" share: a gate soaking under
/// its `for:` and a gate whose source was down read the same.
#[test]
fn backtest_counts_soaking_and_no_data_apart() {
    let mut p = plan("rollback", "2m");
    p.phases[0].exit[0].hold_for = Some(std::time::Duration::from_secs(300));
    let mut r = readings(&[0.0; 13]);
    // `c` true throughout (soaking under its 5m `for:`, then passing); `x` gone from minute 2.
    let x: Vec<table::Reading> = (0..13)
        .map(|i| {
            if i < 2 {
                Ok(0.0)
            } else {
                Err("source prom: down".into())
            }
        })
        .collect();
    r.insert("prom", "x", x);
    let shares = gate_shares(&p, &r);
    let connected = shares
        .iter()
        .find(|g| g.name == "connected")
        .expect("connected");
    assert!(
        connected.soaking > 0.0 && connected.no_data == 0.0,
        "{connected:?}"
    );
    let low = shares.iter().find(|g| g.name == "x low").expect("x low");
    assert!(low.no_data > 0.5 && low.soaking == 0.0, "{low:?}");
    let rehearsal = rehearse(&p, &r, State::Planned);
    let dual = &rehearsal.steps[1];
    assert_eq!(dual.state, State::ConsumeDual);
    let t = &dual.gates[0];
    assert!(t.soaking_ms > 0 && t.no_data_ms == 0, "{t:?}");
    let mut text = Vec::new();
    let outcome = backtest(&p, &r, State::Planned, &[]).expect("backtest");
    report::write_text(
        &mut text,
        &report::report("unit", &outcome, MINUTE, "planned".into(), Vec::new()),
    )
    .expect("text");
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains("soaking 5m"), "{text}");
    assert!(text.contains("  soaking "), "{text}");
    assert!(text.contains("  no data "), "{text}");
    assert!(!text.contains("  held "), "{text}");
}

/// Issue 44: when a source could not be reached, the backtest printed a verdict that read like
/// a plan problem (`x low` held 100%); it says when the source was unreachable instead.
#[test]
fn backtest_says_source_unreachable_from_t_to_t() {
    let mut r = readings(&[0.0; 13]);
    let why: std::sync::Arc<str> = "source prom: cannot connect (is the source up?)".into();
    let x: Vec<table::Reading> = (0..13)
        .map(|i| if i < 3 { Ok(0.0) } else { Err(why.clone()) })
        .collect();
    r.insert("prom", "x", x);
    // Two requests' worth of instants, adjacent: one outage.
    r.unreachable_at("prom", 3, 5, &why);
    r.unreachable_at("prom", 8, 5, &why);
    let outages = r.outages();
    assert_eq!(outages.len(), 1, "{outages:?}");
    assert_eq!(
        (outages[0].from_ms, outages[0].to_ms),
        (T0 + 3 * MINUTE, T0 + 12 * MINUTE)
    );
    let outcome = backtest(&plan("rollback", "2m"), &r, State::Planned, &[]).expect("backtest");
    let rep = report::report("unit", &outcome, MINUTE, "planned".into(), Vec::new());
    assert_eq!(
        rep.verdict,
        "source prom unreachable from 2026-11-30T00:03:00Z to 2026-11-30T00:12:00Z (source prom: \
         cannot connect (is the source up?)): no verdict on the plan for that time (its gates had \
         no data); it got as far as slices[0]"
    );
    // A plan's own trouble keeps its verdict.
    let plain = readings(&[2.0; 13]);
    let outcome = backtest(&plan("rollback", "2m"), &plain, State::Planned, &[]).expect("ok");
    let rep = report::report("unit", &outcome, MINUTE, "planned".into(), Vec::new());
    assert!(
        rep.verdict.starts_with("would still be in slices[0]"),
        "{}",
        rep.verdict
    );
}

#[test]
fn what_if_changes_the_named_threshold_and_refuses_an_unknown_gate() {
    let p = plan("alert", "2m");
    let changed = apply_what_if(&p, &[WhatIf::parse("x low=3").expect("parses")]).expect("known");
    let r = rehearse(&changed, &readings(&[2.0; 13]), State::Planned);
    assert!(matches!(r.end, End::Completed { .. }), "{:?}", r.end);
    let err = apply_what_if(&p, &[WhatIf::parse("nope=1").expect("parses")]).expect_err("unknown");
    assert!(err.to_string().contains("\"x low\""), "{err}");
    assert!(WhatIf::parse("x low").is_err());
    assert!(WhatIf::parse("x low=abc").is_err());
    assert!(start_state(&p, Some("slices[7]")).is_err());
    assert_eq!(start_state(&p, Some("slices[1]")), Ok(State::Slices(1)));
}

#[test]
fn a_step_longer_than_a_for_gates_max_gap_is_said() {
    let p = plan("alert", "2m");
    assert!(step_notes(&p, 10 * MINUTE).is_empty(), "no `for:` gate");
    let held = crate::plan::Gate {
        hold_for: Some(std::time::Duration::from_secs(600)),
        ..p.phases[1].exit[0].clone()
    };
    let mut with_for = p.clone();
    with_for.phases[1].exit[0] = held;
    assert!(step_notes(&with_for, 5 * MINUTE).is_empty());
    let notes = step_notes(&with_for, 6 * MINUTE);
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0]
            .starts_with("gate `x low` (slices): the step 6m is longer than its for_max_gap 5m")
    );
}

/// Issue 55: a judge that cannot decide within its `max_duration` pauses the migration for a
/// person, as the daemon does; the rehearsal ends there and says why.
#[test]
fn an_undecided_judge_ends_the_rehearsal_paused_for_a_person() {
    let yaml = r#"version: 1
name: unit
slices: 8
brokers:
  old: { name: old, kind: amqp, url: "amqp://127.0.0.1:5672/%2f", queue: unit }
  new: { name: new, kind: nats, url: "nats://127.0.0.1:4222", stream: UNIT }
retry: { max_backoff: 2m, visibility_timeout: 1m }
sources:
  prom: { prometheus: "http://127.0.0.1:9" }
phases:
  consume_dual:
    exit:
      - { name: connected, source: prom, query: c, pass_if: ">= 1" }
  slices:
    steps: [4, 8]
    exit:
      - name: failures
        source: prom
        judge:
          new: { events: 'sum(increase(ne[$step]))', failures: 'sum(increase(nf[$step]))' }
          old: { events: 'sum(increase(oe[$step]))', failures: 'sum(increase(of[$step]))' }
          tolerance: 0.2
          min_events: 1
          max_duration: 3m
"#;
    let plan = match crate::plan::compile(yaml, None, &SystemResolve) {
        Ok(c) => c.plan,
        Err(e) => panic!("{e:?}"),
    };
    // A failure a minute on each side: too few to decide either way.
    let n = 8;
    let mut r = readings(&vec![0.0; n]);
    for (q, v) in [("ne", 100.0), ("nf", 1.0), ("oe", 100.0), ("of", 1.0)] {
        r.insert(
            "prom",
            &format!("sum(increase({q}[$step]))"),
            vec![Ok(v); n],
        );
    }
    let r = rehearse(&plan, &r, State::Planned);
    match &r.end {
        End::Undecided {
            at_ms,
            state,
            gates,
        } => {
            assert_eq!(*state, State::Slices(0));
            assert_eq!((at_ms - T0) / MINUTE, 4, "3 minutes after slices[0] began");
            assert!(
                gates[0].starts_with("failures (INCONCLUSIVE after 3m"),
                "{gates:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    let verdict = report::verdict(&r);
    assert!(
        verdict.starts_with("would have paused in slices[0] after 4m")
            && verdict.contains("a judge could not decide"),
        "{verdict}"
    );
}

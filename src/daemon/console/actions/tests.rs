use super::*;
use crate::plan::compile::compile;
use std::path::Path;

struct Env;

impl crate::plan::Resolve for Env {
    fn env(&self, name: &str) -> Option<String> {
        name.starts_with("QM_")
            .then(|| "http://127.0.0.1:9".to_string())
    }
    fn read_file(&self, path: &Path) -> Result<String, String> {
        Err(format!("{}: no files here", path.display()))
    }
}

fn plan(auto_advance: bool) -> Plan {
    let yaml = include_str!("../../../../plans/local.yaml");
    let yaml = if auto_advance {
        yaml.to_string()
    } else {
        yaml.replace("auto_advance: true", "auto_advance: false")
    };
    match compile(&yaml, None, &Env) {
        Ok(c) => c.plan,
        Err(e) => panic!("{e:?}"),
    }
}

fn ladder(p: &Plan) -> Ladder {
    Ladder::of(p)
}

fn guard(verdict: Verdict) -> GateView {
    GateView {
        phase: "slices".into(),
        name: "error ratio breach".into(),
        kind: GateKind::Guard,
        source: "prom".into(),
        verdict,
        value: Some(0.2),
        reason: "0.2 < 0.05 is false".into(),
        evaluated_at: None,
        evaluated_at_ms: None,
        age_ms: None,
        soak: None,
        cause: None,
        largest_partition: None,
    }
}

fn at<'a>(p: &'a Plan, l: &'a Ladder, state: State, paused: bool, g: &'a [GateView]) -> Now<'a> {
    Now {
        name: "local",
        plan: p,
        ladder: l,
        state,
        paused,
        gates: g,
        blocked: None,
        reader: None,
        last_round: None,
    }
}

fn why(actions: &[Action], action: &str) -> Option<String> {
    actions
        .iter()
        .find(|a| a.action == action)
        .and_then(|a| a.why_not.clone())
}

#[test]
fn after_complete_every_action_is_disabled_with_the_reason() {
    let p = plan(true);
    let l = ladder(&p);
    let all = actions(&at(&p, &l, State::Complete, false, &[]));
    assert_eq!(all.len(), 5);
    for a in &all {
        let why = a.why_not.as_deref().unwrap_or_default();
        assert!(why.starts_with("The migration is complete"), "{a:?}");
    }
}

#[test]
fn only_what_applies_is_enabled_and_a_daemon_that_cannot_act_says_why() {
    let p = plan(true);
    let l = ladder(&p);
    let s1 = State::Slices(1);
    let running = actions(&at(&p, &l, s1, false, &[]));
    assert_eq!(why(&running, "advance"), None);
    assert_eq!(why(&running, "pause"), None);
    assert_eq!(
        why(&running, "resume").as_deref(),
        Some("Not paused: nothing to resume.")
    );
    let paused = actions(&at(&p, &l, s1, true, &[]));
    assert_eq!(
        why(&paused, "advance").as_deref(),
        Some("Paused: resume it first.")
    );
    assert_eq!(why(&paused, "pause").as_deref(), Some("Already paused."));
    let planned = actions(&at(&p, &l, State::Planned, false, &[]));
    assert!(why(&planned, "abort").is_some_and(|w| w.contains("no traffic")));
    let mut standby = at(&p, &l, s1, false, &[]);
    standby.blocked = Some("This controller is standing by.".into());
    assert!(actions(&standby).iter().all(|a| a.why_not.is_some()));
}

#[test]
fn a_rollback_says_when_the_daemon_would_advance_again() {
    let p = plan(true);
    let l = ladder(&p);
    let all = actions(&at(&p, &l, State::Slices(1), false, &[]));
    let note = all[1].note.clone().unwrap_or_default();
    assert!(note.contains("Back to slices[0]"), "{note}");
    assert!(note.contains("advances again to slices[1]"), "{note}");
    assert!(note.contains("at the earliest in"), "{note}");
    let manual = plan(false);
    let l = ladder(&manual);
    let all = actions(&at(&manual, &l, State::Slices(1), false, &[]));
    let note = all[1].note.clone().unwrap_or_default();
    assert!(note.contains("does not advance by itself"), "{note}");
}

#[test]
fn resume_warns_while_a_guard_fails() {
    let p = plan(true);
    let l = ladder(&p);
    let failing = [guard(Verdict::Fail)];
    let all = actions(&at(&p, &l, State::Slices(1), true, &failing));
    let warn = all[3].warn.clone().unwrap_or_default();
    assert!(warn.contains("error ratio breach"), "{warn}");
    assert!(warn.contains("(one step back, then paused)"), "{warn}");
    let passing = [guard(Verdict::Pass)];
    let all = actions(&at(&p, &l, State::Slices(1), true, &passing));
    assert_eq!(all[3].warn, None);
}

#[test]
fn advancing_into_complete_is_noted_as_the_point_of_no_return() {
    let p = plan(true);
    let l = ladder(&p);
    let all = actions(&at(&p, &l, State::Disconnect, false, &[]));
    assert_eq!(all[0].why_not, None);
    assert!(
        all[0]
            .note
            .as_deref()
            .is_some_and(|n| n.contains("point of no return"))
    );
}

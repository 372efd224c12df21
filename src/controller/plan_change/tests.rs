use std::path::Path;

use super::*;
use crate::plan::{self, Resolve};

struct Env;

impl Resolve for Env {
    fn env(&self, name: &str) -> Option<String> {
        match name {
            "QM_PROM_URL" => Some("http://127.0.0.1:1".into()),
            "QM_SCRAPE_URL" => Some("http://127.0.0.1:2/metrics".into()),
            _ => None,
        }
    }
    fn read_file(&self, path: &Path) -> Result<String, String> {
        Err(format!("no file {}", path.display()))
    }
}

const PLAN: &str = include_str!("../../../plans/local.yaml");

fn compiled(yaml: &str) -> Plan {
    match plan::compile(yaml, Some(Path::new("/plans")), &Env) {
        Ok(c) => c.plan,
        Err(e) => panic!("the plan compiles: {e:?}"),
    }
}

fn at(state: State) -> MigrationRecord {
    MigrationRecord {
        name: "local".into(),
        plan_yaml: PLAN.into(),
        plan_path: "/plans/local.yaml".into(),
        plan_hash: String::new(),
        state,
        paused: false,
        version: 5,
        generation: 5,
        published_generation: 5,
        publish_error: None,
        entered_at_ms: 0,
        updated_at_ms: 0,
        created_at_ms: 0,
    }
}

fn check(new_yaml: &str, state: State) -> Vec<Refusal> {
    refusals(&compiled(PLAN), &compiled(new_yaml), &at(state))
}

#[test]
fn a_gate_change_is_allowed_in_every_state_but_complete() {
    let looser = PLAN.replace("pass_if: \"< 0.01\"", "pass_if: \"< 0.02\"");
    assert_ne!(looser, PLAN);
    let old = compiled(PLAN);
    for state in Ladder::of(&old).rungs().iter().copied() {
        let got = check(&looser, state);
        if state == State::Complete {
            assert_eq!(got, vec![Refusal::Complete]);
        } else {
            assert_eq!(got, vec![], "{state}");
            assert!(!republishes(&old, &compiled(&looser), &at(state)));
        }
    }
}

#[test]
fn the_slice_total_may_change_in_planned_only_and_is_published_again() {
    let more = PLAN
        .replace("slices: 8", "slices: 16")
        .replace("steps: [1, 4, 8]", "steps: [1, 4, 16]");
    assert!(check(&more, State::Planned).is_empty());
    assert!(republishes(
        &compiled(PLAN),
        &compiled(&more),
        &at(State::Planned)
    ));
    for state in [State::ConsumeDual, State::Slices(1), State::Drain] {
        let got = check(&more, state);
        assert!(
            got.contains(&Refusal::SlicesTotal {
                old: 8,
                new: 16,
                state
            }),
            "{state}: {got:?}"
        );
    }
}

#[test]
fn the_current_steps_routing_may_not_change_but_later_steps_may() {
    let other = PLAN.replace("steps: [1, 4, 8]", "steps: [1, 2, 8]");
    assert!(check(&other, State::Slices(0)).is_empty());
    assert_eq!(
        check(&other, State::Slices(1)),
        vec![Refusal::Routing {
            state: State::Slices(1),
            what: "migrated slices",
            old: "4".into(),
            new: "2".into(),
        }]
    );
    let renamed = PLAN.replace("new: { name: new,", "new: { name: nats-b,");
    assert!(check(&renamed, State::Planned).is_empty());
    assert!(matches!(
        check(&renamed, State::Synthetic).as_slice(),
        [Refusal::Routing {
            what: "new broker",
            ..
        }]
    ));
}

#[test]
fn the_current_step_and_phase_must_stay_in_the_plan() {
    let fewer = PLAN.replace("steps: [1, 4, 8]", "steps: [1, 8]");
    assert!(check(&fewer, State::Slices(1)).contains(&Refusal::Routing {
        state: State::Slices(1),
        what: "migrated slices",
        old: "4".into(),
        new: "8".into(),
    }));
    assert_eq!(
        check(&fewer, State::Slices(2)),
        vec![Refusal::StepGone { step: 2, steps: 2 }]
    );
    let no_synthetic = {
        let start = PLAN.find("  synthetic:").unwrap_or(0);
        let end = PLAN.find("  slices:").unwrap_or(0);
        format!("{}{}", &PLAN[..start], &PLAN[end..])
    };
    assert_eq!(
        check(&no_synthetic, State::Synthetic),
        vec![Refusal::StateGone {
            state: State::Synthetic
        }]
    );
    assert!(check(&no_synthetic, State::Slices(0)).is_empty());
}

#[test]
fn the_routing_file_never_moves() {
    let moved = PLAN.replace("local.routing.json", "elsewhere.json");
    for state in [State::Planned, State::Slices(2)] {
        assert!(matches!(
            check(&moved, state).as_slice(),
            [Refusal::Publisher { what: "file", .. }]
        ));
    }
}

#[test]
fn the_diff_shows_the_changed_lines_with_context() {
    let d = diff("a\nb\nc\n", "a\nB\nc\n");
    assert!(d.contains("--- stored plan\n+++ new plan\n"), "{d}");
    assert!(d.contains("-b\n+B\n"), "{d}");
    assert_eq!(diff("a\n", "a\n"), "");
}

#[test]
fn the_gates_whose_definition_changes_are_named_for_their_memory_to_be_reset() {
    let old = compiled(PLAN);
    let slices = State::Slices(0);
    // The same plan: nothing to reset.
    assert!(changed_gates(&old, &old, slices).is_empty());
    // A threshold, a `for`, a query: each is a new definition of that gate only.
    let threshold = PLAN.replace("pass_if: \"< 0.01\"", "pass_if: \"< 0.02\"");
    let held_for = PLAN.replace("pass_if: \"< 0.01\" }", "pass_if: \"< 0.01\", for: 5m }");
    for yaml in [&threshold, &held_for] {
        assert_eq!(
            changed_gates(&old, &compiled(yaml), slices),
            vec![("error ratio low".to_string(), "exit".to_string())]
        );
    }
    // So is a new `for_max_gap` (the span it gathered may hold gaps the new bound refuses).
    let gap = held_for.replace("for: 5m }", "for: 5m, for_max_gap: 1m }");
    assert_eq!(
        changed_gates(&compiled(&held_for), &compiled(&gap), slices),
        vec![("error ratio low".to_string(), "exit".to_string())]
    );
    let query = PLAN.replace(
        "query: app_error_ratio_new, pass_if: \"< 0.05\"",
        "query: app_error_ratio, pass_if: \"< 0.05\"",
    );
    assert_eq!(
        changed_gates(&old, &compiled(&query), slices),
        vec![("error ratio breach".to_string(), "guard".to_string())]
    );
    // A change in another phase resets nothing of this one.
    assert!(changed_gates(&old, &compiled(&threshold), State::Synthetic).is_empty());
    // A gate renamed: the old name's memory and the new one's (none, or a stale one) go.
    let renamed = PLAN.replace("name: error ratio low", "name: error ratio small");
    assert_eq!(
        changed_gates(&old, &compiled(&renamed), slices),
        vec![
            ("error ratio low".to_string(), "exit".to_string()),
            ("error ratio small".to_string(), "exit".to_string())
        ]
    );
    // No phase (planned): nothing.
    assert!(changed_gates(&old, &compiled(&threshold), State::Planned).is_empty());
}

/// Issue 55: changing a judge's tolerance mid-step forgot its memory, and with it its FAIL. Its
/// settings alone keep the memory (the ledger starts a new count itself, keeping a FAIL); its
/// queries changed still reset it.
#[test]
fn a_judges_tolerance_change_keeps_its_memory_so_a_fail_is_not_erased() {
    let slices = State::Slices(0);
    let judge = |tolerance: f64, failures: &str| crate::plan::Gate {
        name: "errors vs old".into(),
        source: "prom".into(),
        check: crate::plan::Check::Judge(Box::new(crate::plan::JudgeCheck {
            form: crate::plan::JudgeForm::Counts {
                new: crate::plan::JudgeSide {
                    events: "e_new".into(),
                    failures: failures.into(),
                },
                old: crate::plan::JudgeSide {
                    events: "e_old".into(),
                    failures: "f_old".into(),
                },
            },
            config: crate::judge::Config {
                tolerance,
                alpha: 0.01,
                alpha_pass: 0.01,
                confidence: None,
                min_events: 1_000,
                min_failures: 10,
                max_duration: std::time::Duration::from_secs(3600),
            },
        })),
        hold_for: None,
        for_max_gap: None,
        min_samples: 1,
    };
    let with = |gate: crate::plan::Gate| {
        let mut p = compiled(PLAN);
        for phase in &mut p.phases {
            if phase.kind == crate::plan::PhaseKind::Slices {
                phase.guard.push(gate.clone());
            }
        }
        p
    };
    let old = with(judge(0.2, "f_new"));
    assert!(changed_gates(&old, &with(judge(3.0, "f_new")), slices).is_empty());
    assert_eq!(
        changed_gates(&old, &with(judge(0.2, "f_new_total")), slices),
        vec![("errors vs old".to_string(), "guard".to_string())]
    );
}

/// Regression (issue 31): the refusal of a moved etcd publisher quoted the endpoints as written,
/// inline password included, and `plan apply` printed it.
#[test]
fn a_moved_etcd_endpoint_is_refused_without_its_password() {
    let with = |endpoint: &str| {
        PLAN.replace(
            "routing: { file: local.routing.json }",
            &format!(
                "routing: {{ file: local.routing.json, etcd: {{ endpoint: \"{endpoint}\", key: /k }} }}"
            ),
        )
    };
    let got = refusals(
        &compiled(&with("http://root:0ldEtcdPw@127.0.0.1:2379")),
        &compiled(&with("http://root:N3wEtcdPw@127.0.0.1:2380")),
        &at(State::Planned),
    );
    let shown: Vec<String> = got.iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(
        shown[0].contains("(http://***@127.0.0.1:2379 key /k -> http://***@127.0.0.1:2380 key /k)"),
        "{shown:?}"
    );
}

/// Regression (issue 31): the diff `plan apply` prints and journals showed inline passwords
/// and tokens; every credential of both plans' secret values is masked, the rest stays.
#[test]
fn the_shown_diff_masks_both_plans_secrets() {
    let with = |password: &str, token: &str| {
        PLAN.replace(
            "url: \"amqp://127.0.0.1:5672/%2f\"",
            &format!("url: \"amqp://guest:{password}@127.0.0.1:5672/%2f\""),
        )
        .replace(
            "routing: { file: local.routing.json }",
            &format!(
                "routing: {{ file: local.routing.json }}\nnotify: {{ webhooks: [ {{ url: \"http://127.0.0.1:9/h\", token: {token} }} ] }}"
            ),
        )
    };
    let (old, new) = (
        with("0ldPassw0rd", "0ldT0kenX"),
        with("N3wPassw0rd", "N3wT0kenX"),
    );
    let shown = masked_diff(&old, &new, [&compiled(&old), &compiled(&new)]);
    for secret in ["0ldPassw0rd", "N3wPassw0rd", "0ldT0kenX", "N3wT0kenX"] {
        assert!(!shown.contains(secret), "{secret} in\n{shown}");
    }
    assert!(
        shown.contains("-  old: { name: old, kind: amqp, url: \"amqp://***@127.0.0.1:5672/%2f\""),
        "{shown}"
    );
    assert!(shown.contains("token: *** }"), "{shown}");
    assert_eq!(diff(&old, &new).lines().count(), shown.lines().count());
}

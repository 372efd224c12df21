//! Time paused never counts (issue 56): a resume restarts the step's `observe` /
//! `min_duration` and its exit gates' `for:`, and its reply says when the step can advance at
//! the earliest.

use std::time::Duration;

use crate::common::daemon_world::DaemonWorld;
use crate::common::{self, T0};
use queue_migrate::controller::Actor;
use queue_migrate::daemon::tick::{Action, tick};
use queue_migrate::indicators::fetch::Fetcher;
use queue_migrate::machine::{Command, State};
use queue_migrate::plan::BreachAction;
use queue_migrate::store::traits::*;
use serde_json::json;

/// plans/local.yaml with `observe: 10s`, `for: 30s` on the slices' exit gate and a breach that
/// pauses (the step stays where it is).
fn plan() -> String {
    let plan = include_str!("../../../plans/local.yaml");
    let held = plan
        .replacen(
            r#"pass_if: "< 0.01" }"#,
            r#"pass_if: "< 0.01", for: 30s }"#,
            1,
        )
        .replacen("observe: 1m", "observe: 10s", 1)
        .replacen("on_breach: rollback", "on_breach: pause", 1);
    assert_eq!(held.matches("for: 30s").count(), 1);
    assert!(held.contains("observe: 10s") && held.contains("on_breach: pause"));
    held
}

/// Regression (issue 56): a guard breach paused a step; during 60 s paused the exit gate's
/// `for: 30s` kept counting; 5 s after the resume the daemon advanced. Now the `for:` and the
/// step's `observe` count from the resume, and the resume says when it can advance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_restarts_for_and_observe_time_paused_never_counts() {
    let w = DaemonWorld::new(&plan()).await;
    let s = 1_000;
    let entered = T0 * 1000 + 60 * s;
    common::enter_first_slice(&w.store, "local", entered).await;
    let shared = w.leader_at(entered);

    assert_eq!(
        tick(&shared, "local", entered + 10 * s).await.unwrap(),
        Action::Waiting
    );
    // The guard breaches: the step is paused where it is.
    w.indicators.set("app_error_ratio_new", 0.2);
    assert_eq!(
        tick(&shared, "local", entered + 20 * s).await.unwrap(),
        Action::Breach {
            action: BreachAction::Pause
        }
    );
    assert!(w.store.get("local").await.unwrap().paused);
    // Fixed: for 60 s paused, every exit gate holds (its `for:` would be met twice over).
    w.indicators.set("app_error_ratio_new", 0.001);
    for at in (30..=90).step_by(10) {
        tick(&shared, "local", entered + at * s).await.unwrap();
    }
    let paused = w.store.get("local").await.unwrap();
    assert_eq!((paused.state, paused.paused), (State::Slices(0), true));

    // Resumed: the reply says when it can advance at the earliest (`for: 30s` from now).
    let resumed_at = entered + 95 * s;
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let applied = w
        .controller(&fetcher)
        .command(
            "local",
            &Command::Resume,
            &Actor {
                name: "oncall".into(),
                reason: Some("fixed".into()),
            },
            json!({}),
            resumed_at,
        )
        .await
        .unwrap();
    let earliest = queue_migrate::time::rfc3339(resumed_at + 30 * s);
    assert_eq!(
        applied.earliest_advance_at.as_deref(),
        Some(earliest.as_str())
    );
    let served = serde_json::to_value(&applied).unwrap();
    assert_eq!(served["earliest_advance_at"], earliest.as_str());

    // 5 s, then 25 s after the resume: the `for:` has held 5 s and 25 s of its 30 s since the
    // resume (its observe, 10 s, is met at the second): it stays.
    for after in [5, 25] {
        let action = tick(&shared, "local", resumed_at + after * s)
            .await
            .unwrap();
        assert_eq!(action, Action::Waiting, "{after}s after the resume");
        let r = w.store.get("local").await.unwrap();
        assert_eq!((r.state, r.paused), (State::Slices(0), false));
    }
    let gate = w
        .store
        .latest_evaluations("local", entered, &[("error ratio low", "exit")])
        .await
        .unwrap();
    assert_eq!(
        gate[0].held_since_ms,
        Some(resumed_at),
        "counted from the resume"
    );
    // 30 s after the resume, as the reply said: it advances.
    assert_eq!(
        tick(&shared, "local", resumed_at + 30 * s).await.unwrap(),
        Action::Advanced {
            to: State::Slices(1)
        }
    );
}

/// The minimum time (`observe`) alone restarts at a resume too: a step paused past its
/// `observe` does not advance at the first round after the resume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_restarts_observe() {
    let plan = include_str!("../../../plans/local.yaml").to_string();
    let w = DaemonWorld::new(&plan).await;
    let s = 1_000;
    let entered = T0 * 1000 + 60 * s;
    common::enter_first_slice(&w.store, "local", entered).await;
    let shared = w.leader_at(entered);
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let c = w.controller(&fetcher);
    let actor = Actor {
        name: "oncall".into(),
        reason: Some("a look".into()),
    };
    c.command("local", &Command::Pause, &actor, json!({}), entered + 5 * s)
        .await
        .unwrap();
    // Paused for two minutes: `observe: 1m` would be met twice over.
    for at in [30, 60, 90, 120] {
        tick(&shared, "local", entered + at * s).await.unwrap();
    }
    let resumed_at = entered + 125 * s;
    let applied = c
        .command("local", &Command::Resume, &actor, json!({}), resumed_at)
        .await
        .unwrap();
    assert_eq!(
        applied.earliest_advance_at,
        Some(queue_migrate::time::rfc3339(resumed_at + 60 * s))
    );
    assert_eq!(
        tick(&shared, "local", resumed_at + 5 * s).await.unwrap(),
        Action::Waiting
    );
    let loaded = c.load("local").await.unwrap();
    let view = c
        .status_view(&loaded, resumed_at + 5 * s)
        .await
        .unwrap()
        .standing
        .sentence;
    assert!(view.contains("minimum time, 55s left of 1m"), "{view}");
    assert_eq!(
        tick(&shared, "local", resumed_at + 60 * s).await.unwrap(),
        Action::Advanced {
            to: State::Slices(1)
        }
    );
}

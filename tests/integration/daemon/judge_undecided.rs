//! A judge that cannot decide within its `max_duration` (issue 55): the daemon pauses the
//! migration for a person, journaled with the judge's reason; a resume gives the judge a new
//! test, so it is not paused again until that test runs out of time too.

use std::time::Duration;

use crate::common::daemon_world::DaemonWorld;
use crate::common::{self, T0};
use queue_migrate::controller::Actor;
use queue_migrate::daemon::tick::{Action, tick};
use queue_migrate::indicators::fetch::Fetcher;
use queue_migrate::machine::{Command, State};
use queue_migrate::store::traits::*;
use serde_json::json;

/// plans/local.yaml whose slices exit gate is a judge of counters that never grow (it cannot
/// decide) with `max_duration: 1m`; it reads their raw samples (the fake Prometheus answers a
/// range selector with one).
fn plan() -> String {
    let plan = include_str!("../../../plans/local.yaml");
    let judged = plan.replacen(
        r#"- { name: error ratio low, source: prom, query: app_error_ratio_new, pass_if: "< 0.01" }"#,
        "- name: new vs old failures\n        source: prom\n        judge:\n          \
         new: { events: 'sum(increase(judge_new_events[$step]))', failures: 'sum(increase(judge_new_failures[$step]))' }\n          \
         old: { events: 'sum(increase(judge_old_events[$step]))', failures: 'sum(increase(judge_old_failures[$step]))' }\n          \
         tolerance: 0.2\n          min_events: 1\n          max_duration: 1m",
        1,
    );
    assert!(
        judged.contains("max_duration: 1m"),
        "the plan's exit line changed"
    );
    judged
}

/// Regression (issue 55): an INCONCLUSIVE judge held the advance, said "a person decides" and
/// paused nothing: nobody was asked, and the migration sat in its step for as long as nobody
/// looked. Now the daemon pauses it, once per test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inconclusive_judge_pauses_the_migration_for_a_person() {
    let w = DaemonWorld::new(&plan()).await;
    for (metric, value) in [
        ("judge_new_events", 100.0),
        ("judge_new_failures", 1.0),
        ("judge_old_events", 100.0),
        ("judge_old_failures", 1.0),
    ] {
        w.indicators.set(metric, value);
    }
    let s = 1_000;
    let entered = T0 * 1000 + 60 * s;
    common::enter_first_slice(&w.store, "local", entered).await;
    let shared = w.leader_at(entered);

    // Deciding for its minute: nothing happens.
    for at in (10..=50).step_by(10) {
        let action = tick(&shared, "local", entered + at * s).await.unwrap();
        assert_eq!(action, Action::Waiting, "{at}s into the step");
    }
    // The step's first count of the judge's test: its ledger says so.
    let ledger = || async {
        let rows = w
            .store
            .latest_evaluations("local", entered, &[("new vs old failures", "exit")])
            .await
            .unwrap();
        let text = rows[0].judge_ledger.clone().expect("a judge's ledger");
        serde_json::from_str::<queue_migrate::judge::Ledger>(&text).unwrap()
    };
    let before = ledger().await;
    assert_eq!(before.count, 0);

    // Past its minute, undecided: paused where it is, the judge's reason journaled.
    assert_eq!(
        tick(&shared, "local", entered + 70 * s).await.unwrap(),
        Action::PausedUndecided
    );
    let r = w.store.get("local").await.unwrap();
    assert_eq!((r.state, r.paused), (State::Slices(0), true));
    let history = w.store.journal("local").await.unwrap();
    let pause = history.last().unwrap();
    assert_eq!(pause.command, "pause");
    let why = pause.reason.clone().unwrap_or_default();
    assert!(
        why.contains("a judge could not decide: new vs old failures (INCONCLUSIVE after 1m"),
        "{why}"
    );
    // Paused, it waits: no second pause, no advance.
    assert_eq!(
        tick(&shared, "local", entered + 80 * s).await.unwrap(),
        Action::Waiting
    );

    // A person resumes: the judge tests again from the resume, and is not paused at once.
    let resumed_at = entered + 90 * s;
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    w.controller(&fetcher)
        .command(
            "local",
            &Command::Resume,
            &Actor {
                name: "oncall".into(),
                reason: Some("watching it".into()),
            },
            json!({}),
            resumed_at,
        )
        .await
        .unwrap();
    assert_eq!(
        tick(&shared, "local", resumed_at + 10 * s).await.unwrap(),
        Action::Waiting
    );
    assert!(!w.store.get("local").await.unwrap().paused);
    // Issue 55 item 2: the resumed test is the step's second count of the same judge x step,
    // on a smaller share of its budget (all the counts of a step spend at most its alpha), not a
    // fresh one: resuming until it passes cannot buy a PASS.
    // (The daemon's own pause was a commit in the step too: it began a count of its own.)
    let after = ledger().await;
    assert!(after.count >= 1, "{after:?}");
    assert_eq!(after.alpha, before.alpha);
    let spent = |count| queue_migrate::judge::betting::spend(before.alpha, count);
    assert!(
        spent(after.count) < spent(0) / 4.0,
        "{} vs {}",
        spent(after.count),
        spent(0)
    );
    assert!(
        before.alpha < 0.01,
        "the plan's 1% is split across its judge x steps"
    );
    // Its new test runs out of time too: paused again.
    assert_eq!(
        tick(&shared, "local", resumed_at + 70 * s).await.unwrap(),
        Action::PausedUndecided
    );
}

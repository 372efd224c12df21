//! Issue 54, time: a step of the database host's clock (+2 min) let `observe 60s` + `for: 60s`
//! pass in 10 s, because the daemon's clock took the step. `observe`, `min_duration` and `for:`
//! are now measured on the monotonic clock while one daemon runs them; the step is logged and
//! counted in `/metrics`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common;
use common::daemon_world::DaemonWorld;
use common::hooked::Hooked;
use queue_migrate::daemon::DaemonClock;
use queue_migrate::store::traits::*;

/// How far the database host's clock steps forward.
const STEP_MS: i64 = 120_000;

async fn metrics(d: &common::daemon_world::Running) -> String {
    reqwest::get(d.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Regression (issue 54): in `slices[0]` (`observe: 1m`, its exit gate `for: 1m`), the database's
/// clock steps 2 min forward: the daemon does not advance on it; the step is counted in
/// `/metrics` with the lag of the gates' clock behind the database's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_of_the_database_clock_does_not_shorten_observe_or_for() {
    let plan = include_str!("../../../plans/local.yaml").replacen(
        r#"pass_if: "< 0.01" }"#,
        r#"pass_if: "< 0.01", for: 1m }"#,
        1,
    );
    // Transitions stamped on the database's clock, as on a real host.
    let w = DaemonWorld::on_database_clock(&plan).await;
    let hooked = Hooked::new(w.store.clone());
    let step = hooked.lease_clock_step_ms.clone();
    let calls = hooked.lease_calls_at.clone();
    // The daemon's own clock: the database's, followed on the monotonic clock.
    let d = w
        .start_over(hooked, |c| {
            c.clock = DaemonClock::on_host(Arc::new(queue_migrate::time::now_ms), None);
        })
        .await;
    d.leading().await;
    w.wait_for("slices[0]", |s| s.1 == Some(0)).await;
    let text = metrics(&d).await;
    assert!(
        text.contains("\nqueue_migrate_db_clock_steps_total 0\n"),
        "{text}"
    );

    // The database host's clock steps 2 min forward; two lease samples see it.
    step.store(STEP_MS, Ordering::SeqCst);
    let seen = calls.lock().unwrap().len();
    for _ in 0..400 {
        if calls.lock().unwrap().len() >= seen + 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(calls.lock().unwrap().len() >= seen + 2, "no lease samples");
    d.settle().await;
    d.settle().await;
    assert_eq!(
        w.state().await,
        ("slices".to_string(), Some(0), false),
        "observe 1m and for: 1m passed on the step, not on time"
    );
    let text = metrics(&d).await;
    assert!(
        text.contains("\nqueue_migrate_db_clock_steps_total 1\n"),
        "{text}"
    );
    let lag: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("queue_migrate_gates_clock_lag_seconds "))
        .unwrap()
        .parse()
        .unwrap();
    assert!((110.0..=121.0).contains(&lag), "lag {lag}");
    // The gates' evaluations go on, on the monotonic clock: the last one is not 2 min ahead.
    let entered = w.store.get("local").await.unwrap().entered_at_ms;
    let last = w
        .store
        .latest_evaluations("local", entered, &[("error ratio low", "exit")])
        .await
        .unwrap();
    let at = last[0].at_ms;
    assert!(
        at < queue_migrate::time::now_ms() + 10_000,
        "evaluated at {at}, on the stepped clock"
    );
    d.stop().await;
}

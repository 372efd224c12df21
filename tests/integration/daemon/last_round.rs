//! Issue 56: no view contradicts the last round. 4 s after a guard breach, `status` said "no
//! guard fails now" while the guard read 0.2: the breach's rollback enters a step of its own,
//! whose guards no round had evaluated yet, and every view (`status`, `--json`, the API, the
//! console: one `status_view`) read only that step's evaluations. The round that paused it had
//! read the guard at 0.2, and its journal entry says so.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use crate::common::daemon_world::DaemonWorld;
use crate::common::{T0, daemon_config};
use queue_migrate::controller::{Actor, AdvanceOptions};
use queue_migrate::daemon::Shared;
use queue_migrate::daemon::tick::{Action, Read, tick_in_round};
use queue_migrate::indicators::fetch::Fetcher;

/// Regression (issue 56): right after a breach rolled `slices[1]` back to `slices[0]` and paused
/// it, before any round evaluated `slices[0]`, the views named no failing guard ("no guard fails
/// now") though the round that paused it read 0.2. They now say what that round read; once a
/// round evaluates the guard in the new step, that fresher reading is what they say.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_said_no_guard_fails_now_4s_after_a_breach_while_the_guard_read_0_2() {
    let w = DaemonWorld::new(include_str!("../../../plans/local.yaml")).await;
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let actor = Actor {
        name: "alice".into(),
        reason: Some("to slices[1]".into()),
    };
    let mut now = T0 * 1000;
    while w.state().await.1 != Some(1) {
        now += 1_000;
        let force = AdvanceOptions {
            force: true,
            ..AdvanceOptions::default()
        };
        w.controller(&fetcher)
            .advance("local", &force, &actor, now)
            .await
            .unwrap();
    }
    // 30 s into slices[1], the guard reads 0.2.
    now += 30_000;
    w.indicators.set("app_error_ratio_new", 0.2);
    let clock = Arc::new(AtomicI64::new(now));
    let shared = Shared::new(
        w.store.clone(),
        daemon_config(clock.clone()),
        w.resolve.clone(),
    )
    .unwrap();
    shared.leader.store(true, Ordering::SeqCst);
    let breach = tick_in_round(&shared, &shared.fetcher, None, Read::Store("local"), now)
        .await
        .unwrap();
    assert!(matches!(breach, Action::Breach { .. }), "{breach:?}");
    assert_eq!(w.state().await, ("slices".into(), Some(0), true));

    // 4 s later, as `status`, `status --json`, the API and the console read it.
    let c = w.controller(&fetcher);
    let loaded = c.load("local").await.unwrap();
    let view = c.status_view(&loaded, now + 4_000).await.unwrap();
    let sentence = &view.standing.sentence;
    assert!(!sentence.contains("no guard fails now"), "{sentence}");
    assert!(
        sentence.contains("guard error ratio breach failed in the round that paused it (0.2 at ")
            && sentence.ends_with("), not evaluated since"),
        "{sentence}"
    );
    let json = serde_json::to_value(&view).unwrap();
    let person = &json["standing"]["person"];
    assert_eq!(person["failing_guard"], "error ratio breach", "{json}");
    assert_eq!(person["last_round"]["value"], 0.2, "{json}");
    assert_eq!(person["guards_evaluated"], false, "{json}");

    // The next round reads the guard in slices[0], passing: the fresher reading is the truth.
    w.indicators.set("app_error_ratio_new", 0.001);
    let later = now + 15_000;
    clock.store(later, Ordering::SeqCst);
    tick_in_round(&shared, &shared.fetcher, None, Read::Store("local"), later)
        .await
        .unwrap();
    let loaded = c.load("local").await.unwrap();
    let view = c.status_view(&loaded, later + 1_000).await.unwrap();
    assert!(
        view.standing.sentence.ends_with("; no guard fails now"),
        "{}",
        view.standing.sentence
    );
    assert_eq!(w.state().await, ("slices".into(), Some(0), true));
}

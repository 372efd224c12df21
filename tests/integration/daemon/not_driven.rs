//! Issue 56: the standing knows whether anything drives the migration. The daemon stopped; 60 s
//! later `status` still said "moving: every gate passes" from readings taken before.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::daemon_world::DaemonWorld;
use queue_migrate::indicators::fetch::Fetcher;

/// Regression (issue 56): while the daemon leads, its API says where the migration stands by
/// its readings, each with its age; once it stopped (its lease given up), every view says
/// nothing drives it, and what its last readings said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_the_daemon_stopped_the_standing_says_not_driven() {
    let w = DaemonWorld::new(include_str!("../../../plans/local.yaml")).await;
    let d = w.start(|_| {}).await;
    d.leading().await;
    // In slices[0], held by `observe: 1m` (the daemon's clock stands still).
    d.climb_until(&w, |s| s.1 == Some(0)).await;
    let served: serde_json::Value = reqwest::get(d.url("/v1/migrations/local"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_ne!(served["standing"]["kind"], "not_driven", "{served}");
    assert!(
        served["gates"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["age_ms"].as_i64().is_some_and(|a| a >= 0)),
        "{served}"
    );
    let now = d.clock.load(Ordering::SeqCst);
    d.stop().await;

    // A minute later, as `migrate status` reads it.
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let c = w.controller(&fetcher);
    let loaded = c.load("local").await.unwrap();
    let view = c.status_view(&loaded, now + 60_000).await.unwrap();
    let standing = serde_json::to_value(&view.standing).unwrap();
    assert_eq!(standing["kind"], "not_driven", "{standing}");
    assert_eq!(standing["holder"], serde_json::Value::Null, "{standing}");
    assert!(
        view.standing
            .sentence
            .starts_with("not driven: no daemon has evaluated it for 1m"),
        "{}",
        view.standing.sentence
    );
    assert!(
        view.standing
            .sentence
            .contains("start `migrate run` or advance by hand; its last readings: "),
        "{}",
        view.standing.sentence
    );
    assert!(view.gates.iter().all(|g| g.age_ms >= Some(60_000)));
}

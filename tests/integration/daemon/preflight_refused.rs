//! The daemon's preflight before `synthetic` on the real NATS of `scripts/services.sh` (issue
//! 58): a migration whose new broker keeps its stream in memory is refused, paused with the
//! setting and its fix named, until the plan waives that check; then it enters `synthetic`,
//! the waiver journaled with the advance.

use crate::common;

use std::time::Duration;

use common::daemon_world::DaemonWorld;
use queue_migrate::controller::Actor;
use queue_migrate::indicators::fetch::Fetcher;
use queue_migrate::machine::Command;
use queue_migrate::store::traits::*;

/// plans/local.yaml with its new broker on the test NATS, stream `stream`.
fn plan(nats: &str, stream: &str, extra_waiver: &str) -> String {
    include_str!("../../../plans/local.yaml")
        .replace("nats://127.0.0.1:4222", nats)
        .replace("stream: LOCAL", &format!("stream: {stream}"))
        .replace(
            "      - { check: nats.replicas,",
            &format!("{extra_waiver}      - {{ check: nats.replicas,"),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_NATS_URL (scripts/services.sh start nats)"]
async fn a_migration_onto_a_memory_stream_is_refused_before_synthetic_until_waived() {
    use async_nats::jetstream::{self, stream};
    let nats = common::server_url("QM_TEST_NATS_URL");
    let name = format!("QM_PREFLIGHT_DAEMON_{}", std::process::id());
    let js = jetstream::new(async_nats::connect(&nats).await.unwrap());
    let _ = js.delete_stream(&name).await;
    js.create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![name.clone()],
        storage: stream::StorageType::Memory,
        ..Default::default()
    })
    .await
    .unwrap();

    let w = DaemonWorld::new(&plan(&nats, &name, "")).await;
    let d = w.start(|_| {}).await;
    d.climb_until(&w, |s| s.2 || s.0 == "synthetic").await;
    assert_eq!(
        w.state().await,
        ("consume_dual".into(), None, true),
        "refused before synthetic, paused"
    );
    let journal = w.store.journal("local").await.unwrap();
    let pause = journal.last().unwrap();
    assert_eq!(pause.command, "pause");
    let reason = pause.reason.clone().unwrap_or_default();
    for needle in [
        "preflight refused",
        "nats.storage",
        &format!("stream {name} storage is memory"),
        "--storage file",
        "preflight.new.waive.nats.storage",
    ] {
        assert!(reason.contains(needle), "{needle:?} not in {reason:?}");
    }
    // Resumed without a waiver: refused again, never entering synthetic.
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let person = |why: &str| Actor {
        name: "alice".into(),
        reason: Some(why.into()),
    };
    let c = w.controller(&fetcher);
    let now = d.clock.load(std::sync::atomic::Ordering::SeqCst);
    c.command(
        "local",
        &Command::Resume,
        &person("try again"),
        serde_json::json!({}),
        now,
    )
    .await
    .unwrap();
    d.climb_until(&w, |s| s.2 || s.0 == "synthetic").await;
    assert_eq!(w.state().await, ("consume_dual".into(), None, true));

    // Waived, with its reason: it enters synthetic, the waiver journaled with the advance.
    let waiver = "      - { check: nats.storage, reason: \"a test stream in memory\" }\n";
    std::fs::write(w.dir.path().join("local.yaml"), plan(&nats, &name, waiver)).unwrap();
    let now = d.clock.load(std::sync::atomic::Ordering::SeqCst);
    let applied = c
        .plan_apply(
            &w.dir.path().join("local.yaml"),
            &person("accept memory"),
            now,
            false,
        )
        .await
        .unwrap();
    assert!(applied.version.is_some(), "{applied:?}");
    w.indicators.set("app_probe_ok", 0.0); // park it in synthetic once there
    c.command(
        "local",
        &Command::Resume,
        &person("waived"),
        serde_json::json!({}),
        now,
    )
    .await
    .unwrap();
    d.climb_until(&w, |s| s.0 == "synthetic" || s.2).await;
    let _ = js.delete_stream(&name).await;
    assert_eq!(w.state().await, ("synthetic".into(), None, false));
    let journal = w.store.journal("local").await.unwrap();
    let entered = journal
        .iter()
        .rev()
        .find(|e| e.to.state.to_string() == "synthetic")
        .unwrap();
    let findings = entered.evidence["preflight"]["findings"]
        .as_array()
        .unwrap();
    let storage = findings
        .iter()
        .find(|f| f["check"] == "nats.storage")
        .unwrap();
    assert_eq!(storage["outcome"], "waived", "{storage}");
    assert_eq!(storage["waiver"], "a test stream in memory");
    assert_eq!(storage["value"], "memory");
    d.stop().await;
}

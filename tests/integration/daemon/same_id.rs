//! Two processes started with one `--id` (issue 54, item 3): a replacement pod with a stable
//! name. Each process instance holds the lease as `ID#INSTANCE`, so exactly one leads; the other
//! stands by (it serves, it does not crash) and takes over once the lease is given back.

use crate::common;

use std::time::{Duration, Instant};

use common::daemon_world::{DaemonWorld, Running};

fn plan() -> String {
    include_str!("../../../plans/local.yaml").to_string()
}

/// `/healthz` of `d`.
async fn health(http: &reqwest::Client, d: &Running) -> serde_json::Value {
    http.get(d.url("/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// `/readyz` of `d`: its status and body.
async fn ready(http: &reqwest::Client, d: &Running) -> (u16, serde_json::Value) {
    let r = http.get(d.url("/readyz")).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// Regression (issue 54, item 3): the lease's holder was the `--id` alone, so a second daemon
/// started with the same `--id` renewed the first one's lease: both were ready and both acted
/// (every webhook sent twice, under one epoch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_with_one_id_on_one_store_exactly_one_leads() {
    let w = DaemonWorld::new(&plan()).await;
    let first = w.start(|_| {}).await;
    first.leading().await;
    // The same --id (`daemon_config`'s holder), another process instance.
    let second = w.start(|_| {}).await;
    let http = reqwest::Client::new();
    // Over more than a lease period (3 s, renewed every second): the first leads throughout,
    // the second never.
    let until = Instant::now() + Duration::from_secs(4);
    let mut looks = 0;
    while Instant::now() < until {
        let (a, b) = (health(&http, &first).await, health(&http, &second).await);
        assert_eq!(a["holder"], b["holder"], "one --id");
        assert_eq!(a["leader"], true, "the first lost its lease: {a} {b}");
        assert_eq!(
            b["leader"], false,
            "two daemons with one --id both lead: {a} {b}"
        );
        let ((ra, _), (rb, body)) = (ready(&http, &first).await, ready(&http, &second).await);
        assert_eq!((ra, rb), (200, 503), "{body}");
        looks += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(looks > 5);
    let (a, b) = (health(&http, &first).await, health(&http, &second).await);
    assert_ne!(
        a["instance"], b["instance"],
        "each process is an instance of its own"
    );
    assert!(a["epoch"].as_i64().unwrap() >= 1, "{a}");
    // The standby is alive and waiting: the lease given back, it takes over under a new epoch.
    let epoch = a["epoch"].as_i64().unwrap();
    first.stop().await;
    second.leading().await;
    let b = health(&http, &second).await;
    assert!(b["epoch"].as_i64().unwrap() > epoch, "{b}");
    let metrics = http
        .get(second.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let instance = b["instance"].as_str().unwrap();
    assert!(
        metrics.contains(&format!(
            "queue_migrate_instance_info{{id=\"daemon-test\",instance=\"{instance}\"}} 1"
        )),
        "{metrics}"
    );
    second.stop().await;
}

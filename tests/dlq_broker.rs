//! `migrate dlq triage --from-broker`: the old broker's dead-letter queue read without consuming
//! it, on real servers (NATS JetStream and Redis Streams browse; RabbitMQ refuses, saying why and
//! what to do). Runs per broker when `QM_TEST_NATS_URL` / `QM_TEST_REDIS_URL` / `QM_TEST_AMQP_URL`
//! is set (`scripts/services.sh start nats redis rabbitmq`), and says so when skipped.
#![cfg(feature = "brokers")]

mod common;

use common::Bench;
use queue_migrate::brokers::{Adapter, Kind, Message};

fn envelope(class: &str, message: &str, at: &str) -> String {
    serde_json::json!({
        "payload": {"orderId": "o-1"},
        "errorClass": class,
        "errorMessage": message,
        "consumerVersion": "1.4.2",
        "traceId": "t-1",
        "attempts": 5,
        "firstAttemptAt": at,
        "deadLetteredAt": at,
    })
    .to_string()
}

fn bench_for(kind: &str, url: &str, dlq: &str) -> Bench {
    let plan = include_str!("../plans/local.yaml").replace(
        "old: { name: old, kind: amqp, url: \"amqp://127.0.0.1:5672/%2f\", queue: local, dead_letter: local.dlq }",
        &format!("old: {{ name: old, kind: {kind}, url: \"{url}\", queue: local, dead_letter: {dlq} }}"),
    );
    assert!(plan.contains(dlq), "the plan's old broker line changed");
    let bench = Bench::with_plan(&plan);
    bench.init();
    bench
}

fn url(var: &str) -> Option<String> {
    let url = std::env::var(var).ok().filter(|u| !u.is_empty());
    if url.is_none() {
        eprintln!("skipped: set {var} to run against a real server");
    }
    url
}

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        queue_migrate_time_ms()
    )
}

fn queue_migrate_time_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

async fn browse_and_triage(kind: Kind, var: &str, plan_kind: &str) {
    let Some(url) = url(var) else { return };
    let dlq = unique("qm-dlq");
    let adapter = Adapter::connect(kind, &url).await.unwrap();
    adapter.declare(&dlq).await.unwrap();
    let lines = [
        envelope(
            "TimeoutError",
            "upstream timed out after 3000 ms",
            "2026-11-01T10:00:00.000Z",
        ),
        envelope(
            "TimeoutError",
            "upstream timed out after 4500 ms",
            "2026-11-01T11:00:00.000Z",
        ),
        envelope(
            "ValidationError",
            "field amount is negative",
            "2026-11-02T09:00:00.000Z",
        ),
    ];
    for line in &lines {
        adapter
            .publish(&dlq, &Message::new(line.as_bytes().to_vec()))
            .await
            .unwrap();
    }
    let bench = bench_for(plan_kind, &url, &dlq);
    // The CLI blocks this worker thread while it runs; the runtime has others.
    let report = bench
        .ok(
            &[
                "dlq",
                "triage",
                "--from-broker",
                "local",
                "--format",
                "json",
            ],
            0,
        )
        .json();
    let groups = report.as_array().cloned().unwrap_or_default();
    assert_eq!(groups.len(), 2, "{report}");
    let counts: Vec<u64> = groups
        .iter()
        .map(|g| g["count"].as_u64().unwrap())
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), 3, "{report}");
    // Nothing was consumed: the queue still holds the three messages, in order.
    let again = adapter.browse(&dlq, 10).await.unwrap();
    assert_eq!(again.len(), 3);
    assert_eq!(again[0].payload, lines[0].as_bytes());
}

#[tokio::test(flavor = "multi_thread")]
async fn nats_dead_letters_are_triaged_without_being_consumed() {
    browse_and_triage(Kind::Nats, "QM_TEST_NATS_URL", "nats").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_dead_letters_are_triaged_without_being_consumed() {
    browse_and_triage(Kind::Redis, "QM_TEST_REDIS_URL", "redis").await;
}

#[test]
fn rabbitmq_cannot_be_browsed_and_the_error_says_what_to_do() {
    let Some(url) = url("QM_TEST_AMQP_URL") else {
        return;
    };
    let bench = bench_for("rabbitmq", &url, "qm-dlq-rabbit");
    let r = bench.ok(&["dlq", "triage", "--from-broker", "local"], 2);
    assert!(
        r.stderr.contains("shovel") && r.stderr.contains("triage"),
        "{}",
        r.stderr
    );
}

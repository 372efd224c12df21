//! `migrate dlq` on real servers: `triage --from-broker` reads the old broker's dead-letter queue
//! without consuming it (NATS JetStream and Redis Streams browse; RabbitMQ refuses, saying why and
//! what to do), and `replay --migration` publishes each dead letter to the side its key routes
//! to. Runs per broker when `QM_TEST_NATS_URL` / `QM_TEST_REDIS_URL` / `QM_TEST_AMQP_URL` /
//! `QM_TEST_KAFKA_BOOTSTRAP` is set (`scripts/services.sh start nats redis rabbitmq kafka`);
//! ignored unless asked for (`--include-ignored`). Kafka's: [`kafka`].
#![cfg(feature = "brokers")]

use crate::common;

use common::Bench;
use common::dlq_bench::{DlqBench, OLD_BROKER_LINE, drain_rabbitmq, on_store, preflight_waived};

use queue_migrate::brokers::{Adapter, Kind, Message};
use queue_migrate::stamp::{RouteLabel, RouteStamp};

/// Dead letters on Kafka (`QM_TEST_KAFKA_BOOTSTRAP`).
#[cfg(feature = "kafka")]
mod kafka;

/// The dead-letter commands and the bridge over the real broker's SASL_SSL listener.
#[cfg(feature = "kafka")]
mod kafka_sasl;

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

/// A dead letter a replay test sends: a timeout of consumer 2.14.0 with `payload` (a string).
fn timed_out(payload: &str, dead_lettered_at: &str) -> String {
    serde_json::json!({
        "payload": payload,
        "errorClass": "dependency_timeout",
        "errorMessage": "timeout after 30012ms calling inventory-service",
        "consumerVersion": "2.14.0",
        "attempts": 3,
        "firstAttemptAt": "2026-11-29T10:00:00.000Z",
        "deadLetteredAt": dead_lettered_at,
    })
    .to_string()
}

pub(crate) fn bench_for(kind: &str, url: &str, dlq: &str) -> Bench {
    let plan = include_str!("../../../plans/local.yaml").replace(
        OLD_BROKER_LINE,
        &format!(
            "old: {{ name: old, kind: {kind}, url: \"{url}\", queue: local, dead_letter: {dlq} }}"
        ),
    );
    assert!(plan.contains(dlq), "the plan's old broker line changed");
    let bench = Bench::with_plan(&preflight_waived(&plan));
    bench.init();
    bench
}

/// A server's URL: the tests that need one are `#[ignore]`d without it (see
/// [`common::server_url`]).
fn url(var: &str) -> String {
    common::server_url(var)
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

/// Two timeouts and a validation error, oldest first: two groups when triaged.
pub(crate) fn three_dead_letters() -> [String; 3] {
    [
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
    ]
}

async fn browse_and_triage(kind: Kind, var: &str, plan_kind: &str) {
    let url = url(var);
    let dlq = unique("qm-dlq");
    let adapter = Adapter::connect(kind, &url).await.unwrap();
    adapter.declare(&dlq).await.unwrap();
    let lines = three_dead_letters();
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
#[ignore = "needs QM_TEST_NATS_URL (scripts/services.sh start nats)"]
async fn nats_dead_letters_are_triaged_without_being_consumed() {
    browse_and_triage(Kind::Nats, "QM_TEST_NATS_URL", "nats").await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs QM_TEST_REDIS_URL (scripts/services.sh start redis)"]
async fn redis_dead_letters_are_triaged_without_being_consumed() {
    browse_and_triage(Kind::Redis, "QM_TEST_REDIS_URL", "redis").await;
}

#[test]
#[ignore = "needs QM_TEST_AMQP_URL (scripts/services.sh start rabbitmq)"]
fn rabbitmq_cannot_be_browsed_and_the_error_says_what_to_do() {
    let url = url("QM_TEST_AMQP_URL");
    let bench = bench_for("rabbitmq", &url, "qm-dlq-rabbit");
    let r = bench.ok(&["dlq", "triage", "--from-broker", "local"], 2);
    assert!(
        r.stderr.contains("shovel") && r.stderr.contains("triage"),
        "{}",
        r.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// replay --migration

/// A new broker that cannot be reached fails the messages routed to it (counted, named on
/// stderr, exit 1), and only those: the old side gets its own.
#[test]
#[ignore = "needs QM_TEST_AMQP_URL (scripts/services.sh start rabbitmq)"]
fn replay_counts_the_messages_for_a_broker_that_is_down_as_failures() {
    on_store(DlqBench::sqlite, replay_to_a_broker_that_is_down);
}

#[test]
#[ignore = "needs QM_TEST_POSTGRES_URL and QM_TEST_AMQP_URL"]
fn replay_counts_the_messages_for_a_broker_that_is_down_as_failures_on_postgres() {
    on_store(
        || DlqBench::postgres("dlqb_down"),
        replay_to_a_broker_that_is_down,
    );
}

async fn replay_to_a_broker_that_is_down(d: DlqBench) {
    let amqp = url("QM_TEST_AMQP_URL");
    let old_queue = unique(&format!("qm-replay-down-old-{}", d.kind()));
    let old = Adapter::connect(Kind::RabbitMq, &amqp).await.unwrap();
    old.declare(&old_queue).await.unwrap();
    // Nothing listens on port 1.
    let new_line = "new: { name: nats, kind: rabbitmq, url: \"amqp://guest:guest@127.0.0.1:1/%2f\", queue: gone }";
    let bench = d.half_migrated(&amqp, &old_queue, new_line);
    let keys: Vec<String> = (0..12).map(|i| format!("order-{i}")).collect();
    let lines: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, key)| {
            timed_out(
                &serde_json::json!({"orderId": key, "n": i}).to_string(),
                &format!("2026-11-29T10:05:{i:02}.000Z"),
            )
        })
        .collect();
    let on_new = |key: &str| queue_migrate::slice::slice_of(key, 8) < 4;
    // A second message of a key whose first one fails: it must not go after it.
    let held = keys.iter().find(|k| on_new(k)).unwrap();
    let mut lines = lines;
    lines.push(timed_out(
        &serde_json::json!({"orderId": held, "n": 12}).to_string(),
        "2026-11-29T10:06:00.000Z",
    ));
    std::fs::write(bench.path("export.ndjson"), lines.join("\n") + "\n").unwrap();
    let want_old: Vec<&str> = keys
        .iter()
        .map(String::as_str)
        .filter(|k| !on_new(k))
        .collect();
    // The held one is counted apart: it is not a failure of its own.
    let failed = keys.len() - want_old.len();
    assert!(failed <= 10, "every failure is named on stderr");
    let r = bench.ok(
        &replay_at_once(&["--key-field", "orderId", "--no-dedup-key"]),
        1,
    );
    assert!(
        r.stdout.contains(&format!(
            "{} published ({} to old, 0 to new), {failed} failed, 1 held behind a failed message of their key,",
            want_old.len(),
            want_old.len()
        )) && r.stderr.contains("stay open"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    assert!(
        r.stderr.contains("not confirmed") && r.stderr.contains("cannot connect to the new broker"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains(&format!("key {held:?} is held from here on")),
        "{}",
        r.stderr
    );
    let seen = drain_rabbitmq(&old, &old_queue, "replay-test", want_old.len()).await;
    let got: Vec<&str> = seen.iter().map(|m| m.header("x-qm-key").unwrap()).collect();
    assert_eq!(got, want_old);
}

/// A migration from RabbitMQ to NATS JetStream (or to a second RabbitMQ queue without
/// `QM_TEST_NATS_URL`) with half its slices on the new side: a replay of an export whose
/// payloads carry `orderId` puts each message on the side its key routes to, with the origin
/// headers, the key and a `replay` route stamp, and nowhere else; the entry without a key is
/// counted as a failure and published nowhere.
#[test]
#[ignore = "needs QM_TEST_AMQP_URL (scripts/services.sh start rabbitmq)"]
fn replay_to_a_migration_publishes_each_message_where_its_key_routes() {
    on_store(DlqBench::sqlite, replay_where_keys_route);
}

#[test]
#[ignore = "needs QM_TEST_POSTGRES_URL and QM_TEST_AMQP_URL"]
fn replay_to_a_migration_publishes_each_message_where_its_key_routes_on_postgres() {
    on_store(|| DlqBench::postgres("dlqb_route"), replay_where_keys_route);
}

async fn replay_where_keys_route(d: DlqBench) {
    let amqp = url("QM_TEST_AMQP_URL");
    let nats = std::env::var("QM_TEST_NATS_URL")
        .ok()
        .filter(|u| !u.is_empty());
    let old_queue = unique(&format!("qm-replay-old-{}", d.kind()));
    let new_queue = unique(&format!("qm-replay-new-{}", d.kind()));
    let old = Adapter::connect(Kind::RabbitMq, &amqp).await.unwrap();
    old.declare(&old_queue).await.unwrap();
    let (new, new_line) = match &nats {
        Some(nats) => (
            Adapter::connect(Kind::Nats, nats).await.unwrap(),
            format!("new: {{ name: nats, kind: nats, url: \"{nats}\", stream: {new_queue} }}"),
        ),
        None => {
            eprintln!("QM_TEST_NATS_URL is not set: the new side is a second RabbitMQ queue");
            (
                Adapter::connect(Kind::RabbitMq, &amqp).await.unwrap(),
                format!(
                    "new: {{ name: nats, kind: rabbitmq, url: \"{amqp}\", queue: {new_queue} }}"
                ),
            )
        }
    };
    new.declare(&new_queue).await.unwrap();

    let bench = d.half_migrated(&amqp, &old_queue, &new_line);
    let routing = bench.ok(&["routing", "local"], 0).json();
    let generation = routing["generation"].as_u64().unwrap();

    // Twelve keyed entries and one without a key (the seventh).
    let keys: Vec<String> = (0..12).map(|i| format!("order-{i}")).collect();
    let mut lines = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        lines.push(timed_out(
            &serde_json::json!({"orderId": key, "n": i}).to_string(),
            &format!("2026-11-29T10:05:{i:02}.000Z"),
        ));
        if i == 6 {
            lines.push(timed_out(
                "{\"customer\":\"c-1\"}",
                "2026-11-29T10:06:00.000Z",
            ));
        }
    }
    std::fs::write(bench.path("export.ndjson"), lines.join("\n") + "\n").unwrap();
    let on_new = |key: &str| queue_migrate::slice::slice_of(key, 8) < 4;
    let want_new: Vec<&String> = keys.iter().filter(|k| on_new(k)).collect();
    let want_old: Vec<&String> = keys.iter().filter(|k| !on_new(k)).collect();
    assert!(!want_new.is_empty() && !want_old.is_empty());

    let mut args = replay_at_once(&[]);
    let refused = bench.ok(&args, 2);
    assert!(
        refused.stderr.contains("--dedup-key") && refused.stderr.contains("--no-dedup-key"),
        "{}",
        refused.stderr
    );
    args.extend(["--dedup-key", "order.paid:{orderId}:{n}"]);
    let r = bench.ok(&args, 1);
    assert!(
        r.stdout.contains(&format!(
            "12 published ({} to old, {} to new), 1 failed",
            want_old.len(),
            want_new.len()
        )),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    assert!(
        r.stderr.contains("2026-11-29T10:06:00.000Z")
            && r.stderr.contains("no JSON field \"orderId\""),
        "{}",
        r.stderr
    );

    let old_seen = drain_rabbitmq(&old, &old_queue, "replay-test", want_old.len()).await;
    let new_seen = match &nats {
        Some(_) => new.browse(&new_queue, 100).await.unwrap(),
        None => drain_rabbitmq(&new, &new_queue, "replay-test", want_new.len()).await,
    };
    for (side, broker, seen, want) in [
        ("old", "rabbitmq", &old_seen, &want_old),
        ("new", "nats", &new_seen, &want_new),
    ] {
        let got: Vec<&str> = seen.iter().map(|m| m.header("x-qm-key").unwrap()).collect();
        let want: Vec<&str> = want.iter().map(|k| k.as_str()).collect();
        assert_eq!(got, want, "the {side} side, in export order");
        for m in seen.iter() {
            let key = m.header("x-qm-key").unwrap();
            let n = keys.iter().position(|k| k == key).unwrap();
            let payload: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
            assert_eq!(payload["orderId"], key);
            assert_eq!(
                m.header("x-replay-of"),
                Some(format!("2026-11-29T10:05:{n:02}.000Z").as_str())
            );
            assert_eq!(m.header("x-replay-reason"), Some("dependency_timeout"));
            assert_eq!(
                m.header("x-qm-dedup-key"),
                Some(format!("order.paid:{key}:{n}").as_str()),
                "the dedup key --dedup-key builds"
            );
            let stamp = RouteStamp::from_headers(&m.headers).unwrap();
            assert_eq!(stamp.side, RouteLabel::Replay);
            assert_eq!(stamp.broker, broker);
            assert_eq!(stamp.slice, queue_migrate::slice::slice_of(key, 8));
            assert_eq!(stamp.generation, generation);
            assert_eq!(stamp.producer, "migrate-dlq-replay");
        }
    }
}

/// `migrate dlq replay` of `export.ndjson` from `local.dlq` to migration `local` by ana, at once
/// (no canary, no pacing to speak of), then `extra`.
fn replay_at_once<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "dlq",
        "replay",
        "export.ndjson",
        "--migration",
        "local",
        "--canary",
        "0",
        "--rate",
        "1000",
        "--by",
        "ana",
        "--queue",
        "local.dlq",
    ];
    args.extend_from_slice(extra);
    args
}

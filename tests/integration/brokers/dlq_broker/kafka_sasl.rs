//! The commands that reach Kafka, run as a user runs them, over the real broker's SASL_SSL
//! listener (SCRAM-SHA-512, the CA checked): `dlq triage --from-broker` reading an old Kafka's
//! dead-letter topic, `dlq replay --migration` publishing to a Kafka new side, and `migrate
//! bridge` forwarding a RabbitMQ ingress to a Kafka new side. The plan's Kafka URL, password
//! included, comes from a `file:` secret; no output of any command shows the password. What is
//! checked on the topics is read over PLAINTEXT, by a client of the test's own.

use std::time::{Duration, Instant};

use queue_migrate::brokers::{Adapter, HEADER_KEY, Kind, Message};

use super::{
    DlqBench, bench_for, on_store, replay_at_once, three_dead_letters, timed_out, unique, url,
};
use crate::brokers::brokers_real::kafka::{apache_bootstrap, create_topic_at, records_at};
use crate::brokers::brokers_real::kafka_security::{password, sasl_url};
use crate::common::Run;

/// The real broker's PLAINTEXT bootstrap (the checks' own client).
fn plaintext() -> String {
    apache_bootstrap().expect("QM_TEST_APACHE_KAFKA_BOOTSTRAP")
}

/// A `file:` secret holding the SASL_SSL URL (SCRAM-SHA-512), in `dir`: what the plan's `url`
/// says.
fn url_secret(dir: &std::path::Path) -> String {
    let file = dir.join("kafka-url");
    std::fs::write(&file, sasl_url("SCRAM-SHA-512", &password())).unwrap();
    format!("file:{}", file.display())
}

/// Neither output of `run` shows the password.
fn shows_no_secret(run: &Run, what: &str) {
    let secret = password();
    assert!(
        !run.stdout.contains(&secret) && !run.stderr.contains(&secret),
        "{what} showed the password:\n{}\n{}",
        run.stdout,
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the QM_TEST_APACHE_KAFKA_* variables (scripts/services.sh start apache-kafka)"]
async fn dlq_triage_reads_a_kafka_dead_letter_topic_over_sasl_ssl() {
    let dlq = unique("qm-dlq-sasl");
    create_topic_at(&plaintext(), &dlq, 3);
    let writer = Adapter::connect(Kind::Kafka, &format!("kafka://{}", plaintext()))
        .await
        .unwrap();
    for (i, line) in three_dead_letters().iter().enumerate() {
        let m = Message::new(line.as_bytes().to_vec()).with_header(HEADER_KEY, format!("k{i}"));
        writer.publish(&dlq, &m).await.unwrap();
    }
    let secrets = tempfile::tempdir().unwrap();
    let bench = bench_for("kafka", &url_secret(secrets.path()), &dlq);
    let args = [
        "dlq",
        "triage",
        "--from-broker",
        "local",
        "--format",
        "json",
    ];
    let r = bench.ok(&args, 0);
    shows_no_secret(&r, "dlq triage");
    let counts: Vec<(String, u64)> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["errorClass"].as_str().unwrap().to_string(),
                g["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        counts,
        [
            ("TimeoutError".to_string(), 2),
            ("ValidationError".into(), 1)
        ]
    );
}

#[test]
#[ignore = "needs QM_TEST_AMQP_URL and the QM_TEST_APACHE_KAFKA_* variables (scripts/services.sh start rabbitmq apache-kafka)"]
fn dlq_replay_publishes_to_a_kafka_new_side_over_sasl_ssl() {
    on_store(DlqBench::sqlite, replay_over_sasl);
}

async fn replay_over_sasl(d: DlqBench) {
    let (bench, topic) = half_migrated_to_kafka(d, "qm-replay-sasl").await;
    let keys: Vec<String> = (0..)
        .map(|i| format!("order-{i}"))
        .filter(|k| queue_migrate::slice::slice_of(k, 8) < 4)
        .take(3)
        .collect();
    let lines: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(n, key)| {
            let payload = serde_json::json!({"orderId": key, "n": n}).to_string();
            timed_out(&payload, &format!("2026-11-29T10:05:{n:02}.000Z"))
        })
        .collect();
    std::fs::write(bench.path("export.ndjson"), lines.join("\n") + "\n").unwrap();
    let r = bench.ok(
        &replay_at_once(&["--dedup-key", "order.paid:{orderId}:{n}"]),
        0,
    );
    shows_no_secret(&r, "dlq replay");
    assert!(
        r.stdout
            .contains("3 published (0 to old, 3 to new), 0 failed"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    let mut got: Vec<String> = records_at(&plaintext(), &topic, 3)
        .into_iter()
        .map(|r| r.key)
        .collect();
    got.sort();
    let mut want = keys.clone();
    want.sort();
    assert_eq!(got, want, "the replayed records, keyed by their slice key");
}

/// A migration from a RabbitMQ queue of this run (its bridge's ingress `OLD.ingress`) to a Kafka
/// topic of 3 partitions reached over SASL_SSL, half its slices moved: the bench and the topic.
async fn half_migrated_to_kafka(d: DlqBench, tag: &str) -> (DlqBench, String) {
    let amqp = url("QM_TEST_AMQP_URL");
    let old_queue = unique(&format!("{tag}-old"));
    let topic = unique(&format!("{tag}-new"));
    create_topic_at(&plaintext(), &topic, 3);
    let old = Adapter::connect(Kind::RabbitMq, &amqp).await.unwrap();
    old.declare(&old_queue).await.unwrap();
    old.declare(&format!("{old_queue}.ingress")).await.unwrap();
    let secret = url_secret(d.b.dir.path());
    let new_line =
        format!("new: {{ name: kafka, kind: kafka, url: \"{secret}\", queue: {topic} }}");
    (d.half_migrated(&amqp, &old_queue, &new_line), topic)
}

#[test]
#[ignore = "needs QM_TEST_AMQP_URL and the QM_TEST_APACHE_KAFKA_* variables (scripts/services.sh start rabbitmq apache-kafka)"]
fn the_bridge_command_forwards_to_kafka_over_sasl_ssl() {
    on_store(DlqBench::sqlite, bridge_over_sasl);
}

async fn bridge_over_sasl(d: DlqBench) {
    let (bench, topic) = half_migrated_to_kafka(d, "qm-bridge-sasl").await;
    let plan = std::fs::read_to_string(&bench.b.plan).unwrap();
    let ingress = plan
        .lines()
        .find_map(|l| l.strip_prefix("bridge: { ingress: "))
        .and_then(|rest| rest.split(',').next())
        .unwrap()
        .to_string();
    let keys: Vec<String> = (0..)
        .map(|i| format!("order-{i}"))
        .filter(|k| queue_migrate::slice::slice_of(k, 8) < 4)
        .take(5)
        .collect();
    let amqp = Adapter::connect(Kind::RabbitMq, &url("QM_TEST_AMQP_URL"))
        .await
        .unwrap();
    for key in &keys {
        let body = serde_json::json!({"orderId": key}).to_string();
        amqp.publish(&ingress, &Message::new(body.into_bytes()))
            .await
            .unwrap();
    }
    let mut bridge = bench
        .command(&[
            "bridge",
            "local",
            "--metrics",
            "127.0.0.1:0",
            "--lease-ttl",
            "3s",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    while got.len() < keys.len() && Instant::now() < deadline {
        got = records_at(&plaintext(), &topic, keys.len());
        if bridge.try_wait().unwrap().is_some() {
            break;
        }
    }
    // SIGTERM: the bridge stops as a user stops it, and says so.
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &bridge.id().to_string()])
        .status();
    let out = bridge.wait_with_output().unwrap();
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    shows_no_secret(&run, "migrate bridge");
    let mut forwarded: Vec<String> = got.into_iter().map(|r| r.key).collect();
    forwarded.sort();
    let mut want = keys.clone();
    want.sort();
    assert_eq!(forwarded, want, "what the bridge forwarded\n{}", run.stderr);
}

//! Kafka as the bridge's ingress (Kafka -> NATS JetStream), on the Kafka under test (the real
//! broker when `QM_TEST_APACHE_KAFKA_BOOTSTRAP` is set, else librdkafka's mock cluster:
//! `brokers_real::kafka::bootstrap`) and a real NATS (`QM_TEST_NATS_URL`); the test that takes
//! brokers down runs a mock of its own (its control port):
//! an ingress record's offset is committed only once its destination confirmed it, a bridge that
//! dies hands its partitions to the standby from the last commit (nothing lost, each key's first
//! deliveries in order), and the group's lag drains to 0.

use std::collections::HashMap;
use std::io::{BufRead as _, Write as _};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queue_migrate::bridge::metrics::BridgeMetrics;
use queue_migrate::bridge::{self, Brokers, Settings};
use queue_migrate::brokers::{Adapter, HEADER_KEY, Kind, Message, PartitionLag, group_lag};
use queue_migrate::router::Router;
use queue_migrate::routing::Side;

use super::{
    KEYS, PER_KEY, active, common, distinct, firsts_of, half_on_new, keyed, routing, run_and_store,
    seq_of, settings, spawn_bridge,
};

use crate::brokers::brokers_real::kafka::create_topic;

/// A run of its own: the ingress and the old queue as Kafka topics of `partitions` partitions,
/// NATS as the new broker, a SQLite store.
struct KafkaWorld {
    run: String,
    nats_url: String,
    bootstrap: String,
    _dir: tempfile::TempDir,
    store: queue_migrate::store::any::AnyStore,
    brokers: Brokers,
}

async fn kafka_world(tag: &str, partitions: u32) -> KafkaWorld {
    let bootstrap = crate::brokers::brokers_real::kafka::bootstrap();
    let nats_url = common::server_url("QM_TEST_NATS_URL");
    let (run, dir, store) = run_and_store(tag).await;
    let s = settings(&run, "bridge-a");
    create_topic(&s.ingress, partitions);
    create_topic(&s.old_queue, partitions);
    let brokers = Brokers {
        old: Arc::new(
            Adapter::connect(Kind::Kafka, &format!("kafka://{bootstrap}"))
                .await
                .unwrap(),
        ),
        new: Arc::new(Adapter::connect(Kind::Nats, &nats_url).await.unwrap()),
    };
    KafkaWorld {
        run,
        nats_url,
        bootstrap,
        _dir: dir,
        store,
        brokers,
    }
}

/// Settings of a Kafka -> NATS bridge whose key is the header `x-order-id`.
fn from_kafka(run: &str, holder: &str) -> Settings {
    Settings {
        key: queue_migrate::plan::BridgeKey::Header("x-order-id".into()),
        old_name: "kafka".into(),
        new_name: "nats".into(),
        ..settings(run, holder)
    }
}

/// A record as a Kafka producer writes it: [`keyed`], the key also the record key (one key,
/// one partition).
fn record(key: &str, seq: u64) -> Message {
    keyed(key, seq).with_header(HEADER_KEY, key)
}

/// Read `queue` through one subscription (a Kafka group's join takes seconds; a JetStream pull
/// dropped with a message in flight would give it back only after `ack_wait`, behind later ones)
/// until `want` different messages arrived in all or `seconds` passed; `seen` gets them.
async fn collect_one_reader(
    adapter: &Adapter,
    queue: &str,
    want: usize,
    seconds: u64,
    seen: &mut Vec<Message>,
) {
    let options = queue_migrate::brokers::SubscribeOptions {
        visibility_timeout: Duration::from_secs(6),
        // A group of this queue's own: members of one group on other topics (another test)
        // would rebalance with it.
        ..queue_migrate::brokers::SubscribeOptions::group(format!("bridge-test-{queue}"))
    };
    let mut sub = adapter.subscribe(queue, &options).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while distinct(seen) < want && Instant::now() < deadline {
        if let Ok(got) = tokio::time::timeout(Duration::from_millis(500), sub.next()).await {
            let d = got.unwrap().expect("the subscription ended");
            seen.push(d.message.clone());
            d.ack().await.unwrap();
        }
    }
}

/// The bridge group's position on the ingress, per partition.
async fn positions(bootstrap: &str, settings: &Settings) -> Vec<PartitionLag> {
    let (b, group, topic) = (
        bootstrap.to_string(),
        format!("queue-migrate-bridge-{}", settings.migration),
        settings.ingress.clone(),
    );
    tokio::task::spawn_blocking(move || group_lag(&b, &group, &topic))
        .await
        .unwrap()
        .unwrap()
}

fn committed_total(lags: &[PartitionLag]) -> u64 {
    lags.iter()
        .map(|p| u64::try_from(p.committed.unwrap_or(0)).unwrap_or(0))
        .sum()
}

/// Makes the new stream take messages of at most `max` bytes (`-1`: any).
async fn limit_stream(nats_url: &str, stream: &str, max: i32) {
    let client = async_nats::connect(nats_url).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let mut s = js.get_stream(stream).await.unwrap();
    let mut config = s.info().await.unwrap().config.clone();
    config.max_message_size = max;
    js.update_stream(config).await.unwrap();
}

/// A record NATS refuses (larger than the stream's `max_msg_size`) holds the commit of its
/// partition: the records behind it are forwarded (other keys) but not committed, so a bridge
/// stopped then leaves the group's committed offset exactly at the refused record. Once the
/// stream takes it, the next bridge reads from that commit: the refused record and its key's
/// next one arrive, in order, and the lag drains to 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP (or the mock: QM_TEST_KAFKA_BOOTSTRAP, QM_TEST_KAFKA_CONTROL) and QM_TEST_NATS_URL (scripts/services.sh start apache-kafka nats)"]
async fn a_kafka_ingress_commits_only_what_nats_confirmed() {
    let w = kafka_world("kin-commit", 1).await;
    let a = from_kafka(&w.run, "bridge-a");
    w.brokers.new.declare(&a.new_queue).await.unwrap();
    let stream = a.new_queue.replace('.', "_");
    limit_stream(&w.nats_url, &stream, 512).await;
    let big = Message::new(
        serde_json::json!({"orderId": "order-big", "seq": 1, "pad": "x".repeat(2000)})
            .to_string()
            .into_bytes(),
    )
    .with_header("x-order-id", "order-big")
    .with_header(HEADER_KEY, "order-big");
    // One partition: offsets 0..=4 in this order.
    for m in [
        record("order-big", 0),
        big,
        record("order-big", 2),
        record("order-other", 0),
        record("order-other", 1),
    ] {
        w.brokers.old.publish(&a.ingress, &m).await.unwrap();
    }
    let router = Router::builder(a.migration.clone()).slices(16).build();
    router.offer(routing(&a.migration, 1, 16)).unwrap();

    let metrics = Arc::new(BridgeMetrics::new(&a.migration));
    let (task, stop) = spawn_bridge(&w.store, a.clone(), &w.brokers, &router, &metrics);
    let mut seen = Vec::new();
    collect_one_reader(&w.brokers.new, &a.new_queue, 3, 40, &mut seen).await;
    assert_eq!(
        firsts_of(&seen, "order-big"),
        [0],
        "the refused record waits"
    );
    assert_eq!(firsts_of(&seen, "order-other"), [0, 1], "other keys flow");
    let _ = stop.send(());
    task.await.unwrap().unwrap();
    let lags = positions(&w.bootstrap, &a).await;
    assert_eq!(
        lags[0].committed,
        Some(1),
        "committed up to the refused record, not past it: {lags:?}"
    );
    assert_eq!(lags[0].lag(), 4);

    // The stream takes it now: the next bridge goes on from the commit.
    limit_stream(&w.nats_url, &stream, -1).await;
    let metrics = Arc::new(BridgeMetrics::new(&a.migration));
    let (task, stop) = spawn_bridge(
        &w.store,
        from_kafka(&w.run, "bridge-b"),
        &w.brokers,
        &router,
        &metrics,
    );
    collect_one_reader(&w.brokers.new, &a.new_queue, 5, 40, &mut seen).await;
    assert_eq!(firsts_of(&seen, "order-big"), [0, 1, 2], "in order");
    assert_eq!(firsts_of(&seen, "order-other"), [0, 1]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while positions(&w.bootstrap, &a).await[0].lag() > 0 {
        assert!(Instant::now() < deadline, "the group's lag never drained");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

/// Two bridges on a Kafka ingress of 3 partitions: A forwards (half the slices to NATS, half to
/// a Kafka topic on the old side), B stands by. A is killed mid-stream: what the group had
/// committed then was all confirmed by A's destinations. B takes the partitions over from the
/// last commit: every record arrives on its side, each key's first deliveries in order, only
/// duplicates of what A had forwarded and not committed; the lag drains to 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP (or the mock: QM_TEST_KAFKA_BOOTSTRAP, QM_TEST_KAFKA_CONTROL) and QM_TEST_NATS_URL (scripts/services.sh start apache-kafka nats)"]
async fn a_kafka_ingress_bridge_killed_mid_stream_hands_over_without_loss() {
    let w = kafka_world("kin-takeover", 3).await;
    let a = from_kafka(&w.run, "bridge-a");
    let router = half_on_new(&a.migration);
    let on_new = |key: &str| queue_migrate::slice::slice_of(key, 16) < 8;
    for seq in 0..PER_KEY as u64 {
        for k in 0..KEYS {
            let m = record(&format!("order-{k}"), seq);
            w.brokers.old.publish(&a.ingress, &m).await.unwrap();
        }
    }
    let metrics_a = Arc::new(BridgeMetrics::new(&a.migration));
    let task_a = tokio::spawn(bridge::run(
        w.store.clone(),
        a.clone(),
        w.brokers.clone(),
        router.clone(),
        metrics_a.clone(),
        std::future::pending(),
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let metrics_b = Arc::new(BridgeMetrics::new(&a.migration));
    let (task_b, stop_b) = spawn_bridge(
        &w.store,
        from_kafka(&w.run, "bridge-b"),
        &w.brokers,
        &router,
        &metrics_b,
    );
    let confirmed = |m: &BridgeMetrics| m.confirmed(Side::Old) + m.confirmed(Side::New);
    let deadline = Instant::now() + Duration::from_secs(40);
    while confirmed(&metrics_a) < 40 {
        assert!(Instant::now() < deadline, "bridge A forwarded nothing");
        assert!(!active(&metrics_b), "two bridges forward at once");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    task_a.abort();
    let _ = task_a.await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let committed_by_a = committed_total(&positions(&w.bootstrap, &a).await);
    let confirmed_by_a = confirmed(&metrics_a);
    assert!(
        committed_by_a <= confirmed_by_a,
        "A committed {committed_by_a} records, its destinations confirmed {confirmed_by_a}"
    );
    // A second batch after A died: only B can forward it.
    for seq in PER_KEY as u64..2 * PER_KEY as u64 {
        for k in 0..KEYS {
            let m = record(&format!("order-{k}"), seq);
            w.brokers.old.publish(&a.ingress, &m).await.unwrap();
        }
    }
    let total = KEYS * PER_KEY * 2;
    let total_new = (0..KEYS).filter(|k| on_new(&format!("order-{k}"))).count() * PER_KEY * 2;
    let mut new_seen = Vec::new();
    collect_one_reader(&w.brokers.new, &a.new_queue, total_new, 90, &mut new_seen).await;
    let mut old_seen = Vec::new();
    collect_one_reader(
        &w.brokers.old,
        &a.old_queue,
        total - total_new,
        90,
        &mut old_seen,
    )
    .await;
    assert_eq!(distinct(&new_seen), total_new, "lost on NATS");
    assert_eq!(distinct(&old_seen), total - total_new, "lost on old");
    let mut per_key: HashMap<String, Vec<u64>> = HashMap::new();
    for m in new_seen.iter().chain(&old_seen) {
        let key = m.header("x-order-id").unwrap().to_string();
        assert_eq!(
            on_new(&key),
            new_seen.iter().any(|n| std::ptr::eq(n, m)),
            "{key} on the wrong side"
        );
        let firsts = per_key.entry(key).or_default();
        let seq = seq_of(m);
        if !firsts.contains(&seq) {
            firsts.push(seq);
        }
    }
    for (key, seqs) in &per_key {
        let want: Vec<u64> = (0..2 * PER_KEY as u64).collect();
        assert_eq!(seqs, &want, "{key}: first deliveries out of order");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while positions(&w.bootstrap, &a)
        .await
        .iter()
        .any(|p| p.lag() > 0)
    {
        assert!(Instant::now() < deadline, "the group's lag never drained");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = stop_b.send(());
    task_b.await.unwrap().unwrap();
    let again = new_seen.len() + old_seen.len() - total;
    eprintln!(
        "A confirmed {confirmed_by_a} and committed {committed_by_a} before it was killed; {again} forwarded again"
    );
}

/// A mock cluster of this test's own (it takes brokers down, which the shared one must not):
/// the process (killed on drop), its bootstrap list and its control address.
struct OwnMock {
    child: std::process::Child,
    bootstrap: String,
    control: String,
}

impl OwnMock {
    fn start(topics: &[&str]) -> OwnMock {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_qm-kafka-mock"));
        command.args(["--brokers", "3"]);
        for t in topics {
            command.args(["--topic", &format!("{t}:3")]);
        }
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut value = |prefix: &str| {
            let line = lines.next().unwrap().unwrap();
            line.strip_prefix(prefix).unwrap().to_string()
        };
        let bootstrap = value("bootstrap=");
        let control = value("control=");
        OwnMock {
            child,
            bootstrap,
            control,
        }
    }

    fn command(&self, line: &str) {
        let mut c = std::net::TcpStream::connect(&self.control).unwrap();
        writeln!(c, "{line}").unwrap();
        let mut answer = String::new();
        std::io::BufReader::new(c).read_line(&mut answer).unwrap();
        assert_eq!(answer.trim(), "ok", "{line}");
    }
}

impl Drop for OwnMock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Regression: every broker of the cluster out of reach for 2 s (shorter than the group's
/// session timeout) made the Kafka subscription answer librdkafka's transport error, which ended
/// the bridge's session: it left the group, stood down for a second, rejoined, and forwarded
/// again what it had not committed. Now the subscription waits for librdkafka to reconnect: the
/// bridge stays active throughout and forwards nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_NATS_URL (scripts/services.sh start nats) and the qm-kafka-mock binary (feature kafka)"]
async fn a_kafka_cluster_out_of_reach_a_moment_ends_no_bridge_session() {
    let nats_url = common::server_url("QM_TEST_NATS_URL");
    let (run, _dir, store) = run_and_store("kin-down").await;
    let a = from_kafka(&run, "bridge-a");
    let mock = OwnMock::start(&[&a.ingress, &a.old_queue]);
    let brokers = Brokers {
        old: Arc::new(
            Adapter::connect(Kind::Kafka, &format!("kafka://{}", mock.bootstrap))
                .await
                .unwrap(),
        ),
        new: Arc::new(Adapter::connect(Kind::Nats, &nats_url).await.unwrap()),
    };
    let router = Router::builder(a.migration.clone()).slices(16).build();
    router.offer(routing(&a.migration, 1, 16)).unwrap();
    let publish = |from: u64| {
        let brokers = brokers.clone();
        let ingress = a.ingress.clone();
        async move {
            for seq in from..from + 10 {
                for k in 0..3 {
                    let m = record(&format!("order-{k}"), seq);
                    brokers.old.publish(&ingress, &m).await.unwrap();
                }
            }
        }
    };
    publish(0).await;
    let metrics = Arc::new(BridgeMetrics::new(&a.migration));
    let (task, stop) = spawn_bridge(&store, a.clone(), &brokers, &router, &metrics);
    let deadline = Instant::now() + Duration::from_secs(40);
    while metrics.confirmed(Side::New) < 30 {
        assert!(Instant::now() < deadline, "the bridge forwarded nothing");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let watched = {
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut inactive = 0;
            for _ in 0..300 {
                inactive += usize::from(!active(&metrics));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            inactive
        })
    };
    for id in 1..=3 {
        mock.command(&format!("down {id}"));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for id in 1..=3 {
        mock.command(&format!("up {id}"));
    }
    let inactive = watched.await.unwrap();
    publish(10).await;
    let mut seen = Vec::new();
    collect_one_reader(&brokers.new, &a.new_queue, 60, 60, &mut seen).await;
    let _ = stop.send(());
    task.await.unwrap().unwrap();
    assert_eq!(
        inactive, 0,
        "the bridge's session ended while the cluster was out of reach"
    );
    assert_eq!(distinct(&seen), 60, "lost");
    assert_eq!(seen.len(), 60, "forwarded twice");
    for k in 0..3 {
        let want: Vec<u64> = (0..20).collect();
        assert_eq!(firsts_of(&seen, &format!("order-{k}")), want);
    }
}

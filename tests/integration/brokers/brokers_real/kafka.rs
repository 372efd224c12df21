//! The Kafka adapter against a Kafka-protocol server: the real Apache Kafka broker when
//! `QM_TEST_APACHE_KAFKA_BOOTSTRAP` is set (`scripts/services.sh start apache-kafka`), else
//! librdkafka's mock cluster run by `qm-kafka-mock` (`scripts/services.sh start kafka` exports
//! `QM_TEST_KAFKA_BOOTSTRAP` and `QM_TEST_KAFKA_CONTROL`). On the real broker topics are made
//! with CreateTopics; on the mock through its control port (the mock answers CreateTopics with
//! an error: [`the_mock_refuses_create_topics`] pins that gap, on the mock always). The mock
//! stays where a fault needs its control port ([`OwnCluster`]: a broker taken down, a leader
//! moved). The bodies of [`contract`] run on the real broker, the mock and Tansu.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, BufReader, Write as _};
use std::time::{Duration, Instant};

use queue_migrate::brokers::{
    Adapter, HEADER_DEDUP_KEY, HEADER_KEY, Kind, Message, SubscribeOptions, Subscription, group_lag,
};

use super::{BINARY, queue, stamped};

/// The contract's bodies over any Kafka-protocol server (the mock here, Tansu beside).
pub(crate) mod contract;

/// The Kafka under test: the real broker's PLAINTEXT listener when
/// `QM_TEST_APACHE_KAFKA_BOOTSTRAP` is set, else the shared mock.
pub(crate) fn bootstrap() -> String {
    apache_bootstrap().unwrap_or_else(mock_bootstrap)
}

/// The real Apache Kafka broker's PLAINTEXT `host:port`, when one runs.
pub(crate) fn apache_bootstrap() -> Option<String> {
    std::env::var("QM_TEST_APACHE_KAFKA_BOOTSTRAP")
        .ok()
        .filter(|b| !b.is_empty())
}

/// The shared mock cluster (`QM_TEST_KAFKA_BOOTSTRAP`), for what only the mock shows.
pub(crate) fn mock_bootstrap() -> String {
    super::common::server_url("QM_TEST_KAFKA_BOOTSTRAP")
}

/// Creates `topic` with `partitions` partitions on the Kafka under test (see [`bootstrap`]):
/// CreateTopics on the real broker, the control port on the mock.
pub(crate) fn create_topic(topic: &str, partitions: u32) {
    match apache_bootstrap() {
        Some(b) => create_topic_at(&b, topic, partitions),
        None => mock_create_topic(topic, partitions),
    }
}

/// Creates `topic` on the shared mock through its control port.
pub(crate) fn mock_create_topic(topic: &str, partitions: u32) {
    let control = super::common::server_url("QM_TEST_KAFKA_CONTROL");
    command(&control, &format!("topic {topic} {partitions}"));
}

/// Creates `topic` with `partitions` partitions on the cluster at `bootstrap` with the
/// adapter's `declare` (CreateTopics), on a thread and runtime of its own (callers are sync or
/// async alike), and waits until its metadata shows every partition.
pub(crate) fn create_topic_at(bootstrap: &str, topic: &str, partitions: u32) {
    let url = format!("kafka://{bootstrap}?partitions={partitions}");
    let name = topic.to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let adapter = Adapter::connect(Kind::Kafka, &url).await.unwrap();
            adapter.declare(&name).await.unwrap();
        });
    })
    .join()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while partitions_of(bootstrap, topic).len() < partitions as usize {
        assert!(
            Instant::now() < deadline,
            "{topic} has no {partitions} partitions"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sends `line` to the mock's control port at `control` and insists on `ok`.
fn command(control: &str, line: &str) {
    let mut stream = std::net::TcpStream::connect(control).unwrap();
    writeln!(stream, "{line}").unwrap();
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).unwrap();
    assert_eq!(answer.trim(), "ok", "{line}");
}

/// A mock cluster of the test's own (`qm-kafka-mock`, three brokers), for the faults the shared
/// one must not see: a broker taken down. Killed when dropped.
pub(crate) struct OwnCluster {
    child: std::process::Child,
    pub bootstrap: String,
    control: String,
}

impl OwnCluster {
    /// Starts one with the topics `(name, partitions)`.
    pub(crate) fn start(topics: &[(&str, u32)]) -> OwnCluster {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_qm-kafka-mock"));
        for (name, partitions) in topics {
            cmd.args(["--topic", &format!("{name}:{partitions}")]);
        }
        let mut child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut value = |name: &str| {
            let line = lines.next().unwrap().unwrap();
            line.strip_prefix(&format!("{name}="))
                .unwrap_or_else(|| panic!("qm-kafka-mock printed {line:?}"))
                .to_string()
        };
        let bootstrap = value("bootstrap");
        let control = value("control");
        OwnCluster {
            child,
            bootstrap,
            control,
        }
    }

    /// The broker id leading `partition` of `topic`.
    pub(crate) fn leader(&self, topic: &str, partition: i32) -> i32 {
        let all = partitions_of(&self.bootstrap, topic);
        let (_, leader) = all.into_iter().find(|(id, _)| *id == partition).unwrap();
        leader
    }

    /// Partition `partition` of `topic` is led by broker `id` from now on (the mock places
    /// leaders at random: two partitions share one about a third of the time).
    pub(crate) fn set_leader(&self, topic: &str, partition: i32, id: i32) {
        command(&self.control, &format!("leader {topic} {partition} {id}"));
    }

    /// Broker `id` stops (`false`) or resumes (`true`) answering.
    pub(crate) fn set_up(&self, id: i32, up: bool) {
        command(
            &self.control,
            &format!("{} {id}", if up { "up" } else { "down" }),
        );
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `(id, leader)` of each partition of `topic` as the cluster at `bootstrap` describes it;
/// none when it does not know the topic.
pub(crate) fn partitions_of(bootstrap: &str, topic: &str) -> Vec<(i32, i32)> {
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    let client: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("allow.auto.create.topics", "false")
        .create()
        .unwrap();
    let metadata = client
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let known = metadata.topics().iter();
    known
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| (p.id(), p.leader())))
        .collect()
}

/// A topic of this run, made with `partitions` partitions.
fn topic(test: &str, partitions: u32) -> String {
    let name = queue(test);
    create_topic(&name, partitions);
    name
}

async fn connect() -> Adapter {
    let url = format!("kafka://{}", bootstrap());
    Adapter::connect(Kind::Kafka, &url)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn options(group: &str, consumer: &str) -> SubscribeOptions {
    SubscribeOptions {
        consumer: consumer.to_string(),
        visibility_timeout: Duration::from_secs(6),
        ..SubscribeOptions::group(group)
    }
}

/// The next delivery within `seconds` (a group's first join takes a few seconds).
async fn next_within(
    s: &mut Subscription,
    seconds: u64,
) -> Option<queue_migrate::brokers::Delivery> {
    match tokio::time::timeout(Duration::from_secs(seconds), s.next()).await {
        Ok(got) => got.unwrap(),
        Err(_) => None,
    }
}

fn number(m: &Message) -> usize {
    let text = String::from_utf8_lossy(&m.payload);
    text.rsplit('#').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP or QM_TEST_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka kafka)"]
async fn round_trip_keeps_payload_headers_and_the_key() {
    let adapter = connect().await;
    let t = topic("kafka-round-trip", 3);
    adapter.declare(&t).await.unwrap();
    for n in 0..5 {
        adapter.publish(&t, &stamped(n)).await.unwrap();
    }
    let mut s = adapter.subscribe(&t, &options("rt", "rt-1")).await.unwrap();
    let mut got = BTreeMap::new();
    while got.len() < 5 {
        let d = next_within(&mut s, 20).await.expect("all five records");
        let n = number(&d.message);
        assert!(
            d.message.payload.starts_with(BINARY),
            "payload byte for byte"
        );
        let want = stamped(n);
        assert_eq!(
            d.message.headers, want.headers,
            "every header, the route stamp too"
        );
        assert!(!d.redelivered);
        d.ack().await.unwrap();
        got.insert(n, ());
    }
    s.release().await.unwrap();

    // The record key is the slice key, as Kafka itself sees it (a raw consumer, no headers read).
    let keys: BTreeSet<String> = records(&t, 5).into_iter().map(|r| r.key).collect();
    let want: BTreeSet<String> = (0..5).map(|n| format!("order-{n}")).collect();
    assert_eq!(keys, want);
}

/// A record as Kafka itself holds it: where it is, its record key, its payload.
pub(crate) struct Record {
    pub partition: i32,
    pub offset: i64,
    pub key: String,
    pub payload: Vec<u8>,
}

/// The first `want` records of `topic` on the shared mock (see [`records_at`]).
pub(crate) fn records(topic: &str, want: usize) -> Vec<Record> {
    records_at(&bootstrap(), topic, want)
}

/// The first `want` records of `topic` on the cluster at `bootstrap` (or what came within
/// 20 s), read by a raw consumer (no header read, nothing of the adapter's) with every
/// partition *assigned* from its first offset, so no consumer group is joined nor committed to,
/// by partition and offset.
pub(crate) fn records_at(bootstrap: &str, topic: &str, want: usize) -> Vec<Record> {
    use rdkafka::Message as _;
    let mut out: Vec<Record> = raw_messages_at(bootstrap, topic, want)
        .iter()
        .map(|m| Record {
            partition: m.partition(),
            offset: m.offset(),
            key: String::from_utf8(m.key().unwrap_or_default().to_vec()).unwrap(),
            payload: m.payload().unwrap_or_default().to_vec(),
        })
        .collect();
    out.sort_by_key(|r| (r.partition, r.offset));
    out
}

/// The first `want` records of `topic` on the cluster at `bootstrap` as librdkafka gives them
/// (or what came within 20 s), in the order they came: a raw consumer with every partition
/// *assigned* from its first offset, no consumer group joined nor committed to.
pub(crate) fn raw_messages_at(
    bootstrap: &str,
    topic: &str,
    want: usize,
) -> Vec<rdkafka::message::OwnedMessage> {
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    let raw: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        // librdkafka assigns nothing without a group id; this one is never joined.
        .set("group.id", format!("raw-reader-{topic}"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut list = rdkafka::TopicPartitionList::new();
    for (p, _) in partitions_of(bootstrap, topic) {
        list.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .unwrap();
    }
    assert!(list.count() > 0, "no partition of {topic} in the metadata");
    raw.assign(&list).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    while out.len() < want && Instant::now() < deadline {
        if let Some(Ok(m)) = raw.poll(Duration::from_millis(200)) {
            out.push(m.detach());
        }
    }
    out
}

/// Publishes, as a producer that is not ours would, the record `{}` keyed `customer-9` with no
/// header to `topic` on the cluster at `bootstrap`.
pub(crate) async fn send_foreign(bootstrap: &str, topic: &str) {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    producer
        .send(
            FutureRecord::to(topic).key("customer-9").payload("{}"),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
}

/// A record published without `x-qm-key` but with a Kafka key (a producer that is not ours)
/// is read with the key as `x-qm-key`, so the slice router can place it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP or QM_TEST_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka kafka)"]
async fn a_foreign_records_key_becomes_the_slice_key() {
    let adapter = connect().await;
    let t = topic("kafka-foreign-key", 1);
    send_foreign(&bootstrap(), &t).await;
    let mut s = adapter
        .subscribe(&t, &options("foreign", "f-1"))
        .await
        .unwrap();
    let d = next_within(&mut s, 20).await.expect("the record");
    assert_eq!(d.message.header(HEADER_KEY), Some("customer-9"));
    assert_eq!(d.message.header(HEADER_DEDUP_KEY), None);
}

/// Publishes `per_key` records of each of `keys` keys (`key-K`), round robin, one at a time:
/// record `n` (payload `kK#n`) is the `n`th published.
pub(crate) async fn publish_keyed(adapter: &Adapter, topic: &str, keys: usize, per_key: usize) {
    for i in 0..per_key {
        for k in 0..keys {
            let m = Message::new(format!("k{k}#{}", i * keys + k))
                .with_header(HEADER_KEY, format!("key-{k}"));
            adapter.publish(topic, &m).await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP or QM_TEST_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka kafka)"]
async fn per_key_order_is_kept_across_partitions() {
    let adapter = connect().await;
    let t = topic("kafka-order", 3);
    let (keys, per_key) = (10, 30);
    publish_keyed(&adapter, &t, keys, per_key).await;
    let mut s = adapter
        .subscribe(&t, &options("order", "order-1"))
        .await
        .unwrap();
    let mut seen: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for _ in 0..keys * per_key {
        let d = next_within(&mut s, 20).await.expect("every record");
        let key = d.message.header(HEADER_KEY).unwrap().to_string();
        seen.entry(key).or_default().push(number(&d.message));
        d.ack().await.unwrap();
    }
    for (key, got) in &seen {
        let mut sorted = got.clone();
        sorted.sort_unstable();
        assert_eq!(got, &sorted, "{key} in publish order");
        assert_eq!(got.len(), per_key);
    }
}

/// Acked records are committed, unacked ones (and ones acked behind an unacked one) come again
/// to the next member of the group; a nack rewinds to the oldest unacked delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP or QM_TEST_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka kafka)"]
async fn only_what_was_acked_is_committed_and_a_nack_rewinds() {
    let adapter = connect().await;
    let t = topic("kafka-commit", 1);
    for n in 0..6 {
        adapter
            .publish(&t, &Message::new(format!("#{n}")))
            .await
            .unwrap();
    }
    let group = "commit";
    let mut s = adapter.subscribe(&t, &options(group, "c-1")).await.unwrap();
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(next_within(&mut s, 20).await.expect("a record"));
    }
    // 0 acked; 1 held; 2 acked behind it; 3 nacked: 1, 2, 3 and what follows come again.
    let mut held = held.into_iter();
    let (d0, d1, d2, d3) = (
        held.next().unwrap(),
        held.next().unwrap(),
        held.next().unwrap(),
        held.next().unwrap(),
    );
    assert_eq!(number(&d0.message), 0);
    d0.ack().await.unwrap();
    d2.ack().await.unwrap();
    d3.nack().await.unwrap();
    assert!(
        d1.ack().await.is_err(),
        "an ack from before the rewind is refused"
    );
    let again = next_within(&mut s, 20).await.expect("the rewound records");
    assert_eq!(number(&again.message), 1);
    assert!(again.redelivered);
    drop(again);
    s.release().await.unwrap();
    let lag = adapter.depth(&t, group).await.unwrap();
    assert_eq!(lag.ready, 5, "only record 0 committed: {lag:?}");

    let mut s = adapter.subscribe(&t, &options(group, "c-2")).await.unwrap();
    let first = next_within(&mut s, 30)
        .await
        .expect("the next member reads on");
    assert_eq!(number(&first.message), 1);
}

/// The rebalance test: member A is stopped in the middle of a batch while member B runs; B
/// takes A's partitions. Every record is applied (acked) exactly once across both: what A
/// acked is committed, what it held comes to B, and an ack A makes after losing a partition is
/// refused rather than committed past B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP or QM_TEST_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka kafka)"]
async fn a_member_stopped_mid_batch_loses_nothing_and_nothing_is_applied_twice() {
    let adapter = connect().await;
    let t = topic("kafka-rebalance", 4);
    let total = 400;
    for n in 0..total {
        let m = Message::new(format!("#{n}")).with_header(HEADER_KEY, format!("key-{}", n % 37));
        adapter.publish(&t, &m).await.unwrap();
    }
    let group = "rebalance";
    let mut applied: BTreeMap<usize, &'static str> = BTreeMap::new();
    let mut twice = Vec::new();
    let mut apply = |n: usize, who: &'static str, applied: &mut BTreeMap<usize, &'static str>| {
        if let Some(before) = applied.insert(n, who) {
            twice.push((n, before, who));
        }
    };

    // A reads and applies 120 records, then B joins (a rebalance under A's feet).
    let mut a = adapter
        .subscribe(&t, &options(group, "member-a"))
        .await
        .unwrap();
    let mut refused_after_revoke = 0;
    for _ in 0..120 {
        let d = next_within(&mut a, 30).await.expect("A reads");
        let n = number(&d.message);
        if d.ack().await.is_ok() {
            apply(n, "a", &mut applied);
        }
    }
    let mut b = adapter
        .subscribe(&t, &options(group, "member-b"))
        .await
        .unwrap();
    // A goes on through the rebalance, then is stopped with 10 records read and not acked.
    let mut held = Vec::new();
    for i in 0..60 {
        let Some(d) = next_within(&mut a, 5).await else {
            break;
        };
        if i >= 50 {
            held.push(d);
            continue;
        }
        let n = number(&d.message);
        match d.ack().await {
            Ok(()) => apply(n, "a", &mut applied),
            Err(_) => refused_after_revoke += 1,
        }
    }
    drop(held);
    drop(a);

    // B reads until every record is applied.
    let deadline = Instant::now() + Duration::from_secs(90);
    while applied.len() < total && Instant::now() < deadline {
        let Some(d) = next_within(&mut b, 10).await else {
            continue;
        };
        let n = number(&d.message);
        if d.ack().await.is_ok() {
            apply(n, "b", &mut applied);
        }
    }
    assert!(twice.is_empty(), "applied twice: {twice:?}");
    let missing: Vec<usize> = (0..total).filter(|n| !applied.contains_key(n)).collect();
    assert!(missing.is_empty(), "lost: {missing:?}");
    assert!(
        applied.values().any(|w| *w == "b"),
        "B took partitions over"
    );
    eprintln!("acks refused after a revoke: {refused_after_revoke}");
    let lags = group_lag(&bootstrap(), group, &t).unwrap();
    assert_eq!(lags.iter().map(|p| p.lag()).sum::<u64>(), 0, "{lags:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP or QM_TEST_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka kafka)"]
async fn browse_reads_without_committing() {
    let adapter = connect().await;
    let t = topic("kafka-browse", 2);
    for n in 0..4 {
        adapter.publish(&t, &stamped(n)).await.unwrap();
    }
    let got = adapter.browse(&t, 10).await.unwrap();
    let numbers: BTreeSet<usize> = got.iter().map(number).collect();
    assert_eq!(numbers, (0..4).collect());
    assert_eq!(adapter.depth(&t, "nobody").await.unwrap().ready, 4);
}

/// The mock's gap, pinned (on the mock, whichever Kafka the other tests use): CreateTopics is
/// answered with an error, so `declare` of a topic the cluster does not know fails on the mock
/// (it succeeds on the real broker: [`declare_creates_a_topic_on_the_real_broker`]). A topic
/// that exists is declared without asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_KAFKA_BOOTSTRAP (scripts/services.sh start kafka)"]
async fn the_mock_refuses_create_topics() {
    let adapter = Adapter::connect(Kind::Kafka, &format!("kafka://{}", mock_bootstrap()))
        .await
        .unwrap();
    let t = queue("kafka-declare");
    mock_create_topic(&t, 2);
    adapter.declare(&t).await.unwrap();
    let fresh = queue("kafka-fresh");
    let e = adapter.declare(&fresh).await.unwrap_err();
    assert!(e.to_string().contains("CreateTopics"), "{e}");
}

/// The built-in `kafka_lag` source and the drain gate of plans/events-kafka-to-nats.yaml on
/// the Kafka under test (the real broker in CI): the lag rises with what is published, drains to 0 as the old consumers commit,
/// and the gate passes only once it has read 0 for its whole `for:` (the quiet period), a
/// reading above 0 meanwhile starting the count again. The readings are the cluster's; the
/// gate's clock is an input, as the controller gives it.
#[cfg(feature = "controller")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP or QM_TEST_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka kafka)"]
async fn the_lag_source_rises_drains_and_the_drain_gate_waits_for_its_for() {
    use queue_migrate::gate::{self, Memory, Observation, Verdict};
    use queue_migrate::indicators::kafka_lag;
    use queue_migrate::plan::{Check, PhaseKind, Source};

    struct Env(String);
    impl queue_migrate::plan::Resolve for Env {
        fn env(&self, name: &str) -> Option<String> {
            match name {
                "OLD_BROKER_URL" => Some(self.0.clone()),
                "NEW_BROKER_URL" => Some("nats://127.0.0.1:4222".into()),
                _ => None,
            }
        }
        fn read_file(&self, path: &std::path::Path) -> Result<String, String> {
            Err(format!("no file {}", path.display()))
        }
    }

    let adapter = connect().await;
    let t = topic("kafka-lag", 3);
    let group = format!("{t}-consumer");
    let yaml = include_str!("../../../../plans/events-kafka-to-nats.yaml")
        .replace("topics: [events]", &format!("topics: [{t}]"))
        .replace("topic=\"events\"", &format!("topic=\"{t}\""))
        .replace("group: events-consumer", &format!("group: {group}"));
    let url = format!("kafka://{}", bootstrap());
    let plan = queue_migrate::plan::compile(&yaml, None, &Env(url))
        .unwrap_or_else(|e| panic!("{e:?}"))
        .plan;
    let drain = plan.phase(PhaseKind::Drain).unwrap();
    let gate = drain
        .exit
        .iter()
        .find(|g| g.source == "old_lag")
        .expect("the drain gate on the old topic's lag")
        .clone();
    let Check::Threshold { query, .. } = &gate.check else {
        panic!("{:?}", gate.check)
    };
    let Some(Source::KafkaLag {
        url,
        group: g,
        topics,
    }) = plan.sources.get("old_lag")
    else {
        panic!("old_lag")
    };
    assert_eq!(g, &group);
    let hold_ms = gate.hold_for.expect("for: quiet").as_millis() as i64;
    assert_eq!(
        hold_ms,
        11 * 60_000,
        "quiet = max_backoff + visibility_timeout"
    );
    let read = |now_ms: i64| {
        let (url, g, topics, query) = (
            url.value().unwrap().to_string(),
            g.clone(),
            topics.clone(),
            query.clone(),
        );
        async move {
            let lags = kafka_lag::read(&url, &g, &topics).await.unwrap();
            kafka_lag::evaluate(&query, &kafka_lag::samples(&g, &lags), now_ms).unwrap()
        }
    };

    // Nothing published: the topic is empty, lag 0.
    let t0 = 1_000_000_000_000_i64;
    assert_eq!(read(t0).await, 0.0);
    for n in 0..30 {
        let m = Message::new(format!("#{n}")).with_header(HEADER_KEY, format!("key-{}", n % 7));
        adapter.publish(&t, &m).await.unwrap();
    }
    // Published, not consumed: the lag rises to what waits, and the gate fails.
    let risen = read(t0).await;
    assert_eq!(risen, 30.0);
    // Beside the sum, the largest partition's lag and which (issue 57): 30 records on 3
    // partitions, so one holds at least 10.
    let lags = kafka_lag::read(url.value().unwrap(), g, topics)
        .await
        .unwrap();
    let largest = kafka_lag::largest(query, g, &lags).expect("the gate selects partitions' lag");
    assert_eq!(largest.topic, t);
    assert_eq!(
        Some(largest.lag),
        lags.iter().map(|l| l.2).max(),
        "{lags:?}"
    );
    assert!(largest.lag >= 10, "{largest:?} of {lags:?}");
    let mut memory = Memory::default();
    let e = gate::evaluate(&gate, &Observation::Value(risen), memory, t0);
    assert_eq!(e.verdict, Verdict::Fail, "{}", e.reason);
    memory = e.memory;

    // The old consumers read 20 and commit them: 10 left.
    let mut s = adapter
        .subscribe(&t, &options(&group, "old-1"))
        .await
        .unwrap();
    let mut taken = Vec::new();
    while taken.len() < 30 {
        taken.push(next_within(&mut s, 30).await.expect("a record"));
    }
    // Acked per partition in order, the first 20 read.
    let rest = taken.split_off(20);
    for d in taken {
        d.ack().await.unwrap();
    }
    let left = read(t0 + 60_000).await;
    // Each partition's first records read form a prefix of it: all 20 are committed.
    assert_eq!(left, 10.0, "lag after 20 commits");
    let e = gate::evaluate(&gate, &Observation::Value(left), memory, t0 + 60_000);
    assert_eq!(e.verdict, Verdict::Fail);
    memory = e.memory;
    for d in rest {
        d.ack().await.unwrap();
    }
    s.release().await.unwrap();

    // Drained: 0 on every partition. The gate soaks for its `for:`, then passes.
    let t1 = t0 + 120_000;
    let mut now = t1;
    while now < t1 + hold_ms {
        let zero = read(now).await;
        assert_eq!(zero, 0.0);
        let e = gate::evaluate(&gate, &Observation::Value(zero), memory, now);
        assert_eq!(
            e.verdict,
            Verdict::Soaking,
            "at +{} ms: {}",
            now - t1,
            e.reason
        );
        memory = e.memory;
        now += 60_000;
    }
    let e = gate::evaluate(
        &gate,
        &Observation::Value(read(t1 + hold_ms).await),
        memory,
        t1 + hold_ms,
    );
    assert_eq!(e.verdict, Verdict::Pass, "{}", e.reason);
    let lags = group_lag(&bootstrap(), &group, &t).unwrap();
    assert!(lags.iter().all(|p| p.committed == Some(p.high)), "{lags:?}");
}

/// On the real broker `declare` makes a topic the cluster does not know, with the URL's
/// partition count (the CreateTopics the mock refuses), and a second `declare` is no error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka)"]
async fn declare_creates_a_topic_on_the_real_broker() {
    let b = super::common::server_url("QM_TEST_APACHE_KAFKA_BOOTSTRAP");
    let adapter = Adapter::connect(Kind::Kafka, &format!("kafka://{b}?partitions=5"))
        .await
        .unwrap();
    let t = queue("kafka-real-declare");
    assert_eq!(partitions_of(&b, &t).len(), 0);
    adapter.declare(&t).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while partitions_of(&b, &t).len() < 5 {
        assert!(
            Instant::now() < deadline,
            "{t}: {:?}",
            partitions_of(&b, &t)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    adapter.declare(&t).await.unwrap();
}

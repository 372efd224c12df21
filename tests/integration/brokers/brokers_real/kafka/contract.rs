//! The adapter's contract on any Kafka-protocol server, where that server is faithful: bodies
//! taking a [`Server`], run here on the real Apache Kafka broker and on librdkafka's mock cluster
//! (which the fault tests use: these say it is faithful there), and in `brokers_real::tansu` on
//! Tansu. What they read goes through partitions *assigned* (the adapter's `browse`, the raw
//! reader [`records_at`]), which joins no group; the group tests (commit, rebalance, lag) are in
//! `brokers_real::kafka`, on the Kafka under test. Every record is published on its
//! own (the adapter awaits each confirmation), so each is a batch of one: Tansu's high watermark
//! is right for those and wrong for a batch of several (pinned in `brokers_real::tansu`), and
//! `browse` reads up to the high watermark.

use std::collections::{BTreeMap, BTreeSet};

use queue_migrate::brokers::{Adapter, HEADER_DEDUP_KEY, HEADER_KEY, Kind, Message};

use super::super::{queue, stamped};
use super::{mock_create_topic, number, partitions_of, publish_keyed, records_at, send_foreign};

/// A Kafka-protocol server under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Server {
    /// librdkafka's mock cluster (`QM_TEST_KAFKA_BOOTSTRAP`): topics through its control port.
    Mock,
    /// Tansu (`QM_TEST_TANSU_BOOTSTRAP`): topics through CreateTopics, as on a real Kafka.
    Tansu,
    /// The real Apache Kafka broker (`QM_TEST_APACHE_KAFKA_BOOTSTRAP`): topics through
    /// CreateTopics.
    Apache,
}

impl Server {
    /// Its `host:port` list; a test that asks is `#[ignore]`d without it.
    pub(crate) fn bootstrap(self) -> String {
        match self {
            Server::Mock => super::mock_bootstrap(),
            Server::Tansu => crate::common::server_url("QM_TEST_TANSU_BOOTSTRAP"),
            Server::Apache => crate::common::server_url("QM_TEST_APACHE_KAFKA_BOOTSTRAP"),
        }
    }

    /// The adapter on it, making topics of `partitions` partitions when it declares one.
    pub(crate) async fn adapter(self, partitions: u32) -> Adapter {
        let url = format!("kafka://{}?partitions={partitions}", self.bootstrap());
        Adapter::connect(Kind::Kafka, &url)
            .await
            .unwrap_or_else(|e| panic!("{self:?} at {url}: {e}"))
    }

    /// A topic of this run with `partitions` partitions (the mock refuses CreateTopics: its
    /// control port makes it; on Tansu, `declare` with `adapter` made by [`Server::adapter`]
    /// with the same count).
    pub(crate) async fn topic(self, adapter: &Adapter, test: &str, partitions: u32) -> String {
        let name = queue(test);
        match self {
            Server::Mock => mock_create_topic(&name, partitions),
            Server::Tansu | Server::Apache => adapter.declare(&name).await.unwrap(),
        }
        // A real broker's metadata may show a new topic a moment after CreateTopics answered.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let made = partitions_of(&self.bootstrap(), &name).len();
            if made == partitions as usize || std::time::Instant::now() > deadline {
                assert_eq!(made, partitions as usize, "{name}");
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        name
    }
}

/// Five records published (idempotent, `acks=all`), read back by `browse` from another client:
/// the payload byte for byte, every header, the slice key as the record key (as a raw reader
/// sees it); nothing committed, so a second browse reads them again and a group that read
/// nothing lags by all five.
pub(crate) async fn publish_then_browse_keeps_everything(server: Server) {
    let adapter = server.adapter(3).await;
    let t = server.topic(&adapter, "kafka-browse-trip", 3).await;
    for n in 0..5 {
        adapter.publish(&t, &stamped(n)).await.unwrap();
    }
    for _ in 0..2 {
        let got = adapter.browse(&t, 10).await.unwrap();
        let numbers: BTreeSet<usize> = got.iter().map(number).collect();
        assert_eq!((got.len(), numbers), (5, (0..5).collect()), "{server:?}");
        for m in &got {
            let want = stamped(number(m));
            assert_eq!(m.payload, want.payload, "payload byte for byte");
            assert_eq!(m.headers, want.headers, "every header, the route stamp too");
        }
    }
    let keys: BTreeSet<String> = records_at(&server.bootstrap(), &t, 5)
        .into_iter()
        .map(|r| r.key)
        .collect();
    let want: BTreeSet<String> = (0..5).map(|n| format!("order-{n}")).collect();
    assert_eq!(keys, want, "the record key is the slice key");
    assert_eq!(adapter.depth(&t, "nobody").await.unwrap().ready, 5);
}

/// 10 keys x 20 records over 3 partitions: each key's records on one partition, in publish
/// order by offset (a raw reader) and in `browse`'s answer (oldest first).
pub(crate) async fn each_key_keeps_one_partition_and_its_order(server: Server) {
    let adapter = server.adapter(3).await;
    let t = server.topic(&adapter, "kafka-key-order", 3).await;
    let (keys, per_key) = (10, 20);
    publish_keyed(&adapter, &t, keys, per_key).await;
    let held = records_at(&server.bootstrap(), &t, keys * per_key);
    assert_eq!(
        held.len(),
        keys * per_key,
        "{server:?}: every record fetched"
    );
    let mut by_key: BTreeMap<String, (BTreeSet<i32>, Vec<usize>)> = BTreeMap::new();
    for r in &held {
        let entry = by_key.entry(r.key.clone()).or_default();
        entry.0.insert(r.partition);
        entry.1.push(number(&Message::new(r.payload.clone())));
    }
    let used: BTreeSet<i32> = held.iter().map(|r| r.partition).collect();
    assert!(used.len() > 1, "10 keys over one partition only: {used:?}");
    for (key, (partitions, numbers)) in &by_key {
        assert_eq!(partitions.len(), 1, "{key} on {partitions:?}");
        assert!(numbers.is_sorted(), "{key} by offset: {numbers:?}");
        assert_eq!(numbers.len(), per_key, "{key}");
    }
    let browsed = adapter.browse(&t, 1_000).await.unwrap();
    assert_eq!(browsed.len(), keys * per_key, "{server:?}: browse whole");
    let mut seen: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for m in &browsed {
        let key = m.header(HEADER_KEY).unwrap().to_string();
        seen.entry(key).or_default().push(number(m));
    }
    for (key, numbers) in &seen {
        assert_eq!(numbers, &by_key[key].1, "{key} in browse's answer");
    }
}

/// A record of a producer that is not ours (a Kafka key, no headers) is browsed with the key as
/// `x-qm-key`, so the slice router can place it.
pub(crate) async fn a_foreign_records_key_is_browsed_as_the_slice_key(server: Server) {
    let adapter = server.adapter(1).await;
    let t = server.topic(&adapter, "kafka-foreign-browse", 1).await;
    send_foreign(&server.bootstrap(), &t).await;
    let got = adapter.browse(&t, 10).await.unwrap();
    assert_eq!(got.len(), 1, "{server:?}");
    assert_eq!(got[0].header(HEADER_KEY), Some("customer-9"));
    assert_eq!(got[0].header(HEADER_DEDUP_KEY), None);
    assert_eq!(got[0].payload, b"{}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_KAFKA_BOOTSTRAP (scripts/services.sh start kafka)"]
async fn publish_then_browse_keeps_everything_on_the_mock() {
    publish_then_browse_keeps_everything(Server::Mock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_KAFKA_BOOTSTRAP (scripts/services.sh start kafka)"]
async fn each_key_keeps_one_partition_and_its_order_on_the_mock() {
    each_key_keeps_one_partition_and_its_order(Server::Mock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_KAFKA_BOOTSTRAP (scripts/services.sh start kafka)"]
async fn a_foreign_records_key_is_browsed_as_the_slice_key_on_the_mock() {
    a_foreign_records_key_is_browsed_as_the_slice_key(Server::Mock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka)"]
async fn publish_then_browse_keeps_everything_on_apache_kafka() {
    publish_then_browse_keeps_everything(Server::Apache).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka)"]
async fn each_key_keeps_one_partition_and_its_order_on_apache_kafka() {
    each_key_keeps_one_partition_and_its_order(Server::Apache).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka)"]
async fn a_foreign_records_key_is_browsed_as_the_slice_key_on_apache_kafka() {
    a_foreign_records_key_is_browsed_as_the_slice_key(Server::Apache).await;
}

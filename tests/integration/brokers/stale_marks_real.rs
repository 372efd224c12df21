//! The stale-producer check with the old broker's own marks, on the real servers (issue 58):
//! NATS JetStream (`QM_TEST_NATS_URL`), Redis (`QM_TEST_REDIS_URL`) and Apache Kafka
//! (`QM_TEST_APACHE_KAFKA_BOOTSTRAP`). Each test writes, as a producer pinned to generation 4:
//! a message before the move whose stamp lies an hour ahead (its clock runs ahead), then, after
//! the old broker's mark was read with the move's document ([`follow_marked`]) and the stream sat
//! idle longer than the grace, one at once (propagation) and one after the grace. The mark makes
//! the first a backlog (by the stamp's time alone it would be stale), leaves the second in the
//! grace (a Redis mark from an idle stream's last id would trip it) and trips the third.
//!
//! These tests wait for real time to pass (the grace on the broker's own clock): about 2.5 s
//! each, plus a consumer group's join on Kafka.
#![cfg(feature = "brokers")]

use std::collections::BTreeMap;
use std::time::Duration;

use queue_migrate::brokers::marks::{MARK_DEADLINE, follow_marked};
use queue_migrate::brokers::{Adapter, Kind, Message, SubscribeOptions, Subscription};
use queue_migrate::routing::{Route, Side, sample_document};
use queue_migrate::stale::{
    self, Bounds, Decision, Mark, MoveLedger, Publish, StaleGuard, classify,
};
use queue_migrate::stamp::RouteStamp;

use crate::common;

const BOUNDS: Bounds = Bounds {
    grace_ms: 500,
    clock_skew_ms: 300,
};
/// Longer than the grace and the skew together, on any clock.
const PAST_THE_GRACE: Duration = Duration::from_millis(1_100);
/// The producer's clock an hour ahead.
const AHEAD_MS: i64 = 3_600_000;
const LABEL: &str = "x-test-label";

fn now_ms() -> i64 {
    queue_migrate::time::now_ms()
}

/// A message of a producer pinned to generation 4 on slice 3 (moved at generation 5), stamped
/// at `at_ms` by its clock.
fn pinned(label: &str, at_ms: i64) -> Message {
    let route = Route::new(Side::Old, 3, 4);
    let stamp = RouteStamp::new(&route, "old", "pinned", at_ms).unwrap();
    let mut m = Message::new(label.as_bytes().to_vec()).with_header(LABEL, label);
    for (name, value) in stamp.headers() {
        m.headers.insert(name.to_string(), value);
    }
    m
}

/// What the check says of one delivery: with the guard (the mark), and by the stamp's time alone
/// (the same move, published at `t0`, without a mark).
#[derive(Debug)]
struct Checked {
    facts: stale::Delivery,
    marked: Decision,
    unmarked: Decision,
}

/// Reads `n` deliveries and checks each, by its label.
async fn check(
    sub: &mut Subscription,
    n: usize,
    guard: &StaleGuard,
    t0: i64,
) -> BTreeMap<String, Checked> {
    let mut unmarked = MoveLedger::new();
    unmarked.record(Publish {
        generation: 5,
        slices_migrated: 8,
        published_at_ms: t0,
        old_mark: None,
    });
    let mut out = BTreeMap::new();
    while out.len() < n {
        let d = tokio::time::timeout(Duration::from_secs(30), sub.next())
            .await
            .expect("a delivery within 30 s")
            .unwrap()
            .expect("the subscription goes on");
        let label = d.message.header(LABEL).unwrap().to_string();
        let facts = d.stale_facts();
        let stamp = RouteStamp::from_headers(d.message.headers.iter()).unwrap();
        let checked = Checked {
            facts,
            marked: guard.check(Some(&stamp), facts),
            unmarked: classify(Some(&stamp), &unmarked, facts, BOUNDS),
        };
        d.ack().await.unwrap();
        out.insert(label, checked);
    }
    out
}

fn is_stale(d: &Decision) -> bool {
    matches!(d, Decision::Stale { producer, slice: 3, stamped: 4, moved_at: 5 } if producer == "pinned")
}

/// The before / in-grace / after story on one queue of `adapter` (NATS, Redis): returns the mark
/// read and what the check said of each message.
async fn story(adapter: &Adapter, queue: &str) -> (Option<Mark>, BTreeMap<String, Checked>) {
    adapter.declare(queue).await.unwrap();
    let t0 = now_ms();
    adapter
        .publish(queue, &pinned("before", t0 + AHEAD_MS))
        .await
        .unwrap();
    // The queue sits idle longer than the grace before the move.
    tokio::time::sleep(PAST_THE_GRACE).await;
    let guard = StaleGuard::new(BOUNDS);
    let t_move = now_ms();
    let mark = follow_marked(
        &guard,
        &sample_document(5, 8),
        Some(adapter),
        queue,
        MARK_DEADLINE,
    )
    .await;
    adapter
        .publish(queue, &pinned("in-grace", now_ms()))
        .await
        .unwrap();
    tokio::time::sleep(PAST_THE_GRACE).await;
    adapter
        .publish(queue, &pinned("after", now_ms()))
        .await
        .unwrap();
    let mut sub = adapter
        .subscribe(queue, &SubscribeOptions::group("marks"))
        .await
        .unwrap();
    let checked = check(&mut sub, 3, &guard, t_move).await;
    assert_eq!(guard.counts().marks_unread(), 0);
    (mark, checked)
}

/// The three decisions every broker with a mark gives.
fn assert_told_by_the_mark(checked: &BTreeMap<String, Checked>) {
    let before = &checked["before"];
    assert_eq!(before.marked, Decision::Backlog, "{checked:?}");
    assert!(
        is_stale(&before.unmarked),
        "without the mark the stamp an hour ahead trips: {checked:?}"
    );
    assert_eq!(checked["in-grace"].marked, Decision::InGrace, "{checked:?}");
    assert!(is_stale(&checked["after"].marked), "{checked:?}");
}

async fn delete_stream(url: &str, queue: &str) {
    let client = async_nats::connect(url).await.unwrap();
    let js = async_nats::jetstream::new(client);
    js.delete_stream(queue.replace('.', "_")).await.unwrap();
}

fn queue(test: &str) -> String {
    format!("qm.test.marks.{test}.{}.{}", std::process::id(), now_ms())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_NATS_URL (scripts/services.sh start nats)"]
async fn nats_a_backlog_is_told_by_the_streams_last_sequence_whatever_its_stamp_says() {
    let url = common::server_url("QM_TEST_NATS_URL");
    let adapter = Adapter::connect(Kind::Nats, &url).await.unwrap();
    let q = queue("nats");
    let (mark, checked) = story(&adapter, &q).await;
    // The stream held one message when its mark was read.
    assert_eq!(mark, Some(Mark::Position(1)));
    let positions: Vec<_> = ["before", "in-grace", "after"]
        .iter()
        .map(|l| checked[*l].facts.position)
        .collect();
    assert_eq!(positions, [Some(1), Some(2), Some(3)]);
    assert!(
        checked["before"].facts.enqueued_at_ms.is_some(),
        "{checked:?}"
    );
    assert_told_by_the_mark(&checked);
    delete_stream(&url, &q).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_REDIS_URL (scripts/services.sh start redis)"]
async fn redis_a_backlog_is_told_by_the_servers_clock_and_an_idle_stream_trips_nothing_in_the_grace()
 {
    let url = common::server_url("QM_TEST_REDIS_URL");
    let adapter = Adapter::connect(Kind::Redis, &url).await.unwrap();
    let q = queue("redis");
    let (mark, checked) = story(&adapter, &q).await;
    let Some(Mark::EnqueuedAt(at)) = mark else {
        panic!("{mark:?}")
    };
    let before = checked["before"].facts.enqueued_at_ms.unwrap();
    // The server's clock at the mark, not the idle stream's last id (the "before" entry): with
    // that one, the entry written at once after the move would be beyond the grace.
    assert!(
        at >= before + 1_000,
        "mark {at}, last entry {before}: {checked:?}"
    );
    let in_grace = checked["in-grace"].facts.enqueued_at_ms.unwrap();
    assert!(in_grace > before + BOUNDS.grace_ms, "{checked:?}");
    assert_told_by_the_mark(&checked);
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let _: i64 = redis::cmd("DEL").arg(&q).query_async(&mut c).await.unwrap();
}

/// RabbitMQ has no mark: none is read, none counted as unread, and its deliveries carry no facts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_AMQP_URL (scripts/services.sh start rabbitmq)"]
async fn rabbitmq_has_no_mark_and_its_backlog_is_told_by_the_stamps_time() {
    let url = common::server_url("QM_TEST_AMQP_URL");
    let adapter = Adapter::connect(Kind::RabbitMq, &url).await.unwrap();
    let q = queue("rabbitmq");
    adapter.declare(&q).await.unwrap();
    assert_eq!(adapter.stale_mark(&q).await.unwrap(), None);
    let t0 = now_ms();
    adapter.publish(&q, &pinned("before", t0)).await.unwrap();
    let guard = StaleGuard::new(BOUNDS);
    let mark = follow_marked(
        &guard,
        &sample_document(5, 8),
        Some(&adapter),
        &q,
        MARK_DEADLINE,
    )
    .await;
    assert_eq!((mark, guard.counts().marks_unread()), (None, 0));
    let mut sub = adapter
        .subscribe(&q, &SubscribeOptions::group("marks"))
        .await
        .unwrap();
    let checked = check(&mut sub, 1, &guard, t0).await;
    assert_eq!(checked["before"].facts, stale::Delivery::default());
    assert_eq!(checked["before"].marked, Decision::Backlog, "{checked:?}");
    drop(sub);
    common::delete_queue(Kind::RabbitMq, &url, &q).await;
}

/// A mark that cannot be read is counted, and the document followed without one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_NATS_URL (scripts/services.sh start nats)"]
async fn a_mark_that_cannot_be_read_is_counted_and_the_document_followed_without_one() {
    let url = common::server_url("QM_TEST_NATS_URL");
    let adapter = Adapter::connect(Kind::Nats, &url).await.unwrap();
    let guard = StaleGuard::new(BOUNDS);
    // No stream for this queue: the read fails.
    let q = queue("missing");
    let doc = sample_document(5, 8);
    let mark = follow_marked(&guard, &doc, Some(&adapter), &q, MARK_DEADLINE).await;
    assert_eq!(mark, None);
    assert_eq!(guard.counts().marks_unread(), 1);
    assert_eq!(guard.latest_generation(), Some(5));
    // Not connected at all: the same.
    follow_marked(&guard, &sample_document(6, 8), None, &q, MARK_DEADLINE).await;
    assert_eq!(guard.counts().marks_unread(), 2);
    // A generation already followed reads nothing.
    follow_marked(&guard, &doc, None, &q, MARK_DEADLINE).await;
    assert_eq!(guard.counts().marks_unread(), 2);
}

/// Kafka: a topic of two partitions, each told by its own high watermark.
#[cfg(feature = "kafka")]
mod kafka {
    use super::*;

    /// Writes `message` to `partition` of `topic` with rdkafka's own producer.
    async fn produce(bootstrap: &str, topic: &str, partition: i32, message: &Message) {
        use rdkafka::message::{Header, OwnedHeaders};
        use rdkafka::producer::{FutureProducer, FutureRecord};
        let producer: FutureProducer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .unwrap();
        let mut headers = OwnedHeaders::new();
        for (name, value) in &message.headers {
            headers = headers.insert(Header {
                key: name,
                value: Some(value.as_bytes()),
            });
        }
        let record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic)
            .partition(partition)
            .headers(headers)
            .payload(message.payload.as_slice());
        producer
            .send(record, Duration::from_secs(10))
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka)"]
    async fn kafka_each_partition_is_told_by_its_own_high_watermark() {
        let bootstrap = common::server_url("QM_TEST_APACHE_KAFKA_BOOTSTRAP");
        let topic = queue("kafka").replace('.', "-");
        super::super::brokers_real::kafka::create_topic_at(&bootstrap, &topic, 2);
        let adapter = Adapter::connect(Kind::Kafka, &bootstrap).await.unwrap();
        let t0 = now_ms();
        // Before the move: three records on partition 0, one on partition 1, stamped an hour
        // ahead.
        for (i, p) in [(0, 0), (1, 0), (2, 0), (3, 1)] {
            let label = format!("before-{i}");
            produce(&bootstrap, &topic, p, &pinned(&label, t0 + AHEAD_MS)).await;
        }
        tokio::time::sleep(PAST_THE_GRACE).await;
        let guard = StaleGuard::new(BOUNDS);
        let t_move = now_ms();
        let doc = sample_document(5, 8);
        let mark = follow_marked(&guard, &doc, Some(&adapter), &topic, MARK_DEADLINE).await;
        let ends: BTreeMap<u32, u64> = [(0, 3), (1, 1)].into_iter().collect();
        assert_eq!(mark, Some(Mark::PartitionEnds(ends)));
        // At once after the move, on partition 1 (offset 1, below partition 0's end).
        produce(&bootstrap, &topic, 1, &pinned("in-grace", now_ms())).await;
        tokio::time::sleep(PAST_THE_GRACE).await;
        produce(&bootstrap, &topic, 0, &pinned("after-0", now_ms())).await;
        produce(&bootstrap, &topic, 1, &pinned("after-1", now_ms())).await;
        let mut sub = adapter
            .subscribe(&topic, &SubscribeOptions::group("marks"))
            .await
            .unwrap();
        let checked = check(&mut sub, 7, &guard, t_move).await;
        let at = |l: &str| (checked[l].facts.partition, checked[l].facts.position);
        assert_eq!(at("before-3"), (Some(1), Some(0)));
        assert_eq!(at("in-grace"), (Some(1), Some(1)));
        assert_eq!(at("after-0"), (Some(0), Some(3)));
        assert_eq!(at("after-1"), (Some(1), Some(2)));
        for i in 0..4 {
            let before = &checked[&format!("before-{i}")];
            assert_eq!(before.marked, Decision::Backlog, "{checked:?}");
            assert!(is_stale(&before.unmarked), "{checked:?}");
        }
        assert_eq!(checked["in-grace"].marked, Decision::InGrace, "{checked:?}");
        // Offset 2 of partition 1 is below partition 0's end: its own partition's end says it
        // came after the move.
        assert!(is_stale(&checked["after-0"].marked), "{checked:?}");
        assert!(is_stale(&checked["after-1"].marked), "{checked:?}");
        sub.release().await.unwrap();
    }
}

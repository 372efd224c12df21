//! A faithful Kafka ingress (issue 57, item 4), on the real Apache Kafka broker
//! (`QM_TEST_APACHE_KAFKA_BOOTSTRAP`): a record written by an outside producer (rdkafka, not the
//! adapter) with binary header values, a repeated header name, a null header value, a binary
//! key, a null payload or a create time of its own goes through the bridge to a Kafka egress
//! unchanged, as a raw consumer (not the adapter) reads it there, the route stamp added; and to
//! RabbitMQ, NATS JetStream and Redis Streams as the `x-kafka-*` headers docs/brokers.md states.
//!
//! Each regression failed on the old main: the ingress read header values lossily (U+FFFD for
//! each byte that is not UTF-8), kept the last value of a repeated name, read a null value as
//! `""`, dropped a key that is not UTF-8 (the egress record had none), read a tombstone as an
//! empty payload (written back as an empty record) and never read the timestamp (the egress
//! record had the producer's clock).

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use rdkafka::Message as _;
use rdkafka::message::{Header, Headers as _, OwnedHeaders, OwnedMessage};

use queue_migrate::bridge::metrics::BridgeMetrics;
use queue_migrate::bridge::{Brokers, Settings};
use queue_migrate::brokers::{Adapter, Kind, Message};
use queue_migrate::router::Router;
use queue_migrate::routing::Side;
use queue_migrate::stamp::HEADER_ROUTE;

use super::{collect_until, common, routing, run_and_store, settings, spawn_bridge};

use crate::brokers::brokers_real::kafka::{create_topic_at, raw_messages_at};

/// One record as an outside producer writes it to the ingress.
#[derive(Clone, Default)]
struct Outside {
    headers: Vec<(&'static str, Option<Vec<u8>>)>,
    key: Option<Vec<u8>>,
    /// `None`: a tombstone.
    payload: Option<Vec<u8>>,
    timestamp_ms: Option<i64>,
}

/// A record of order `order-1` (its `x-order-id` header, the bridge's key) with `{}` as payload.
fn outside() -> Outside {
    Outside {
        headers: vec![("x-order-id", Some(b"order-1".to_vec()))],
        key: Some(b"order-1".to_vec()),
        payload: Some(b"{}".to_vec()),
        timestamp_ms: None,
    }
}

/// The real broker's PLAINTEXT listener (every test here needs it).
fn real_kafka() -> String {
    common::server_url("QM_TEST_APACHE_KAFKA_BOOTSTRAP")
}

/// Writes `records` to `topic`, in order, with rdkafka's own producer.
async fn produce(bootstrap: &str, topic: &str, records: &[Outside]) {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    for r in records {
        let mut headers = OwnedHeaders::new();
        for (name, value) in &r.headers {
            headers = headers.insert(Header {
                key: name,
                value: value.as_deref(),
            });
        }
        let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(topic).headers(headers);
        if let Some(key) = &r.key {
            record = record.key(key.as_slice());
        }
        if let Some(payload) = &r.payload {
            record = record.payload(payload.as_slice());
        }
        if let Some(ms) = r.timestamp_ms {
            record = record.timestamp(ms);
        }
        producer
            .send(record, Duration::from_secs(10))
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }
}

/// A record's headers, in order.
fn headers_of(m: &OwnedMessage) -> Vec<(String, Option<Vec<u8>>)> {
    m.headers()
        .map(|h| {
            h.iter()
                .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                .collect()
        })
        .unwrap_or_default()
}

/// The values of the headers named `name`, in order.
fn values(m: &OwnedMessage, name: &str) -> Vec<Option<Vec<u8>>> {
    headers_of(m)
        .into_iter()
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v)
        .collect()
}

/// Settings of a bridge from the Kafka ingress keyed by the header `x-order-id`, every slice on
/// the new broker `new` (named `new_name`).
fn from_kafka(run: &str, new_name: &str) -> Settings {
    Settings {
        key: queue_migrate::plan::BridgeKey::Header("x-order-id".into()),
        old_name: "kafka".into(),
        new_name: new_name.into(),
        ..settings(run, "bridge-a")
    }
}

/// Runs a bridge from a Kafka ingress (on the real broker) to `new` until it confirmed
/// `records` on the new side, every slice routed there; the settings it ran with.
async fn bridge_records(
    tag: &str,
    new: Arc<Adapter>,
    new_name: &str,
    records: &[Outside],
) -> Settings {
    let bootstrap = real_kafka();
    let (run, _dir, store) = run_and_store(tag).await;
    let s = from_kafka(&run, new_name);
    create_topic_at(&bootstrap, &s.ingress, 1);
    create_topic_at(&bootstrap, &s.old_queue, 1);
    produce(&bootstrap, &s.ingress, records).await;
    let brokers = Brokers {
        old: Arc::new(
            Adapter::connect(Kind::Kafka, &format!("kafka://{bootstrap}"))
                .await
                .unwrap(),
        ),
        new,
    };
    let router = Router::builder(s.migration.clone()).slices(16).build();
    router.offer(routing(&s.migration, 1, 16)).unwrap();
    let metrics = Arc::new(BridgeMetrics::new(&s.migration));
    let (task, stop) = spawn_bridge(&store, s.clone(), &brokers, &router, &metrics);
    let deadline = Instant::now() + Duration::from_secs(60);
    while metrics.confirmed(Side::New) < records.len() as u64 {
        assert!(
            Instant::now() < deadline,
            "the bridge did not forward {} records",
            records.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = stop.send(());
    task.await.unwrap().unwrap();
    s
}

/// Kafka -> Kafka: `records` through the bridge, as a raw consumer reads them on the egress.
async fn kafka_to_kafka(tag: &str, records: &[Outside]) -> Vec<OwnedMessage> {
    let bootstrap = real_kafka();
    let egress = Arc::new(
        Adapter::connect(Kind::Kafka, &format!("kafka://{bootstrap}"))
            .await
            .unwrap(),
    );
    let s = bridge_records(tag, egress, "kafka-new", records).await;
    let out = raw_messages_at(&bootstrap, &s.new_queue, records.len());
    assert_eq!(out.len(), records.len(), "every record on the egress");
    for m in &out {
        assert_eq!(
            values(m, HEADER_ROUTE).len(),
            1,
            "the route stamp is added: {:?}",
            headers_of(m)
        );
    }
    out
}

/// Regression (issue 57): a binary header value was read lossily (each byte that is not UTF-8
/// became U+FFFD) and forwarded so.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka)"]
async fn a_binary_header_value_reaches_the_kafka_egress_byte_for_byte() {
    let binary = vec![0x00, 0xff, 0xfe, 0x80, 0x7f];
    let mut r = outside();
    r.headers.push(("trace-bin", Some(binary.clone())));
    r.headers
        .push(("x-qm-dedup-key", Some(b"order.paid:order-1:1".to_vec())));
    let out = kafka_to_kafka("kff-binary", &[r]).await;
    assert_eq!(values(&out[0], "trace-bin"), [Some(binary)]);
    assert_eq!(
        values(&out[0], "x-qm-dedup-key"),
        [Some(b"order.paid:order-1:1".to_vec())],
        "the dedup header too"
    );
}

/// Regression (issue 57): of a header name given three times only the last value was kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka)"]
async fn repeated_header_names_reach_the_kafka_egress_all_in_order() {
    let mut r = outside();
    for v in ["b", "a", "c"] {
        r.headers.push(("tag", Some(v.as_bytes().to_vec())));
    }
    let out = kafka_to_kafka("kff-repeated", &[r]).await;
    let want: Vec<Option<Vec<u8>>> = ["b", "a", "c"]
        .iter()
        .map(|v| Some(v.as_bytes().to_vec()))
        .collect();
    assert_eq!(values(&out[0], "tag"), want);
}

/// Regression (issue 57): a null header value was forwarded as an empty string.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka)"]
async fn a_null_header_value_reaches_the_kafka_egress_null() {
    let mut r = outside();
    r.headers.push(("gone", None));
    r.headers.push(("empty", Some(Vec::new())));
    let out = kafka_to_kafka("kff-null", &[r]).await;
    assert_eq!(values(&out[0], "gone"), [None], "null stays null");
    assert_eq!(
        values(&out[0], "empty"),
        [Some(Vec::new())],
        "empty stays empty"
    );
}

/// Regression (issue 57): a key that is not UTF-8 was dropped (the egress record had no key).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka)"]
async fn a_binary_key_reaches_the_kafka_egress_byte_for_byte() {
    let key = vec![0x00, 0xc3, 0x28, 0xff];
    let mut r = outside();
    r.key = Some(key.clone());
    let out = kafka_to_kafka("kff-key", &[r]).await;
    assert_eq!(out[0].key(), Some(key.as_slice()));
}

/// Regression (issue 57): a tombstone (null payload) was forwarded as an empty record, which no
/// longer deletes its key on a compacted topic. An empty payload stays empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka)"]
async fn a_tombstone_reaches_the_kafka_egress_as_a_tombstone() {
    let tombstone = Outside {
        payload: None,
        ..outside()
    };
    let empty = Outside {
        payload: Some(Vec::new()),
        ..outside()
    };
    let out = kafka_to_kafka("kff-tombstone", &[tombstone, empty]).await;
    assert_eq!(out[0].payload(), None, "null stays null");
    assert_eq!(out[1].payload(), Some(&b""[..]), "empty stays empty");
}

/// Regression (issue 57): the egress record's timestamp was the forwarding time, not the
/// record's create time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP (scripts/services.sh start apache-kafka)"]
async fn the_create_time_reaches_the_kafka_egress() {
    // A day ago: well inside the broker's retention, far from the forwarding time.
    let created = queue_migrate::time::now_ms() - 86_400_000 + 123;
    let r = Outside {
        timestamp_ms: Some(created),
        ..outside()
    };
    let out = kafka_to_kafka("kff-timestamp", &[r]).await;
    assert_eq!(out[0].timestamp(), rdkafka::Timestamp::CreateTime(created));
}

/// One record with every property, and what a text broker must say of it.
fn everything(created: i64) -> Outside {
    let mut r = outside();
    r.headers.push(("bin", Some(vec![0xff, 0x00])));
    r.headers.push(("tag", Some(b"x".to_vec())));
    r.headers.push(("gone", None));
    r.headers.push(("tag", Some(b"y".to_vec())));
    r.key = Some(vec![0x00, 0xff]);
    r.payload = None;
    r.timestamp_ms = Some(created);
    r
}

/// What RabbitMQ, NATS and Redis must deliver for [`everything`]: the plain headers as they
/// are, the rest as the `x-kafka-*` headers of docs/brokers.md, an empty body.
fn assert_mapped(m: &Message, created: i64) {
    assert_eq!(m.header("x-order-id"), Some("order-1"), "{:?}", m.headers);
    assert_eq!(
        m.header("x-kafka-headers"),
        Some(
            r#"[{"name":"bin","base64":"/wA="},{"name":"tag","value":"x"},{"name":"gone","value":null},{"name":"tag","value":"y"}]"#
        ),
        "{:?}",
        m.headers
    );
    let key = base64::engine::general_purpose::STANDARD.encode([0x00, 0xff]);
    assert_eq!(m.header("x-kafka-key-base64"), Some(key.as_str()));
    assert_eq!(
        m.header("x-kafka-timestamp"),
        Some(created.to_string().as_str())
    );
    assert_eq!(m.header("x-kafka-tombstone"), Some("true"));
    assert!(m.payload.is_empty());
    assert!(m.header(HEADER_ROUTE).is_some(), "the route stamp");
}

/// `everything` through the bridge to `kind` at the URL in `var`, read back by the adapter.
async fn kafka_to(kind: Kind, var: &str, name: &str) -> (Message, i64) {
    let created = queue_migrate::time::now_ms() - 3_600_000 + 7;
    let url = common::server_url(var);
    let new = Arc::new(Adapter::connect(kind, &url).await.unwrap());
    let s = bridge_records(
        &format!("kff-{name}"),
        new.clone(),
        name,
        &[everything(created)],
    )
    .await;
    let mut seen = Vec::new();
    collect_until(&new, &s.new_queue, 1, 30, &mut seen).await;
    assert!(!seen.is_empty(), "the record on {name}");
    (seen.remove(0), created)
}

/// A Kafka record's binary, null and repeated headers, binary key, tombstone and create time
/// reach RabbitMQ as `x-kafka-*` headers; the create time also as the AMQP `timestamp` property.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP and QM_TEST_AMQP_URL (scripts/services.sh start apache-kafka rabbitmq)"]
async fn a_kafka_record_reaches_rabbitmq_as_documented() {
    let (m, created) = kafka_to(Kind::RabbitMq, "QM_TEST_AMQP_URL", "rabbitmq").await;
    assert_mapped(&m, created);
    assert_eq!(m.properties.timestamp, Some((created / 1000) as u64));
}

/// The same, to NATS JetStream.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP and QM_TEST_NATS_URL (scripts/services.sh start apache-kafka nats)"]
async fn a_kafka_record_reaches_nats_as_documented() {
    let (m, created) = kafka_to(Kind::Nats, "QM_TEST_NATS_URL", "nats").await;
    assert_mapped(&m, created);
}

/// The same, to Redis Streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP and QM_TEST_REDIS_URL (scripts/services.sh start apache-kafka redis)"]
async fn a_kafka_record_reaches_redis_as_documented() {
    let (m, created) = kafka_to(Kind::Redis, "QM_TEST_REDIS_URL", "redis").await;
    assert_mapped(&m, created);
}

//! What the bridge forwards of a RabbitMQ message besides its payload, against real brokers
//! (`QM_TEST_AMQP_URL`, and `QM_TEST_NATS_URL` / `QM_TEST_REDIS_URL` for the text-only
//! destinations): a producer publishes through lapin with every AMQP basic property and headers
//! of every AMQP type, the bridge forwards, and the destination is read back property by
//! property, header by header. Skipped, with a note, without the servers.
#![cfg(feature = "cli")]

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lapin::options::{BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, DecimalValue, FieldArray, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use queue_migrate::bridge::metrics::BridgeMetrics;
use queue_migrate::bridge::{self, Brokers, Settings};
use queue_migrate::brokers::{Adapter, Kind, Message, SubscribeOptions};
use queue_migrate::plan::BridgeKey;
use queue_migrate::router::Router;
use queue_migrate::routing::{BrokerNames, RoutingDocument, Side};

/// A server's URL: every test here is `#[ignore]`d without its servers (see
/// [`common::server_url`]).
fn env(var: &str) -> Option<String> {
    Some(common::server_url(var))
}

fn run_id(tag: &str) -> String {
    format!(
        "{tag}-{}-{}",
        std::process::id(),
        queue_migrate::time::now_ms()
    )
}

/// A bridge from RabbitMQ to the `new_name` broker, keyed by the header `x-order-id`, with
/// every slice on new.
fn settings(run: &str, new_name: &str) -> Settings {
    Settings {
        migration: format!("bridge-props-{run}"),
        ingress: format!("qm-props-{run}.ingress"),
        key: BridgeKey::Header("x-order-id".into()),
        prefetch: 4,
        old_queue: format!("qm-props-{run}.old"),
        dead_letter: None,
        new_queue: format!("qm-props-{run}.new"),
        old_name: "rabbitmq".into(),
        new_name: new_name.into(),
        holder: "bridge-a".into(),
        lease_ttl: Duration::from_secs(2),
        visibility_timeout: Duration::from_secs(2),
    }
}

fn all_on_new(migration: &str, new_name: &str) -> Router {
    let router = Router::builder(migration).slices(16).build();
    router
        .offer(RoutingDocument {
            migration: migration.to_owned(),
            generation: 1,
            state: "slices".into(),
            step: Some(0),
            paused: false,
            slices_total: 16,
            slices_migrated: 16,
            consume: vec![Side::Old, Side::New],
            brokers: BrokerNames {
                old: "rabbitmq".into(),
                new: new_name.into(),
            },
            updated_at: "2026-11-30T00:00:00Z".into(),
        })
        .unwrap();
    router
}

/// Every AMQP field type, nested ones too, and a stamp header the bridge replaces.
fn typed_headers() -> FieldTable {
    let mut nested = FieldTable::default();
    nested.insert("attempt".into(), AMQPValue::LongInt(2));
    nested.insert("by".into(), AMQPValue::LongString("billing".into()));
    let mut array = FieldArray::default();
    array.push(AMQPValue::LongString("a".into()));
    array.push(AMQPValue::ShortShortUInt(7));
    array.push(AMQPValue::Boolean(true));
    let mut t = FieldTable::default();
    t.insert("x-order-id".into(), AMQPValue::LongString("order-1".into()));
    t.insert("x-retry-count".into(), AMQPValue::LongInt(3));
    t.insert("x-flag".into(), AMQPValue::Boolean(true));
    t.insert("x-i8".into(), AMQPValue::ShortShortInt(-8));
    t.insert("x-u8".into(), AMQPValue::ShortShortUInt(8));
    t.insert("x-i16".into(), AMQPValue::ShortInt(-16));
    t.insert("x-u16".into(), AMQPValue::ShortUInt(16));
    t.insert("x-u32".into(), AMQPValue::LongUInt(32));
    t.insert("x-i64".into(), AMQPValue::LongLongInt(-6_400_000_000));
    t.insert("x-f32".into(), AMQPValue::Float(1.5));
    t.insert("x-f64".into(), AMQPValue::Double(2.25));
    t.insert(
        "x-amount".into(),
        AMQPValue::DecimalValue(DecimalValue {
            scale: 2,
            value: 12_345,
        }),
    );
    t.insert("x-sent".into(), AMQPValue::Timestamp(1_767_225_600));
    t.insert(
        "x-bytes".into(),
        AMQPValue::ByteArray(vec![0xff, 0x00].into()),
    );
    t.insert("x-void".into(), AMQPValue::Void);
    t.insert("x-table".into(), AMQPValue::FieldTable(nested));
    t.insert("x-array".into(), AMQPValue::FieldArray(array));
    t.insert("x-qm-route".into(), AMQPValue::LongString("old".into()));
    t
}

/// Every basic property; `user_id` is the connection's own user (RabbitMQ checks it).
fn properties(user: &str) -> BasicProperties {
    BasicProperties::default()
        .with_content_type("application/json".into())
        .with_content_encoding("identity".into())
        .with_delivery_mode(1)
        .with_priority(5)
        .with_correlation_id("corr-1".into())
        .with_reply_to("replies".into())
        .with_expiration("600000".into())
        .with_message_id("msg-1".into())
        .with_timestamp(1_767_225_600)
        .with_type("order.paid".into())
        .with_user_id(ShortString::from(user.to_string()))
        .with_app_id("checkout".into())
        .with_cluster_id("c1".into())
        .with_headers(typed_headers())
}

/// The user an AMQP URL logs in as.
fn user_of(amqp: &str) -> String {
    let url = reqwest::Url::parse(amqp).unwrap();
    match url.username() {
        "" => "guest".into(),
        u => u.to_string(),
    }
}

/// Publish `payload` with `properties` to `queue` as a producer would (lapin, confirmed).
async fn produce(amqp: &str, queue: &str, payload: &[u8], properties: BasicProperties) {
    let connection = Connection::connect(amqp, ConnectionProperties::default())
        .await
        .unwrap();
    let channel = connection.create_channel().await.unwrap();
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let confirm = channel
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            payload,
            properties,
        )
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(confirm.is_ack(), "the producer's publish was confirmed");
    let _ = connection.close(200, "OK".into()).await;
}

/// Take one message of `queue` through lapin (`basic.get`, acked), waiting up to 20 s.
async fn take(amqp: &str, queue: &str) -> (Vec<u8>, BasicProperties) {
    let connection = Connection::connect(amqp, ConnectionProperties::default())
        .await
        .unwrap();
    let channel = connection.create_channel().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = channel
            .basic_get(queue.into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap();
        if let Some(m) = got {
            let out = (m.delivery.data.clone(), m.delivery.properties.clone());
            let _ = connection.close(200, "OK".into()).await;
            return out;
        }
        assert!(Instant::now() < deadline, "nothing reached {queue}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs a bridge until the returned sender is used.
fn spawn_bridge(
    settings: Settings,
    brokers: &Brokers,
    router: Router,
    store: queue_migrate::store::any::AnyStore,
) -> (
    tokio::task::JoinHandle<Result<(), bridge::BridgeError>>,
    tokio::sync::oneshot::Sender<()>,
) {
    let metrics = Arc::new(BridgeMetrics::new(&settings.migration));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(bridge::run(
        store,
        settings,
        brokers.clone(),
        router,
        metrics,
        async {
            let _ = stopped.await;
        },
    ));
    (task, stop)
}

async fn store(dir: &tempfile::TempDir) -> queue_migrate::store::any::AnyStore {
    queue_migrate::store::any::open(dir.path().join("state.db").to_str().unwrap())
        .await
        .unwrap()
}

/// Regression: a RabbitMQ → RabbitMQ bridge dropped every basic property and every header that
/// was not a string (`x-retry-count` as an integer, `correlation_id`, `message_id`, ...).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_AMQP_URL and the new side's server (scripts/services.sh start rabbitmq nats redis)"]
async fn rabbitmq_to_rabbitmq_keeps_every_property_and_typed_header() {
    let Some(amqp) = env("QM_TEST_AMQP_URL") else {
        return;
    };
    let run = run_id("amqp");
    let s = settings(&run, "rabbitmq-new");
    let rabbit = Arc::new(Adapter::connect(Kind::RabbitMq, &amqp).await.unwrap());
    let brokers = Brokers {
        old: rabbit.clone(),
        new: rabbit.clone(),
    };
    rabbit.declare(&s.ingress).await.unwrap();
    rabbit.declare(&s.new_queue).await.unwrap();
    let user = user_of(&amqp);
    let sent = properties(&user);
    produce(
        &amqp,
        &s.ingress,
        b"{\"orderId\":\"order-1\"}",
        sent.clone(),
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let router = all_on_new(&s.migration, &s.new_name);
    let (task, stop) = spawn_bridge(s.clone(), &brokers, router, store(&dir).await);
    let (payload, got) = take(&amqp, &s.new_queue).await;
    let _ = stop.send(());
    task.await.unwrap().unwrap();

    assert_eq!(payload, b"{\"orderId\":\"order-1\"}");
    assert_eq!(got.content_type(), sent.content_type());
    assert_eq!(got.content_encoding(), sent.content_encoding());
    assert_eq!(
        got.delivery_mode(),
        &Some(2),
        "the bridge publishes persistent, whatever the producer chose"
    );
    assert_eq!(got.priority(), sent.priority());
    assert_eq!(got.correlation_id(), sent.correlation_id());
    assert_eq!(got.reply_to(), sent.reply_to());
    assert_eq!(got.expiration(), sent.expiration());
    assert_eq!(got.message_id(), sent.message_id());
    assert_eq!(got.timestamp(), sent.timestamp());
    assert_eq!(got.kind(), sent.kind());
    assert_eq!(got.user_id(), sent.user_id());
    assert_eq!(got.app_id(), sent.app_id());
    assert_eq!(got.cluster_id(), sent.cluster_id());

    let got = got.headers().clone().expect("headers").inner().clone();
    for (name, value) in typed_headers().inner() {
        if name.as_str() == "x-qm-route" {
            continue;
        }
        assert_eq!(got.get(name), Some(value), "header {name:?}");
    }
    assert_eq!(
        got.get("x-qm-route"),
        Some(&AMQPValue::LongString(LongString::from("bridge"))),
        "the route stamp replaces a same-named header"
    );
    let stamp = [
        "x-qm-broker",
        "x-qm-slice",
        "x-qm-generation",
        "x-qm-producer",
        "x-qm-at",
    ];
    for name in stamp {
        assert!(
            matches!(got.get(name), Some(AMQPValue::LongString(_))),
            "stamp header {name}: {:?}",
            got.get(name)
        );
    }
    assert_eq!(
        got.len(),
        typed_headers().inner().len() + stamp.len(),
        "nothing else: {got:?}"
    );
}

/// Regression: the bridge forwarded a `CC` header, and RabbitMQ routes a publish to the queues a
/// `CC` header names too: the forwarded message landed in another queue besides its destination.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_AMQP_URL and the new side's server (scripts/services.sh start rabbitmq nats redis)"]
async fn a_cc_header_forwarded_by_the_bridge_copies_the_message_nowhere() {
    let Some(amqp) = env("QM_TEST_AMQP_URL") else {
        return;
    };
    let run = run_id("cc");
    let s = settings(&run, "rabbitmq-new");
    let other = format!("qm-props-{run}.other");
    let rabbit = Arc::new(Adapter::connect(Kind::RabbitMq, &amqp).await.unwrap());
    let brokers = Brokers {
        old: rabbit.clone(),
        new: rabbit.clone(),
    };
    for queue in [&s.ingress, &s.new_queue, &other] {
        rabbit.declare(queue).await.unwrap();
    }
    let mut cc = FieldArray::default();
    cc.push(AMQPValue::LongString(other.as_str().into()));
    let mut headers = FieldTable::default();
    headers.insert("x-order-id".into(), AMQPValue::LongString("order-1".into()));
    headers.insert("CC".into(), AMQPValue::FieldArray(cc.clone()));
    produce(
        &amqp,
        &s.ingress,
        b"{}",
        BasicProperties::default().with_headers(headers),
    )
    .await;
    // The producer's own publish was copied there by RabbitMQ: take that copy.
    take(&amqp, &other).await;

    let dir = tempfile::tempdir().unwrap();
    let router = all_on_new(&s.migration, &s.new_name);
    let (task, stop) = spawn_bridge(s.clone(), &brokers, router, store(&dir).await);
    let (_, got) = take(&amqp, &s.new_queue).await;
    let _ = stop.send(());
    task.await.unwrap().unwrap();

    let got = got.headers().clone().expect("headers").inner().clone();
    assert_eq!(got.get("CC"), None);
    assert_eq!(got.get("x-original-cc"), Some(&AMQPValue::FieldArray(cc)));
    let connection = Connection::connect(&amqp, ConnectionProperties::default())
        .await
        .unwrap();
    let channel = connection.create_channel().await.unwrap();
    let copy = channel
        .basic_get(other.as_str().into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap();
    let _ = connection.close(200, "OK".into()).await;
    assert!(
        copy.is_none(),
        "the forwarded message was copied to {other}"
    );
}

/// The text headers a RabbitMQ message of [`properties`] arrives with on a text-only broker:
/// properties under `x-amqp-*`, typed headers as text.
fn expected_text(user: &str) -> BTreeMap<&'static str, String> {
    [
        ("x-amqp-content-type", "application/json"),
        ("x-amqp-content-encoding", "identity"),
        ("x-amqp-delivery-mode", "1"),
        ("x-amqp-priority", "5"),
        ("x-amqp-correlation-id", "corr-1"),
        ("x-amqp-reply-to", "replies"),
        ("x-amqp-expiration", "600000"),
        ("x-amqp-message-id", "msg-1"),
        ("x-amqp-timestamp", "1767225600"),
        ("x-amqp-type", "order.paid"),
        ("x-amqp-user-id", user),
        ("x-amqp-app-id", "checkout"),
        ("x-amqp-cluster-id", "c1"),
        ("x-order-id", "order-1"),
        ("x-retry-count", "3"),
        ("x-flag", "true"),
        ("x-i8", "-8"),
        ("x-u8", "8"),
        ("x-i16", "-16"),
        ("x-u16", "16"),
        ("x-u32", "32"),
        ("x-i64", "-6400000000"),
        ("x-f32", "1.5"),
        ("x-f64", "2.25"),
        ("x-amount", "123.45"),
        ("x-sent", "1767225600"),
        ("x-void", ""),
        ("x-table", r#"{"attempt":2,"by":"billing"}"#),
        ("x-array", r#"["a",7,true]"#),
        ("x-qm-route", "bridge"),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_string()))
    .collect()
}

/// Regression: a RabbitMQ → NATS / Redis bridge dropped every basic property and every header
/// that was not a string, without a word.
async fn rabbitmq_to_text_broker(kind: Kind, url_var: &str, new_name: &str) {
    let (Some(amqp), Some(new_url)) = (env("QM_TEST_AMQP_URL"), env(url_var)) else {
        return;
    };
    let run = run_id(new_name);
    let s = settings(&run, new_name);
    let brokers = Brokers {
        old: Arc::new(Adapter::connect(Kind::RabbitMq, &amqp).await.unwrap()),
        new: Arc::new(Adapter::connect(kind, &new_url).await.unwrap()),
    };
    brokers.old.declare(&s.ingress).await.unwrap();
    brokers.new.declare(&s.new_queue).await.unwrap();
    let user = user_of(&amqp);
    produce(&amqp, &s.ingress, b"{}", properties(&user)).await;

    let dir = tempfile::tempdir().unwrap();
    let router = all_on_new(&s.migration, &s.new_name);
    let (task, stop) = spawn_bridge(s.clone(), &brokers, router, store(&dir).await);
    let mut sub = brokers
        .new
        .subscribe(&s.new_queue, &SubscribeOptions::group("props-test"))
        .await
        .unwrap();
    let delivery = tokio::time::timeout(Duration::from_secs(20), sub.next())
        .await
        .expect("a message within 20 s")
        .unwrap()
        .expect("a delivery");
    let message: Message = delivery.message.clone();
    delivery.ack().await.unwrap();
    let _ = stop.send(());
    task.await.unwrap().unwrap();

    assert_eq!(message.payload, b"{}");
    for (name, value) in expected_text(&user) {
        assert_eq!(message.header(name), Some(value.as_str()), "header {name}");
    }
    assert_eq!(
        message.header("x-bytes"),
        None,
        "bytes that are not UTF-8 have no text form"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_AMQP_URL and the new side's server (scripts/services.sh start rabbitmq nats redis)"]
async fn rabbitmq_to_nats_carries_properties_and_typed_headers_as_text() {
    rabbitmq_to_text_broker(Kind::Nats, "QM_TEST_NATS_URL", "nats").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_AMQP_URL and the new side's server (scripts/services.sh start rabbitmq nats redis)"]
async fn rabbitmq_to_redis_carries_properties_and_typed_headers_as_text() {
    rabbitmq_to_text_broker(Kind::Redis, "QM_TEST_REDIS_URL", "redis").await;
}

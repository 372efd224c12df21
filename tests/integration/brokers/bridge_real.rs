//! The bridge's runner against real brokers (`QM_TEST_AMQP_URL` for the ingress and the old
//! queue, `QM_TEST_REDIS_URL` for the new stream; `scripts/services.sh start rabbitmq redis`), with
//! two bridges on one SQLite store: one forwards, the other stands by and takes over when the
//! first dies without releasing its lease. Every message reaches the side its slice is on, stamped
//! `bridge`; per key, the first deliveries come in publish order; nothing is lost (a crash may
//! only duplicate). Skipped, with a note, without the servers.
#![cfg(feature = "cli")]

use crate::common;

#[cfg(feature = "kafka")]
mod kafka_ingress;

/// A faithful Kafka ingress: every part of a record to a Kafka egress, and to the text brokers.
#[cfg(feature = "kafka")]
mod kafka_faithful;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queue_migrate::bridge::metrics::BridgeMetrics;
use queue_migrate::bridge::{self, Brokers, Settings};
use queue_migrate::brokers::{Adapter, Kind, Message, SubscribeOptions};
use queue_migrate::plan::BridgeKey;
use queue_migrate::router::Router;
use queue_migrate::routing::{BrokerNames, RoutingDocument, Side};
use queue_migrate::stamp::{HEADER_ROUTE, HEADER_SLICE};

const KEYS: usize = 20;
const PER_KEY: usize = 15;

/// A server's URL: every test here is `#[ignore]`d without its servers (see
/// [`common::server_url`]).
fn env(var: &str) -> Option<String> {
    Some(common::server_url(var))
}

fn settings(run: &str, holder: &str) -> Settings {
    Settings {
        migration: format!("bridge-test-{run}"),
        ingress: format!("qm-bridge-{run}.ingress"),
        key: BridgeKey::Json("orderId".into()),
        prefetch: 16,
        old_queue: format!("qm-bridge-{run}.old"),
        dead_letter: None,
        new_queue: format!("qm-bridge-{run}.new"),
        old_name: "rabbitmq".into(),
        new_name: "redis".into(),
        holder: holder.into(),
        lease_ttl: Duration::from_secs(2),
        visibility_timeout: Duration::from_secs(2),
    }
}

/// What every test here starts from: a run id of its own, a SQLite store in a temporary
/// directory, RabbitMQ as the old broker (and the ingress), Redis as the new one; `None`, with
/// a note, without the servers.
struct World {
    run: String,
    /// The new broker's URL.
    new_url: String,
    dir: tempfile::TempDir,
    store: queue_migrate::store::any::AnyStore,
    brokers: Brokers,
}

async fn world(tag: &str) -> Option<World> {
    world_to(tag, Kind::Redis, "QM_TEST_REDIS_URL").await
}

/// [`world`] with `new` (its URL in `new_var`) as the new broker.
async fn world_to(tag: &str, new: Kind, new_var: &str) -> Option<World> {
    world_at(tag, new, env(new_var)).await
}

/// [`world`] with `new` at `new_url` as the new broker.
async fn world_at(tag: &str, new: Kind, new_url: Option<String>) -> Option<World> {
    let (Some(amqp), Some(new_url)) = (env("QM_TEST_AMQP_URL"), new_url) else {
        return None;
    };
    let (run, dir, store) = run_and_store(tag).await;
    let brokers = Brokers {
        old: Arc::new(Adapter::connect(Kind::RabbitMq, &amqp).await.unwrap()),
        new: Arc::new(Adapter::connect(new, &new_url).await.unwrap()),
    };
    Some(World {
        run,
        new_url,
        dir,
        store,
        brokers,
    })
}

/// A run id of its own (`TAG-PID-MS`) and a SQLite store in a temporary directory.
async fn run_and_store(
    tag: &str,
) -> (
    String,
    tempfile::TempDir,
    queue_migrate::store::any::AnyStore,
) {
    let run = format!(
        "{tag}-{}-{}",
        std::process::id(),
        queue_migrate::time::now_ms()
    );
    let dir = tempfile::tempdir().unwrap();
    let store = queue_migrate::store::any::open(dir.path().join("state.db").to_str().unwrap())
        .await
        .unwrap();
    (run, dir, store)
}

/// Run a bridge until the sender it answers is used (or dropped).
fn spawn_bridge<S: queue_migrate::store::Store + Clone + Send + Sync + 'static>(
    store: &S,
    settings: Settings,
    brokers: &Brokers,
    router: &Router,
    metrics: &Arc<BridgeMetrics>,
) -> (
    tokio::task::JoinHandle<Result<(), bridge::BridgeError>>,
    tokio::sync::oneshot::Sender<()>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(bridge::run(
        store.clone(),
        settings,
        brokers.clone(),
        router.clone(),
        metrics.clone(),
        async {
            let _ = stopped.await;
        },
    ));
    (task, stop)
}

/// Whether a bridge says it holds the lease and forwards.
fn active(metrics: &BridgeMetrics) -> bool {
    metrics
        .render()
        .lines()
        .any(|l| l.starts_with("queue_migrate_bridge_active{") && l.ends_with(" 1"))
}

/// Take (and ack) what arrives on `queue` until the deadline.
async fn collect(adapter: &Adapter, queue: &str, seen: &mut Vec<Message>, deadline: Instant) {
    let mut sub = adapter
        .subscribe(queue, &SubscribeOptions::group("bridge-test"))
        .await
        .unwrap();
    while Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_millis(500), sub.next()).await {
            Ok(Ok(Some(d))) => {
                seen.push(d.message.clone());
                d.ack().await.unwrap();
            }
            Ok(Ok(None)) => break,
            Ok(Err(e)) => panic!("{e}"),
            Err(_) => {}
        }
    }
}

/// How many different payloads `ms` holds (a redelivery counts once).
fn distinct(ms: &[Message]) -> usize {
    ms.iter()
        .map(|m| m.payload.clone())
        .collect::<std::collections::HashSet<_>>()
        .len()
}

/// Read both destination queues of `settings`, two seconds each in turn, until `total`
/// different messages arrived or 40 s passed: what each side received, in order.
async fn collect_both(
    brokers: &Brokers,
    settings: &Settings,
    total: usize,
) -> (Vec<Message>, Vec<Message>) {
    let mut old_seen = Vec::new();
    let mut new_seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(40);
    while distinct(&old_seen) + distinct(&new_seen) < total && Instant::now() < deadline {
        let until = Instant::now() + Duration::from_secs(2);
        collect(&brokers.old, &settings.old_queue, &mut old_seen, until).await;
        let until = Instant::now() + Duration::from_secs(2);
        collect(&brokers.new, &settings.new_queue, &mut new_seen, until).await;
    }
    (old_seen, new_seen)
}

/// Regression (issue 54, item 3): the bridge's lease was held by its `--id` alone, so a second
/// bridge started with the same `--id` renewed the first one's lease and both forwarded. Each
/// process instance is a holder of its own: the second stands by until the lease is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_AMQP_URL and the new side's server (scripts/services.sh start rabbitmq redis nats)"]
async fn a_second_bridge_with_the_same_id_stands_by_until_the_lease_is_given_back() {
    let Some(World {
        run,
        new_url: _,
        dir: _dir,
        store,
        brokers,
    }) = world("same-id").await
    else {
        return;
    };
    let a = settings(&run, "bridge-a");
    brokers.old.declare(&a.ingress).await.unwrap();
    let router = half_on_new(&a.migration);
    let metrics_a = Arc::new(BridgeMetrics::new(&a.migration));
    let metrics_b = Arc::new(BridgeMetrics::new(&a.migration));
    let (task_a, stop_a) = spawn_bridge(&store, a.clone(), &brokers, &router, &metrics_a);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !active(&metrics_a) {
        assert!(Instant::now() < deadline, "bridge A never took the lease");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The same --id, another process instance.
    let (task_b, stop_b) = spawn_bridge(&store, a.clone(), &brokers, &router, &metrics_b);
    // Over more than a lease period (renewals every third of it): A forwards, B never.
    let until = Instant::now() + a.lease_ttl + Duration::from_secs(1);
    while Instant::now() < until {
        assert!(active(&metrics_a), "bridge A lost its lease");
        assert!(
            !active(&metrics_b),
            "two bridges with one --id forward at once"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A stops cleanly (its lease given back): B takes over.
    let _ = stop_a.send(());
    task_a.await.unwrap().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !active(&metrics_b) {
        assert!(Instant::now() < deadline, "bridge B never took over");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop_b.send(());
    task_b.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_AMQP_URL and the new side's server (scripts/services.sh start rabbitmq redis nats)"]
async fn one_bridge_forwards_a_standby_takes_over_and_nothing_is_lost() {
    let Some(World {
        run,
        new_url: _,
        dir: _dir,
        store,
        brokers,
    }) = world("fwd").await
    else {
        return;
    };
    let a = settings(&run, "bridge-a");
    brokers.old.declare(&a.ingress).await.unwrap();

    // Half of the 16 slices on new.
    let router = half_on_new(&a.migration);

    // The unchangeable producer: keys interleaved, a sequence number per key.
    for seq in 0..PER_KEY {
        for k in 0..KEYS {
            let body = serde_json::json!({"orderId": format!("order-{k}"), "seq": seq});
            let m = Message::new(body.to_string().into_bytes()).with_header("x-custom", "kept");
            brokers.old.publish(&a.ingress, &m).await.unwrap();
        }
    }

    // Bridge A starts first and takes the lease; B stands by.
    let metrics_a = Arc::new(BridgeMetrics::new(&a.migration));
    let metrics_b = Arc::new(BridgeMetrics::new(&a.migration));
    let task_a = tokio::spawn(bridge::run(
        store.clone(),
        a.clone(),
        brokers.clone(),
        router.clone(),
        metrics_a.clone(),
        std::future::pending(),
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (task_b, stop_b) = spawn_bridge(
        &store,
        settings(&run, "bridge-b"),
        &brokers,
        &router,
        &metrics_b,
    );
    // Let A forward some, then kill it (no release: B must wait for the lease to expire).
    let deadline = Instant::now() + Duration::from_secs(20);
    while metrics_a.confirmed(Side::Old) + metrics_a.confirmed(Side::New) < 40 {
        assert!(Instant::now() < deadline, "bridge A forwarded nothing");
        assert!(!active(&metrics_b), "two bridges forward at once");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(active(&metrics_a) && !active(&metrics_b));
    task_a.abort();
    let forwarded_by_a = metrics_a.confirmed(Side::Old) + metrics_a.confirmed(Side::New);
    // A second batch after A died (a fast A may have forwarded the whole first one): only the
    // standby can forward it.
    for seq in PER_KEY..2 * PER_KEY {
        for k in 0..KEYS {
            let body = serde_json::json!({"orderId": format!("order-{k}"), "seq": seq});
            let m = Message::new(body.to_string().into_bytes()).with_header("x-custom", "kept");
            brokers.old.publish(&a.ingress, &m).await.unwrap();
        }
    }

    // Everything arrives: on old the slices >= 8, on new the others.
    let total = KEYS * PER_KEY * 2;
    let (old_seen, new_seen) = collect_both(&brokers, &a, total).await;
    let _ = stop_b.send(());
    task_b.await.unwrap().unwrap();
    assert!(
        metrics_b.confirmed(Side::Old) + metrics_b.confirmed(Side::New) > 0,
        "the standby never took over (A forwarded {forwarded_by_a})"
    );
    assert_eq!(
        distinct(&old_seen) + distinct(&new_seen),
        total,
        "lost messages: old {} new {}",
        distinct(&old_seen),
        distinct(&new_seen)
    );

    let mut first_seen: HashMap<String, Vec<u64>> = HashMap::new();
    let mut side_of: BTreeMap<String, &str> = BTreeMap::new();
    for (side, seen) in [("old", &old_seen), ("new", &new_seen)] {
        for m in seen {
            assert_eq!(m.header(HEADER_ROUTE), Some("bridge"));
            assert_eq!(m.header("x-custom"), Some("kept"), "headers are forwarded");
            let body: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
            let key = body["orderId"].as_str().unwrap().to_string();
            let slice: u32 = m.header(HEADER_SLICE).unwrap().parse().unwrap();
            assert_eq!(slice, queue_migrate::slice::slice_of(&key, 16));
            assert_eq!(
                side == "new",
                slice < 8,
                "{key} (slice {slice}) went {side}"
            );
            assert_eq!(*side_of.entry(key.clone()).or_insert(side), side);
            let seq = body["seq"].as_u64().unwrap();
            let firsts = first_seen.entry(key).or_default();
            if !firsts.contains(&seq) {
                firsts.push(seq);
            }
        }
    }
    for (key, seqs) in &first_seen {
        let mut sorted = seqs.clone();
        sorted.sort_unstable();
        assert_eq!(seqs, &sorted, "{key}: first deliveries out of order");
    }
}

/// Nothing is acked before its destination confirmed it, and a killed bridge whose coalesced
/// acks were not all sent loses nothing. The new side is broken (its Redis key holds a string,
/// so every `XADD` fails and is retried): bridge A confirms the old-side messages and acks them
/// around the unconfirmed new-side ones (gaps in the ingress's delivery tags), then is killed.
/// Once the new side is repaired, bridge B forwards every message A never confirmed (so A acked
/// none of them) and those whose acks A held (duplicates, which consumers dedup).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_AMQP_URL and the new side's server (scripts/services.sh start rabbitmq redis nats)"]
async fn a_killed_bridge_acked_nothing_unconfirmed_and_loses_nothing() {
    let Some(World {
        run,
        new_url: redis_url,
        dir: _dir,
        store,
        brokers,
    }) = world("gap").await
    else {
        return;
    };
    let a = settings(&run, "bridge-a");
    brokers.old.declare(&a.ingress).await.unwrap();
    let redis = redis::Client::open(redis_url.as_str()).unwrap();
    let mut raw = redis.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg(&a.new_queue)
        .arg("not a stream")
        .query_async(&mut raw)
        .await
        .unwrap();

    let router = half_on_new(&a.migration);
    let on_new = |key: &str| queue_migrate::slice::slice_of(key, 16) < 8;

    let mut total_old = 0;
    for seq in 0..PER_KEY {
        for k in 0..KEYS {
            let key = format!("order-{k}");
            total_old += usize::from(!on_new(&key));
            let body = serde_json::json!({"orderId": key, "seq": seq});
            let m = Message::new(body.to_string().into_bytes());
            brokers.old.publish(&a.ingress, &m).await.unwrap();
        }
    }
    let total = KEYS * PER_KEY;
    assert!(total_old > 0 && total_old < total, "keys on both sides");

    let metrics_a = Arc::new(BridgeMetrics::new(&a.migration));
    let task_a = tokio::spawn(bridge::run(
        store.clone(),
        a.clone(),
        brokers.clone(),
        router.clone(),
        metrics_a.clone(),
        std::future::pending(),
    ));
    // A forwards what its window lets through to old; the new side never confirms.
    let deadline = Instant::now() + Duration::from_secs(20);
    while metrics_a.confirmed(Side::Old) < 3 {
        assert!(
            Instant::now() < deadline,
            "bridge A forwarded nothing to old"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    task_a.abort();
    let _ = task_a.await;
    assert_eq!(metrics_a.confirmed(Side::New), 0, "the new side is broken");
    let confirmed_by_a = metrics_a.confirmed(Side::Old);

    // Repair the new side; B takes over once A's lease expires.
    let _: () = redis::cmd("DEL")
        .arg(&a.new_queue)
        .query_async(&mut raw)
        .await
        .unwrap();
    let metrics_b = Arc::new(BridgeMetrics::new(&a.migration));
    let (task_b, stop_b) = spawn_bridge(
        &store,
        settings(&run, "bridge-b"),
        &brokers,
        &router,
        &metrics_b,
    );

    let (old_seen, new_seen) = collect_both(&brokers, &a, total).await;
    let _ = stop_b.send(());
    task_b.await.unwrap().unwrap();
    assert_eq!(
        distinct(&new_seen),
        total - total_old,
        "new-side messages lost: A acked a message its destination never confirmed"
    );
    assert_eq!(
        distinct(&old_seen),
        total_old,
        "old-side messages lost (A confirmed {confirmed_by_a})"
    );
    for m in &new_seen {
        let body: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
        assert!(on_new(body["orderId"].as_str().unwrap()));
    }
    eprintln!(
        "A confirmed {confirmed_by_a} to old before it was killed; old received {} ({} distinct): {} forwarded again",
        old_seen.len(),
        distinct(&old_seen),
        old_seen.len() - distinct(&old_seen)
    );
}

/// A router holding generation 3 of `migration`: 8 of 16 slices on new (Redis), the rest on old.
fn half_on_new(migration: &str) -> Router {
    let router = Router::builder(migration).slices(16).build();
    router.offer(routing(migration, 3, 8)).unwrap();
    router
}

/// A routing document of generation `generation` with `migrated` of 16 slices on new.
fn routing(migration: &str, generation: u64, migrated: u32) -> RoutingDocument {
    RoutingDocument {
        migration: migration.to_owned(),
        generation,
        state: "slices".into(),
        step: Some(0),
        paused: false,
        slices_total: 16,
        slices_migrated: migrated,
        consume: vec![Side::Old, Side::New],
        brokers: BrokerNames {
            old: "rabbitmq".into(),
            new: "redis".into(),
        },
        updated_at: "2026-11-30T00:00:00Z".into(),
    }
}

/// Regression: a bridge whose router had no document yet forwarded by the router's default
/// (everything to old), which strands messages on an unread queue from `disconnect` on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_AMQP_URL and the new side's server (scripts/services.sh start rabbitmq redis nats)"]
async fn a_bridge_takes_no_message_before_its_first_routing_document() {
    let Some(World {
        run,
        new_url: _,
        dir: _dir,
        store,
        brokers,
    }) = world("doc").await
    else {
        return;
    };
    let a = settings(&run, "bridge-a");
    for (adapter, queue) in [
        (&brokers.old, &a.ingress),
        (&brokers.old, &a.old_queue),
        (&brokers.new, &a.new_queue),
    ] {
        adapter.declare(queue).await.unwrap();
    }
    let body = serde_json::json!({"orderId": "order-1", "seq": 0}).to_string();
    brokers
        .old
        .publish(&a.ingress, &Message::new(body.clone().into_bytes()))
        .await
        .unwrap();
    let router = Router::builder(a.migration.clone()).slices(16).build();
    let metrics = Arc::new(BridgeMetrics::new(&a.migration));
    let (task, stop) = spawn_bridge(&store, a.clone(), &brokers, &router, &metrics);
    let mut old_seen = Vec::new();
    collect(
        &brokers.old,
        &a.old_queue,
        &mut old_seen,
        Instant::now() + Duration::from_millis(1500),
    )
    .await;
    assert!(old_seen.is_empty(), "forwarded by the default routing");
    // The migration's routing arrives: every slice on new.
    router.offer(routing(&a.migration, 1, 16)).unwrap();
    let mut new_seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while new_seen.is_empty() && Instant::now() < deadline {
        let until = Instant::now() + Duration::from_secs(1);
        collect(&brokers.new, &a.new_queue, &mut new_seen, until).await;
    }
    assert_eq!(new_seen.len(), 1, "forwarded where the document says");
    assert_eq!(new_seen[0].payload, body.into_bytes());
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

/// Regression: the bridge checked its lease's deadline only when a renewal answered, so with a
/// store that answers errors at once it kept taking messages past the instant it promised to
/// stop (a fifth of the TTL before the lease runs out), while a standby may take the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_AMQP_URL and the new side's server (scripts/services.sh start rabbitmq redis nats)"]
async fn a_bridge_whose_renewals_fail_fast_stops_a_fifth_of_the_ttl_before_the_lease_runs_out() {
    let Some(World {
        run,
        new_url: _,
        dir: _dir,
        store,
        brokers,
    }) = world("ttl").await
    else {
        return;
    };
    let mut store = common::hooked::Hooked::new(store);
    // The lease is taken, renewed once as the session starts; every renewal after fails.
    store.lease_fails_from = Some(2);
    let a = Settings {
        lease_ttl: Duration::from_secs(10),
        ..settings(&run, "bridge-a")
    };
    brokers.old.declare(&a.ingress).await.unwrap();
    let router = Router::builder(a.migration.clone()).slices(16).build();
    router.offer(routing(&a.migration, 1, 0)).unwrap();
    let metrics = Arc::new(BridgeMetrics::new(&a.migration));
    let (task, stop) = spawn_bridge(&store, a.clone(), &brokers, &router, &metrics);
    // The session's renewal (the second call) sets the lease the session runs on.
    let deadline = Instant::now() + Duration::from_secs(20);
    let renewed_at = loop {
        if let Some(at) = store.lease_calls_at.lock().unwrap().get(1) {
            break *at;
        }
        assert!(
            Instant::now() < deadline,
            "the session never renewed its lease"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let publish = |seq: u64| {
        let body = serde_json::json!({"orderId": "order-1", "seq": seq}).to_string();
        let (old, ingress) = (brokers.old.clone(), a.ingress.clone());
        async move {
            old.publish(&ingress, &Message::new(body.into_bytes()))
                .await
                .unwrap();
        }
    };
    publish(0).await;
    let mut seen = Vec::new();
    collect(
        &brokers.old,
        &a.old_queue,
        &mut seen,
        Instant::now() + Duration::from_secs(2),
    )
    .await;
    assert_eq!(seen.len(), 1, "forwarded while the lease holds");
    // The lease runs out 10 s after the session's renewal: the bridge promised to stop taking
    // messages at 8 s. Past that instant, and before 10 s, a message must stay on the ingress.
    let until = renewed_at + 8_700 - queue_migrate::time::now_ms();
    tokio::time::sleep(Duration::from_millis(u64::try_from(until).unwrap_or(0))).await;
    assert!(
        !active(&metrics),
        "still forwarding 8.7 s into a 10 s lease"
    );
    publish(1).await;
    collect(
        &brokers.old,
        &a.old_queue,
        &mut seen,
        Instant::now() + Duration::from_millis(1_000),
    )
    .await;
    assert_eq!(seen.len(), 1, "a message taken past the promised stop");
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

/// Settings of a bridge from RabbitMQ to NATS whose key is the header `x-order-id` (so a
/// payload may be any bytes), with the dead-letter queue `qm-bridge-RUN.dlq` on old or none.
fn to_nats(run: &str, dead_letter: bool) -> Settings {
    Settings {
        key: BridgeKey::Header("x-order-id".into()),
        new_name: "nats".into(),
        dead_letter: dead_letter.then(|| format!("qm-bridge-{run}.dlq")),
        ..settings(run, "bridge-a")
    }
}

/// A small message of `key`: `{"orderId": key, "seq": seq}`.
fn keyed(key: &str, seq: u64) -> Message {
    let body = serde_json::json!({"orderId": key, "seq": seq}).to_string();
    Message::new(body.into_bytes()).with_header("x-order-id", key)
}

/// A message of `key` that NATS cannot take: `size` bytes, not UTF-8.
fn oversize(key: &str, size: usize) -> Message {
    let payload: Vec<u8> = (0..size).map(|i| (i % 251) as u8 | 0x80).collect();
    Message::new(payload)
        .with_header("x-order-id", key)
        .with_header("x-custom", "kept")
}

/// `seq` of a [`keyed`] message.
fn seq_of(m: &Message) -> u64 {
    let body: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
    body["seq"].as_u64().unwrap()
}

/// The `seq`s of `key`'s first deliveries in `seen`, in order.
fn firsts_of(seen: &[Message], key: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for m in seen.iter().filter(|m| m.header("x-order-id") == Some(key)) {
        let seq = seq_of(m);
        if !out.contains(&seq) {
            out.push(seq);
        }
    }
    out
}

/// Read `queue` until `want` different messages arrived or `seconds` passed.
async fn collect_until(
    adapter: &Adapter,
    queue: &str,
    want: usize,
    seconds: u64,
    seen: &mut Vec<Message>,
) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while distinct(seen) < want && Instant::now() < deadline {
        let until = (Instant::now() + Duration::from_secs(1)).min(deadline);
        collect(adapter, queue, seen, until).await;
    }
}

/// A series of the bridge's metrics, by its name and labels.
fn series(metrics: &BridgeMetrics, name_and_labels: &str) -> Option<f64> {
    metrics.render().lines().find_map(|l| {
        l.strip_prefix(name_and_labels)
            .and_then(|v| v.trim().parse().ok())
    })
}

/// Regression: a message NATS refuses for good (larger than its max_payload; RabbitMQ took it)
/// was retried forever: its key was blocked for good and, once `2 × prefetch` messages were
/// held, the whole bridge. Now it is parked in the old broker's dead-letter queue as a seed-001
/// envelope, payload byte for byte, original headers kept, and the key moves on in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_AMQP_URL and the new side's server (scripts/services.sh start rabbitmq redis nats)"]
async fn a_message_nats_refuses_is_dead_lettered_and_its_key_moves_on() {
    let Some(World {
        run,
        new_url: _,
        dir: _dir,
        store,
        brokers,
    }) = world_to("refused", Kind::Nats, "QM_TEST_NATS_URL").await
    else {
        return;
    };
    let a = to_nats(&run, true);
    let dlq = a.dead_letter.clone().unwrap();
    brokers.old.declare(&a.ingress).await.unwrap();
    brokers.new.declare(&a.new_queue).await.unwrap();
    brokers.old.declare(&dlq).await.unwrap();
    let big = oversize("order-big", common::nats::max_payload().await + 1024 * 1024);
    for m in [
        keyed("order-big", 0),
        big.clone(),
        keyed("order-big", 2),
        keyed("order-other", 0),
        keyed("order-big", 3),
        keyed("order-other", 1),
    ] {
        brokers.old.publish(&a.ingress, &m).await.unwrap();
    }
    // Every slice on new: the big message's slice is migrated.
    let router = Router::builder(a.migration.clone()).slices(16).build();
    router.offer(routing(&a.migration, 1, 16)).unwrap();
    let metrics = Arc::new(BridgeMetrics::new(&a.migration));
    let (task, stop) = spawn_bridge(&store, a.clone(), &brokers, &router, &metrics);

    let mut new_seen = Vec::new();
    collect_until(&brokers.new, &a.new_queue, 5, 30, &mut new_seen).await;
    assert_eq!(
        firsts_of(&new_seen, "order-big"),
        [0, 2, 3],
        "the key moves on past the refused message, in order"
    );
    assert_eq!(firsts_of(&new_seen, "order-other"), [0, 1]);

    let mut parked = Vec::new();
    collect_until(&brokers.old, &dlq, 1, 20, &mut parked).await;
    assert_eq!(distinct(&parked), 1, "one dead letter");
    let letter = &parked[0];
    let envelope = queue_migrate::dlq::envelope::DeadLetter::from_line(&letter.payload)
        .expect("a seed-001 envelope");
    assert!(
        envelope.payload.to_bytes().as_ref() == big.payload.as_slice(),
        "the payload is byte-intact ({} bytes parked, {} sent)",
        envelope.payload.to_bytes().len(),
        big.payload.len()
    );
    assert_eq!(envelope.error_class, "bridge_refused");
    assert!(
        envelope.error_message.contains("max payload"),
        "{}",
        envelope.error_message
    );
    assert!(
        envelope
            .consumer_version
            .starts_with("queue-migrate-bridge "),
        "{}",
        envelope.consumer_version
    );
    assert!(envelope.attempts >= 1);
    assert_eq!(letter.header("x-order-id"), Some("order-big"));
    assert_eq!(letter.header("x-custom"), Some("kept"));
    let labels = format!("{{migration=\"{}\",destination=\"new\"}}", a.migration);
    assert_eq!(
        series(
            &metrics,
            &format!("queue_migrate_bridge_dead_lettered_total{labels}")
        ),
        Some(1.0)
    );
    assert_eq!(
        series(
            &metrics,
            &format!("queue_migrate_bridge_refused_total{labels}")
        ),
        Some(1.0)
    );
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

/// Regression, without `brokers.old.dead_letter`: the refused message is retried (never
/// dropped, never acked), counted once in `queue_migrate_bridge_refused_total` however often
/// it is retried, its key waits, and other keys keep flowing. Once the bridge stops, the
/// message is still on the ingress.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_AMQP_URL and the new side's server (scripts/services.sh start rabbitmq redis nats)"]
async fn without_a_dead_letter_queue_a_refused_message_is_kept_and_other_keys_flow() {
    let Some(World {
        run,
        new_url: _,
        dir: _dir,
        store,
        brokers,
    }) = world_to("kept", Kind::Nats, "QM_TEST_NATS_URL").await
    else {
        return;
    };
    let a = to_nats(&run, false);
    brokers.old.declare(&a.ingress).await.unwrap();
    brokers.new.declare(&a.new_queue).await.unwrap();
    let big = oversize("order-big", common::nats::max_payload().await + 1024 * 1024);
    brokers.old.publish(&a.ingress, &big).await.unwrap();
    brokers
        .old
        .publish(&a.ingress, &keyed("order-big", 1))
        .await
        .unwrap();
    for seq in 0..5 {
        brokers
            .old
            .publish(&a.ingress, &keyed("order-other", seq))
            .await
            .unwrap();
    }
    let router = Router::builder(a.migration.clone()).slices(16).build();
    router.offer(routing(&a.migration, 1, 16)).unwrap();
    let metrics = Arc::new(BridgeMetrics::new(&a.migration));
    let (task, stop) = spawn_bridge(&store, a.clone(), &brokers, &router, &metrics);

    let mut new_seen = Vec::new();
    collect_until(&brokers.new, &a.new_queue, 5, 30, &mut new_seen).await;
    assert_eq!(
        firsts_of(&new_seen, "order-other"),
        [0, 1, 2, 3, 4],
        "other keys flow"
    );
    // A few retries (100 ms, 200 ms, 400 ms, ...) happen meanwhile.
    collect_until(&brokers.new, &a.new_queue, 6, 2, &mut new_seen).await;
    assert!(
        firsts_of(&new_seen, "order-big").is_empty(),
        "the key waits behind its refused message"
    );
    let labels = format!("{{migration=\"{}\",destination=\"new\"}}", a.migration);
    assert_eq!(
        series(
            &metrics,
            &format!("queue_migrate_bridge_refused_total{labels}")
        ),
        Some(1.0),
        "counted once per message"
    );
    let errors = series(
        &metrics,
        &format!("queue_migrate_bridge_publish_errors_total{{migration=\"{}\",destination=\"new\",route=\"bridge\"}}", a.migration),
    )
    .unwrap_or(0.0);
    assert!(errors >= 2.0, "retried: {errors} publish errors");
    let _ = stop.send(());
    task.await.unwrap().unwrap();

    // Nothing was dropped: both of the key's messages are back on the ingress, in order.
    let mut left = Vec::new();
    collect_until(&brokers.old, &a.ingress, 2, 10, &mut left).await;
    assert_eq!(
        distinct(&left),
        2,
        "the refused message and the one behind it"
    );
    assert!(left[0].payload == big.payload, "the refused message first");
    assert_eq!(seq_of(&left[1]), 1);
}

/// RabbitMQ -> Kafka through the bridge (the Kafka under test: the real broker when
/// `QM_TEST_APACHE_KAFKA_BOOTSTRAP` is set, else librdkafka's mock cluster):
/// the new side's slices arrive on a Kafka topic of 3 partitions with their key as the record
/// key (so one key stays on one partition), stamped `bridge`, each key's first deliveries in
/// publish order; the others on the old queue; nothing lost.
#[cfg(feature = "kafka")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_AMQP_URL and QM_TEST_APACHE_KAFKA_BOOTSTRAP or QM_TEST_KAFKA_BOOTSTRAP (scripts/services.sh start rabbitmq apache-kafka)"]
async fn a_bridge_forwards_rabbitmq_to_kafka_keyed_and_in_order() {
    use crate::brokers::brokers_real::kafka::{bootstrap, create_topic};
    let Some(World {
        run,
        dir: _dir,
        store,
        brokers,
        ..
    }) = world_at("kafka", Kind::Kafka, Some(bootstrap())).await
    else {
        return;
    };
    let a = settings(&run, "bridge-a");
    create_topic(&a.new_queue, 3);
    brokers.old.declare(&a.ingress).await.unwrap();
    let router = half_on_new(&a.migration);
    for seq in 0..PER_KEY {
        for k in 0..KEYS {
            let body = serde_json::json!({"orderId": format!("order-{k}"), "seq": seq});
            let m = Message::new(body.to_string().into_bytes()).with_header("x-custom", "kept");
            brokers.old.publish(&a.ingress, &m).await.unwrap();
        }
    }
    let on_new = (0..KEYS)
        .filter(|k| queue_migrate::slice::slice_of(&format!("order-{k}"), 16) < 8)
        .count()
        * PER_KEY;
    let metrics = Arc::new(BridgeMetrics::new(&a.migration));
    let (task, stop) = spawn_bridge(&store, a.clone(), &brokers, &router, &metrics);

    let mut new_seen = Vec::new();
    let mut sub = brokers
        .new
        .subscribe(&a.new_queue, &SubscribeOptions::group("bridge-test"))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while distinct(&new_seen) < on_new && Instant::now() < deadline {
        if let Ok(got) = tokio::time::timeout(Duration::from_millis(500), sub.next()).await {
            let d = got.unwrap().expect("the subscription ended");
            new_seen.push(d.message.clone());
            d.ack().await.unwrap();
        }
    }
    let mut old_seen = Vec::new();
    let until = Instant::now() + Duration::from_secs(20);
    while distinct(&old_seen) < KEYS * PER_KEY - on_new && Instant::now() < until {
        collect(
            &brokers.old,
            &a.old_queue,
            &mut old_seen,
            Instant::now() + Duration::from_secs(2),
        )
        .await;
    }
    let _ = stop.send(());
    task.await.unwrap().unwrap();
    assert_eq!(distinct(&new_seen), on_new, "lost on Kafka");
    assert_eq!(distinct(&old_seen), KEYS * PER_KEY - on_new, "lost on old");
    let mut first_seen: HashMap<String, Vec<u64>> = HashMap::new();
    for m in &new_seen {
        assert_eq!(m.header(HEADER_ROUTE), Some("bridge"));
        assert_eq!(m.header("x-custom"), Some("kept"));
        let body: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
        let key = body["orderId"].as_str().unwrap().to_string();
        assert!(
            queue_migrate::slice::slice_of(&key, 16) < 8,
            "{key} went new"
        );
        assert_eq!(
            m.header("x-qm-key"),
            Some(key.as_str()),
            "the record key is the slice key"
        );
        let seq = body["seq"].as_u64().unwrap();
        let firsts = first_seen.entry(key).or_default();
        if !firsts.contains(&seq) {
            firsts.push(seq);
        }
    }
    for (key, seqs) in &first_seen {
        let mut sorted = seqs.clone();
        sorted.sort_unstable();
        assert_eq!(
            seqs, &sorted,
            "{key}: first deliveries out of order on Kafka"
        );
    }
}

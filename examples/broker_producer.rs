//! A producer of `order.paid` events on real brokers.
//!
//! Two modes:
//! - **routed** (a producer you can change): follows the routing document (`--daemon` long-poll
//!   or `--routing-file`), sends each event to the broker its aggregate's slice is on now
//!   (`Router::route`), with the route stamp in its headers;
//! - **ingress** (a producer you cannot change, `--ingress QUEUE`): sends everything to one queue
//!   on the old broker, no stamp, the key in the JSON payload (`orderId`); `migrate bridge`
//!   forwards it.
//!
//! Every event carries `x-qm-dedup-key: order.paid:<orderId>:<version>` and the aggregate's
//! version, 1, 2, 3... per order: the consumer applies each version once and in order. Events
//! are published one at a time and each is confirmed by its broker before the next: a publish
//! that fails is retried (re-routed: its slice may have moved meanwhile) until confirmed. With
//! `--log FILE`, the dedup key of every confirmed event is appended to FILE, and of every event
//! before its first publish to FILE.attempted — what the end-to-end test compares with the
//! consumer's database; in routed mode FILE.routes gets each confirmed event's stamp (`key side
//! slice generation at_ms`). SIGTERM stops it between two events.
//!
//! `--pin-generation N` (or `--pin-at-slices K`) makes one instance a producer that stopped
//! following the routing document (an old deploy, a stuck follower): it follows until it has
//! applied generation N (a document moving at least K slices), then drops its follower and keeps
//! routing by that document, writing slices moved since then to the old broker. The consumer of the old broker counts those messages as stale and the daemon's
//! built-in stale-producer guard pauses the migration naming it (tests/e2e/run.sh, `stale`).
//!
//! ```text
//! cargo run --example broker_producer -- --migration orders --daemon http://127.0.0.1:8480 \
//!     --old rabbitmq=amqp://guest:guest@127.0.0.1:5672/%2f --old-queue orders \
//!     --new nats=nats://127.0.0.1:4222 --new-queue ORDERS --rate 50 --count 1000
//! cargo run --example broker_producer -- --old rabbitmq=amqp://... --ingress orders.ingress --count 1000
//! ```

mod support;

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use queue_migrate::brokers::{Adapter, HEADER_DEDUP_KEY, HEADER_KEY, Message};
use queue_migrate::router::Router;
use queue_migrate::routing::Side;
use queue_migrate::stamp::{PublishedCounter, RouteLabel};

/// Publish `order.paid` events to real brokers, routed by slice or into the bridge's ingress.
#[derive(Debug, Parser)]
struct Args {
    /// The migration whose routing to follow.
    #[arg(long, default_value = "orders")]
    migration: String,
    /// The daemon to long-poll for the routing document.
    #[arg(long, conflicts_with_all = ["routing_file", "ingress"])]
    daemon: Option<String>,
    /// A routing file to follow instead of the daemon.
    #[arg(long, conflicts_with = "ingress")]
    routing_file: Option<PathBuf>,
    /// The old broker, KIND=URL.
    #[arg(long)]
    old: String,
    /// The queue consumers read on the old broker.
    #[arg(long, default_value = "orders")]
    old_queue: String,
    /// The new broker, KIND=URL (routed mode).
    #[arg(long)]
    new: Option<String>,
    /// The queue or stream on the new broker.
    #[arg(long, default_value = "ORDERS")]
    new_queue: String,
    /// Unchangeable producer: send everything to this queue on the old broker (for the bridge).
    #[arg(long)]
    ingress: Option<String>,
    /// The old broker's name in the plan (`brokers.old.name`): the label of stamps and metrics
    /// until the first routing document names it. Default: the KIND of `--old`.
    #[arg(long)]
    old_name: Option<String>,
    /// The new broker's name in the plan (`brokers.new.name`). Default: the KIND of `--new`.
    #[arg(long)]
    new_name: Option<String>,
    /// The producer's name in route stamps and metrics.
    #[arg(long, default_value = "checkout")]
    producer: String,
    /// Events per second.
    #[arg(long, default_value_t = 50.0)]
    rate: f64,
    /// How many events (0: forever).
    #[arg(long, default_value_t = 1000)]
    count: u64,
    /// How many orders the events spread over.
    #[arg(long, default_value_t = 40)]
    aggregates: u64,
    /// Slices, until the first routing document arrives.
    #[arg(long, default_value_t = 128)]
    slices: u32,
    /// Append each confirmed event's dedup key to this file.
    #[arg(long)]
    log: Option<PathBuf>,
    /// Serve /metrics here.
    #[arg(long)]
    metrics: Option<String>,
    /// Fault injection for tests: stop following the routing document once generation N (or a
    /// later one, if it arrived first) is applied, and keep routing by it: a pinned producer that
    /// writes slices moved after N to the old broker. Prints the generation it pinned at.
    #[arg(
        long,
        value_name = "N",
        requires = "daemon",
        conflicts_with = "pin_at_slices"
    )]
    pin_generation: Option<u64>,
    /// Fault injection for tests: as --pin-generation, pinned at the first document that moves at
    /// least K slices to the new broker (a step of the plan, whatever its generation number).
    #[arg(long, value_name = "K", requires = "daemon")]
    pin_at_slices: Option<u32>,
    /// The orders' ids are PREFIX0, PREFIX1...: two instances with other prefixes write disjoint
    /// orders (dedup keys `order.paid:PREFIXn:version`).
    #[arg(long, default_value = "order-")]
    order_prefix: String,
    /// Fault injection for tests: publish one message to the new broker that reuses the dedup
    /// key of order-0's first event with another payload (a conflict the consumer must refuse),
    /// then exit.
    #[arg(long)]
    inject_conflict: bool,
}

/// Where a pinned producer stops following.
#[derive(Debug, Clone, Copy)]
enum Pin {
    /// At generation N or a later one.
    Generation(u64),
    /// At the first document moving at least K slices.
    Slices(u32),
}

impl Pin {
    fn reached(self, router: &Router) -> bool {
        match self {
            Pin::Generation(n) => router.generation() >= n,
            Pin::Slices(k) => router.document().is_some_and(|d| d.slices_migrated >= k),
        }
    }
}

/// Follow until `pin` is reached, then stop following: drop the follower, so the router keeps the
/// document it has.
async fn pin_at(router: Router, follower: queue_migrate::router::FollowerHandle, pin: Pin) {
    let mut changed = router.subscribe();
    while !pin.reached(&router) {
        if changed.changed().await.is_err() {
            return;
        }
    }
    drop(follower);
    let migrated = router.document().map_or(0, |d| d.slices_migrated);
    eprintln!(
        "producer: pinned at generation {} ({migrated} slices on the new broker): no longer following the routing document",
        router.generation()
    );
}

struct Target {
    adapter: Adapter,
    queue: String,
    name: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    if args.rate.is_nan() || args.rate <= 0.0 {
        return Err("--rate must be above 0".into());
    }
    let kind_of = |spec: &str| {
        spec.split_once('=')
            .map_or("", |(kind, _)| kind)
            .to_string()
    };
    let old_name = args.old_name.clone().unwrap_or_else(|| kind_of(&args.old));
    let new_name = (args.new_name.clone())
        .unwrap_or_else(|| args.new.as_deref().map(kind_of).unwrap_or_default());
    // The plan's names from the first message on: one `broker` label before and after the first
    // routing document.
    let router = Router::for_migration(
        args.migration.clone(),
        args.slices,
        old_name.clone(),
        new_name.clone(),
    );
    let follower = match (&args.daemon, &args.routing_file) {
        (Some(url), _) => Some(router.follow_http(
            url,
            &args.migration,
            std::env::var("MIGRATE_API_TOKEN").ok(),
        )?),
        (None, Some(file)) => Some(router.follow_file(file, Duration::from_millis(200))?),
        (None, None) => None,
    };
    // Kept until the end of main (dropping the handle stops following), or handed to the task
    // that drops it at the pinned generation.
    let pin = match (args.pin_generation, args.pin_at_slices) {
        (Some(n), _) => Some(Pin::Generation(n)),
        (None, Some(k)) => Some(Pin::Slices(k)),
        (None, None) => None,
    };
    let _follower = match (pin, follower) {
        (Some(pin), Some(follower)) => {
            tokio::spawn(pin_at(router.clone(), follower, pin));
            None
        }
        (_, follower) => follower,
    };
    let old_spec = support::parse_broker(&args.old)?;
    let old = Target {
        adapter: support::connect(&old_spec, "producer").await,
        queue: args
            .ingress
            .clone()
            .unwrap_or_else(|| args.old_queue.clone()),
        name: old_name,
    };
    old.adapter.declare(&old.queue).await?;
    let new = match (&args.new, &args.ingress) {
        (Some(spec), None) => {
            let spec = support::parse_broker(spec)?;
            let t = Target {
                adapter: support::connect(&spec, "producer").await,
                queue: args.new_queue.clone(),
                name: new_name,
            };
            t.adapter.declare(&t.queue).await?;
            Some(t)
        }
        (None, None) => return Err("routed mode needs --new KIND=URL (or give --ingress)".into()),
        _ => None,
    };

    if args.inject_conflict {
        let new = new.as_ref().ok_or("--inject-conflict needs --new")?;
        let m = Message::new(
            br#"{"orderId":"order-0","version":1,"amount":-1,"injected":true}"#.to_vec(),
        )
        .with_header(HEADER_DEDUP_KEY, "order.paid:order-0:1")
        .with_header(HEADER_KEY, "order-0");
        new.adapter.publish(&new.queue, &m).await?;
        eprintln!(
            "producer: injected a conflicting duplicate of order.paid:order-0:1 into {}",
            new.queue
        );
        return Ok(());
    }

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            if let Ok(mut term) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
                stop.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        });
    }
    let counter = Arc::new(PublishedCounter::new());
    if let Some(addr) = args.metrics.clone() {
        let counter = counter.clone();
        tokio::spawn(support::serve_metrics(addr, "producer", move || {
            counter.render()
        }));
    }
    // FILE: confirmed keys; FILE.attempted: every key before its first publish (a key confirmed
    // by the broker but not yet written to FILE when the process died is in FILE.attempted).
    let open = |p: PathBuf| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
    };
    let with_suffix = |p: &PathBuf, suffix: &str| {
        let mut a = p.clone().into_os_string();
        a.push(suffix);
        PathBuf::from(a)
    };
    let (mut log, mut attempted, mut routes) = match &args.log {
        Some(p) => (
            Some(open(p.clone())?),
            Some(open(with_suffix(p, ".attempted"))?),
            match new {
                Some(_) => Some(open(with_suffix(p, ".routes"))?),
                None => None,
            },
        ),
        None => (None, None, None),
    };

    let mut versions = vec![0u64; usize::try_from(args.aggregates.max(1))?];
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / args.rate));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n = 0u64;
    while (args.count == 0 || n < args.count) && !stop.load(std::sync::atomic::Ordering::SeqCst) {
        ticker.tick().await;
        let agg = n % args.aggregates.max(1);
        let slot = &mut versions[usize::try_from(agg)?];
        *slot += 1;
        let (order, version) = (format!("{}{agg}", args.order_prefix), *slot);
        let dedup_key = format!("order.paid:{order}:{version}");
        let payload = serde_json::json!({
            "orderId": order, "version": version, "amount": 100 + (n % 900), "seq": n,
        });
        let base = Message::new(payload.to_string().into_bytes())
            .with_header(HEADER_DEDUP_KEY, dedup_key.clone())
            .with_header(HEADER_KEY, order.clone());
        if let Some(f) = attempted.as_mut() {
            writeln!(f, "{dedup_key}")?;
        }
        let mut backoff = Duration::from_millis(100);
        let confirmed = loop {
            let (target, message, route) = match &new {
                None => (&old, base.clone(), None),
                Some(new) => {
                    let route = router.route(&order);
                    let target = if route.target == Side::New { new } else { &old };
                    let stamp = router.stamp(&route, args.producer.clone(), support::now_ms())?;
                    let mut m = base.clone();
                    for (k, v) in stamp.headers() {
                        m.headers.insert(k.to_string(), v);
                    }
                    (target, m, Some(stamp))
                }
            };
            match target.adapter.publish(&target.queue, &message).await {
                Ok(()) => {
                    match &route {
                        Some(stamp) => counter.record(stamp),
                        None => counter.add(&target.name, RouteLabel::Old, &args.producer, 1),
                    }
                    break route;
                }
                Err(e) => {
                    eprintln!("producer: {e}; retrying {dedup_key} in {backoff:?}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        };
        if let Some(f) = log.as_mut() {
            writeln!(f, "{dedup_key}")?;
        }
        if let (Some(f), Some(stamp)) = (routes.as_mut(), &confirmed) {
            // One write per line: the end-to-end suite reads it while the producer runs.
            let line = format!(
                "{dedup_key} {} {} {} {}\n",
                stamp.side.as_str(),
                stamp.slice,
                stamp.generation,
                stamp.at_ms
            );
            f.write_all(line.as_bytes())?;
        }
        n += 1;
        if n.is_multiple_of(500) {
            eprintln!(
                "producer: {n} confirmed (routing generation {})",
                router.generation()
            );
        }
    }
    if let Some(f) = log.as_mut() {
        f.sync_all()?;
    }
    eprintln!("producer: done, {n} events confirmed");
    println!("{n}");
    Ok(())
}

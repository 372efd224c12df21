//! A producer that routes every message by its aggregate's slice, following the daemon's routing
//! document, and stamps it with its route.
//!
//! Until the broker adapters exist, the two brokers are two directories standing in for queues:
//! `QUEUES/old/` and `QUEUES/new/`, one JSON file per message, written atomically (a temporary
//! file, then a rename) and named by publish time so that a reader sees them in order. Swap
//! `publish_to_directory` for a real broker client; everything else stays.
//!
//! ```text
//! cargo run --example producer --features router -- \
//!     --daemon http://127.0.0.1:8480 --migration orders --queues /tmp/qm-demo \
//!     [--routing-file orders.routing.json] [--producer checkout] [--rate 20] [--count 0] \
//!     [--aggregates 50] [--retry-every 10] [--metrics 127.0.0.1:9465]
//! ```
//!
//! What it shows:
//! - `Router::route(key)` on the hot path, lock-free, everything to old until a document arrives;
//! - the route stamp in the payload (`"route": {...}`), so a consumer can count by path;
//! - `PublishedCounter` on `/metrics`: `queue_migrate_published_total{broker,route,producer}`, what
//!   the disconnect gate counts distinct producers on;
//! - a producer retry (`--retry-every`): the same event published again — possibly to the other
//!   broker if its slice moved in between. The consumer applies it once.

use std::collections::HashMap;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queue_migrate::router::Router;
use queue_migrate::routing::Side;
use queue_migrate::stamp::{PublishedCounter, RouteLabel, RouteStamp};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const USAGE: &str = "usage: producer [--daemon URL | --routing-file PATH] [--migration NAME] \
[--queues DIR] [--producer NAME] [--rate MSG_PER_S] [--count N (0: forever)] [--aggregates N] \
[--retry-every N (0: never)] [--metrics ADDR] [--default-slices N]
(the API token, if the daemon wants one, comes from MIGRATE_API_TOKEN)";

/// `--name value` pairs.
struct Args(HashMap<String, String>);

impl Args {
    fn parse() -> Result<Args, String> {
        let mut map = HashMap::new();
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            if flag == "--help" || flag == "-h" {
                return Err(USAGE.to_string());
            }
            let name = flag
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {flag:?}\n{USAGE}"))?;
            let value = it
                .next()
                .ok_or_else(|| format!("--{name} needs a value\n{USAGE}"))?;
            map.insert(name.to_string(), value);
        }
        Ok(Args(map))
    }
    fn get(&self, name: &str, default: &str) -> String {
        self.0
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    }
    fn opt(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
    fn num(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.0.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|e| format!("--{name} {v:?}: {e}\n{USAGE}")),
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// "Publish": write the message as a file in the broker's directory, atomically.
fn publish_to_directory(dir: &Path, producer: &str, message: &Value) -> std::io::Result<PathBuf> {
    let safe: String = producer
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = format!(
        "{:013}-{safe}-{:010}.json",
        now_ms(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec(message)?)?;
    let path = dir.join(name);
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Route, stamp, publish, count.
fn publish(
    router: &Router,
    queues: &Path,
    producer: &str,
    counter: &PublishedCounter,
    mut event: Value,
) -> Result<RouteStamp, Box<dyn Error>> {
    let aggregate = event["orderId"]
        .as_str()
        .ok_or("event without orderId")?
        .to_string();
    let route = router.route(&aggregate);
    let broker = router
        .broker_name(route.target)
        .unwrap_or_else(|| route.target.as_str().to_string());
    let stamp = RouteStamp::new(&route, broker, producer, now_ms())?;
    stamp.insert_into(&mut event)?;
    publish_to_directory(&queues.join(route.target.as_str()), producer, &event)?;
    counter.record(&stamp);
    Ok(stamp)
}

/// A bare-bones `/metrics` endpoint (any path answers), enough for a scrape or a gate.
async fn serve_metrics(addr: String, counter: Arc<PublishedCounter>) {
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("producer: cannot serve /metrics on {addr}: {e}");
            return;
        }
    };
    println!("producer: /metrics on http://{addr}/metrics");
    while let Ok((mut socket, _)) = listener.accept().await {
        let body = counter.render();
        tokio::spawn(async move {
            let mut request = [0u8; 2048];
            let _ = socket.read(&mut request).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
        });
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args = match Args::parse() {
        Ok(a) => a,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let queues = PathBuf::from(args.get("queues", "qm-demo-queues"));
    for side in [Side::Old, Side::New] {
        std::fs::create_dir_all(queues.join(side.as_str()))?;
    }
    let default_slices = u32::try_from(args.num("default-slices", 128)?)?;
    let router = Router::with_default_slices(default_slices);
    let migration = args.get("migration", "orders");
    let follower = match args.opt("routing-file") {
        Some(file) => {
            println!("producer: following the routing file {file}");
            router.follow_file(file, Duration::from_secs(1))?
        }
        None => {
            let daemon = args.get("daemon", "http://127.0.0.1:8480");
            println!("producer: following {daemon} for migration {migration:?}");
            router.follow_http(&daemon, &migration, std::env::var("MIGRATE_API_TOKEN").ok())?
        }
    };

    let producer = args.get("producer", "example-producer");
    let rate = args.num("rate", 20)?.max(1);
    let count = args.num("count", 0)?;
    let aggregates = args.num("aggregates", 50)?.max(1);
    let retry_every = args.num("retry-every", 10)?;
    let counter = Arc::new(PublishedCounter::new());
    if let Some(addr) = args.opt("metrics") {
        tokio::spawn(serve_metrics(addr, counter.clone()));
    }

    let mut changes = router.subscribe();
    let mut versions: HashMap<String, u64> = HashMap::new();
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    let mut seq: u64 = 0;
    let mut last_report = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
        }
        if changes.has_changed().unwrap_or(false) {
            changes.borrow_and_update();
            if let Some(doc) = router.document() {
                println!(
                    "producer: routing generation {}: {} ({}/{} slices to {})",
                    doc.generation,
                    doc.state,
                    doc.slices_migrated,
                    doc.slices_total,
                    doc.brokers.new
                );
                // The series exist from now on, so a first publish is an increase from 0.
                counter.touch(&doc.brokers.old, RouteLabel::Old, &producer);
                counter.touch(&doc.brokers.new, RouteLabel::New, &producer);
            }
        }
        seq += 1;
        // Spread events over the aggregates; each aggregate's versions increase by one.
        let aggregate = format!("order-{}", seq.wrapping_mul(7919) % aggregates);
        let version = versions.entry(aggregate.clone()).or_insert(0);
        *version += 1;
        let event = json!({
            "type": "order.paid",
            "orderId": aggregate,
            "eventId": format!("{aggregate}-v{version}"),
            "version": *version,
            "amount": 10,
        });
        publish(&router, &queues, &producer, &counter, event.clone())?;
        if retry_every > 0 && seq.is_multiple_of(retry_every) {
            // A producer retry: the confirm was "lost", the same event goes out again.
            publish(&router, &queues, &producer, &counter, event)?;
        }
        if last_report.elapsed() >= Duration::from_secs(5) {
            last_report = std::time::Instant::now();
            let status = follower.status();
            let health = match &status.last_error {
                Some(e) => format!(
                    "routing source failing ({e}); using generation {}",
                    router.generation()
                ),
                None => format!("routing generation {}", router.generation()),
            };
            println!("producer: {seq} events published; {health}");
        }
        if count > 0 && seq >= count {
            break;
        }
    }
    println!("producer: done, {seq} events\n{}", counter.render());
    Ok(())
}

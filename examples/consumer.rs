//! A consumer that reads both sides and applies every effect once, idempotently, in SQLite with
//! `dedup::sql`: the business key and the effect commit in one transaction.
//!
//! Until the broker adapters exist, the two brokers are two directories standing in for queues
//! (what `examples/producer.rs` writes): `QUEUES/old/` and `QUEUES/new/`, one JSON file per
//! message. Reading a file is a delivery; deleting it is the ack, done only after the transaction
//! committed — so a crash in between redelivers the message, and the dedup key turns the
//! redelivery into a blocked duplicate. Several instances may run on the same directories.
//!
//! ```text
//! cargo run --example consumer --features dedup -- \
//!     --queues /tmp/qm-demo --db /tmp/qm-demo/consumer.db [--metrics 127.0.0.1:9464] \
//!     [--once true] [--fail-every 0] [--poll-ms 200]
//! ```
//!
//! The effect is a ledger row plus an account balance (not idempotent by itself, so a duplicate
//! would show). Per message:
//! 1. `BEGIN IMMEDIATE`; `claim(key = order.paid:<orderId>:<eventId>, hash of the payload without
//!    its route stamp)`;
//! 2. `Fresh`: `accept_version("order:<id>", version)` drops an event older than the last applied
//!    one (the in-flight message of a slice that moved back), else the effect; commit; ack.
//!    `Duplicate`: ack. `Conflict`: set aside (dead/) for a person. Effect failed: roll back (the
//!    key goes with it), leave the message for the retry.
//! 3. Count the outcome by the route in the stamp (old / new / bridge).
//!
//! An effect that leaves the system (a call to a payment service) must also send
//! `key.idempotency_key()` as that service's `Idempotency-Key`: if this process dies after the
//! call and before the commit, only the other side can recognise the retry.

use std::collections::HashMap;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queue_migrate::dedup::sql::{self, Claim, VersionCheck};
use queue_migrate::dedup::{BusinessKey, ConsumerMetrics, Outcome, PayloadHash};
use queue_migrate::routing::Side;
use queue_migrate::stamp::{RouteLabel, RouteStamp};
use serde_json::Value;
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const USAGE: &str = "usage: consumer [--queues DIR] [--db PATH] [--metrics ADDR] [--once true] \
[--fail-every N (0: never)] [--poll-ms MS]";

const EFFECT_SCHEMA: &str = "\
CREATE TABLE IF NOT EXISTS ledger (
    key TEXT NOT NULL, order_id TEXT NOT NULL, amount BIGINT NOT NULL, route TEXT NOT NULL,
    applied_at_ms BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS balances (order_id TEXT NOT NULL PRIMARY KEY, total BIGINT NOT NULL);
";

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
    fn num(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.0.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|e| format!("--{name} {v:?}: {e}\n{USAGE}")),
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// One delivered message.
struct Delivery {
    path: PathBuf,
    side: Side,
}

/// What the consumer counts besides the metrics.
#[derive(Default)]
struct Tally {
    stale: AtomicU64,
    attempts: AtomicU64,
}

/// The messages waiting on both sides, oldest first (file names start with the publish time).
fn pending(queues: &Path) -> std::io::Result<Vec<Delivery>> {
    let mut all = Vec::new();
    for side in [Side::Old, Side::New] {
        let dir = queues.join(side.as_str());
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let path = entry?.path();
            let visible = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".json") && !n.starts_with('.'));
            if visible {
                all.push(Delivery { path, side });
            }
        }
    }
    all.sort_by(|a, b| a.path.file_name().cmp(&b.path.file_name()));
    Ok(all)
}

/// Set a message aside for a person (a stand-in for the broker's dead-letter queue).
fn set_aside(queues: &Path, d: &Delivery, why: &str) -> std::io::Result<()> {
    let dead = queues.join("dead");
    std::fs::create_dir_all(&dead)?;
    if let Some(name) = d.path.file_name() {
        eprintln!("consumer: {} set aside: {why}", d.path.display());
        match std::fs::rename(&d.path, dead.join(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// The business fields of an `order.paid` event.
struct Event {
    key: BusinessKey,
    order_id: String,
    version: i64,
    amount: i64,
}

fn event_of(payload: &Value) -> Result<Event, String> {
    let text = |name: &str| {
        payload[name]
            .as_str()
            .ok_or_else(|| format!("no string field {name:?}"))
    };
    let number = |name: &str| {
        payload[name]
            .as_i64()
            .ok_or_else(|| format!("no integer field {name:?}"))
    };
    let order_id = text("orderId")?.to_string();
    // The business identity, never the broker's message id (a file name here).
    let key =
        BusinessKey::new(text("type")?, &order_id, text("eventId")?).map_err(|e| e.to_string())?;
    Ok(Event {
        key,
        order_id,
        version: number("version")?,
        amount: number("amount")?,
    })
}

/// Handle one delivery: the whole dedup protocol.
async fn handle(
    pool: &SqlitePool,
    queues: &Path,
    metrics: &ConsumerMetrics,
    tally: &Tally,
    fail_every: u64,
    d: &Delivery,
) -> Result<(), Box<dyn Error>> {
    let bytes = match std::fs::read(&d.path) {
        Ok(b) => b,
        // Another instance acked it first.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let payload: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            metrics.record(RouteLabel::from(d.side), Outcome::DeadLettered);
            set_aside(queues, d, &format!("not JSON: {e}"))?;
            return Ok(());
        }
    };
    // Count by the path the message took (the stamp), else by the side it was read from.
    let route = match RouteStamp::from_payload(&payload) {
        Ok(stamp) => stamp.side,
        Err(e) => {
            eprintln!(
                "consumer: {}: {e}; counting it under {}",
                d.path.display(),
                d.side.as_str()
            );
            RouteLabel::from(d.side)
        }
    };
    let event = match event_of(&payload) {
        Ok(ev) => ev,
        Err(why) => {
            metrics.record(route, Outcome::DeadLettered);
            set_aside(queues, d, &why)?;
            return Ok(());
        }
    };
    let hash = PayloadHash::of_json(&payload);

    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let outcome = match sql::claim(&mut tx, &event.key, &hash, now_ms()).await? {
        Claim::Fresh => {
            let aggregate = format!("order:{}", event.order_id);
            match sql::accept_version(&mut tx, &aggregate, event.version).await? {
                VersionCheck::Accepted => {
                    let attempt = tally.attempts.fetch_add(1, Ordering::Relaxed) + 1;
                    if fail_every > 0 && attempt.is_multiple_of(fail_every) {
                        // The effect failed: the key rolls back with it; the message stays.
                        tx.rollback().await?;
                        metrics.record(route, Outcome::Failed);
                        return Ok(());
                    }
                    sqlx::query(
                        "INSERT INTO ledger (key, order_id, amount, route, applied_at_ms) VALUES ($1, $2, $3, $4, $5)",
                    )
                    .bind(event.key.as_str())
                    .bind(&event.order_id)
                    .bind(event.amount)
                    .bind(route.as_str())
                    .bind(now_ms())
                    .execute(&mut *tx)
                    .await?;
                    sqlx::query(
                        "INSERT INTO balances (order_id, total) VALUES ($1, $2) \
                         ON CONFLICT (order_id) DO UPDATE SET total = total + excluded.total",
                    )
                    .bind(&event.order_id)
                    .bind(event.amount)
                    .execute(&mut *tx)
                    .await?;
                }
                VersionCheck::Stale { last } => {
                    // Committing the claim records that this event was seen; no effect.
                    tally.stale.fetch_add(1, Ordering::Relaxed);
                    eprintln!(
                        "consumer: {} version {} is older than the applied {last}: skipped",
                        event.key, event.version
                    );
                }
            }
            tx.commit().await?;
            Outcome::Processed
        }
        Claim::Duplicate => {
            tx.rollback().await?;
            Outcome::DuplicateBlocked
        }
        Claim::Conflict { stored_hash } => {
            tx.rollback().await?;
            metrics.record(route, Outcome::Conflict);
            set_aside(
                queues,
                d,
                &format!(
                    "{}: payload differs from the one applied ({stored_hash})",
                    event.key
                ),
            )?;
            return Ok(());
        }
    };
    metrics.record(route, outcome);
    // The ack, after the commit.
    match std::fs::remove_file(&d.path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

/// Keys whose effect was applied more than once: what dedup exists to keep at 0.
async fn duplicate_effects(pool: &SqlitePool) -> Result<i64, sqlx::Error> {
    let row: (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM (SELECT key FROM ledger GROUP BY key HAVING COUNT(*) > 1)",
    )
    .fetch_one(pool)
    .await?;
    Ok(row.0)
}

/// A bare-bones `/metrics` endpoint (any path answers).
async fn serve_metrics(addr: String, metrics: Arc<ConsumerMetrics>, pool: SqlitePool) {
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("consumer: cannot serve /metrics on {addr}: {e}");
            return;
        }
    };
    println!("consumer: /metrics on http://{addr}/metrics");
    while let Ok((mut socket, _)) = listener.accept().await {
        let mut body = metrics.render();
        if let Ok(n) = duplicate_effects(&pool).await {
            body.push_str(
                "# HELP example_duplicate_effects Business keys applied more than once.\n",
            );
            body.push_str("# TYPE example_duplicate_effects gauge\n");
            body.push_str(&format!("example_duplicate_effects {n}\n"));
        }
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

fn summary(metrics: &ConsumerMetrics, tally: &Tally) -> String {
    let mut parts = Vec::new();
    for outcome in Outcome::ALL {
        let by_route: Vec<String> = RouteLabel::ALL
            .iter()
            .map(|r| (r, metrics.get(*r, outcome)))
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        if !by_route.is_empty() {
            parts.push(format!("{}: {}", outcome.as_str(), by_route.join(", ")));
        }
    }
    parts.push(format!(
        "stale skipped: {}",
        tally.stale.load(Ordering::Relaxed)
    ));
    parts.join("; ")
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
    let db = args.get("db", "qm-demo-consumer.db");
    let once = args.get("once", "false") == "true";
    let fail_every = args.num("fail-every", 0)?;
    let poll = Duration::from_millis(args.num("poll-ms", 200)?.max(10));

    let options = SqliteConnectOptions::new()
        .filename(&db)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(Duration::from_secs(10));
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await?;
    sql::ensure_schema(&pool).await?;
    sqlx::raw_sql(EFFECT_SCHEMA).execute(&pool).await?;

    let metrics = Arc::new(ConsumerMetrics::new());
    let tally = Tally::default();
    if let Some(addr) = args.0.get("metrics").cloned() {
        tokio::spawn(serve_metrics(addr, metrics.clone(), pool.clone()));
    }
    println!(
        "consumer: reading {}/old and {}/new into {db}",
        queues.display(),
        queues.display()
    );

    let mut last_purge = std::time::Instant::now();
    let mut last_report = std::time::Instant::now();
    loop {
        let batch = pending(&queues)?;
        for d in &batch {
            if let Err(e) = handle(&pool, &queues, &metrics, &tally, fail_every, d).await {
                // Not acked: the message stays for the next poll (a redelivery).
                eprintln!("consumer: {}: {e}; will retry", d.path.display());
            }
        }
        if last_purge.elapsed() >= Duration::from_secs(60) {
            last_purge = std::time::Instant::now();
            let purged = sql::purge_expired(&pool, now_ms(), 1000).await?;
            if purged > 0 {
                println!("consumer: purged {purged} expired keys");
            }
        }
        if last_report.elapsed() >= Duration::from_secs(5) {
            last_report = std::time::Instant::now();
            println!("consumer: {}", summary(&metrics, &tally));
        }
        if once && batch.is_empty() {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    println!(
        "consumer: {}; duplicate effects: {}",
        summary(&metrics, &tally),
        duplicate_effects(&pool).await?
    );
    Ok(())
}

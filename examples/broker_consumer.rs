//! An idempotent consumer of `order.paid` events on real brokers: it reads the old and the new
//! broker at once (what `consume_dual` asks), applies every event once and in per-order version
//! order, in SQLite with `dedup::sql` (the business key and the effect commit in one
//! transaction), and acks only after the commit.
//!
//! Per delivery:
//! 1. A synthetic probe (`x-qm-probe`): claim its dedup key, apply nothing, record it (count,
//!    latency by route) in `queue_migrate_probe_*`; ack.
//! 2. Otherwise `BEGIN IMMEDIATE`; `claim(x-qm-dedup-key, hash of the payload)`:
//!    - `Duplicate`: ack (already applied, via the other broker or a redelivery);
//!    - `Conflict` (same key, other payload): set aside, ack, count;
//!    - `Fresh` and the order's next version: the effect (a ledger row and the order's version),
//!      commit, ack;
//!    - `Fresh` but a version ahead of the next one (its predecessor is still on the other broker,
//!      in flight at the moment its slice moved): roll back — the claim goes with it — and give
//!      the message back for a later redelivery. This is what keeps per-key order across the two
//!      brokers.
//! 3. Count the outcome by the route in the stamp (old / new / bridge).
//!
//! The stale-producer check (issue 58, `docs/design.md#stale-producers`): with `--daemon` (the
//! routing long-poll, as follower `GROUP-consumer`) or `--routing-file`, the consumer follows the
//! migration's routing document and feeds every document it sees to a `StaleGuard`, dated when it
//! first saw it; every delivery from the OLD broker goes through the guard on the admit path
//! (`dedup::admission::Admission::from_old_broker`): a message stamped by a generation older than
//! the one that moved its slice, after the grace, is counted in
//! `queue_migrate_stale_producer_messages_total{producer,slice}` and
//! `queue_migrate_stale_messages_total` (what the daemon's built-in guard reads), a message
//! without a stamp in `queue_migrate_unstamped_messages_total`; it is still applied once and acked
//! as any other. With each new document the consumer reads the old broker's own mark of the old
//! queue (`Adapter::stale_mark`: a JetStream stream's last sequence, a Redis server's clock, a
//! Kafka topic's high watermarks; within 2 s, on a connection of its own), and each delivery
//! carries the broker's facts (`Delivery::stale_facts`): a backlog enqueued before the move is
//! told by the broker's own order, whatever its producer's clock says. RabbitMQ has no such mark,
//! and a mark not read in time is counted in `queue_migrate_stale_mark_unread_total`: then the
//! stamp's time decides, within the clock-skew bound.
//! The bounds come from the plan's `stale_producers` section with `--plan`, else from
//! `--stale-grace` and `--stale-clock-skew` (the same defaults, 3 s and 2 s). Without a routing
//! source nothing has moved as far as the guard knows: unstamped messages are still counted,
//! nothing is stale. Both brokers are read from the start whatever the document says (a superset
//! of what `consume_dual` asks).
//!
//! A broker that goes away is reconnected every second; what was unacked comes back and the dedup
//! key turns it into a blocked duplicate.
//!
//! ```text
//! cargo run --example broker_consumer -- --db /tmp/consumer.db \
//!     --old rabbitmq=amqp://guest:guest@127.0.0.1:5672/%2f --old-queue orders \
//!     --new nats=nats://127.0.0.1:4222 --new-queue ORDERS --metrics 127.0.0.1:9464 \
//!     --migration orders --daemon http://127.0.0.1:8480 --plan plan.yaml
//! ```

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clap::Parser;
use queue_migrate::brokers::{Adapter, Delivery, HEADER_DEDUP_KEY, Kind, SubscribeOptions, marks};
use queue_migrate::dedup::admission::Admission;
use queue_migrate::dedup::sql::{self, Verdict};
use queue_migrate::dedup::{BusinessKey, ConsumerMetrics, Outcome, PayloadHash};
use queue_migrate::probe::{Probe, ProbeMetrics};
use queue_migrate::router::{FollowerHandle, Router};
use queue_migrate::routing::Side;
use queue_migrate::stale::{Bounds, StaleGuard};
use queue_migrate::stamp::{HEADER_AT, HEADER_ROUTE, RouteLabel};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

/// Consume `order.paid` events from both brokers and apply each once, in order.
#[derive(Debug, Parser)]
struct Args {
    /// The old broker, KIND=URL.
    #[arg(long)]
    old: Option<String>,
    /// The queue on the old broker.
    #[arg(long, default_value = "orders")]
    old_queue: String,
    /// The new broker, KIND=URL.
    #[arg(long)]
    new: Option<String>,
    /// The queue or stream on the new broker.
    #[arg(long, default_value = "ORDERS")]
    new_queue: String,
    /// The SQLite database of effects and dedup keys.
    #[arg(long, default_value = "consumer.db")]
    db: PathBuf,
    /// The consumer group.
    #[arg(long, default_value = "orders-consumer")]
    group: String,
    /// Unacked deliveries per broker.
    #[arg(long, default_value_t = 32)]
    prefetch: u16,
    /// A delivery not acked within this time goes to another consumer (NATS, Redis).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    visibility_timeout: Duration,
    /// Serve /metrics here.
    #[arg(long)]
    metrics: Option<String>,
    /// The migration whose routing document to follow (default: the plan's `name` with `--plan`,
    /// else `orders`).
    #[arg(long)]
    migration: Option<String>,
    /// Follow the routing document by the daemon's long-poll at this URL (the stale-producer
    /// check needs the document; `MIGRATE_API_TOKEN` is sent if set).
    #[arg(long, conflicts_with = "routing_file")]
    daemon: Option<String>,
    /// Follow the routing document in this file instead of the daemon.
    #[arg(long)]
    routing_file: Option<PathBuf>,
    /// The migration's plan: the stale-producer check's grace and clock-skew bound come from its
    /// `stale_producers` section (`grace: auto` is 3 s), overriding the two flags below.
    #[arg(long)]
    plan: Option<PathBuf>,
    /// The stale-producer check's grace without `--plan` (or when the plan has no
    /// `stale_producers`): how long after a publish a producer may still write a moved slice by
    /// the generation before (the plan's `grace: auto`).
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    stale_grace: Duration,
    /// The stale-producer check's bound on a producer's clock against the controller's, without
    /// `--plan` (the plan's `clock_skew` default).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    stale_clock_skew: Duration,
}

const EFFECT_SCHEMA: &str = "\
CREATE TABLE IF NOT EXISTS ledger (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL, order_id TEXT NOT NULL, version BIGINT NOT NULL, route TEXT NOT NULL,
    applied_at_ms BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS orders (order_id TEXT NOT NULL PRIMARY KEY, version BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS set_aside (key TEXT NOT NULL, why TEXT NOT NULL, at_ms BIGINT NOT NULL);
";

struct App {
    pool: SqlitePool,
    metrics: ConsumerMetrics,
    stale: Arc<StaleGuard>,
    probes: ProbeMetrics,
    connected: [AtomicU64; 2],
    deferred: AtomicU64,
    started: i64,
}

impl App {
    fn render(&self) -> String {
        let mut out = self.metrics.render();
        out.push_str(&self.probes.render());
        out.push_str("# TYPE app_consumer_connected gauge\n");
        for (i, side) in ["old", "new"].iter().enumerate() {
            out.push_str(&format!(
                "app_consumer_connected{{side=\"{side}\"}} {}\n",
                self.connected[i].load(Ordering::Relaxed)
            ));
        }
        out.push_str(&format!(
            "# TYPE app_consumer_deferred_total counter\napp_consumer_deferred_total {}\n",
            self.deferred.load(Ordering::Relaxed)
        ));
        out.push_str(&format!(
            "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {}\n",
            self.started / 1000
        ));
        out
    }
}

/// What to do with the delivery once its transaction is over.
enum Then {
    Ack,
    Defer,
}

async fn handle(app: &App, d: &Delivery, side: Side) -> Result<Then, Box<dyn std::error::Error>> {
    let m = &d.message;
    let route = m
        .header(HEADER_ROUTE)
        .and_then(RouteLabel::parse)
        .unwrap_or(RouteLabel::from(side));
    let key = m
        .header(HEADER_DEDUP_KEY)
        .ok_or("no x-qm-dedup-key header")?;
    let key = BusinessKey::parse(key).map_err(|e| format!("dedup key {key:?}: {e}"))?;
    let hash = PayloadHash::of_bytes(&m.payload);
    let now = support::now_ms();
    let headers = || m.headers.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    let mut tx = app.pool.begin_with("BEGIN IMMEDIATE").await?;
    let mut admission = Admission::new(&key, &hash);
    if side == Side::Old {
        // The old broker's position or enqueue time of this delivery, where it has one.
        admission = admission.from_old_broker(&app.stale, headers(), d.stale_facts());
    }
    // Unversioned here (the order check below defers instead of refusing): never `Stale`.
    let claim = admission.admit(&mut tx, now).await?.verdict;

    if let Some(probe) = Probe::from_headers(headers()) {
        let fresh = matches!(claim, Verdict::Fresh);
        tx.commit().await?;
        let latency = m
            .header(HEADER_AT)
            .and_then(|at| at.parse::<i64>().ok())
            .map(|at| now - at);
        app.probes.record(route, probe.kind, fresh, latency);
        return Ok(Then::Ack);
    }

    match claim {
        Verdict::Duplicate | Verdict::Stale { .. } => {
            tx.rollback().await?;
            app.metrics.record(route, Outcome::DuplicateBlocked);
            Ok(Then::Ack)
        }
        Verdict::Conflict { .. } => {
            sqlx::query("INSERT INTO set_aside (key, why, at_ms) VALUES (?, 'conflict', ?)")
                .bind(key.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            app.metrics.record(route, Outcome::Conflict);
            Ok(Then::Ack)
        }
        Verdict::Fresh => {
            let event: serde_json::Value = serde_json::from_slice(&m.payload)?;
            let order = event["orderId"].as_str().ok_or("no orderId")?;
            let version = event["version"].as_i64().ok_or("no version")?;
            let last: i64 = sqlx::query_scalar("SELECT version FROM orders WHERE order_id = ?")
                .bind(order)
                .fetch_optional(&mut *tx)
                .await?
                .unwrap_or(0);
            if version > last + 1 {
                tx.rollback().await?;
                app.deferred.fetch_add(1, Ordering::Relaxed);
                app.metrics.record(route, Outcome::InProgressRetry);
                return Ok(Then::Defer);
            }
            if version <= last {
                // Already past it (a key that was not deduplicated): record the claim only.
                tx.commit().await?;
                app.metrics.record(route, Outcome::DuplicateBlocked);
                return Ok(Then::Ack);
            }
            sqlx::query(
                "INSERT INTO orders (order_id, version) VALUES (?, ?) \
                 ON CONFLICT (order_id) DO UPDATE SET version = excluded.version",
            )
            .bind(order)
            .bind(version)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO ledger (key, order_id, version, route, applied_at_ms) VALUES (?, ?, ?, ?, ?)",
            )
            .bind(key.as_str())
            .bind(order)
            .bind(version)
            .bind(route.as_str())
            .bind(now)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            app.metrics.record(route, Outcome::Processed);
            Ok(Then::Ack)
        }
    }
}

/// Read one side for ever, reconnecting when its broker goes away.
async fn consume(app: Arc<App>, side: Side, spec: (Kind, String), queue: String, args: Arc<Args>) {
    let i = usize::from(side == Side::New);
    let who = if side == Side::New {
        "consumer[new]"
    } else {
        "consumer[old]"
    };
    loop {
        let adapter = support::connect(&spec, who).await;
        let options = SubscribeOptions {
            group: args.group.clone(),
            consumer: format!("{}-{}", args.group, std::process::id()),
            prefetch: args.prefetch,
            visibility_timeout: args.visibility_timeout,
            // Several consumers of the group may read at once.
            exclusive: false,
        };
        let subscribed = match adapter.declare(&queue).await {
            Ok(()) => adapter.subscribe(&queue, &options).await,
            Err(e) => Err(e),
        };
        let mut sub = match subscribed {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{who}: {e}; retrying in 1s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        eprintln!("{who}: reading {queue}");
        app.connected[i].store(1, Ordering::Relaxed);
        loop {
            let d = match sub.next().await {
                Ok(Some(d)) => d,
                Ok(None) => break,
                Err(e) => {
                    eprintln!("{who}: {e}; reconnecting");
                    break;
                }
            };
            let then = match handle(&app, &d, side).await {
                Ok(t) => t,
                Err(e) => {
                    // The transaction rolled back: leave the message for a redelivery.
                    eprintln!("{who}: {e}; the message will be redelivered");
                    app.metrics.record(RouteLabel::from(side), Outcome::Failed);
                    Then::Defer
                }
            };
            let done = match then {
                Then::Ack => d.ack().await,
                Then::Defer => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    d.nack().await
                }
            };
            if let Err(e) = done {
                eprintln!("{who}: {e}; reconnecting");
                break;
            }
        }
        app.connected[i].store(0, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The stale-producer check's bounds: the plan's `stale_producers` with `--plan`, else the flags.
fn stale_bounds(args: &Args) -> Result<Bounds, String> {
    let flags = Bounds {
        grace_ms: i64::try_from(args.stale_grace.as_millis()).unwrap_or(i64::MAX),
        clock_skew_ms: i64::try_from(args.stale_clock_skew.as_millis()).unwrap_or(i64::MAX),
    };
    let Some(path) = &args.plan else {
        return Ok(flags);
    };
    let plan = read_plan(path)?;
    Ok(plan.stale_producers.map_or(flags, |s| Bounds {
        grace_ms: queue_migrate::time::millis(s.grace),
        clock_skew_ms: queue_migrate::time::millis(s.clock_skew),
    }))
}

/// The plan at `path`, compiled (its secrets need not resolve here: only its name and its
/// `stale_producers` are read).
fn read_plan(path: &std::path::Path) -> Result<queue_migrate::plan::Plan, String> {
    use queue_migrate::plan::{SecretsMode, SystemResolve, compile_with_secrets_mode};
    let yaml = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    compile_with_secrets_mode(&yaml, path.parent(), &SystemResolve, SecretsMode::Deferred)
        .map(|c| c.plan)
        .map_err(|errors| {
            let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
            format!("{}: {}", path.display(), errors.join("; "))
        })
}

/// Follow the routing document (`--daemon` or `--routing-file`) and feed each one to `guard`,
/// dated when this consumer first saw it, with the old broker's mark of the old queue read then
/// (both later than the publish: the safe side). `None` without a routing source.
fn follow_routing(
    args: &Args,
    migration: &str,
    guard: Arc<StaleGuard>,
) -> Result<Option<FollowerHandle>, Box<dyn std::error::Error>> {
    let old = args.old.as_deref().map(support::parse_broker).transpose()?;
    let old_queue = args.old_queue.clone();
    // A stable id: a restarted consumer reports as the same follower.
    let router = Router::builder(migration)
        .producer(format!("{}-consumer", args.group))
        .build();
    let follower = match (&args.daemon, &args.routing_file) {
        (Some(url), _) => router
            .follow_http(url, migration, std::env::var("MIGRATE_API_TOKEN").ok())
            .map_err(|e| format!("--daemon {}: {e}", queue_migrate::redact::url(url)))?,
        (None, Some(file)) => router
            .follow_file(file, Duration::from_millis(200))
            .map_err(|e| format!("--routing-file {}: {e}", file.display()))?,
        (None, None) => return Ok(None),
    };
    let mut changed = router.subscribe();
    tokio::spawn(async move {
        // A connection of its own to the old broker, made when a document needs a mark.
        let mut adapter: Option<Adapter> = None;
        loop {
            if let Some(doc) = router.document()
                && guard.latest_generation().is_none_or(|g| g < doc.generation)
            {
                if adapter.is_none()
                    && let Some((kind, url)) = &old
                {
                    let connect = Adapter::connect(*kind, url);
                    match tokio::time::timeout(marks::MARK_DEADLINE, connect).await {
                        Ok(Ok(a)) => adapter = Some(a),
                        Ok(Err(e)) => eprintln!("consumer: stale marks: {e}"),
                        Err(_) => eprintln!("consumer: stale marks: no connection in time"),
                    }
                }
                if adapter.is_some() || old.is_some() {
                    let deadline = marks::MARK_DEADLINE;
                    let read =
                        marks::follow_marked(&guard, &doc, adapter.as_ref(), &old_queue, deadline);
                    if read.await.is_none() && kind_has_marks(old.as_ref()) {
                        // A connection that failed once is made again for the next document.
                        adapter = None;
                    }
                } else {
                    guard.follow(&doc, support::now_ms(), None);
                }
            }
            if changed.changed().await.is_err() {
                return;
            }
        }
    });
    Ok(Some(follower))
}

/// Whether the old broker keeps a mark (RabbitMQ has none: no mark is no failure there).
fn kind_has_marks(old: Option<&(Kind, String)>) -> bool {
    old.is_some_and(|(kind, _)| *kind != Kind::RabbitMq)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Arc::new(Args::parse());
    let options = SqliteConnectOptions::new()
        .filename(&args.db)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(Duration::from_secs(30));
    let pool = SqlitePoolOptions::new()
        .max_connections(2)
        .connect_with(options)
        .await?;
    sql::ensure_schema(&pool).await?;
    sqlx::raw_sql(EFFECT_SCHEMA).execute(&pool).await?;
    let stale = Arc::new(StaleGuard::new(stale_bounds(&args)?));
    let migration = match (&args.migration, &args.plan) {
        (Some(m), _) => m.clone(),
        (None, Some(path)) => read_plan(path)?.name,
        (None, None) => "orders".to_string(),
    };
    // Held to the end of main: dropping the handle stops the follower.
    let follower = follow_routing(&args, &migration, stale.clone())?;
    let bounds = stale.bounds();
    eprintln!(
        "consumer: stale-producer check on the old broker: {} (grace {} ms, clock skew {} ms)",
        if follower.is_some() {
            format!("following the routing of {migration}")
        } else {
            "no routing followed: unstamped messages counted only".to_string()
        },
        bounds.grace_ms,
        bounds.clock_skew_ms
    );
    let app = Arc::new(App {
        pool,
        metrics: ConsumerMetrics::new().with_stale_guard(stale.clone()),
        stale,
        probes: ProbeMetrics::new(),
        connected: [AtomicU64::new(0), AtomicU64::new(0)],
        deferred: AtomicU64::new(0),
        started: support::now_ms(),
    });
    if let Some(addr) = args.metrics.clone() {
        let app = app.clone();
        tokio::spawn(support::serve_metrics(addr, "consumer", move || {
            app.render()
        }));
    }
    let mut sides = Vec::new();
    for (side, spec, queue) in [
        (Side::Old, &args.old, &args.old_queue),
        (Side::New, &args.new, &args.new_queue),
    ] {
        if let Some(spec) = spec {
            let spec = support::parse_broker(spec)?;
            sides.push(tokio::spawn(consume(
                app.clone(),
                side,
                spec,
                queue.clone(),
                args.clone(),
            )));
        }
    }
    if sides.is_empty() {
        return Err("give --old and/or --new (KIND=URL)".into());
    }
    tokio::select! {
        _ = futures_util::future::join_all(sides) => {}
        _ = tokio::signal::ctrl_c() => eprintln!("consumer: stopping"),
    }
    Ok(())
}

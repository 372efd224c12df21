//! Issue 54 at scale: 500 migrations on one daemon over PostgreSQL, 5 of them on silent sources
//! (4 gates each), the 495 others' guards reading the real Prometheus of `QM_TEST_PROMETHEUS_URL`
//! (`vector(time())` compared with an instant of their own: each breaches at a known instant,
//! spread over ten seconds). Every breach must be acted on within two intervals of its instant.
//! Prints the latencies, the round time and the process's RSS (BENCHMARKS.md, "Guard isolation").
//!
//! ```text
//! source /tmp/qm-services/env   # or scripts/services.sh start postgres prometheus
//! cargo test --all-features --test integration -- --include-ignored --nocapture \
//!     daemon::guard_isolation_scale
//! ```

use std::sync::Arc;
use std::time::Duration;

use crate::common;
use queue_migrate::controller::Actor;
use queue_migrate::daemon::{self, Config, DaemonClock};
use queue_migrate::indicators::fetch::Fetcher;
use queue_migrate::plan::Resolve;
use queue_migrate::store::any;
use queue_migrate::store::traits::*;

const MIGRATIONS: usize = 500;
const SILENT: usize = 5;
const INTERVAL: Duration = Duration::from_secs(1);

fn plan(name: &str, prom: &str, silent: Option<&str>, breach_at_s: i64, dir: &str) -> String {
    let slices = match silent {
        None => format!(
            "    exit:\n      - {{ name: low, source: prom, query: \"vector(0)\", pass_if: \"< 1\" }}\n    guard:\n      - {{ name: breach, source: prom, query: \"vector(time())\", pass_if: \"< {breach_at_s}\" }}\n"
        ),
        Some(_) => "    exit:\n      - { name: a, source: dead, query: dead_a, pass_if: \"< 1\" }\n      - { name: b, source: dead, query: dead_b, pass_if: \"< 1\" }\n      - { name: c, source: dead, query: dead_c, pass_if: \"< 1\" }\n    guard:\n      - { name: d, source: dead, query: dead_d, pass_if: \"< 1\" }\n".to_string(),
    };
    let dead = silent.map_or(String::new(), |url| {
        format!("  dead: {{ prometheus: \"{url}\" }}\n")
    });
    format!(
        r#"version: 1
name: {name}
slices: 8
auto_advance: false
brokers:
  old: {{ name: old, kind: amqp, url: "amqp://127.0.0.1:5672/%2f", queue: {name}, dead_letter: {name}.dlq }}
  new: {{ name: new, kind: nats, url: "nats://127.0.0.1:4222", stream: S{name} }}
retry: {{ max_backoff: 2m, visibility_timeout: 1m }}
dedup: {{ window: 1d, max_redelivery_delay: 2m, max_consumer_delay: 1m, reprocess_margin: 12h }}
sources:
  prom: {{ prometheus: "{prom}" }}
{dead}routing: {{ file: {dir}/{name}.routing.json }}
phases:
  consume_dual:
    exit:
      - {{ name: c, source: prom, query: "vector(1)", pass_if: ">= 1" }}
  synthetic:
    exit:
      - {{ name: p, source: prom, query: "vector(1)", pass_if: "== 1" }}
  slices:
    steps: [1, 4, 8]
    observe: 1m
{slices}    on_breach: rollback
  drain:
    quiet: auto
    exit:
      - {{ name: d, source: prom, query: "vector(0)", pass_if: "== 0", for: quiet }}
  disconnect:
    retain: 2m
    exit:
      - {{ name: n, source: prom, query: "vector(0)", pass_if: "== 0" }}
"#
    )
}

fn silent_source() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    url
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
#[ignore = "needs QM_TEST_POSTGRES_URL and QM_TEST_PROMETHEUS_URL (scripts/services.sh start postgres prometheus)"]
fn five_hundred_migrations_five_silent_every_breach_within_two_intervals() {
    let prom = common::server_url("QM_TEST_PROMETHEUS_URL");
    let pg = common::Postgres::fresh("guard_scale");
    let late = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(scenario(&pg.url, &prom));
    pg.drop_database();
    assert!(
        late.is_empty(),
        "{} breaches acted on later than two intervals (or not at all): {:?}",
        late.len(),
        &late[..late.len().min(10)]
    );
}

/// The fleet on the database at `url`, the daemon over it until every breach instant passed:
/// the breaches acted on late (name, ms after the instant; `i64::MAX`: not at all).
async fn scenario(url: &str, prom: &str) -> Vec<(String, i64)> {
    let store = any::open(url).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(Duration::from_secs(5)).unwrap();
    let map = Arc::new(common::MapResolve(Default::default()));
    let resolve: Arc<dyn Resolve + Send + Sync> = map.clone();
    let actor = Actor {
        name: "bench".into(),
        reason: None,
    };
    let silent = silent_source();
    let setup_s = queue_migrate::time::now_ms() / 1000;
    // Each healthy guard breaches at an instant of its own, from a minute on (the setup takes
    // less), spread over ten seconds: the daemon runs its rounds meanwhile.
    let breach_s = |i: usize| setup_s + 60 + i64::try_from(i % 10).unwrap();
    let where_ = dir.path().to_str().unwrap().to_string();
    for i in 0..MIGRATIONS {
        let name = format!("m{i:03}");
        let dead = (i < SILENT).then_some(silent.as_str());
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, plan(&name, prom, dead, breach_s(i), &where_)).unwrap();
        let c = common::controller(&store, &fetcher, &map);
        c.init(&path, &actor, setup_s * 1000).await.unwrap();
        common::enter_first_slice(&store, &name, setup_s * 1000).await;
    }
    let started_s = queue_migrate::time::now_ms() / 1000;
    assert!(
        started_s + 5 < breach_s(0),
        "the setup took {} s: too long for the breach instants",
        started_s - setup_s
    );
    let config = Config {
        interval: INTERVAL,
        source_timeout: Duration::from_secs(5),
        lease_ttl: Duration::from_secs(15),
        clock: DaemonClock::on_host(Arc::new(queue_migrate::time::now_ms), None),
        holder: "scale".into(),
        ..common::daemon_config(Arc::new(std::sync::atomic::AtomicI64::new(0)))
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(daemon::run(
        store.clone(),
        listener,
        config,
        resolve.clone(),
        async move {
            let _ = rx.await;
        },
    ));
    let mut rss_max = 0;
    while queue_migrate::time::now_ms() / 1000 < breach_s(9) + 4 {
        rss_max = rss_max.max(rss_kib());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let metrics = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let _ = tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), daemon).await;
    let mut late = Vec::new();
    let mut latencies = Vec::new();
    for i in SILENT..MIGRATIONS {
        let name = format!("m{i:03}");
        let journal = store.journal(&name).await.unwrap();
        match journal.iter().find(|e| e.command == "rollback") {
            Some(e) => {
                let latency = e.at_ms - breach_s(i) * 1000;
                latencies.push(latency);
                if latency > i64::try_from(2 * INTERVAL.as_millis()).unwrap() {
                    late.push((name, latency));
                }
            }
            None => late.push((name, i64::MAX)),
        }
    }
    latencies.sort_unstable();
    let pick = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q) as usize)
            .copied()
    };
    let family = |name: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or("")
            .to_string()
    };
    eprintln!(
        "guard isolation at scale: {MIGRATIONS} migrations ({SILENT} on silent sources), interval {INTERVAL:?}: breach latency ms p50 {:?} p90 {:?} max {:?} over {} breaches; {}; {}; {}; RSS max {} MiB",
        pick(0.5),
        pick(0.9),
        latencies.last(),
        latencies.len(),
        family("queue_migrate_tick_seconds_max"),
        family("queue_migrate_tick_seconds "),
        family("queue_migrate_ticks_total"),
        rss_max / 1024
    );
    late
}

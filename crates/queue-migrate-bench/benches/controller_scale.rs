//! Controller scale: many active migrations, ten gates each, one scrape endpoint and one
//! Prometheus. The helper of `bench/controller_scale.sh`; run by `cargo bench` alone it only says
//! so and exits.
//!
//! ```text
//! controller_scale serve ADDR                  # the app's /metrics (one endpoint for everyone)
//! controller_scale setup STATE N PROM SCRAPE [distinct]
//!                                              # N migrations in slices[0], ten gates each;
//!                                              # `distinct`: each migration's PromQL queries
//!                                              # name it (same answers, distinct texts)
//! controller_scale ticks STATE K               # K rounds of daemon::tick_all in this process
//! controller_scale compare STATE K             # K rounds each, alternating: one migration after
//!                                              # the other (daemon::tick::tick in a loop) and
//!                                              # daemon::tick_all
//! controller_scale parts STATE PROM SCRAPE N   # the pieces of a tick, each alone, N times
//! ```
//!
//! Every migration's `slices` phase has 6 exit gates and 4 guards: 5 read Prometheus (one PromQL
//! instant query each) and 5 read the scrape source (scraped once per migration per tick, the
//! queries evaluated in the controller). `auto_advance: false` and passing gates keep every
//! migration where it is: each tick evaluates and records all ten gates and decides "ready for a
//! person", the steady state of a fleet waiting on people.
//!
//! By default every migration asks Prometheus the same 5 queries, which a round of the daemon
//! asks once for the whole fleet (see `daemon::tick_all`): a fleet of copies of one plan. With
//! `distinct`, each query carries a matcher naming its migration that matches every series
//! anyway (`{job!="scale-0042"}`, `{instance!="scale-0042"}`): the same answers, but 5,000
//! distinct query texts per round, so nothing is shared but the scrape.

use queue_migrate_bench as support;

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use queue_migrate::controller::plans::PlanCache;
use queue_migrate::controller::{Actor, AdvanceOptions, Controller};
use queue_migrate::daemon::{self, Config, Shared};
use queue_migrate::indicators::fetch::Fetcher;
use queue_migrate::plan::{PhaseKind, SystemResolve};
use queue_migrate::store::any;
use queue_migrate::store::traits::*;
use queue_migrate::store::{GateRecord, SourcePoints, StoredPoint};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    queue_migrate::indicators::fetch::install_crypto_provider();
    let arg = |i: usize| -> &str {
        args.get(i)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("missing argument {i}: see the module doc"))
    };
    let num = |i: usize| -> usize { arg(i).parse().expect("a number") };
    match args.first().map(String::as_str) {
        Some("serve") => runtime.block_on(serve(arg(1).to_string())),
        Some("setup") => runtime.block_on(setup(
            arg(1),
            num(2),
            arg(3),
            arg(4),
            args.get(5).map(String::as_str) == Some("distinct"),
        )),
        Some("ticks") => runtime.block_on(ticks(arg(1), num(2))),
        Some("compare") => runtime.block_on(compare(arg(1), num(2))),
        Some("parts") => runtime.block_on(parts(arg(1), arg(2), arg(3), num(4))),
        _ => println!(
            "controller_scale: run bench/controller_scale.sh (needs Prometheus); nothing to do"
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// The app's /metrics: a consumer's exposition, counters growing with time.

fn exposition(started: Instant) -> String {
    let t = started.elapsed().as_secs_f64();
    let mut out = String::with_capacity(16 * 1024);
    let _ = writeln!(
        out,
        "# HELP app_messages_total Messages consumed.\n# TYPE app_messages_total counter"
    );
    for (route, rate) in [("old", 300.0), ("new", 20.0)] {
        for (outcome, share) in [
            ("processed", 0.995),
            ("duplicate_blocked", 0.003),
            ("in_progress_retry", 0.001),
            ("failed", 0.001),
        ] {
            let _ = writeln!(
                out,
                "app_messages_total{{route=\"{route}\",outcome=\"{outcome}\"}} {}",
                (t * rate * share).floor()
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP app_end_to_end_seconds End-to-end latency.\n# TYPE app_end_to_end_seconds histogram"
    );
    let buckets = [
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ];
    for (route, rate) in [("old", 300.0), ("new", 20.0)] {
        let count = (t * rate).floor();
        for (i, le) in buckets.iter().enumerate() {
            let share = (i + 1) as f64 / buckets.len() as f64;
            let _ = writeln!(
                out,
                "app_end_to_end_seconds_bucket{{route=\"{route}\",le=\"{le}\"}} {}",
                (count * share).floor()
            );
        }
        let _ = writeln!(
            out,
            "app_end_to_end_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(
            out,
            "app_end_to_end_seconds_sum{{route=\"{route}\"}} {}",
            count * 0.03
        );
        let _ = writeln!(
            out,
            "app_end_to_end_seconds_count{{route=\"{route}\"}} {count}"
        );
    }
    for (name, help, value) in [
        ("app_error_ratio_new", "Failed share on new.", 0.002),
        (
            "app_new_consumer_connected",
            "Consumer connected to new.",
            1.0,
        ),
        ("app_old_depth", "Messages ready on old.", 17.0),
        ("app_probe_ok", "Synthetic probe passes.", 1.0),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
        );
    }
    // The runtime metrics every exporter carries.
    for i in 0..40 {
        let _ = writeln!(
            out,
            "# HELP process_runtime_metric_{i} A runtime metric.\n# TYPE process_runtime_metric_{i} gauge\nprocess_runtime_metric_{i}{{pool=\"default\"}} {}",
            (t * f64::from(i)).floor()
        );
    }
    out
}

async fn serve(addr: String) {
    let started = Instant::now();
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || async move {
            (
                [(
                    axum::http::header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )],
                exposition(started),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .expect("bind the metrics address");
    println!(
        "http://{}/metrics ({} bytes, {} lines)",
        listener.local_addr().expect("an address"),
        exposition(started).len(),
        exposition(started).lines().count()
    );
    axum::serve(listener, app).await.expect("serve");
}

// ---------------------------------------------------------------------------------------------
// The fleet.

fn plan(name: &str, prom: &str, scrape: &str, distinct: bool) -> String {
    // Matchers that every series passes: they change the query text, not its answer.
    let (m, also, or) = if distinct {
        (
            format!("{{job!=\"{name}\"}}"),
            format!(",instance!=\"{name}\""),
            " or vector(0)",
        )
    } else {
        (String::new(), String::new(), "")
    };
    format!(
        r#"version: 1
name: {name}
slices: 128
auto_advance: false
brokers:
  old: {{ name: rabbitmq, kind: amqp, url: "amqp://127.0.0.1:5672/%2f", queue: {name}, dead_letter: {name}.dlq }}
  new: {{ name: nats, kind: nats, url: "nats://127.0.0.1:4222", stream: S{name} }}
retry: {{ max_backoff: 2m, visibility_timeout: 1m }}
dedup: {{ window: 1d, max_redelivery_delay: 2m, max_consumer_delay: 1m, reprocess_margin: 12h }}
sources:
  prom: {{ prometheus: "{prom}" }}
  app: {{ scrape: "{scrape}" }}
phases:
  consume_dual:
    min_duration: 0s
    exit:
      - {{ name: new consumer connected, source: app, query: app_new_consumer_connected, pass_if: ">= 1" }}
  synthetic:
    min_duration: 0s
    exit:
      - {{ name: probe ok, source: app, query: app_probe_ok, pass_if: "== 1" }}
  slices:
    steps: [6, 32, 64, 128]
    observe: 24h
    exit:
      - {{ name: prometheus serving, source: prom, query: 'sum(rate(prometheus_http_requests_total{m}[1m]))', pass_if: ">= 0" }}
      - {{ name: prometheus up, source: prom, query: 'max(up{{job="prometheus"{also}}})', pass_if: "== 1" }}
      - {{ name: head series, source: prom, query: 'sum(prometheus_tsdb_head_series{m})', pass_if: "> 0" }}
      - {{ name: error ratio low, source: app, query: app_error_ratio_new, pass_if: "< 0.01" }}
      - {{ name: new consumes, source: app, query: 'sum(rate(app_messages_total{{route="new"}}[1m]))', pass_if: ">= 0" }}
      - {{ name: new consumer connected, source: app, query: app_new_consumer_connected, pass_if: ">= 1" }}
    guard:
      - {{ name: prometheus still up, source: prom, query: 'max(up{{job="prometheus"{also}}}){or}', pass_if: "== 1" }}
      - {{ name: targets, source: prom, query: 'count(up{m})', pass_if: ">= 1" }}
      - {{ name: error ratio breach, source: app, query: app_error_ratio_new, pass_if: "< 0.05" }}
      - {{ name: old depth sane, source: app, query: app_old_depth, pass_if: ">= 0" }}
    on_breach: rollback
  drain:
    quiet: auto
    exit:
      - {{ name: old queue empty, source: app, query: app_old_depth, pass_if: "== 0", for: quiet }}
  disconnect:
    retain: 2m
    exit:
      - {{ name: no publishers on old, source: prom, query: 'count(up{{job="nope"}}) or vector(0)', pass_if: "== 0" }}
"#
    )
}

async fn setup(state: &str, n: usize, prom: &str, scrape: &str, distinct: bool) {
    let store = any::open(state).await.expect("open the store");
    let fetcher = Fetcher::new(Duration::from_secs(10)).expect("a fetcher");
    let resolve = SystemResolve;
    let c = Controller::new(&store, &fetcher, &resolve)
        .with_secrets(queue_migrate::plan::SecretsMode::Required);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let actor = Actor {
        name: "bench".into(),
        reason: Some("controller scale bench".into()),
    };
    let started = Instant::now();
    for i in 0..n {
        let name = format!("scale-{i:04}");
        let path = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&path, plan(&name, prom, scrape, distinct)).expect("write a plan");
        let now = queue_migrate::time::now_ms();
        c.init(&path, &actor, now).await.expect("init");
        for _ in 0..3 {
            let out = c
                .advance(
                    &name,
                    &AdvanceOptions {
                        force: true,
                        ..AdvanceOptions::default()
                    },
                    &actor,
                    queue_migrate::time::now_ms(),
                )
                .await
                .expect("advance");
            assert!(out.applied.is_some(), "{name}: {:?}", out.blockers);
        }
    }
    let r = store.get("scale-0000").await.expect("a migration");
    println!(
        "setup: {n} migrations in {} (step {:?}), {} PromQL queries, in {:.1} s",
        r.state.name(),
        r.state.step(),
        if distinct { "distinct" } else { "the same" },
        started.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------------------------
// Measuring.

/// VmRSS and VmHWM in MiB.
fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (kb("VmRSS:"), kb("VmHWM:"))
}

fn config() -> Config {
    Config {
        interval: Duration::from_secs(15),
        source_timeout: Duration::from_secs(10),
        queries_per_request: queue_migrate::indicators::fetch::QUERIES_PER_REQUEST,
        max_series: queue_migrate::indicators::fetch::MAX_SERIES,
        lease_ttl: Duration::from_secs(15),
        watch_interval: Duration::from_millis(500),
        holder: "controller-scale-bench".into(),
        instance: String::new(),
        access: Default::default(),
        read_only_api: false,
        allowed_hosts: Vec::new(),
        confirm_complete: vec![],
        clock: queue_migrate::daemon::DaemonClock::simulated(Arc::new(queue_migrate::time::now_ms)),
        http: queue_migrate::daemon::http::Limits::default(),
        retain: None,
        max_clock_skew: std::time::Duration::from_secs(2),
    }
}

async fn ticks(state: &str, rounds: usize) {
    let store = any::open(state).await.expect("open the store");
    let migrations = store.list().await.expect("list").len();
    let shared = Shared::new(store, config(), Arc::new(SystemResolve)).expect("the daemon state");
    shared.leader.store(true, Ordering::SeqCst);
    println!("| tick | migrations | wall s | CPU s | RSS MiB |");
    println!("|---:|---:|---:|---:|---:|");
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    for i in 0..rounds {
        let (w0, c0) = (Instant::now(), support::cpu_seconds("self"));
        daemon::tick_all(&shared).await;
        let (wall, cpu) = (
            w0.elapsed().as_secs_f64(),
            support::cpu_seconds("self") - c0,
        );
        walls.push(wall);
        cpus.push(cpu);
        println!(
            "| {} | {migrations} | {wall:.3} | {cpu:.2} | {:.1} |",
            i + 1,
            rss_mib().0
        );
    }
    let (rss, hwm) = rss_mib();
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    // The first tick differs (connections, caches): the median skips it when there are several.
    let mut w = walls.iter().skip(1.min(rounds - 1)).copied().collect();
    let mut c = cpus.iter().skip(1.min(rounds - 1)).copied().collect();
    println!(
        "summary: {migrations} migrations, median tick {:.3} s wall, {:.2} s CPU; RSS {rss:.1} MiB, peak {hwm:.1} MiB",
        median(&mut w),
        median(&mut c)
    );
}

/// Sequential ticks (what `tick_all` did before it overlapped migrations) against `tick_all`,
/// alternating, in one process and one run.
async fn compare(state: &str, rounds: usize) {
    let store = any::open(state).await.expect("open the store");
    let names: Vec<String> = store
        .list()
        .await
        .expect("list")
        .into_iter()
        .map(|r| r.name)
        .collect();
    let shared = Shared::new(store, config(), Arc::new(SystemResolve)).expect("the daemon state");
    shared.leader.store(true, Ordering::SeqCst);
    println!("| round | one after the other: wall s | CPU s | daemon::tick_all: wall s | CPU s |");
    println!("|---:|---:|---:|---:|---:|");
    let mut ratios = Vec::new();
    for i in 0..rounds {
        let (w0, c0) = (Instant::now(), support::cpu_seconds("self"));
        for name in &names {
            let _ = daemon::tick::tick(&shared, name, shared.now_ms()).await;
        }
        let (sw, sc) = (
            w0.elapsed().as_secs_f64(),
            support::cpu_seconds("self") - c0,
        );
        let (w0, c0) = (Instant::now(), support::cpu_seconds("self"));
        daemon::tick_all(&shared).await;
        let (cw, cc) = (
            w0.elapsed().as_secs_f64(),
            support::cpu_seconds("self") - c0,
        );
        ratios.push(cw / sw);
        println!(
            "| {} | {sw:.2} | {cc_s:.2} | {cw:.2} | {cc:.2} |",
            i + 1,
            cc_s = sc
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "median wall ratio tick_all / one after the other: {:.2}",
        ratios[ratios.len() / 2]
    );
}

/// The pieces of one migration's tick, each alone, `n` times in a row: where the time goes.
async fn parts(state: &str, prom: &str, scrape: &str, n: usize) {
    let store = any::open(state).await.expect("open the store");
    let fetcher = Fetcher::new(Duration::from_secs(10)).expect("a fetcher");
    let resolve = SystemResolve;
    let c = Controller::new(&store, &fetcher, &resolve)
        .with_secrets(queue_migrate::plan::SecretsMode::Required)
        .with_read_only(true);
    let names: Vec<String> = store
        .list()
        .await
        .expect("list")
        .into_iter()
        .map(|r| r.name)
        .collect();
    let name = |i: usize| &names[i % names.len()];
    let loaded = c.load(name(0)).await.expect("load");
    let gates: Vec<(&str, &str)> = loaded
        .plan
        .phase(PhaseKind::Slices)
        .expect("a slices phase")
        .gate_keys()
        .into_iter()
        .map(|(name, kind)| (name, kind.as_str()))
        .collect();
    let now = queue_migrate::time::now_ms();
    println!("| part | calls | wall ms per call | CPU ms per call |");
    println!("|---|---:|---:|---:|");
    let report = |part: &str, calls: usize, w0: Instant, c0: f64| {
        println!(
            "| {part} | {calls} | {:.3} | {:.3} |",
            w0.elapsed().as_secs_f64() * 1e3 / calls as f64,
            (support::cpu_seconds("self") - c0) * 1e3 / calls as f64
        );
    };

    let (w0, c0) = (Instant::now(), support::cpu_seconds("self"));
    for i in 0..n {
        c.load(name(i)).await.expect("load");
    }
    report("load (store get + plan compile)", n, w0, c0);

    // The daemon keeps each compiled plan while the stored one is unchanged: a first pass
    // compiles and keeps, the second (measured) finds each plan kept.
    let plans = PlanCache::default();
    for i in 0..n {
        c.load_cached(name(i), &plans).await.expect("load");
    }
    let (w0, c0) = (Instant::now(), support::cpu_seconds("self"));
    for i in 0..n {
        c.load_cached(name(i), &plans).await.expect("load");
    }
    report("load_cached (store get + plan kept)", n, w0, c0);

    let (w0, c0) = (Instant::now(), support::cpu_seconds("self"));
    for _ in 0..n {
        fetcher
            .prometheus(prom, "max(up{job=\"prometheus\"})", now)
            .await
            .expect("a reading");
    }
    report("one Prometheus query", n, w0, c0);

    let (w0, c0) = (Instant::now(), support::cpu_seconds("self"));
    for _ in 0..n {
        let text = fetcher.scrape(scrape).await.expect("a scrape");
        let parsed = queue_migrate::indicators::exposition::parse(&text);
        assert!(parsed.errors.is_empty());
    }
    report("one scrape + parse", n, w0, c0);

    let (w0, c0) = (Instant::now(), support::cpu_seconds("self"));
    for i in 0..n {
        store
            .load_points(name(i), "app")
            .await
            .expect("load points");
    }
    report("load_points (scrape history)", n, w0, c0);

    let (w0, c0) = (Instant::now(), support::cpu_seconds("self"));
    for i in 0..n {
        let r = store.get(name(i)).await.expect("get");
        store
            .latest_evaluations(&r.name, r.entered_at_ms, &gates)
            .await
            .expect("latest evaluations");
    }
    report("get + latest_evaluations", n, w0, c0);

    let rows: Vec<GateRecord> = {
        let r = store.get(name(0)).await.expect("get");
        store
            .latest_evaluations(&r.name, r.entered_at_ms, &gates)
            .await
            .expect("latest evaluations")
    };
    let (w0, c0) = (Instant::now(), support::cpu_seconds("self"));
    for i in 0..n {
        store
            .record_evaluations(name(i), &rows)
            .await
            .expect("record");
    }
    report(
        &format!("record_evaluations ({} rows, one transaction)", rows.len()),
        n,
        w0,
        c0,
    );

    // What a round stores: its evaluations and the samples of its scrape (7 series here), in
    // two transactions (as before) or in one (`record_round`).
    let taken = |at_ms: i64| SourcePoints {
        source: "parts".into(),
        points: (0..7)
            .map(|k| StoredPoint {
                series: format!("app_series{{k=\"{k}\"}}"),
                metric: "app_series".into(),
                labels: format!("[[\"k\",\"{k}\"]]"),
                at_ms,
                value: f64::from(k),
            })
            .collect(),
        scrape_times: vec![at_ms],
        keep_from_ms: Some(0),
    };
    let (w0, c0) = (Instant::now(), support::cpu_seconds("self"));
    for i in 0..n {
        let t = taken(now + i64::try_from(i).unwrap_or(0));
        store
            .record_evaluations(name(i), &rows)
            .await
            .expect("record");
        store
            .save_points(name(i), &t.source, &t.points, &t.scrape_times, 0)
            .await
            .expect("save points");
    }
    report(
        "record_evaluations + save_points (two transactions)",
        n,
        w0,
        c0,
    );
    let (w0, c0) = (Instant::now(), support::cpu_seconds("self"));
    for i in 0..n {
        store
            .record_round(
                name(i),
                &rows,
                &[taken(now + i64::try_from(n + i).unwrap_or(0))],
            )
            .await
            .expect("record a round");
    }
    report("record_round (the same, one transaction)", n, w0, c0);
}

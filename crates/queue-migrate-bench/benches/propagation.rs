//! Routing propagation: how long after a committed transition the last of N producers holds the
//! new generation. The client side of `bench/propagation.sh`, which starts the real `migrate run`
//! in its own process (so that this process's CPU is not the daemon's) and runs this binary.
//!
//! Each producer is the library's own [`Router`] following the daemon with
//! [`Router::follow_http_tuned`] (long-poll, `?wait=60s`), all of them tokio tasks sharing one
//! reqwest client. Transitions alternate `pause` and `resume`:
//!
//! - `QM_MODE=api`: `POST /v1/migrations/{name}/{pause|resume}`; the clock starts when the request
//!   is sent (the commit happens while it is in flight, so the figure includes the commit).
//! - `QM_MODE=cli`: `migrate pause|resume` in a child process, which writes the store directly;
//!   the clock starts when the child exits (after its commit), and the daemon's store watcher
//!   (every 500 ms) must notice the change.
//!
//! Environment: `QM_DAEMON` (base URL; without it the binary says so and exits 0, so that
//! `cargo bench`/`cargo test --benches` pass without a daemon), `QM_MIGRATION` (default `bench`),
//! `QM_TOKEN`, `QM_CLIENTS` (1000), `QM_TRANSITIONS` (40), `QM_MODE` (`api`), and for the CLI
//! mode `QM_MIGRATE` (the binary) and `QM_STATE` (the store URL).

use std::time::{Duration, Instant};

use queue_migrate::router::{HttpFollow, Router};
use tokio::sync::mpsc;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The nearest-rank percentile of sorted `xs`.
fn percentile(xs: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * xs.len() as f64).ceil().max(1.0) as usize;
    xs[rank.min(xs.len()) - 1]
}

struct Sample {
    /// From the start (request sent / CLI exited) to the first producer holding the generation.
    first_ms: f64,
    /// ... to the last one.
    last_ms: f64,
    /// The round trip of the mutation itself (API: the POST; CLI: the child process).
    command_ms: f64,
}

fn main() {
    let Ok(base) = std::env::var("QM_DAEMON") else {
        println!(
            "propagation: set QM_DAEMON (bench/propagation.sh starts a daemon and does); nothing to do"
        );
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(run(base));
}

async fn run(base: String) {
    queue_migrate::indicators::fetch::install_crypto_provider();
    let migration = env_or("QM_MIGRATION", "bench");
    let token = std::env::var("QM_TOKEN").ok();
    let clients = env_num("QM_CLIENTS", 1000);
    let transitions = env_num("QM_TRANSITIONS", 40);
    let mode = env_or("QM_MODE", "api");
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(usize::MAX)
        .build()
        .expect("an HTTP client");

    // The producers, and one event per document a producer accepts.
    let (tx, mut events) = mpsc::unbounded_channel::<(u64, Instant)>();
    let mut followers = Vec::with_capacity(clients);
    for _ in 0..clients {
        let router = Router::builder(migration.clone()).build();
        // Subscribe before the follower starts, so that its first document is a change too.
        let mut changes = router.subscribe();
        let options = HttpFollow {
            wait: Duration::from_secs(60),
            ..HttpFollow::default()
        };
        followers.push(
            router
                .follow_http_tuned(&base, &migration, None, options)
                .expect("a follower"),
        );
        let tx = tx.clone();
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let generation = *changes.borrow_and_update();
                if tx.send((generation, Instant::now())).is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);

    let current = |url: String, http: reqwest::Client| async move {
        let v: serde_json::Value = http
            .get(url)
            .send()
            .await
            .expect("GET routing")
            .json()
            .await
            .expect("a routing document");
        (
            v["generation"].as_u64().expect("a generation"),
            v["paused"].as_bool().expect("paused"),
        )
    };
    let routing_url = format!("{base}/v1/migrations/{migration}/routing");
    let (g0, mut paused) = current(routing_url.clone(), http.clone()).await;
    wait_for_all(
        &mut events,
        g0,
        clients,
        Instant::now(),
        Duration::from_secs(60),
    )
    .await
    .unwrap_or_else(|| panic!("not every producer got generation {g0} within 60 s"));
    // Let every producer park its next long-poll.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    eprintln!(
        "propagation: {clients} producers hold generation {g0}; {transitions} transitions ({mode})"
    );

    let mut samples = Vec::with_capacity(transitions);
    for i in 0..transitions {
        let action = if paused { "resume" } else { "pause" };
        let (started, command_ms, generation) = match mode.as_str() {
            "api" => {
                let t0 = Instant::now();
                let mut request = http
                    .post(format!("{base}/v1/migrations/{migration}/{action}"))
                    .json(&serde_json::json!({ "reason": format!("propagation bench {i}") }));
                if let Some(t) = &token {
                    request = request.bearer_auth(t);
                }
                let response = request.send().await.expect("POST");
                let status = response.status();
                let body: serde_json::Value = response.json().await.expect("a JSON answer");
                assert!(status.is_success(), "{action}: {status} {body}");
                let ms = t0.elapsed().as_secs_f64() * 1e3;
                let g = body["routing"]["generation"].as_u64().expect("generation");
                (t0, ms, g)
            }
            "cli" => {
                let migrate = std::env::var("QM_MIGRATE").expect("QM_MIGRATE for QM_MODE=cli");
                let state = std::env::var("QM_STATE").expect("QM_STATE for QM_MODE=cli");
                let t0 = Instant::now();
                let args = [
                    "--state".to_string(),
                    state,
                    action.to_string(),
                    migration.clone(),
                    "--reason".to_string(),
                    format!("propagation bench {i}"),
                ];
                let out = tokio::task::spawn_blocking(move || {
                    std::process::Command::new(&migrate).args(&args).output()
                })
                .await
                .expect("the child's thread")
                .expect("run migrate");
                let exited = Instant::now();
                assert!(
                    out.status.success(),
                    "migrate {action}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let ms = exited.duration_since(t0).as_secs_f64() * 1e3;
                let (g, _) = current(routing_url.clone(), http.clone()).await;
                // The daemon may not have noticed yet: the new generation is the old one + 1.
                (exited, ms, g.max(previous_generation(&samples, g0) + 1))
            }
            other => panic!("QM_MODE={other}: api or cli"),
        };
        paused = !paused;
        let Some((first, last)) = wait_for_all(
            &mut events,
            generation,
            clients,
            started,
            Duration::from_secs(30),
        )
        .await
        else {
            panic!("transition {i}: not every producer got generation {generation} within 30 s");
        };
        let ms = |t: Instant| {
            // An event can precede `started` in the CLI mode only if the daemon noticed before the
            // child exited; count it as 0.
            t.checked_duration_since(started)
                .map_or(0.0, |d| d.as_secs_f64() * 1e3)
        };
        samples.push((
            generation,
            Sample {
                first_ms: ms(first),
                last_ms: ms(last),
                command_ms,
            },
        ));
        // Let the producers park again, at varying phases of the store watcher.
        tokio::time::sleep(Duration::from_millis(300 + (i as u64 * 37) % 250)).await;
    }

    let mut last: Vec<f64> = samples.iter().map(|(_, s)| s.last_ms).collect();
    let mut first: Vec<f64> = samples.iter().map(|(_, s)| s.first_ms).collect();
    let mut command: Vec<f64> = samples.iter().map(|(_, s)| s.command_ms).collect();
    for v in [&mut last, &mut first, &mut command] {
        v.sort_by(f64::total_cmp);
    }
    let row = |name: &str, v: &[f64]| {
        println!(
            "| {mode} | {clients} | {} | {name} | {:.1} | {:.1} | {:.1} | {:.1} |",
            v.len(),
            percentile(v, 50.0),
            percentile(v, 90.0),
            percentile(v, 99.0),
            v[v.len() - 1]
        );
    };
    println!("| mode | producers | transitions | ms from start to | p50 | p90 | p99 | max |");
    println!("|---|---:|---:|---|---:|---:|---:|---:|");
    row("last producer", &last);
    row("first producer", &first);
    row("(command round trip)", &command);
    drop(followers);
}

fn previous_generation(samples: &[(u64, Sample)], g0: u64) -> u64 {
    samples.last().map_or(g0, |(g, _)| *g)
}

/// Wait until `clients` producers announced `generation` (or newer); the first and last arrival.
async fn wait_for_all(
    events: &mut mpsc::UnboundedReceiver<(u64, Instant)>,
    generation: u64,
    clients: usize,
    started: Instant,
    limit: Duration,
) -> Option<(Instant, Instant)> {
    let mut got = 0usize;
    let mut first: Option<Instant> = None;
    let mut last = started;
    let deadline = tokio::time::Instant::from_std(started + limit);
    while got < clients {
        let (g, at) = tokio::time::timeout_at(deadline, events.recv())
            .await
            .ok()??;
        if g >= generation {
            got += 1;
            first = Some(first.map_or(at, |f| f.min(at)));
            last = last.max(at);
        }
    }
    first.map(|f| (f, last))
}

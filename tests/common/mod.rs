//! Shared harness for the CLI integration tests: a real HTTP server on 127.0.0.1:0 that serves
//! `/metrics` (text exposition) and a PromQL-compatible `/api/v1/query` whose values the test
//! changes, and a runner for the real `migrate` binary with injected time.

#![allow(dead_code)]

pub mod daemon_world;
pub mod dlq_bench;
pub mod hooked;
#[cfg(feature = "brokers")]
pub mod management;
#[cfg(feature = "brokers")]
pub mod nats;
pub mod silent_proxy;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// A plan's environment from a map, its files from the disk.
pub struct MapResolve(pub HashMap<String, String>);

impl MapResolve {
    /// The environment plans/local.yaml reads: the URLs of `indicators`.
    pub fn of(indicators: &Indicators) -> MapResolve {
        MapResolve(HashMap::from([
            ("QM_PROM_URL".to_string(), indicators.prom_url()),
            ("QM_SCRAPE_URL".to_string(), indicators.scrape_url()),
        ]))
    }
}

impl queue_migrate::plan::Resolve for MapResolve {
    fn env(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
    fn read_file(&self, path: &Path) -> Result<String, String> {
        std::fs::read_to_string(path).map_err(|e| e.to_string())
    }
}

/// plans/local.yaml renamed `name` (its routing file `<name>.routing.json`), written into `dir`;
/// its path, for `migrate init`.
pub fn local_plan_named(dir: &Path, name: &str) -> PathBuf {
    let yaml = include_str!("../../plans/local.yaml")
        .replacen("name: local", &format!("name: {name}"), 1)
        .replacen("local.routing.json", &format!("{name}.routing.json"), 1);
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    path
}

/// A controller over `store`, as the CLI acts on it.
pub fn controller<'a, S: queue_migrate::store::Store>(
    store: &'a S,
    fetcher: &'a queue_migrate::indicators::fetch::Fetcher,
    resolve: &'a MapResolve,
) -> queue_migrate::controller::Controller<'a, S> {
    queue_migrate::controller::Controller::new(store, fetcher, resolve)
}

/// A daemon's configuration for the in-process tests: fast ticks, the clock `clock` (ms).
pub fn daemon_config(clock: Arc<std::sync::atomic::AtomicI64>) -> queue_migrate::daemon::Config {
    queue_migrate::daemon::Config {
        interval: std::time::Duration::from_millis(40),
        source_timeout: std::time::Duration::from_secs(2),
        queries_per_request: queue_migrate::indicators::fetch::QUERIES_PER_REQUEST,
        max_series: queue_migrate::indicators::fetch::MAX_SERIES,
        lease_ttl: std::time::Duration::from_secs(3),
        watch_interval: std::time::Duration::from_millis(50),
        holder: "daemon-test".into(),
        instance: String::new(),
        access: Default::default(),
        read_only_api: false,
        allowed_hosts: Vec::new(),
        confirm_complete: vec![],
        clock: queue_migrate::daemon::DaemonClock::simulated(Arc::new(move || {
            clock.load(std::sync::atomic::Ordering::SeqCst)
        })),
        http: queue_migrate::daemon::http::Limits::default(),
        retain: None,
        max_clock_skew: std::time::Duration::from_secs(2),
    }
}

/// What the fake sources answer.
#[derive(Default)]
pub struct World {
    /// metric name → value, served by both endpoints.
    pub values: BTreeMap<String, f64>,
    /// When set, both endpoints answer 503.
    pub down: bool,
    /// Raw lines appended to /metrics (to serve garbage).
    pub extra_metrics: String,
}

#[derive(Clone)]
pub struct Indicators {
    pub world: Arc<Mutex<World>>,
    pub addr: SocketAddr,
}

async fn metrics(State(w): State<Arc<Mutex<World>>>) -> Response {
    let w = w.lock().unwrap();
    if w.down {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let mut body = String::new();
    for (k, v) in &w.values {
        body.push_str(&format!("# TYPE {k} gauge\n{k} {v}\n"));
    }
    body.push_str(&w.extra_metrics);
    body.into_response()
}

async fn query(
    State(w): State<Arc<Mutex<World>>>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    let w = w.lock().unwrap();
    if w.down {
        return (StatusCode::SERVICE_UNAVAILABLE, "down").into_response();
    }
    let expr = q.get("query").cloned().unwrap_or_default();
    let time = q.get("time").cloned().unwrap_or_else(|| "0".into());
    // A range selector `name[300s]` (how a judge reads its raw counters): the value as the one
    // raw sample of one series, at the query's time.
    if let Some((name, _)) = expr.trim().split_once('[') {
        let result = match w.values.get(name.trim()) {
            Some(v) => format!(r#"[{{"metric":{{}},"values":[[{time},"{v}"]]}}]"#),
            None => "[]".into(),
        };
        return (
            [("content-type", "application/json")],
            format!(r#"{{"status":"success","data":{{"resultType":"matrix","result":{result}}}}}"#),
        )
            .into_response();
    }
    let result = match w.values.get(expr.trim()) {
        Some(v) => format!(r#"[{{"metric":{{}},"value":[{time},"{v}"]}}]"#),
        None => "[]".into(),
    };
    (
        [("content-type", "application/json")],
        format!(r#"{{"status":"success","data":{{"resultType":"vector","result":{result}}}}}"#),
    )
        .into_response()
}

impl Indicators {
    /// Start the server on a thread of its own with its own runtime, so that it serves both
    /// synchronous tests and async ones (it lives until the test process ends).
    pub fn start() -> Indicators {
        let world = Arc::new(Mutex::new(World::default()));
        let app = Router::new()
            .route("/metrics", get(metrics))
            .route("/api/v1/query", get(query))
            .with_state(world.clone());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app).await.unwrap()
            });
        });
        Indicators { world, addr }
    }

    pub fn set(&self, metric: &str, value: f64) {
        self.world
            .lock()
            .unwrap()
            .values
            .insert(metric.into(), value);
    }

    pub fn set_down(&self, down: bool) {
        self.world.lock().unwrap().down = down;
    }

    pub fn prom_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn scrape_url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    /// Every indicator of plans/local.yaml at a passing value.
    pub fn all_green(&self) {
        self.set("app_new_consumer_connected", 1.0);
        self.set("app_probe_ok", 1.0);
        self.set("app_error_ratio_new", 0.001);
        self.set("app_old_depth", 0.0);
        self.set("app_old_publishers", 0.0);
    }
}

/// A scratch directory with a copy of a plan, a state store, and the fake sources.
pub struct Bench {
    pub dir: tempfile::TempDir,
    pub indicators: Indicators,
    pub plan: PathBuf,
    /// Minutes since the start instant, for `--now`.
    pub minute: i64,
    pub prom_url: String,
}

/// 2026-11-30T00:00:00Z in seconds.
pub const T0: i64 = 1_795_996_800;

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\nstderr: {}", self.stdout, self.stderr))
    }
}

impl Bench {
    pub fn new() -> Bench {
        Bench::with_plan(include_str!("../../plans/local.yaml"))
    }

    pub fn with_plan(yaml: &str) -> Bench {
        let dir = tempfile::tempdir().unwrap();
        let plan = dir.path().join("local.yaml");
        std::fs::write(&plan, yaml).unwrap();
        let indicators = Indicators::start();
        let prom_url = indicators.prom_url();
        Bench {
            dir,
            indicators,
            plan,
            minute: 0,
            prom_url,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn now(&self) -> String {
        let secs = T0 + self.minute * 60;
        humantime::format_rfc3339_seconds(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64),
        )
        .to_string()
    }

    /// Run `migrate ARGS` at the bench's current minute.
    pub fn run(&self, args: &[&str]) -> Run {
        let out: Output = Command::new(env!("CARGO_BIN_EXE_migrate"))
            .args(args)
            .current_dir(self.dir.path())
            .env("MIGRATE_STATE", self.path("state.db"))
            .env("MIGRATE_NOW", self.now())
            .env("MIGRATE_ACTOR", "test")
            .env("QM_PROM_URL", &self.prom_url)
            .env("QM_SCRAPE_URL", self.indicators.scrape_url())
            .env_remove("MIGRATE_LOG")
            .output()
            .unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Run and insist on an exit code.
    pub fn ok(&self, args: &[&str], code: i32) -> Run {
        let r = self.run(args);
        assert_eq!(
            r.code, code,
            "migrate {args:?} exited {} (want {code})\nstdout:\n{}\nstderr:\n{}",
            r.code, r.stdout, r.stderr
        );
        r
    }

    pub fn status(&self) -> serde_json::Value {
        self.ok(&["status", "local", "--json"], 0).json()
    }

    /// (state, step) of the migration.
    pub fn state(&self) -> (String, Option<u64>) {
        let s = self.status();
        (s["state"].as_str().unwrap().to_string(), s["step"].as_u64())
    }

    pub fn routing_file(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(self.path("local.routing.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    pub fn init(&self) {
        self.ok(&["init", self.plan.to_str().unwrap()], 0);
    }

    /// Advance one step with every indicator green (`migrate advance local --confirm local`),
    /// waiting out minimum times and `for:` periods by moving the injected clock a minute each
    /// time it is gated (never sleeping), 10 minutes at most: the (state, step) it moved to.
    pub fn advance_green(&mut self) -> (String, Option<u64>) {
        for _ in 0..10 {
            let r = self.run(&["advance", "local", "--confirm", "local"]);
            match r.code {
                0 => return self.state(),
                3 => self.minute += 1,
                other => panic!("advance exited {other}\n{}\n{}", r.stdout, r.stderr),
            }
        }
        panic!("advance stayed gated for 10 minutes: {}", self.status());
    }

    /// The routing file `<name>.routing.json` a plan renamed `name` writes.
    pub fn routing_file_of(&self, name: &str) -> serde_json::Value {
        let text = std::fs::read_to_string(self.path(&format!("{name}.routing.json"))).unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

pub fn exists(p: &Path) -> bool {
    p.exists()
}

// ---------------------------------------------------------------------------------------------
// Helpers for tests/integration/daemon/crash_sigkill.rs and tests/integration/daemon/sources_misbehaving.rs: a `migrate` command that
// can be spawned (and killed), extra environment for one run, a plan that runs in seconds of real
// time, a `migrate run` child with its address, a blocking GET, and a poll with a deadline.

impl Bench {
    /// The `migrate ARGS` command of [`Bench::run`], not started: to spawn it, kill it, or add
    /// environment (a later `env` of the same name wins).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_migrate"));
        c.args(args)
            .current_dir(self.dir.path())
            .env("MIGRATE_STATE", self.path("state.db"))
            .env("MIGRATE_NOW", self.now())
            .env("MIGRATE_ACTOR", "test")
            .env("QM_PROM_URL", &self.prom_url)
            .env("QM_SCRAPE_URL", self.indicators.scrape_url())
            .env_remove("MIGRATE_LOG")
            .env_remove("MIGRATE_API_TOKEN");
        c
    }

    /// `migrate [GLOBAL] run` on 127.0.0.1:0 as `id`, rounds every 100 ms, a 2-s lease, on the
    /// real clock (no `MIGRATE_NOW`), not started: for [`DaemonChild::spawn`].
    pub fn daemon_command(&self, id: &str, global: &[&str]) -> Command {
        let mut args = global.to_vec();
        args.extend([
            "run",
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "100ms",
            "--lease-ttl",
            "2s",
            "--id",
            id,
        ]);
        let mut c = self.command(&args);
        c.env_remove("MIGRATE_NOW");
        c
    }

    /// [`Bench::run`] with extra environment (e.g. `QM_SCRAPE_URL` of another server).
    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut c = self.command(args);
        for (k, v) in env {
            c.env(k, v);
        }
        let out: Output = c.output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// plans/local.yaml made to run in seconds of real time: no minimum times, a 2 s drain quiet
/// period (the same edits as tests/integration/daemon/daemon_real.rs's `fast_plan`).
pub fn fast_local_plan() -> String {
    include_str!("../../plans/local.yaml")
        .replace("observe: 1m", "observe: 0s")
        .replace("retain: 2m", "retain: 0s")
        .replace("max_backoff: 2m", "max_backoff: 1s")
        .replace("visibility_timeout: 1m", "visibility_timeout: 1s")
        .replace("max_redelivery_delay: 2m", "max_redelivery_delay: 1s")
}

/// A port on 127.0.0.1 that refuses connections and stays this test process's: a socket bound
/// to it, never listening, held until the process ends (as the tests' servers are), so that no
/// other test's server is given the port while a client here still tries it. Was: bound, then
/// closed, and `sources_misbehaving`'s redirect server, given the port next, counted the polls
/// of `secrets_redacted`'s daemon as its own requests (15 instead of 2).
pub fn refused_port() -> u16 {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
    let port = socket.local_addr().unwrap().port();
    static HELD: Mutex<Vec<tokio::net::TcpSocket>> = Mutex::new(Vec::new());
    HELD.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(socket);
    port
}

/// A server on loopback that answers every request with what `answer` makes of the request's
/// head (request line and headers, as sent): the status (`401 Unauthorized`), the content type
/// and the body; the connection is closed after each answer. Its port.
pub fn answering_server(
    answer: impl Fn(&str) -> (&'static str, &'static str, String) + Send + 'static,
) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let mut buf = [0u8; 8192];
            let n = s.read(&mut buf).unwrap_or(0);
            let (status, kind, body) = answer(&String::from_utf8_lossy(&buf[..n]));
            let _ = s.write_all(
                format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    });
    port
}

/// How often [`poll_until`] and [`poll_until_async`] look.
const POLL_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// What a poll waits for and how long it may: panics once that is spent.
struct PollBudget<'a> {
    what: &'a str,
    timeout: std::time::Duration,
    start: std::time::Instant,
}

impl<'a> PollBudget<'a> {
    fn new(what: &'a str, timeout: std::time::Duration) -> Self {
        PollBudget {
            what,
            timeout,
            start: std::time::Instant::now(),
        }
    }

    fn check(&self) {
        if self.start.elapsed() >= self.timeout {
            panic!(
                "timed out after {:?} waiting for {}",
                self.timeout, self.what
            );
        }
    }
}

/// Poll `f` every 20 ms until it is true; panic with `what` after `timeout`. Returns how long it
/// took.
pub fn poll_until(
    what: &str,
    timeout: std::time::Duration,
    mut f: impl FnMut() -> bool,
) -> std::time::Duration {
    let budget = PollBudget::new(what, timeout);
    while !f() {
        budget.check();
        std::thread::sleep(POLL_EVERY);
    }
    budget.start.elapsed()
}

/// [`poll_until`] for async tests: sleeping on the runtime's timer instead of blocking its thread.
pub async fn poll_until_async(
    what: &str,
    timeout: std::time::Duration,
    mut f: impl FnMut() -> bool,
) -> std::time::Duration {
    let budget = PollBudget::new(what, timeout);
    while !f() {
        budget.check();
        tokio::time::sleep(POLL_EVERY).await;
    }
    budget.start.elapsed()
}

/// A blocking `GET` over std: `(status, body)`, `None` when nothing usable came back.
pub fn http_get(url: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let mut s = std::net::TcpStream::connect(host).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

/// A `migrate run` child, the address it printed, and every line it logged so far.
pub struct DaemonChild {
    pub child: std::process::Child,
    pub addr: String,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl DaemonChild {
    /// Spawn `cmd` (a `migrate run --listen 127.0.0.1:0 ...` command; its stderr is taken) and
    /// wait for the line that names its address. `None` when it exits or stays silent for
    /// `timeout` (the child is then killed and reaped).
    pub fn spawn(mut cmd: Command, timeout: std::time::Duration) -> Option<DaemonChild> {
        use std::io::{BufRead, BufReader};
        let mut child = cmd
            .env("MIGRATE_LOG", "info")
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let lines = log.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent && let Some(rest) = line.split(" on http://").nth(1) {
                    let addr = rest.split_whitespace().next().unwrap_or_default();
                    let _ = tx.send(addr.to_string());
                    sent = true;
                }
                lines.lock().unwrap().push(line);
            }
        });
        match rx.recv_timeout(timeout) {
            Ok(addr) => Some(DaemonChild { child, addr, log }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                None
            }
        }
    }

    /// `GET /healthz` as JSON.
    pub fn healthz(&self) -> Option<serde_json::Value> {
        let (_, body) = http_get(&format!("http://{}/healthz", self.addr))?;
        serde_json::from_str(&body).ok()
    }

    /// Ticks run so far (0 when /healthz does not answer).
    pub fn ticks(&self) -> u64 {
        self.healthz()
            .and_then(|h| h["ticks"].as_u64())
            .unwrap_or(0)
    }

    /// SIGKILL and reap.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
/// The URL of a real server that a test needs, from `var`.
///
/// Such a test is marked `#[ignore = "needs VAR ..."]`, so that `cargo test` reports it as
/// ignored where no server was given, never as passed. Run with `--include-ignored` (as `.ci/run`
/// does after starting the servers), it fails here when `var` is unset: it never passes without
/// having run.
pub fn server_url(var: &str) -> String {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "{var} is not set: this test needs a real server \
             (scripts/services.sh install && scripts/services.sh start, then source its env file)"
        ),
    }
}

// PostgreSQL: a database per test.

/// A database of its own on the server of `QM_TEST_POSTGRES_URL`.
pub struct Postgres {
    admin: String,
    name: String,
    pub url: String,
}

impl Postgres {
    /// A fresh database on the server of `QM_TEST_POSTGRES_URL` (see [`server_url`]: a test
    /// that calls it is `#[ignore]`d without the server).
    pub fn fresh(test: &str) -> Postgres {
        let admin = server_url("QM_TEST_POSTGRES_URL");
        let name = format!("qm_{test}_{}", std::process::id());
        Postgres::admin(
            &admin,
            &[
                format!("DROP DATABASE IF EXISTS {name}"),
                format!("CREATE DATABASE {name}"),
            ],
        );
        let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
        let url = format!("{base}/{name}");
        Postgres { admin, name, url }
    }

    pub fn drop_database(self) {
        Postgres::admin(
            &self.admin,
            &[format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            )],
        );
    }

    pub fn admin(url: &str, statements: &[String]) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            use sqlx::Executor;
            let pool = sqlx::PgPool::connect(url).await.unwrap();
            for s in statements {
                pool.execute(sqlx::AssertSqlSafe(s.clone())).await.unwrap();
            }
            pool.close().await;
        });
    }
}

/// Moves migration `name` into `slices[0]` at `at_ms`, as alice's forced advance would: a test's
/// starting point in the first slice step.
pub async fn enter_first_slice<S: queue_migrate::store::Store>(store: &S, name: &str, at_ms: i64) {
    let planned = store.get(name).await.unwrap();
    store
        .commit(
            name,
            &queue_migrate::store::Commit {
                expected_version: planned.version,
                command: "advance".into(),
                to: queue_migrate::machine::Snapshot {
                    state: queue_migrate::machine::State::Slices(0),
                    paused: false,
                },
                at_ms,
                actor: "alice".into(),
                reason: Some("to the slices".into()),
                forced: true,
                evidence: serde_json::json!({}),
                memory: Vec::new(),
            },
        )
        .await
        .unwrap();
}

/// Deletes what a test made on a broker: the RabbitMQ queue, the JetStream stream, the Redis
/// key (a Kafka topic stays: every test's topic is new).
#[cfg(feature = "brokers")]
pub async fn delete_queue(kind: queue_migrate::brokers::Kind, url: &str, queue: &str) {
    use queue_migrate::brokers::Kind;
    match kind {
        Kind::RabbitMq => {
            let connection =
                lapin::Connection::connect(url, lapin::ConnectionProperties::default())
                    .await
                    .unwrap();
            let channel = connection.create_channel().await.unwrap();
            channel
                .queue_delete(queue.into(), lapin::options::QueueDeleteOptions::default())
                .await
                .unwrap();
            let _ = connection.close(200, "OK".into()).await;
        }
        Kind::Nats => {
            let client = async_nats::connect(url).await.unwrap();
            let js = async_nats::jetstream::new(client);
            js.delete_stream(queue.replace('.', "_")).await.unwrap();
        }
        Kind::Redis => {
            let client = redis::Client::open(url).unwrap();
            let mut c = client.get_multiplexed_async_connection().await.unwrap();
            let _: i64 = redis::cmd("DEL")
                .arg(queue)
                .query_async(&mut c)
                .await
                .unwrap();
        }
        // The Kafka tests are their own module: every topic is new, the mock forgets them all.
        Kind::Kafka => {}
    }
}

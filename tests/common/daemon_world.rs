//! A migration registered in a fresh SQLite store, with every indicator green, and in-process
//! daemons over it (`daemon::run` with a listener on `127.0.0.1:0` and a clock the test moves).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use queue_migrate::controller::{Actor, Controller};
use queue_migrate::daemon::auth::Access;
use queue_migrate::daemon::{self, Config, DaemonError};
use queue_migrate::indicators::fetch::Fetcher;
use queue_migrate::plan::Resolve;
use queue_migrate::store::any::AnyStore;
use queue_migrate::store::sqlite::SqliteStore;
use queue_migrate::store::traits::*;

use super::{Indicators, MapResolve, T0, daemon_config};

/// The bearer token of a daemon started with [`single_token`].
pub const TOKEN: &str = "s3cret";

/// Every mutation needs [`TOKEN`].
pub fn single_token() -> Access {
    Access::single_token(TOKEN.into())
}

/// plans/local.yaml with `auto_advance: false`: only the API's (or the CLI's) callers move it.
pub fn local_by_hand() -> String {
    include_str!("../../plans/local.yaml").replace("auto_advance: true", "auto_advance: false")
}

/// A migration `local` (or the plan's own name) registered as the CLI does, by actor `test` at
/// [`T0`], in a SQLite store of its own directory.
pub struct DaemonWorld {
    pub dir: tempfile::TempDir,
    pub indicators: Indicators,
    pub store: AnyStore,
    pub resolve: Arc<MapResolve>,
}

impl DaemonWorld {
    /// `plan` written to `local.yaml` and registered (`init`) at [`T0`], in a store that stamps
    /// transitions with the writer's instants: the tests' clocks tell the story, as `--now` does
    /// (`with_writer_clock`).
    pub async fn new(plan: &str) -> DaemonWorld {
        DaemonWorld::opened(plan, true).await
    }

    /// [`DaemonWorld::new`] in a store that stamps transitions (the journal's `at`, the step's
    /// start) on the database's clock, as a store does for a daemon or a command on a real host.
    pub async fn on_database_clock(plan: &str) -> DaemonWorld {
        DaemonWorld::opened(plan, false).await
    }

    async fn opened(plan: &str, writer_clock: bool) -> DaemonWorld {
        let dir = tempfile::tempdir().unwrap();
        let indicators = Indicators::start();
        indicators.all_green();
        let resolve = Arc::new(MapResolve::of(&indicators));
        let store: AnyStore = SqliteStore::open(dir.path().join("state.db").to_str().unwrap())
            .await
            .unwrap();
        let store = if writer_clock {
            store.with_writer_clock()
        } else {
            store
        };
        let w = DaemonWorld {
            dir,
            indicators,
            store,
            resolve,
        };
        let path = w.dir.path().join("local.yaml");
        std::fs::write(&path, plan).unwrap();
        let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
        // Registered as the CLI does (secrets deferred), from a machine that has them all.
        w.controller(&fetcher)
            .init(
                &path,
                &Actor {
                    name: "test".into(),
                    reason: None,
                },
                T0 * 1000,
            )
            .await
            .unwrap();
        w
    }

    /// From now on, the environment daemons of this world resolve lacks the variables `names`.
    pub fn unset(&mut self, names: &[&str]) {
        let resolve = Arc::get_mut(&mut self.resolve).expect("no daemon started yet");
        for name in names {
            resolve.0.remove(*name);
        }
    }

    /// A controller over this world's store, as the CLI would act on it.
    pub fn controller<'a>(&'a self, fetcher: &'a Fetcher) -> Controller<'a, AnyStore> {
        super::controller(&self.store, fetcher, &self.resolve)
    }

    /// A daemon over this world's store, its clock at [`T0`], its [`daemon_config`] changed by
    /// `tweak`.
    pub async fn start(&self, tweak: impl FnOnce(&mut Config)) -> Running {
        self.start_over(self.store.clone(), tweak).await
    }

    /// A daemon over this world whose mutations need a token of `access` ([`single_token`],
    /// a token file), its [`daemon_config`] then changed by `tweak`; returned once it leads.
    pub async fn start_guarded(&self, access: Access, tweak: impl FnOnce(&mut Config)) -> Running {
        let d = self
            .start(|c| {
                c.access = access;
                tweak(c);
            })
            .await;
        d.leading().await;
        d
    }

    /// [`DaemonWorld::start`] over another store (one that wraps this world's).
    pub async fn start_over<S: Store + Clone + 'static>(
        &self,
        store: S,
        tweak: impl FnOnce(&mut Config),
    ) -> Running {
        let clock = Arc::new(AtomicI64::new(T0 * 1000));
        let mut config = daemon_config(clock.clone());
        tweak(&mut config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let resolve: Arc<dyn Resolve + Send + Sync> = self.resolve.clone();
        let handle = tokio::spawn(daemon::run(store, listener, config, resolve, async move {
            let _ = rx.await;
        }));
        Running {
            addr,
            stop: Some(tx),
            handle,
            clock,
        }
    }

    /// The routing file the daemon wrote for migration `name` (its plan's `routing.file`).
    /// A [`daemon::Shared`] over this world's store that leads, its clock at `clock_ms` (a tick
    /// takes its instant as an argument: what the tests drive by hand).
    pub fn leader_at(&self, clock_ms: i64) -> Arc<daemon::Shared<AnyStore>> {
        let shared = daemon::Shared::new(
            self.store.clone(),
            daemon_config(Arc::new(AtomicI64::new(clock_ms))),
            self.resolve.clone(),
        )
        .unwrap();
        shared.leader.store(true, Ordering::SeqCst);
        shared
    }

    pub fn routing_file(&self, name: &str) -> serde_json::Value {
        let path = self.dir.path().join(format!("{name}.routing.json"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// Migration `local`'s state name, step and whether it is paused.
    pub async fn state(&self) -> (String, Option<usize>, bool) {
        let r = self.store.get("local").await.unwrap();
        (r.state.name().to_string(), r.state.step(), r.paused)
    }

    /// Wait (10 s at most) until `f` holds of [`DaemonWorld::state`].
    pub async fn wait_for(
        &self,
        what: &str,
        mut f: impl FnMut(&(String, Option<usize>, bool)) -> bool,
    ) {
        for _ in 0..400 {
            let s = self.state().await;
            if f(&s) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!(
            "timed out waiting for {what}; state {:?}",
            self.state().await
        );
    }
}

/// A daemon started by [`DaemonWorld::start`].
pub struct Running {
    pub addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: tokio::task::JoinHandle<Result<(), DaemonError>>,
    /// The daemon's clock (ms since the epoch).
    pub clock: Arc<AtomicI64>,
}

impl Running {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn advance_clock(&self, minutes: i64) {
        self.clock.fetch_add(minutes * 60_000, Ordering::SeqCst);
    }

    /// The rounds `/healthz` counts, and the migrations' ticks running now (a tick may outlive
    /// its round: issue 54).
    pub async fn rounds_and_running(&self) -> (u64, u64) {
        let h: serde_json::Value = reqwest::get(self.url("/healthz"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        (
            h["ticks"].as_u64().unwrap(),
            h["ticks_running"].as_u64().unwrap(),
        )
    }

    /// The ticks `/healthz` counts.
    pub async fn ticks(&self) -> u64 {
        self.rounds_and_running().await.0
    }

    /// Wait until every migration tick started before now has finished (a tick may outlive its
    /// round, and one started before the clock moved decides at the instant it started), then
    /// until the daemon has run two whole rounds after that with no tick left running.
    pub async fn settle(&self) {
        while self.rounds_and_running().await.1 > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let start = self.ticks().await;
        loop {
            let (rounds, running) = self.rounds_and_running().await;
            if rounds >= start + 2 && running == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Move the clock a minute at a time, letting the daemon settle at each, until `done`.
    pub async fn climb_until(
        &self,
        w: &DaemonWorld,
        done: impl Fn(&(String, Option<usize>, bool)) -> bool,
    ) {
        for _ in 0..60 {
            // Settled: the same state across a full tick.
            let mut s = w.state().await;
            loop {
                self.settle().await;
                let again = w.state().await;
                if again == s {
                    break;
                }
                s = again;
            }
            if done(&s) {
                return;
            }
            self.advance_clock(1);
        }
        panic!("never reached the wanted state; at {:?}", w.state().await);
    }

    /// Wait (5 s at most) until this daemon leads.
    pub async fn leading(&self) {
        let http = reqwest::Client::new();
        for _ in 0..250 {
            if let Ok(r) = http.get(self.url("/healthz")).send().await
                && let Ok(h) = r.json::<serde_json::Value>().await
                && h["leader"] == true
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the daemon never took the lease");
    }

    /// `n` readers long-polling the routing of `local` past `etag` for `wait` (each answered
    /// with its status, when, and its body), once every one of them is parked. The daemon must
    /// park at most `n` long-polls (`http.max_long_polls`): a probe that is refused (`503`) then
    /// finds them all parked. A probe waits for nothing (`?wait=0s`) and gives its place back
    /// before it is answered; a reader that met one holding it is told to retry, and does.
    pub async fn parked_readers(
        &self,
        etag: &str,
        n: usize,
        wait: &str,
    ) -> Vec<tokio::task::JoinHandle<(u16, std::time::Instant, String)>> {
        let http = reqwest::Client::new();
        let readers = (0..n)
            .map(|_| {
                let http = http.clone();
                let url = self.url(&format!("/v1/migrations/local/routing?wait={wait}"));
                let etag = etag.to_string();
                tokio::spawn(async move {
                    for _ in 0..100 {
                        let r = http
                            .get(&url)
                            .header("If-None-Match", &etag)
                            .send()
                            .await
                            .unwrap();
                        if r.status() == 503 {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                        let at = std::time::Instant::now();
                        return (r.status().as_u16(), at, r.text().await.unwrap());
                    }
                    panic!("a reader was refused a place 100 times");
                })
            })
            .collect();
        for _ in 0..500 {
            let probe = http
                .get(self.url("/v1/migrations/local/routing?wait=0s"))
                .header("If-None-Match", etag)
                .send()
                .await
                .unwrap();
            if probe.status() == 503 {
                return readers;
            }
            assert_eq!(probe.status(), 304, "nothing changed yet");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{n} readers were never all parked");
    }

    /// Stop the daemon; it must stop cleanly.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.handle.await.unwrap().unwrap();
    }

    /// Stop the daemon, waiting 10 s at most, whatever it returns (a daemon whose store went
    /// away may stop with an error).
    pub async fn stop_quietly(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), self.handle).await;
    }
}

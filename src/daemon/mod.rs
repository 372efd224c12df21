//! `migrate run`: the daemon that drives every active migration in a store.
//!
//! - a loop that ticks every `interval`: for each migration, evaluate the current phase's gates and
//!   guards, act on a breach at once, advance when every exit gate passes ([`tick`]);
//! - a lease in the store so that exactly one daemon per store acts; the others stand by, serve
//!   read-only API calls and take over when the lease expires (the policy of [`LeaseKeeper`]);
//! - a watcher that notices changes made by others (the CLI) within a poll (25 ms) and publishes
//!   their routing to long-polling producers ([`hub`]);
//! - the HTTP API and `/metrics` ([`server`]), webhooks ([`notify`]).
//!
//! [`run`] takes its listener and a shutdown future, so that tests bind `127.0.0.1:0` and stop it
//! when they want.

pub mod console;
pub mod http;
pub mod hub;
pub mod metrics;
pub mod notify;
#[cfg(feature = "brokers")]
pub mod probes;
pub mod retention;
pub mod server;
pub mod tick;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::controller::histories::Histories;
use crate::controller::plans::PlanCache;
use crate::controller::round::RoundBatch;
use crate::controller::{Actor, Controller, Loaded};
use crate::indicators::fetch::Fetcher;
use crate::plan::{Resolve, SecretsMode};
use crate::store::lease_keeper::{LeaseKeeper, Renewal};
use crate::store::{Fleet, MigrationRecord, Store, StoreError};
use hub::Hub;
use metrics::Metrics;
use notify::{Event, EventKind, Notifier};
use tick::Memo;

/// The name of the lease every daemon of a store competes for.
pub const LEASE: &str = "controller";

/// A clock in ms since the epoch (the demo runs the controller on a faster one).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// How the daemon runs.
#[derive(Clone)]
pub struct Config {
    /// Time between ticks.
    pub interval: Duration,
    /// How long to wait for an indicator source before its gates hold.
    pub source_timeout: Duration,
    /// Most Prometheus queries a round asks in one request (1: each alone); see
    /// [`Fetcher::prefetch_prometheus`].
    pub queries_per_request: usize,
    /// How long the lease lasts without renewal (renewed every third of it).
    pub lease_ttl: Duration,
    /// How often the watcher looks for changes made by others (one cheap read of the store; every
    /// migration is compared every [`WHOLE_WATCH_EVERY`] of these).
    pub watch_interval: Duration,
    /// This daemon's identity in the lease and the journal.
    pub holder: String,
    /// Required on mutating API calls (`Authorization: Bearer ...`).
    pub token: Option<String>,
    /// Refuse every mutating API call.
    pub read_only_api: bool,
    /// Migrations the operator confirmed may enter `complete` unattended.
    pub confirm_complete: Vec<String>,
    /// The clock gates are evaluated against.
    pub clock: Clock,
    /// The HTTP server's limits and timeouts.
    pub http: http::Limits,
    /// Delete what is older than this, in batches after the leader's rounds ([`retention`]);
    /// `None`: keep everything.
    pub retain: Option<Duration>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("interval", &self.interval)
            .field("lease_ttl", &self.lease_ttl)
            .field("holder", &self.holder)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("confirm_complete", &self.confirm_complete)
            .field("http", &self.http)
            .field("retain", &self.retain)
            .finish_non_exhaustive()
    }
}

/// Every how many watcher polls every migration is compared, even when the store's mark did
/// not move.
pub const WHOLE_WATCH_EVERY: u64 = 20;

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Mutations on a non-loopback address without a token.
    #[error(
        "refusing to serve mutating API calls on {0} without a token: set MIGRATE_API_TOKEN or --token-file, listen on 127.0.0.1, or pass --read-only"
    )]
    NoToken(std::net::SocketAddr),
    /// The listener's address could not be read.
    #[error("cannot read the listen address: {0}")]
    Listener(std::io::Error),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Fetch(#[from] crate::indicators::fetch::FetchError),
    /// The HTTP server failed.
    #[error("the HTTP server failed: {0}")]
    Server(std::io::Error),
    /// The store failed at start.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What the loop, the watcher and the API share.
pub struct Shared<S: Store> {
    pub store: S,
    pub fetcher: Fetcher,
    pub resolve: Arc<dyn Resolve + Send + Sync>,
    pub hub: Hub,
    pub metrics: Metrics,
    pub notifier: Notifier,
    pub config: Config,
    /// Set by a caller that drives ticks itself and has no lease (the demo).
    pub leader: AtomicBool,
    /// Until when (wall clock, ms) this daemon's lease is valid; 0 when it holds none.
    lease_until: AtomicI64,
    /// When (wall clock, ms) the store last answered a lease renewal; 0 never.
    store_ok_at: AtomicI64,
    /// Whether this daemon last said (log, metric) that it leads.
    said_leading: AtomicBool,
    /// Routing long-polls parked now, at most [`http::Limits::max_long_polls`].
    pub long_polls: Arc<tokio::sync::Semaphore>,
    /// Why a migration could not be loaded (its plan does not compile here), by name; cleared
    /// when it loads again.
    load_errors: Mutex<HashMap<String, String>>,
    /// Flips to true when the daemon stops: long-polls answer at once.
    pub stopping: watch::Sender<bool>,
    memo: Mutex<HashMap<String, Memo>>,
    /// The store's [`Store::generations_mark`] when the watcher last compared every migration.
    watch_mark: Mutex<Option<(i64, i64)>>,
    watch_polls: AtomicU64,
    /// Each migration's compiled plan, kept while its stored plan (and what it reads) is unchanged.
    plans: PlanCache,
    /// Each migration's scrape histories, kept between rounds.
    histories: Histories,
    /// Where the leader's pruning stands ([`retention`]).
    retention: retention::Retention,
    /// The synthetic phase's probe runs.
    #[cfg(feature = "brokers")]
    pub probes: probes::ProbeRuns,
}

impl<S: Store + Clone + 'static> Shared<S> {
    /// The daemon's state, before anything runs. [`run`] builds one; a caller that drives ticks
    /// itself (the demo, in lockstep with its simulated world) builds one too and calls
    /// [`tick_all`] with the lease taken for granted (`leader` set).
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(
        store: S,
        config: Config,
        resolve: Arc<dyn Resolve + Send + Sync>,
    ) -> Result<Arc<Shared<S>>, DaemonError> {
        let fetcher = Fetcher::new(config.source_timeout)?
            .with_queries_per_request(config.queries_per_request);
        let notifier = Notifier::start(fetcher.client().clone());
        let long_polls = config.http.max_long_polls;
        Ok(Arc::new(Shared {
            store,
            fetcher,
            resolve,
            hub: Hub::default(),
            metrics: Metrics::default(),
            notifier,
            config,
            leader: AtomicBool::new(false),
            lease_until: AtomicI64::new(0),
            store_ok_at: AtomicI64::new(0),
            said_leading: AtomicBool::new(false),
            long_polls: Arc::new(tokio::sync::Semaphore::new(long_polls)),
            load_errors: Mutex::new(HashMap::new()),
            stopping: watch::Sender::new(false),
            memo: Mutex::new(HashMap::new()),
            watch_mark: Mutex::new(None),
            watch_polls: AtomicU64::new(0),
            plans: PlanCache::default(),
            histories: Histories::default(),
            retention: retention::Retention::default(),
            #[cfg(feature = "brokers")]
            probes: probes::ProbeRuns::default(),
        }))
    }

    /// A controller over the shared store; a standby's never writes.
    pub fn controller(&self, read_only: bool) -> Controller<'_, S> {
        self.controller_with_fetcher(&self.fetcher, read_only)
    }

    /// A controller over the shared store reading its sources through `fetcher` (a round's).
    pub fn controller_with_fetcher<'a>(
        &'a self,
        fetcher: &'a Fetcher,
        read_only: bool,
    ) -> Controller<'a, S> {
        Controller {
            store: &self.store,
            fetcher,
            resolve: &*self.resolve,
            // docs/operations.md §2: every variable is set in every daemon's environment; a
            // plan that does not resolve is reported at every tick, never half-run.
            secrets: SecretsMode::Required,
            read_only,
            histories: Some(&self.histories),
            round: None,
        }
    }

    /// Whether this daemon may act now: it holds a lease that is valid for a while yet (a
    /// margin of a fifth of the TTL, so that a slow tick stops before a standby may take over),
    /// or its caller said so (`leader`).
    pub fn is_leader(&self) -> bool {
        if self.leader.load(Ordering::SeqCst) {
            return true;
        }
        self.lease_keeper().acts(
            crate::time::now_ms(),
            self.lease_until.load(Ordering::SeqCst),
        )
    }

    /// The lease every daemon of this store competes for, held as this daemon.
    fn lease_keeper(&self) -> LeaseKeeper<'_, S> {
        LeaseKeeper::new(
            &self.store,
            LEASE,
            &self.config.holder,
            self.config.lease_ttl,
        )
    }

    pub fn now_ms(&self) -> i64 {
        (self.config.clock)()
    }

    fn actor(&self, reason: &str) -> Actor {
        Actor {
            name: self.config.holder.clone(),
            reason: Some(reason.to_string()),
        }
    }

    fn with_memo<R>(&self, name: &str, f: impl FnOnce(&mut Memo) -> R) -> R {
        match self.memo.lock() {
            Ok(mut map) => f(map.entry(name.to_string()).or_default()),
            Err(poisoned) => f(poisoned.into_inner().entry(name.to_string()).or_default()),
        }
    }

    /// Send an event to the plan's webhooks.
    fn event(&self, loaded: &Loaded, kind: EventKind, text: String, details: serde_json::Value) {
        self.notifier.send(
            &loaded.plan.notify.webhooks,
            Event {
                event: kind,
                migration: loaded.record.name.clone(),
                state: loaded.record.state.name().to_string(),
                step: loaded.record.state.step(),
                text,
                at: crate::time::rfc3339(self.now_ms()),
                details,
            },
        );
    }

    /// Take in a migration as stored: routing to readers and metrics, a transition announced.
    async fn observe(&self, c: &Controller<'_, S>, loaded: &Loaded) {
        let doc = crate::controller::publish::document(&loaded.plan, &loaded.record);
        self.metrics.routing(&doc);
        self.hub.update(doc);
        let generation = loaded.record.generation;
        // Never lowered: a read older than one already seen announces nothing again.
        let previous = self.with_memo(&loaded.record.name, |m| {
            let previous = m.generation;
            m.generation = Some(previous.map_or(generation, |p| p.max(generation)));
            previous
        });
        if !self.is_leader() {
            return;
        }
        if let Some(prev) = previous
            && prev < generation
            && let Ok(journal) = c.store.journal(&loaded.record.name).await
            && let Some(last) = journal.last()
        {
            let text = format!(
                "{}: {} {} -> {}{} by {}{}",
                loaded.record.name,
                last.command,
                last.from.state,
                last.to.state,
                if last.to.paused { " (paused)" } else { "" },
                last.actor,
                last.reason
                    .as_ref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            );
            self.event(
                loaded,
                EventKind::Transition,
                text,
                serde_json::to_value(crate::controller::views::EntryView::of(last))
                    .unwrap_or_default(),
            );
        }
    }

    /// Load and observe one migration (after a change).
    async fn refresh(&self, c: &Controller<'_, S>, name: &str) {
        self.refresh_from(c, name, None).await;
    }

    /// [`Shared::refresh`] from `record` when one was read already. A routing to re-publish is
    /// published from a fresh read, never from `record` (which may be older than a command that
    /// published since), as a round does.
    async fn refresh_from(
        &self,
        c: &Controller<'_, S>,
        name: &str,
        record: Option<MigrationRecord>,
    ) {
        let loaded = match record {
            Some(record) if c.read_only || record.published_generation >= record.generation => {
                c.load_record(record, Some(&self.plans)).await
            }
            _ => c.load_cached(name, &self.plans).await,
        };
        match loaded {
            Ok(loaded) => {
                self.set_load_error(name, None);
                self.observe(c, &loaded).await;
            }
            Err(e) => {
                let why = e.to_string();
                // Said once per distinct reason, not at every watch.
                if self.set_load_error(name, Some(why.clone())) {
                    tracing::warn!(migration = name, "cannot load: {why}");
                }
            }
        }
    }

    /// Note why `name` cannot be loaded (`None`: it loads); whether that is news.
    fn set_load_error(&self, name: &str, why: Option<String>) -> bool {
        let mut errors = self
            .load_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match why {
            Some(why) => errors.insert(name.to_string(), why.clone()).as_ref() != Some(&why),
            None => errors.remove(name).is_some(),
        }
    }

    /// Why `name` could not be loaded when last tried, if it could not.
    pub fn load_error(&self, name: &str) -> Option<String> {
        self.load_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// Whether the store answered a lease renewal within the last lease period.
    pub fn store_works(&self) -> bool {
        let at = self.store_ok_at.load(Ordering::SeqCst);
        let ttl = i64::try_from(self.config.lease_ttl.as_millis()).unwrap_or(i64::MAX);
        at > 0 && crate::time::now_ms() - at <= ttl
    }

    /// Say (log, metric) whether this daemon leads now, when that changed: `lost the lease` as
    /// soon as the lease ran out, not at the next tick (which may wait on a store gone away).
    fn say_leading(&self, why_not: Option<&str>) {
        let leading = self.is_leader();
        self.metrics.leading(leading);
        let said = self.said_leading.swap(leading, Ordering::SeqCst);
        if said && !leading {
            match why_not {
                Some(why) => tracing::warn!("lost the lease: standing by ({why})"),
                None => tracing::warn!("lost the lease: standing by"),
            }
        }
    }

    /// Every migration in the store whose generation moved since readers last saw it. Most calls
    /// read one row ([`Store::generations_mark`]) and stop there when nothing moved; every
    /// [`WHOLE_WATCH_EVERY`]th call compares every migration regardless. When a good part of the
    /// fleet moved (all of it when the daemon starts: see [`read_whole_fleet`]), those are loaded
    /// from one read of every record instead of one read each; a routing left behind is still
    /// re-published from the store as it is then, never from that read.
    pub async fn watch_once(&self) {
        let mark = self.store.generations_mark().await.ok();
        let polls = self.watch_polls.fetch_add(1, Ordering::Relaxed);
        let seen_mark = *self
            .watch_mark
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if mark.is_some() && mark == seen_mark && !polls.is_multiple_of(WHOLE_WATCH_EVERY) {
            return;
        }
        let read_only = !self.is_leader();
        let c = self.controller(read_only);
        let Ok(generations) = self.store.generations().await else {
            return;
        };
        let fleet = generations.len();
        let behind: Vec<String> = generations
            .into_iter()
            .filter(|(name, generation)| {
                self.hub
                    .generation(name)
                    .is_none_or(|g| i64::try_from(g).unwrap_or(i64::MAX) < *generation)
            })
            .map(|(name, _)| name)
            .collect();
        let mut listed: HashMap<String, MigrationRecord> = HashMap::new();
        if read_whole_fleet(behind.len(), fleet) {
            match self.store.list().await {
                Ok(records) => listed.extend(records.into_iter().map(|r| (r.name.clone(), r))),
                Err(e) => {
                    tracing::warn!("cannot read the fleet at once, reading each migration: {e}");
                }
            }
        }
        for name in &behind {
            self.refresh_from(&c, name, listed.remove(name)).await;
        }
        *self
            .watch_mark
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = mark;
    }
}

/// Whether the watcher loads the `behind` migrations of a fleet of `fleet` from one read of
/// every record rather than one read each: when at least two and a quarter of the fleet are
/// behind (a start: all of them).
pub fn read_whole_fleet(behind: usize, fleet: usize) -> bool {
    behind >= 2 && behind.saturating_mul(4) >= fleet
}

/// Mutating API calls on a non-loopback address need a token (unless the API is read-only).
///
/// # Errors
/// [`DaemonError::NoToken`].
pub fn check_listener(addr: std::net::SocketAddr, config: &Config) -> Result<(), DaemonError> {
    if !addr.ip().is_loopback() && config.token.is_none() && !config.read_only_api {
        return Err(DaemonError::NoToken(addr));
    }
    Ok(())
}

/// Run the daemon until `shutdown` resolves: then finish the tick in progress, release the lease
/// and return.
///
/// # Errors
/// A non-loopback listener without a token (unless the API is read-only), or an HTTP server
/// failure.
pub async fn run<S: Store + Clone + 'static>(
    store: S,
    listener: TcpListener,
    config: Config,
    resolve: Arc<dyn Resolve + Send + Sync>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), DaemonError> {
    let addr = listener.local_addr().map_err(DaemonError::Listener)?;
    check_listener(addr, &config)?;
    let shared = Shared::new(store, config.clone(), resolve)?;
    shared.watch_once().await;

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let app = server::router(shared.clone());
    let server = tokio::spawn(http::serve(listener, app, config.http, stop_rx.clone()));
    let watcher = {
        let shared = shared.clone();
        let stop = stop_rx.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(shared.config.watch_interval);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stopped(stop.clone()) => break,
                    _ = every.tick() => shared.watch_once().await,
                }
            }
        })
    };

    let renewer = {
        let shared = shared.clone();
        let stop = stop_rx.clone();
        tokio::spawn(async move {
            let mut every = shared.lease_keeper().renewals();
            loop {
                tokio::select! {
                    _ = stopped(stop.clone()) => break,
                    _ = every.tick() => renew(&shared).await,
                    // The lease runs out between two renewals when the store does not answer.
                    () = lease_runs_out(&shared) => shared.say_leading(Some("not renewed in time")),
                }
            }
        })
    };

    let mut ticks = tokio::time::interval(config.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            _ = ticks.tick() => {
                let leading = shared.is_leader();
                let started = std::time::Instant::now();
                if leading {
                    tick_all(&shared).await;
                    #[cfg(feature = "brokers")]
                    shared.probes.reconcile(&shared).await;
                    shared.retention.after_round(&shared).await;
                } else {
                    // The lease ran out (or was never ours): no probe is published on behalf
                    // of a daemon that does not own the migrations.
                    #[cfg(feature = "brokers")]
                    shared.probes.stop_all();
                }
                // As of now: a tick that waited on a store gone away no longer leads.
                shared.metrics.tick(shared.is_leader(), started.elapsed());
            }
        }
    }
    let _ = stop_tx.send(true);
    shared.stopping.send_replace(true);
    let _ = renewer.await;
    // Before the lease is released: a standby may take over at once.
    #[cfg(feature = "brokers")]
    shared.probes.stop_all();
    if shared.lease_until.swap(0, Ordering::SeqCst) > 0
        && let Err(e) = shared.lease_keeper().release().await
    {
        tracing::warn!("cannot release the lease: {e}");
    }
    let _ = watcher.await;
    match server.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(DaemonError::Server(e)),
        Err(_) => Ok(()),
    }
}

/// Renew (or take) the lease and note until when it is ours. A store that does not answer
/// within a third of the lease period is a failed renewal (the next one is due then).
async fn renew<S: Store + Clone + 'static>(shared: &Shared<S>) {
    let now = crate::time::now_ms();
    let keeper = shared.lease_keeper();
    let had = shared.lease_until.load(Ordering::SeqCst) > now;
    match keeper.renew(now, keeper.renew_every()).await {
        Renewal::Held { until_ms } => {
            shared.store_ok_at.store(now, Ordering::SeqCst);
            if !had {
                tracing::info!(holder = %shared.config.holder, "holding the lease: this controller acts");
            }
            shared.lease_until.store(until_ms, Ordering::SeqCst);
            shared.say_leading(None);
        }
        Renewal::Taken { holder } => {
            shared.store_ok_at.store(now, Ordering::SeqCst);
            shared.lease_until.store(0, Ordering::SeqCst);
            shared.say_leading(Some(&format!("{holder} holds it")));
            // Another daemon owns the migrations now: its probes, not ours.
            #[cfg(feature = "brokers")]
            shared.probes.stop_all();
        }
        // Keep acting only while the lease we hold is still valid (is_leader checks the time).
        Renewal::Failed(e) => {
            tracing::warn!("cannot renew the lease: {e}");
            shared.say_leading(Some(&format!("cannot renew it: {e}")));
        }
        Renewal::Unanswered => {
            tracing::warn!(
                "cannot renew the lease: the store did not answer within {}",
                crate::time::human(keeper.renew_every())
            );
            shared.say_leading(Some("the store did not answer in time"));
        }
    }
}

/// Resolves when the lease this daemon said it holds runs out by its clock (never while it does
/// not lead, or leads by its caller's say-so).
async fn lease_runs_out<S: Store + Clone + 'static>(shared: &Shared<S>) {
    if shared.leader.load(Ordering::SeqCst) || !shared.said_leading.load(Ordering::SeqCst) {
        return std::future::pending().await;
    }
    let until = shared
        .lease_keeper()
        .acts_until(shared.lease_until.load(Ordering::SeqCst));
    let wait = until.saturating_sub(crate::time::now_ms());
    if let Ok(wait) = u64::try_from(wait) {
        tokio::time::sleep(Duration::from_millis(wait + 1)).await;
    }
}

/// How many migrations one tick evaluates at once: each waits mostly on its sources and on the
/// store, so a few in flight overlap those waits (a migration is still ticked once).
pub const TICK_CONCURRENCY: usize = 8;

/// One tick of every migration in the store: a round. What [`run`]'s loop does while this
/// daemon holds the lease. Up to [`TICK_CONCURRENCY`] migrations are ticked at once.
///
/// The round is evaluated as of one instant (the config's clock read once at its start) and
/// reads its sources through one round's fetcher ([`Fetcher::for_round`]): each `/metrics` URL is
/// scraped once and each distinct PromQL instant query (same Prometheus, same text, same instant)
/// asked once for every migration that reads it, and every migration records that scrape at the
/// round's instant. That is what each migration would have read by itself at that instant; a
/// failing source is a hold, with that source's reason, for each migration reading it.
///
/// The round starts from one read of the fleet ([`Store::fleet`]): every record and the gate
/// memory of its step, in two statements instead of two per migration. A migration that another
/// process moves during the round is a conflict when its tick commits a transition (the next
/// round reads it afresh), as for two commands racing.
///
/// The round's gate evaluations and samples are written in one transaction at its end
/// ([`RoundBatch`]): a transition made during the round is committed at once, with its gates in
/// its journal entry; if that last commit fails, the next round goes on from the memory of the
/// round before.
pub async fn tick_all<S: Store + Clone + 'static>(shared: &Shared<S>) {
    let Fleet {
        records,
        mut memory,
    } = match shared.store.fleet().await {
        Ok(fleet) => fleet,
        Err(e) => {
            tracing::warn!("cannot list migrations: {e}");
            return;
        }
    };
    let names: Vec<String> = records.iter().map(|r| r.name.clone()).collect();
    shared.plans.retain(&names);
    let queue = Mutex::new(records.into_iter().map(|r| {
        let m = memory.remove(&r.name).unwrap_or_default();
        tick::Read::Fleet(r, m)
    }));
    let now = shared.now_ms();
    let fetcher = shared.fetcher.for_round();
    let batch = RoundBatch::default();
    let lane = || async {
        loop {
            let next = queue.lock().unwrap_or_else(PoisonError::into_inner).next();
            let Some(read) = next else { break };
            let name = read.name().to_string();
            match tick::tick_in_round(shared, &fetcher, Some(&batch), read, now).await {
                Ok(action) => tracing::debug!(migration = %name, ?action, "tick"),
                Err(e) => tracing::warn!(migration = %name, "tick failed: {e}"),
            }
        }
    };
    let mut lanes: Vec<_> = (0..TICK_CONCURRENCY.min(names.len()))
        .map(|_| Some(Box::pin(lane())))
        .collect();
    // Drive the lanes together on this task (no spawn: they borrow `shared`).
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for slot in &mut lanes {
            if let Some(f) = slot {
                if f.as_mut().poll(cx).is_ready() {
                    *slot = None;
                } else {
                    pending = true;
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    drop(lanes);
    if !shared.is_leader() {
        // The lease ran out during the round: another daemon may be leading; leave the store
        // to it.
        return;
    }
    if let Err(e) = batch.commit(&shared.store, Some(&shared.histories)).await {
        tracing::warn!(
            "cannot record the round's gate evaluations (the next round goes on from the one before): {e}"
        );
    }
}

//! What every part of the daemon shares: its configuration, and the state the ticks, the lease
//! keeper, the watcher and the HTTP API read and write ([`Shared`]).

use super::hub::Hub;
use super::metrics::Metrics;
use super::notify::{Event, EventKind, Notifier};
use super::round_state::RoundState;
use super::views::Views;
use crate::controller::plans::PlanCache;
use crate::controller::{Actor, Controller, Loaded};
use crate::indicators::fetch::Fetcher;
use crate::lease::Lease;
use crate::plan::{Resolve, SecretsMode};
use crate::store::lease_keeper::LeaseKeeper;
use crate::store::retention::{Prune, Pruned};
use crate::store::{MigrationRecord, Store, StoreError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

/// The name of the lease every daemon of a store competes for.
pub const LEASE: &str = crate::controller::LEASE;

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
    /// Most series of one `/metrics` scrape (`--max-series`); see [`Fetcher::with_max_series`].
    pub max_series: usize,
    /// How long the lease lasts without renewal (renewed every third of it).
    pub lease_ttl: Duration,
    /// How often the watcher looks for changes made by others (one cheap read of the store; every
    /// migration is compared every [`WHOLE_WATCH_EVERY`] of these).
    pub watch_interval: Duration,
    /// This daemon's identity (`--id`): the journal's actor, and the first part of its holder
    /// in the lease.
    pub holder: String,
    /// This process instance's random id ([`crate::store::lease_keeper::new_instance`]): the
    /// lease is held as `HOLDER#INSTANCE`, so that two processes with one `--id` are two
    /// holders (the second stands by). Empty: [`super::run`] draws one.
    pub instance: String,
    /// Who may call the mutating API calls, and as whom (tokens, roles, a trusted proxy).
    pub access: super::auth::Access,
    /// Refuse every mutating API call.
    pub read_only_api: bool,
    /// `Host` names answered beside loopback, the listen address and this machine's hostname
    /// (`--allowed-host`; `*`: any): [`super::guard`].
    pub allowed_hosts: Vec<String>,
    /// Migrations the operator confirmed may enter `complete` unattended.
    pub confirm_complete: Vec<String>,
    /// Every reading of time the daemon makes: the gates' clock, the database's clock the lease
    /// is measured on (sampled at every lease renewal), the host's wall clock for the skew.
    pub clock: super::DaemonClock,
    /// The HTTP server's limits and timeouts.
    pub http: super::http::Limits,
    /// Delete what is older than this, in batches after the leader's rounds ([`super::retention`]);
    /// `None`: keep everything.
    pub retain: Option<Duration>,
    /// A local clock further than this from the database's is warned about (at start and when
    /// that changes) .
    pub max_clock_skew: Duration,
}

impl Config {
    /// The holder this daemon's lease is held as: `HOLDER#INSTANCE`
    /// ([`crate::store::lease_keeper::instance_holder`]).
    pub fn lease_holder(&self) -> String {
        crate::store::lease_keeper::instance_holder(&self.holder, &self.instance)
    }

    /// How long one migration's tick may run (issue 54): its sources' timeout (they are asked
    /// all at once) plus [`Config::store_deadline`] for its store calls. A tick cut there
    /// changes nothing it had not committed; its gates are evaluated again by the next round.
    pub fn tick_deadline(&self) -> Duration {
        self.source_timeout + self.store_deadline()
    }

    /// How long a round's own store calls (the fleet read, the commit of its gate evaluations)
    /// and a tick's may wait in all: a third of the lease TTL (as a lease renewal), at least a
    /// second. A call cut there is a failure, its connection dropped, never waited on.
    pub fn store_deadline(&self) -> Duration {
        (self.lease_ttl / 3).max(Duration::from_secs(1))
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("interval", &self.interval)
            .field("lease_ttl", &self.lease_ttl)
            .field("holder", &self.holder)
            .field("instance", &self.instance)
            .field("access", &self.access)
            .field("confirm_complete", &self.confirm_complete)
            .field("http", &self.http)
            .field("retain", &self.retain)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

/// The idempotency key of an event about `record` (see [`Event::idempotency_key`]): a
/// transition's is its journal entry's (`MIGRATION:SEQ`, the same from any daemon that
/// announces it); another event's names its kind, the generation and the instant.
fn idempotency_key(
    record: &MigrationRecord,
    kind: EventKind,
    details: &serde_json::Value,
    now_ms: i64,
) -> String {
    match (kind, details.get("seq").and_then(serde_json::Value::as_i64)) {
        (EventKind::Transition, Some(seq)) => format!("{}:{seq}", record.name),
        _ => {
            let kind = serde_json::to_value(kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            format!("{}:{kind}:{}:{now_ms}", record.name, record.generation)
        }
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

/// What the loop, the watcher and the API share, by role: what every part reads (the store,
/// the configuration, the metrics, the sources' client, the routing hub), the leadership
/// (the [`Lease`], what was last said of it), what readers see ([`Views`]), what the rounds
/// keep between them ([`RoundState`]), and what announces ([`Announce`]).
pub struct Shared<S: Store> {
    pub store: S,
    pub fetcher: Fetcher,
    pub resolve: Arc<dyn Resolve + Send + Sync>,
    pub hub: Hub,
    pub metrics: Metrics,
    pub config: Config,
    /// Set by a caller that drives ticks itself and has no lease (the demo).
    pub leader: AtomicBool,
    /// This daemon's lease ([`LEASE`], held as [`Config::lease_holder`]): until when, under
    /// which epoch, on the database's clock it samples (the gates' too: [`Config::clock`]).
    pub lease: Lease<S>,
    /// What this daemon last said (log, metric) of its lease and clock.
    pub(super) said: Said,
    /// What the HTTP API and the watcher show readers.
    pub views: Views,
    /// What the leader's rounds keep between them.
    pub rounds: RoundState,
    /// What announces transitions and events.
    pub(super) announce: Announce,
}

/// What a daemon last said (log, metric) of its lease and its clock.
#[derive(Debug, Default)]
pub(super) struct Said {
    /// Whether the local clock was last said to be too far from the database's.
    pub(super) skewed: AtomicBool,
    /// Whether this daemon last said that it leads.
    pub(super) leading: AtomicBool,
}

/// What announces: the webhooks' sender, and the leader's deliveries of the store's outbox
/// ([`super::outbox`]).
pub(super) struct Announce {
    pub(super) notifier: Notifier,
    pub(super) outbox: super::outbox_memory::Outbox,
}

impl<S: Store + Clone + 'static> Shared<S> {
    /// The daemon's state, before anything runs. [`super::run`] builds one; a caller that drives ticks
    /// itself (the demo, in lockstep with its simulated world) builds one too and calls
    /// [`super::tick_all`] with the lease taken for granted (`leader` set).
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(
        store: S,
        config: Config,
        resolve: Arc<dyn Resolve + Send + Sync>,
    ) -> Result<Arc<Shared<S>>, DaemonError> {
        let followers = Arc::new(crate::indicators::followers::Followers::new(
            config.http.max_followers,
        ));
        let fetcher = Fetcher::new(config.source_timeout)?
            .with_queries_per_request(config.queries_per_request)
            .with_max_series(config.max_series)
            .with_followers(followers.clone());
        let notifier = Notifier::start(fetcher.client().clone());
        let long_polls = config.http.max_long_polls;
        let metrics = Metrics::default();
        metrics.identity(&config.holder, &config.instance);
        let lease = Lease::new(
            store.clone(),
            LEASE,
            &config.lease_holder(),
            config.lease_ttl,
            config.clock.db().clone(),
        );
        Ok(Arc::new(Shared {
            store,
            fetcher,
            resolve,
            hub: Hub::default(),
            metrics,
            lease,
            config,
            leader: AtomicBool::new(false),
            said: Said::default(),
            views: Views::new(long_polls, followers),
            rounds: RoundState::default(),
            announce: Announce {
                notifier,
                outbox: super::outbox_memory::Outbox::default(),
            },
        }))
    }

    /// How the preflight reads brokers from now on (the demo's simulated world, a test's);
    /// `None`: no preflight.
    pub fn set_preflight_reader(&self, reader: Option<super::preflight_reader::Reader>) {
        self.rounds.set_preflight_reader(reader);
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
        // docs/operations.md §2: every variable is set in every daemon's environment; a plan
        // that does not resolve is reported at every tick, never half-run.
        Controller::new(&self.store, fetcher, &*self.resolve)
            .with_secrets(SecretsMode::Required)
            .with_read_only(read_only)
            .with_histories(&self.rounds.histories)
            .with_interval(self.config.interval)
    }

    /// Whether this daemon may act now: it holds a lease that is valid for a while yet (a
    /// margin of a fifth of the TTL, so that a slow tick stops before a standby may take over),
    /// or its caller said so (`leader`).
    pub fn is_leader(&self) -> bool {
        if self.leader.load(Ordering::SeqCst) {
            return true;
        }
        self.lease.acts()
    }

    /// The lease every daemon of this store competes for, held as this daemon.
    pub(super) fn lease_keeper(&self) -> LeaseKeeper<'_, S> {
        self.lease.keeper()
    }

    /// Now, as the gates read it ([`super::DaemonClock::gates_ms`]): what a round, the API's
    /// views, the webhooks and the retention are told in.
    pub fn now_ms(&self) -> i64 {
        self.config.clock.gates_ms()
    }

    pub(super) fn actor(&self, reason: &str) -> Actor {
        Actor {
            name: self.config.holder.clone(),
            reason: Some(reason.to_string()),
        }
    }

    /// Whether an event decided now may be sent: on a fenced store, only while this daemon
    /// leads and still holds the lease under the epoch the decision was made under (the
    /// round's: [`crate::store::fence::FenceCell::decided_under`]). An alert computed before a
    /// pause, the lease lost (or lost and taken again) meanwhile, is not sent: the leader now
    /// decides again on fresh readings. Said at WARN, with the word "fenced", when it is not.
    pub(super) fn may_announce(&self, what: &str) -> bool {
        let fence = self.store.fence();
        if !fence.is_armed() {
            return true;
        }
        let decided = fence.decided_under();
        let held = fence.epoch();
        if decided.is_some() && decided == held && self.is_leader() {
            return true;
        }
        let shown = |e: Option<i64>| e.map_or_else(|| "none".to_string(), |e| e.to_string());
        tracing::warn!(
            decided_under = %shown(decided),
            held = %shown(held),
            "fenced: {what} not sent: the lease is no longer held under the epoch it was decided under"
        );
        false
    }

    /// Send an event to the plan's webhooks, under the epoch its decision was made under, if
    /// it still may be ([`Shared::may_announce`]).
    pub(super) fn event(
        &self,
        loaded: &Loaded,
        kind: EventKind,
        text: String,
        details: serde_json::Value,
    ) {
        if !self.may_announce(&format!("a {kind:?} event of {}", loaded.record.name)) {
            return;
        }
        let epoch = self.store.fence().decided_under();
        self.announce.notifier.send(
            &loaded.plan.notify.webhooks,
            Event {
                idempotency_key: idempotency_key(&loaded.record, kind, &details, self.now_ms()),
                epoch,
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

    /// Take in a migration as stored: its routing to readers and metrics. (A transition is
    /// announced from the store's outbox, by whoever leads: [`super::outbox`].)
    pub(super) async fn observe(&self, _c: &Controller<'_, S>, loaded: &Loaded) {
        let doc = crate::controller::publish::document(&loaded.plan, &loaded.record);
        self.metrics.routing(&doc);
        self.hub.update(doc);
    }

    /// The daemon's compiled plans, kept while unchanged ([`Controller::load_cached`]).
    pub fn plans(&self) -> &PlanCache {
        &self.rounds.plans
    }

    /// Load and observe one migration (after a change).
    pub(super) async fn refresh(&self, c: &Controller<'_, S>, name: &str) {
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
                c.load_record(record, Some(&self.rounds.plans)).await
            }
            _ => c.load_cached(name, &self.rounds.plans).await,
        };
        match loaded {
            Ok(loaded) => {
                self.views.set_load_error(name, None);
                self.observe(c, &loaded).await;
            }
            Err(e) => {
                let why = e.to_string();
                // Said once per distinct reason, not at every watch.
                if self.views.set_load_error(name, Some(why.clone())) {
                    tracing::warn!(migration = name, "cannot load: {why}");
                }
            }
        }
    }

    /// Note the local clock's skew from the database's (`skew_ms`, local minus database), as
    /// a renewal measured it: in `/metrics`, and warned about when it passes the bound (at
    /// start and whenever that changes).
    pub(super) fn note_skew(&self, skew_ms: i64) {
        #[allow(clippy::cast_precision_loss)]
        let seconds = skew_ms as f64 / 1000.0;
        let epoch = self.store.fence().epoch().unwrap_or(0);
        self.metrics.lease(epoch, Some(seconds));
        let bound = crate::time::millis(self.config.max_clock_skew);
        let skewed = skew_ms.abs() > bound;
        if self.said.skewed.swap(skewed, Ordering::SeqCst) != skewed {
            if skewed {
                tracing::warn!(
                    skew_seconds = seconds,
                    "this host's clock differs from the database's by {seconds:.1} s (more than \
                     --max-clock-skew {}): leases and gates run on the database's clock, but \
                     fix the host's clock (NTP)",
                    crate::time::human(self.config.max_clock_skew)
                );
            } else {
                tracing::info!(
                    skew_seconds = seconds,
                    "this host's clock agrees with the database's again"
                );
            }
        }
    }

    /// Whether the store answered a lease renewal within the last lease period.
    pub fn store_works(&self) -> bool {
        let at = self.lease.answered_at();
        let ttl = i64::try_from(self.config.lease_ttl.as_millis()).unwrap_or(i64::MAX);
        at > 0 && self.config.clock.lease_ms() - at <= ttl
    }

    /// Say (log, metric) whether this daemon leads now, when that changed: `lost the lease` as
    /// soon as the lease ran out, not at the next tick (which may wait on a store gone away).
    pub(super) fn say_leading(&self, why_not: Option<&str>) {
        let leading = self.is_leader();
        self.metrics.leading(leading);
        let said = self.said.leading.swap(leading, Ordering::SeqCst);
        if said && !leading {
            match why_not {
                Some(why) => tracing::warn!("lost the lease: standing by ({why})"),
                None => tracing::warn!("lost the lease: standing by"),
            }
        }
    }

    /// Every migration in the store whose generation moved since readers last saw it. Most calls
    /// read one row ([`crate::store::JournalStore::generations_mark`]) and stop there when nothing moved; every
    /// [`WHOLE_WATCH_EVERY`]th call compares every migration regardless. When a good part of the
    /// fleet moved (all of it when the daemon starts: see [`read_whole_fleet`]), those are loaded
    /// from one read of every record instead of one read each; a routing left behind is still
    /// re-published from the store as it is then, never from that read.
    pub async fn watch_once(&self) {
        let mark = self.store.generations_mark().await.ok();
        let polls = self.views.watch_polls.fetch_add(1, Ordering::Relaxed);
        let seen_mark = *self
            .views
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
            .views
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

impl<S: Store + Clone + 'static> Shared<S> {
    /// After a committed round: prune if due ([`super::retention`]). Answers what was deleted
    /// (`None`: not due, no retention, or not the leader).
    pub async fn prune_if_due(&self) -> Option<Pruned> {
        let state = &self.rounds.retention;
        let retain = self.config.retain?;
        if !self.is_leader() {
            return None;
        }
        let rounds = state
            .rounds
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        let every = super::retention::rounds_between(self.config.interval);
        if !super::retention::due(rounds, every, state.behind.load(Ordering::Relaxed)) {
            return None;
        }
        state.rounds.store(0, Ordering::Relaxed);
        let age = i64::try_from(retain.as_millis()).unwrap_or(i64::MAX);
        let prune = Prune {
            before_ms: self.now_ms().saturating_sub(age),
            migration: None,
            batch: super::retention::BATCH,
        };
        let mut sum = Pruned::default();
        let mut full = false;
        for _ in 0..super::retention::BATCHES_PER_ROUND {
            match self.store.prune(&prune).await {
                Ok(batch) => {
                    sum += batch;
                    full = batch.full(super::retention::BATCH);
                    if !full {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        "cannot prune what is older than the retention (--retain {}): {e}; \
                         retried at the next due round",
                        crate::time::human(retain)
                    );
                    full = false;
                    break;
                }
            }
            if !self.is_leader() {
                break;
            }
        }
        state.behind.store(full, Ordering::Relaxed);
        self.metrics.pruned(&sum);
        if sum.total() > 0 {
            tracing::debug!(
                gate_evaluations = sum.gate_evaluations,
                gate_memory = sum.gate_memory,
                scrapes = sum.scrapes,
                behind = full,
                "pruned rows older than the retention"
            );
        }
        Some(sum)
    }
}

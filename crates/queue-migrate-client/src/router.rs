//! The producer's router: the latest routing document, a lock-free `route(key)` on the hot path,
//! and followers that keep the document current from the daemon (HTTP long-poll) or a file.
//!
//! ```no_run
//! # async fn demo() -> Result<(), queue_migrate_client::router::RouterError> {
//! use queue_migrate_client::router::Router;
//! let router = Router::for_migration("orders", 128, "rabbitmq", "nats");
//! let _follower = router.follow_http("http://127.0.0.1:8080", "orders", None)?;
//! let route = router.route("order-4711"); // never waits, never fails
//! # let _ = route; Ok(()) }
//! ```
//!
//! # Guarantees
//! - [`Router::route`] never blocks and never waits for an update. It reads the three numbers it
//!   needs (generation, slice count, slices migrated) from one of two slots the writer fills in
//!   turn after each accepted document: plain loads of one cache line, no read-modify-write, no
//!   lock. A read starts again only if a newer document was stored while it read, so `route`
//!   comes from one document, never a mix of two, and one thread never goes back to an older
//!   document than one it already routed with.
//! - Until a first document arrives the router answers the safe default: every key to the old
//!   broker, generation 0, slices of the count given to [`Router::for_migration`] /
//!   [`RouterBuilder::slices`] (default [`DEFAULT_SLICES`]), and the broker names given, so that
//!   stamps and metrics carry one broker label from the first message on.
//! - A document replaces the current one only if its generation is higher (or there is none yet),
//!   it names the router's migration, and it is coherent (`slices_migrated <= slices_total`, at
//!   least one slice, at least one side to consume). Nothing else ever changes what `route`
//!   answers: another migration's document (from [`Router::offer`], a file or the daemon), an
//!   unreachable daemon, a malformed file or an old document leave the last good one in place,
//!   and the refusal is an error the caller sees ([`RouterError::OtherMigration`] from `offer`
//!   and from `follow_file` when the file names another migration at start, else
//!   [`FollowStatus::last_error`]).
//! - Followers are tokio tasks; dropping their [`FollowerHandle`] stops them.

// Part of the library consumers depend on: every public item is documented.
#![warn(missing_docs)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwapOption;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use hot::Hot;

use crate::routing::{BrokerNames, Route, RoutingDocument, Side};
use crate::stamp::{HEADER_BROKER, RouteStamp, StampError, StampHeaders};
use crate::time::Millis;
use url::Url;

mod applied;
mod hot;
mod http;
#[cfg(test)]
mod tests_http;

pub use applied::APPLIED_METRIC;
pub use http::ProxyChoice;

/// The slice count of the safe default, before any document (the plan's default).
pub const DEFAULT_SLICES: u32 = 128;
/// The largest routing document read (the real one is a few hundred bytes).
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;
/// What the HTTP follower says it is.
const USER_AGENT: &str = concat!("queue-migrate-router/", env!("CARGO_PKG_VERSION"));

/// Errors of the router and its followers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RouterError {
    /// The document is incoherent; the current one is kept.
    #[error("routing document rejected: {0}")]
    Invalid(String),
    /// The document is for another migration than the one this router follows.
    #[error("routing document is for migration {got:?}, but this router follows {expected:?}")]
    OtherMigration {
        /// The migration this router follows.
        expected: String,
        /// The migration named by the document.
        got: String,
    },
    /// A follower was started outside a tokio runtime.
    #[error("routing followers run as tokio tasks: start them inside a tokio runtime")]
    NoRuntime,
    /// The daemon's base URL cannot be used.
    #[error("invalid daemon URL {url:?}: {reason}")]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be built (TLS setup).
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    /// The request did not get an answer (connection refused, timeout, reset).
    #[error("GET {url}: {reason}")]
    Unreachable {
        /// The URL requested.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The daemon answered with a status other than 200 or 304.
    #[error("GET {url}: unexpected status {status}")]
    Status {
        /// The URL requested.
        url: String,
        /// The status received.
        status: u16,
    },
    /// The body or file is not a routing document.
    #[error("{source_name}: not a routing document: {reason}")]
    Malformed {
        /// The URL or path read.
        source_name: String,
        /// Why it could not be read as one.
        reason: String,
    },
    /// The routing file could not be read.
    #[error("cannot read the routing file {path}: {reason}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        reason: String,
    },
}

/// What [`Router::offer`] did with a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Offer {
    /// The document is now current; `previous` is the generation it replaced (0: the default).
    Accepted {
        /// The generation replaced.
        previous: u64,
    },
    /// The document is not newer than the current one, which stays.
    NotNewer {
        /// The generation kept.
        current: u64,
    },
}

/// How a follower is doing, for health checks ("routing stale for 10 minutes").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FollowStatus {
    /// Documents accepted from this follower's source.
    pub accepted: u64,
    /// Failed attempts since the last success (0: the source answered last time).
    pub consecutive_failures: u32,
    /// The last failure, if the source is failing now.
    pub last_error: Option<String>,
}

struct Inner {
    hot: Hot,
    doc: ArcSwapOption<RoutingDocument>,
    /// The migration followed; `None` only for the deprecated constructors (the first
    /// document's migration is then kept).
    migration: Option<String>,
    default_slices: u32,
    /// The brokers' names before the first document (the plan's), if given.
    default_brokers: Option<BrokerNames>,
    /// The id this router reports on the routing long-poll and in its metrics.
    producer: String,
    /// The id of the broker names stamps carry now (the current document's, else
    /// `default_brokers`): unique in the process ([`next_names_id`]), 0 while none is known. A
    /// [`StampHeaders`] that holds these names stamps without reading the document.
    names: AtomicU64,
    /// Serialises writers (followers, `offer`); readers never take it.
    write: Mutex<()>,
    changed: watch::Sender<u64>,
}

/// A new id of a set of broker names, never given before in this process (0 is none).
fn next_names_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The latest routing document and `route(key)` over it. Cheap to clone (one `Arc`); every clone
/// sees the same document.
#[derive(Clone)]
pub struct Router {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("generation", &self.generation())
            .field("default_slices", &self.inner.default_slices)
            .finish_non_exhaustive()
    }
}

/// The router of no named migration, as [`Router::new`] (deprecated): it takes the first
/// document of any migration. Kept for one release with the deprecated constructors.
impl Default for Router {
    fn default() -> Self {
        Router::build(None, DEFAULT_SLICES, None)
    }
}

/// How a [`Router`] is built: [`Router::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct RouterBuilder {
    migration: String,
    slices: u32,
    brokers: Option<BrokerNames>,
    producer: Option<String>,
}

impl RouterBuilder {
    /// The slice count of the safe default, before the first document: the plan's `slices`
    /// (default [`DEFAULT_SLICES`]; 0 counts as 1).
    pub fn slices(mut self, slices: u32) -> RouterBuilder {
        self.slices = slices;
        self
    }

    /// The brokers' names before the first document: the plan's `brokers.old.name` and
    /// `brokers.new.name`, so that stamps say `broker="rabbitmq"` from the first message on.
    pub fn brokers(mut self, old: impl Into<String>, new: impl Into<String>) -> RouterBuilder {
        self.brokers = Some(BrokerNames {
            old: old.into(),
            new: new.into(),
        });
        self
    }

    /// The id this producer reports: on every routing long-poll (`?producer=ID&applied=G`,
    /// so that the daemon learns who follows and which generation each applied) and in
    /// [`Router::metrics_text`]. Default: `HOSTNAME-PID-N` (N counts the routers of the
    /// process). Give one that is stable across restarts and unique per instance (a pod's
    /// name); it is not a secret.
    pub fn producer(mut self, id: impl Into<String>) -> RouterBuilder {
        self.producer = Some(id.into());
        self
    }

    /// The router: no document yet, every key to old.
    pub fn build(self) -> Router {
        let mut router = Router::build(Some(self.migration), self.slices, self.brokers);
        if let (Some(id), Some(inner)) = (self.producer, Arc::get_mut(&mut router.inner)) {
            inner.producer = id;
        }
        router
    }
}

impl Router {
    /// The router of `migration`, its safe default over `slices` (the plan's `slices`) and the
    /// plan's broker names (`brokers.old.name`, `brokers.new.name`): what a producer uses. A
    /// document of another migration is refused ([`RouterError::OtherMigration`]) whoever offers
    /// it: [`Router::offer`], [`Router::follow_file`], [`Router::follow_http`].
    ///
    /// ```
    /// use queue_migrate_client::router::{Router, RouterError};
    /// use queue_migrate_client::routing::Side;
    ///
    /// let router = Router::for_migration("orders", 128, "rabbitmq", "nats");
    /// let route = router.route("order-0"); // no document yet: old, generation 0
    /// assert_eq!(route.target, Side::Old);
    /// let stamp = router.stamp(&route, "checkout", 1_764_460_800_123)?;
    /// assert_eq!(stamp.broker, "rabbitmq");
    /// # Ok::<(), queue_migrate_client::stamp::StampError>(())
    /// ```
    pub fn for_migration(
        migration: impl Into<String>,
        slices: u32,
        old: impl Into<String>,
        new: impl Into<String>,
    ) -> Router {
        Router::builder(migration)
            .slices(slices)
            .brokers(old, new)
            .build()
    }

    /// A builder of the router of `migration`, for a router without broker names (its
    /// [`Router::stamp`] fails until the first document names them) or to set the parts one
    /// by one.
    pub fn builder(migration: impl Into<String>) -> RouterBuilder {
        RouterBuilder {
            migration: migration.into(),
            slices: DEFAULT_SLICES,
            brokers: None,
            producer: None,
        }
    }

    /// A router with no document yet: everything to old, over [`DEFAULT_SLICES`].
    #[deprecated(
        since = "0.1.1",
        note = "names no migration, so it takes another migration's document: use Router::for_migration or Router::builder; removed in the next release"
    )]
    pub fn new() -> Router {
        Router::default()
    }

    /// A router whose safe default computes slices over `slices` (the plan's `slices`), so that the
    /// slice in a route stamp is meaningful before the first document.
    #[deprecated(
        since = "0.1.1",
        note = "names no migration, so it takes another migration's document: use Router::builder(migration).slices(n).build(); removed in the next release"
    )]
    pub fn with_default_slices(slices: u32) -> Router {
        Router::build(None, slices, None)
    }

    /// A router that also knows the brokers' names before the first document: the plan's
    /// `brokers.old.name` and `brokers.new.name`, which every routing document carries.
    #[deprecated(
        since = "0.1.1",
        note = "names no migration, so it takes another migration's document: use Router::for_migration(migration, slices, old, new); removed in the next release"
    )]
    pub fn for_brokers(slices: u32, old: impl Into<String>, new: impl Into<String>) -> Router {
        Router::build(
            None,
            slices,
            Some(BrokerNames {
                old: old.into(),
                new: new.into(),
            }),
        )
    }

    fn build(
        migration: Option<String>,
        slices: u32,
        default_brokers: Option<BrokerNames>,
    ) -> Router {
        Router {
            inner: Arc::new(Inner {
                hot: Hot::new(slices.max(1)),
                doc: ArcSwapOption::empty(),
                migration,
                default_slices: slices.max(1),
                names: AtomicU64::new(default_brokers.as_ref().map_or(0, |_| next_names_id())),
                default_brokers,
                producer: applied::default_producer(),
                write: Mutex::new(()),
                changed: watch::Sender::new(0),
            }),
        }
    }

    /// Where a message of aggregate `key` goes now. Lock-free, no allocation; never fails.
    #[inline]
    pub fn route(&self, key: &str) -> Route {
        let (generation, total, migrated) = self.inner.hot.read();
        Route::of(key, total, migrated, generation)
    }

    /// The migration this router follows: the name it was built with, else (a deprecated
    /// constructor) the first accepted document's; `None` before that.
    pub fn migration(&self) -> Option<String> {
        match &self.inner.migration {
            Some(name) => Some(name.clone()),
            None => self.inner.doc.load().as_ref().map(|d| d.migration.clone()),
        }
    }

    /// The current document, if one arrived.
    pub fn document(&self) -> Option<Arc<RoutingDocument>> {
        self.inner.doc.load_full()
    }

    /// The current generation (0 before any document).
    pub fn generation(&self) -> u64 {
        self.inner.doc.load().as_ref().map_or(0, |d| d.generation)
    }

    /// The id this router reports on the routing long-poll and in its metrics
    /// ([`RouterBuilder::producer`]).
    pub fn producer_id(&self) -> &str {
        &self.inner.producer
    }

    /// The router's metrics, Prometheus text: `queue_migrate_routing_applied_generation{migration,
    /// producer}`, the generation it applied (0 before the first document). Serve it on the
    /// producer's `/metrics` beside its own.
    pub fn metrics_text(&self) -> String {
        applied::metrics(
            self.migration().as_deref(),
            self.producer_id(),
            self.generation(),
        )
    }

    /// The sides consumers should read now (safe default: old only).
    pub fn consume(&self) -> Vec<Side> {
        match &*self.inner.doc.load() {
            Some(doc) => doc.consume.clone(),
            None => vec![Side::Old],
        }
    }

    /// The broker name of `side`: the current document's, or before any document the names given
    /// to [`Router::for_migration`] / [`RouterBuilder::brokers`]; `None` only for a router built
    /// without names that has no
    /// document yet.
    pub fn broker_name(&self, side: Side) -> Option<String> {
        let pick = |b: &BrokerNames| match side {
            Side::Old => b.old.clone(),
            Side::New => b.new.clone(),
        };
        match &*self.inner.doc.load() {
            Some(d) => Some(pick(&d.brokers)),
            None => self.inner.default_brokers.as_ref().map(pick),
        }
    }

    /// The route stamp of a message routed by `route` (from [`Router::route`]), published by
    /// `producer` at `at_ms`, naming the broker as [`Router::broker_name`] does: one label
    /// scheme from the first message on.
    ///
    /// # Errors
    /// [`StampError::Missing`] (`x-qm-broker`) when no broker name is known yet (a router built
    /// without broker names, before its first document); [`StampError::Invalid`] for
    /// a producer name outside the wire format.
    pub fn stamp(
        &self,
        route: &Route,
        producer: impl Into<String>,
        at_ms: Millis,
    ) -> Result<RouteStamp, StampError> {
        let broker = self
            .broker_name(route.target)
            .ok_or_else(|| StampError::Missing {
                field: HEADER_BROKER.to_string(),
            })?;
        RouteStamp::new(route, broker, producer, at_ms)
    }

    /// Route `key` and write its stamp into `headers` (a buffer reused across messages, made by
    /// [`StampHeaders::new`] with the producer's name): [`Router::route`] and
    /// [`Router::stamp`]'s headers in one call, with no allocation once the buffer has held the
    /// broker's name. The broker is named as [`Router::broker_name`] does.
    ///
    /// ```
    /// use queue_migrate_client::router::Router;
    /// use queue_migrate_client::stamp::StampHeaders;
    ///
    /// let router = Router::for_migration("orders", 128, "rabbitmq", "nats");
    /// let mut headers = StampHeaders::new("checkout")?; // once per producer task
    /// let route = router.stamp_into("order-0", 1_764_460_800_123, &mut headers)?;
    /// assert_eq!(headers.get("x-qm-broker"), Some("rabbitmq"));
    /// // publish(route.target, headers.pairs(), body)
    /// # let _ = route;
    /// # Ok::<(), queue_migrate_client::stamp::StampError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Router::stamp`]: no broker name known yet, or a document's broker name outside the
    /// wire format (the buffer keeps its previous stamp then).
    #[inline]
    pub fn stamp_into(
        &self,
        key: &str,
        at_ms: Millis,
        headers: &mut StampHeaders,
    ) -> Result<Route, StampError> {
        let route = self.route(key);
        // Acquire: the names of the document `route` read, or of a later one (the writer stores
        // them before it publishes the route's numbers).
        let names = self.inner.names.load(Ordering::Acquire);
        if !headers.holds_names(names) {
            self.hold_names(names, route.target, headers)?;
        }
        headers.set_held(&route, at_ms);
        Ok(route)
    }

    /// The first stamp into `headers`, or the first since the names changed: the names of the
    /// current document (else the plan's) into `headers`, as the names `id`.
    #[cold]
    #[inline(never)]
    fn hold_names(
        &self,
        id: u64,
        side: Side,
        headers: &mut StampHeaders,
    ) -> Result<(), StampError> {
        let doc = self.inner.doc.load();
        let names = match (&*doc, &self.inner.default_brokers) {
            (Some(d), _) => &d.brokers,
            (None, Some(names)) => names,
            (None, None) => {
                return Err(StampError::Missing {
                    field: HEADER_BROKER.to_string(),
                });
            }
        };
        headers.hold_names(id, &names.old, &names.new, side)
    }

    /// A receiver that sees the generation each time a document is accepted.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    /// Offer a document: it becomes current if it is coherent, names this router's migration
    /// (the one it was built with; for a deprecated constructor, the current document's), and is
    /// newer (or the first).
    ///
    /// # Errors
    /// [`RouterError::Invalid`] or [`RouterError::OtherMigration`]; the current document stays.
    pub fn offer(&self, doc: RoutingDocument) -> Result<Offer, RouterError> {
        check(&doc)?;
        let _writer = self
            .inner
            .write
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let current = self.inner.doc.load_full();
        let expected = match (&self.inner.migration, &current) {
            (Some(name), _) => Some(name.as_str()),
            (None, Some(cur)) => Some(cur.migration.as_str()),
            (None, None) => None,
        };
        if let Some(expected) = expected
            && expected != doc.migration
        {
            return Err(RouterError::OtherMigration {
                expected: expected.to_string(),
                got: doc.migration,
            });
        }
        if let Some(cur) = &current
            && doc.generation <= cur.generation
        {
            return Ok(Offer::NotNewer {
                current: cur.generation,
            });
        }
        if let Some(names) = self.inner.default_brokers.as_ref()
            && *names != doc.brokers
        {
            tracing::warn!(
                configured = ?names, document = ?doc.brokers,
                "the routing document names other brokers than this router was given: stamps and metrics follow the document from now on; give the plan's names to Router::for_migration"
            );
        }
        let previous = current.as_ref().map_or(0, |c| c.generation);
        let generation = doc.generation;
        let names_before = current
            .as_deref()
            .map(|c| &c.brokers)
            .or(self.inner.default_brokers.as_ref());
        let renamed = names_before != Some(&doc.brokers);
        let doc = Arc::new(doc);
        // Once `route` answers a generation, `document()` has it too, and stamps its names.
        self.inner.doc.store(Some(Arc::clone(&doc)));
        if renamed {
            self.inner.names.store(next_names_id(), Ordering::Release);
        }
        self.inner.hot.write(&doc);
        self.inner.changed.send_replace(generation);
        Ok(Offer::Accepted { previous })
    }

    /// Follow a routing file (the daemon's mirror, `routing.file` in the plan): read it now and
    /// whenever its modification time, size or inode changes, checking every `poll_interval`. A
    /// missing, unreadable or malformed file, or one for another migration, is reported once (a
    /// `tracing` warning and [`FollowerHandle::status`]) and the last good document is kept.
    ///
    /// # Errors
    /// [`RouterError::NoRuntime`] outside a tokio runtime; [`RouterError::OtherMigration`] when
    /// the file names another migration than this router's now (the router was pointed at the
    /// wrong file; read once, synchronously, before the follower starts; a missing or malformed
    /// file at start is only reported by the follower).
    pub fn follow_file(
        &self,
        path: impl Into<PathBuf>,
        poll_interval: Duration,
    ) -> Result<FollowerHandle, RouterError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| RouterError::NoRuntime)?;
        let path = path.into();
        if let (Some(expected), Some(got)) = (&self.inner.migration, file_migration(&path))
            && *expected != got
        {
            return Err(RouterError::OtherMigration {
                expected: expected.clone(),
                got,
            });
        }
        let (status_tx, status) = watch::channel(FollowStatus::default());
        let router = self.clone();
        let interval = poll_interval.max(Duration::from_millis(10));
        let task = runtime.spawn(async move {
            let mut seen: Option<FileSignature> = None;
            loop {
                match read_file(&path, &mut seen).await {
                    Ok(None) => {}
                    Ok(Some(doc)) => {
                        report(&router, &status_tx, &path.display().to_string(), doc);
                    }
                    Err(e) => fail(&status_tx, &e),
                }
                tokio::time::sleep(interval).await;
            }
        });
        Ok(FollowerHandle { task, status })
    }

    /// Follow the daemon: long-poll `GET {base_url}/v1/migrations/{migration}/routing?wait=30s
    /// &producer=ID&applied=GENERATION` with `If-None-Match: "<generation>"` (and
    /// `Authorization: Bearer <token>` if given): the daemon learns who follows and which
    /// generation each applied ([`Router::producer_id`]). A 200
    /// brings a document (accepted if newer), a 304 means no change; a failure keeps the last good
    /// document and retries after 1 s, doubling up to 30 s. See [`HttpFollow`] to tune.
    ///
    /// The requests go through the proxy the environment names (`HTTP_PROXY` for an `http://`
    /// daemon, `HTTPS_PROXY` for an `https://` one, `ALL_PROXY`, minus the hosts `NO_PROXY`
    /// lists), read once when the follower starts; [`HttpFollow::proxy`] chooses otherwise.
    ///
    /// # Errors
    /// [`RouterError::OtherMigration`] when `migration` is not the router's; the URL cannot be
    /// a base, no tokio runtime, or the HTTP client cannot be built (the platform's TLS
    /// verifier, a proxy URL that is not one).
    pub fn follow_http(
        &self,
        base_url: &str,
        migration: &str,
        token: Option<String>,
    ) -> Result<FollowerHandle, RouterError> {
        self.follow_http_tuned(base_url, migration, token, HttpFollow::default())
    }

    /// [`Router::follow_http`] with explicit timings.
    ///
    /// # Errors
    /// As [`Router::follow_http`].
    pub fn follow_http_tuned(
        &self,
        base_url: &str,
        migration: &str,
        token: Option<String>,
        options: HttpFollow,
    ) -> Result<FollowerHandle, RouterError> {
        if let Some(expected) = &self.inner.migration
            && expected != migration
        {
            return Err(RouterError::OtherMigration {
                expected: expected.clone(),
                got: migration.to_string(),
            });
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| RouterError::NoRuntime)?;
        let mut url = routing_url(base_url, migration, options.wait)?;
        url.query_pairs_mut()
            .append_pair("producer", self.producer_id());
        let https = url.scheme() == "https";
        let client =
            http::Client::new(USER_AGENT, &options.proxy, https).map_err(RouterError::Client)?;
        let (status_tx, status) = watch::channel(FollowStatus::default());
        let router = self.clone();
        let migration = migration.to_string();
        let task = runtime.spawn(async move {
            let poll = Poll {
                client,
                url,
                token,
                migration,
                timeout: options.wait + options.request_margin,
            };
            let mut backoff = options.backoff_initial;
            loop {
                let started = Instant::now();
                let next = match poll.once(router.document().as_deref()).await {
                    Ok(Some(doc)) => match report(&router, &status_tx, poll.url.as_str(), doc) {
                        // Something new: ask again at once (the next answer waits for a change).
                        Reported::Accepted => Next::Now,
                        Reported::NotNewer => Next::Spaced,
                        Reported::Rejected => Next::Backoff,
                    },
                    Ok(None) => {
                        recovered(&status_tx);
                        Next::Spaced
                    }
                    Err(e) => {
                        fail(&status_tx, &e);
                        Next::Backoff
                    }
                };
                match next {
                    Next::Now => backoff = options.backoff_initial,
                    Next::Spaced => {
                        backoff = options.backoff_initial;
                        // A server or proxy that does not hold the request must not make us spin.
                        let elapsed = started.elapsed();
                        if elapsed < options.min_interval {
                            tokio::time::sleep(options.min_interval - elapsed).await;
                        }
                    }
                    Next::Backoff => {
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(options.backoff_max);
                    }
                }
            }
        });
        Ok(FollowerHandle { task, status })
    }
}

/// Timings of the HTTP follower.
#[derive(Debug, Clone)]
pub struct HttpFollow {
    /// How long the daemon may hold a request (`?wait=`); default 30 s.
    pub wait: Duration,
    /// Added to `wait` for the request's own timeout; default 15 s.
    pub request_margin: Duration,
    /// First delay after a failure; default 1 s.
    pub backoff_initial: Duration,
    /// Largest delay after repeated failures; default 30 s.
    pub backoff_max: Duration,
    /// Least time between two requests that brought nothing new (guards against a server or
    /// proxy that answers at once instead of holding); default 1 s.
    pub min_interval: Duration,
    /// The proxy; default [`ProxyChoice::Environment`]: `HTTP_PROXY` / `HTTPS_PROXY` /
    /// `ALL_PROXY` and `NO_PROXY` as they are when the follower starts.
    pub proxy: ProxyChoice,
}

impl Default for HttpFollow {
    fn default() -> Self {
        HttpFollow {
            wait: Duration::from_secs(30),
            request_margin: Duration::from_secs(15),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(30),
            min_interval: Duration::from_secs(1),
            proxy: ProxyChoice::Environment,
        }
    }
}

/// A running follower; dropping it (or [`FollowerHandle::stop`]) stops the task.
#[derive(Debug)]
pub struct FollowerHandle {
    task: JoinHandle<()>,
    status: watch::Receiver<FollowStatus>,
}

impl FollowerHandle {
    /// How the follower is doing now.
    pub fn status(&self) -> FollowStatus {
        self.status.borrow().clone()
    }

    /// A receiver of status changes.
    pub fn watch_status(&self) -> watch::Receiver<FollowStatus> {
        self.status.clone()
    }

    /// Stop the follower (the same as dropping the handle).
    pub fn stop(self) {}
}

impl Drop for FollowerHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn check(doc: &RoutingDocument) -> Result<(), RouterError> {
    if doc.migration.is_empty() {
        return Err(RouterError::Invalid("no migration name".into()));
    }
    if doc.slices_total == 0 {
        return Err(RouterError::Invalid("slices_total is 0".into()));
    }
    if doc.slices_migrated > doc.slices_total {
        return Err(RouterError::Invalid(format!(
            "slices_migrated {} > slices_total {}",
            doc.slices_migrated, doc.slices_total
        )));
    }
    if doc.consume.is_empty() {
        return Err(RouterError::Invalid("consume names no side".into()));
    }
    Ok(())
}

/// What happened to a document a follower read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reported {
    Accepted,
    NotNewer,
    Rejected,
}

/// When the HTTP follower asks again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    Now,
    Spaced,
    Backoff,
}

/// Offer `doc` from `source` and record the outcome in the follower's status.
fn report(
    router: &Router,
    status: &watch::Sender<FollowStatus>,
    source: &str,
    doc: RoutingDocument,
) -> Reported {
    match router.offer(doc) {
        Ok(Offer::Accepted { previous }) => {
            let generation = router.generation();
            tracing::info!(source, previous, generation, "routing document accepted");
            status.send_modify(|s| {
                s.accepted += 1;
                s.consecutive_failures = 0;
                s.last_error = None;
            });
            Reported::Accepted
        }
        Ok(Offer::NotNewer { current }) => {
            tracing::debug!(
                source,
                current,
                "routing document not newer; kept the current one"
            );
            recovered(status);
            Reported::NotNewer
        }
        Err(e) => {
            fail(status, &e);
            Reported::Rejected
        }
    }
}

fn recovered(status: &watch::Sender<FollowStatus>) {
    status.send_if_modified(|s| {
        let changed = s.consecutive_failures > 0;
        if changed {
            tracing::info!("routing source reachable again");
        }
        s.consecutive_failures = 0;
        s.last_error = None;
        changed
    });
}

fn fail(status: &watch::Sender<FollowStatus>, e: &RouterError) {
    let message = e.to_string();
    status.send_modify(|s| {
        // Warn once per distinct failure; the rest at debug (a down daemon is retried every 30 s).
        if s.last_error.as_deref() != Some(message.as_str()) {
            tracing::warn!(error = %message, "routing source failed; keeping the last good document");
        } else {
            tracing::debug!(error = %message, "routing source still failing");
        }
        s.consecutive_failures = s.consecutive_failures.saturating_add(1);
        s.last_error = Some(message.clone());
    });
}

/// What identifies one version of the routing file without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileSignature {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

/// The migration the routing file at `path` names now, if it can be read as a document (read
/// through the cap, synchronously: a file of a few hundred bytes, once, when a follower starts).
fn file_migration(path: &std::path::Path) -> Option<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_DOCUMENT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return None;
    }
    serde_json::from_slice::<RoutingDocument>(&bytes)
        .ok()
        .map(|d| d.migration)
}

/// Read the file if it changed since `seen`: `Ok(None)` when unchanged.
async fn read_file(
    path: &std::path::Path,
    seen: &mut Option<FileSignature>,
) -> Result<Option<RoutingDocument>, RouterError> {
    let io = |e: std::io::Error| RouterError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let meta = tokio::fs::metadata(path).await.map_err(|e| {
        // Re-read as soon as it comes back, whatever its signature.
        *seen = None;
        io(e)
    })?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    let signature = FileSignature {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode,
    };
    if seen.as_ref() == Some(&signature) {
        return Ok(None);
    }
    // Recorded before parsing: a malformed version is reported once, not at every poll.
    *seen = Some(signature);
    if meta.len() > MAX_DOCUMENT_BYTES as u64 {
        return Err(RouterError::Malformed {
            source_name: path.display().to_string(),
            reason: format!("larger than {MAX_DOCUMENT_BYTES} bytes"),
        });
    }
    // Read through the cap too: the file may have grown since, or be a device.
    let mut bytes = Vec::new();
    {
        use tokio::io::AsyncReadExt;
        let file = tokio::fs::File::open(path).await.map_err(io)?;
        file.take(MAX_DOCUMENT_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .await
            .map_err(io)?;
    }
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(RouterError::Malformed {
            source_name: path.display().to_string(),
            reason: format!("larger than {MAX_DOCUMENT_BYTES} bytes"),
        });
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| RouterError::Malformed {
            source_name: path.display().to_string(),
            reason: e.to_string(),
        })
}

/// `{base}/v1/migrations/{migration}/routing?wait=<secs>s`, the name percent-encoded.
fn routing_url(base: &str, migration: &str, wait: Duration) -> Result<Url, RouterError> {
    let bad = |reason: &str| RouterError::Url {
        url: crate::redact::url(base),
        reason: crate::redact::text(reason),
    };
    if migration.is_empty() {
        return Err(bad("the migration name is empty"));
    }
    let mut url = Url::parse(base).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("expected an http:// or https:// URL"));
    }
    url.path_segments_mut()
        .map_err(|()| bad("cannot be a base URL"))?
        .pop_if_empty()
        .extend(["v1", "migrations", migration, "routing"]);
    url.set_query(None);
    url.query_pairs_mut()
        .append_pair("wait", &format!("{}s", wait.as_secs().max(1)));
    Ok(url)
}

struct Poll {
    client: http::Client,
    url: Url,
    token: Option<String>,
    migration: String,
    timeout: Duration,
}

impl Poll {
    /// One long-poll: `Ok(Some(doc))` on 200, `Ok(None)` on 304.
    async fn once(
        &self,
        current: Option<&RoutingDocument>,
    ) -> Result<Option<RoutingDocument>, RouterError> {
        // As shown in errors and logs: credentials in the daemon's URL masked.
        let url = &crate::redact::url(self.url.as_str());
        let validator = current.map(|doc| format!("\"{}\"", doc.generation));
        // The generation applied, so that the daemon knows how far this producer follows.
        let mut target = self.url.clone();
        target.query_pairs_mut().append_pair(
            "applied",
            &current.map_or(0, |doc| doc.generation).to_string(),
        );
        let bearer = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Accept", "application/json")];
        headers.extend(validator.as_deref().map(|v| ("If-None-Match", v)));
        headers.extend(bearer.as_deref().map(|v| ("Authorization", v)));
        let answer = self
            .client
            .get(&target, &headers, self.timeout, MAX_DOCUMENT_BYTES)
            .await
            .map_err(|failure| match failure {
                http::Failure::Unreachable(reason) => RouterError::Unreachable {
                    url: url.to_string(),
                    reason: crate::redact::text(&reason),
                },
                http::Failure::TooLarge => RouterError::Malformed {
                    source_name: url.to_string(),
                    reason: format!("larger than {MAX_DOCUMENT_BYTES} bytes"),
                },
            })?;
        match answer.status {
            304 => return Ok(None),
            200 => {}
            status => {
                return Err(RouterError::Status {
                    url: url.to_string(),
                    status,
                });
            }
        }
        let (etag, body) = (answer.etag, answer.body);
        let doc: RoutingDocument =
            serde_json::from_slice(&body).map_err(|e| RouterError::Malformed {
                source_name: url.to_string(),
                reason: e.to_string(),
            })?;
        if doc.migration != self.migration {
            return Err(RouterError::OtherMigration {
                expected: self.migration.clone(),
                got: doc.migration,
            });
        }
        if let Some(tag) = etag {
            let expected = format!("\"{}\"", doc.generation);
            if tag.trim_start_matches("W/") != expected {
                tracing::debug!(etag = %tag, generation = doc.generation, "ETag differs from the document's generation; the document wins");
            }
        }
        Ok(Some(doc))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::hot::filling;
    use super::*;
    use crate::slice::slice_of;

    fn doc(generation: u64, migrated: u32) -> RoutingDocument {
        crate::routing::sample_document(generation, migrated)
    }

    /// Regression: the size was checked on the file's metadata only, then the file read whole: a
    /// device (`/dev/zero`, length 0) or a file that grew meanwhile was read without end.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_routing_file_that_never_ends_is_read_up_to_the_cap() {
        let mut seen = None;
        let err = read_file(std::path::Path::new("/dev/zero"), &mut seen)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("larger than"), "{err}");
    }

    #[test]
    fn safe_default_is_all_old_generation_zero() {
        let r = Router::builder("orders").build();
        for key in ["order-0", "order-1", "x"] {
            let route = r.route(key);
            assert_eq!(route.target, Side::Old);
            assert_eq!(route.generation, 0);
            assert_eq!(route.slice, slice_of(key, 128));
        }
        assert_eq!(r.consume(), vec![Side::Old]);
        assert_eq!(
            Router::builder("orders")
                .slices(7)
                .build()
                .route("order-0")
                .slice,
            0
        );
        assert!(r.document().is_none());
    }

    /// The metrics fallback `broker_name(..).unwrap_or_else(|| side name)` labelled the first
    /// messages `broker="old"` and later ones `broker="rabbitmq"`: a router given the plan's
    /// names stamps the same broker label before and after the first document.
    #[test]
    fn broker_label_is_the_same_before_and_after_the_first_document() {
        let router = Router::for_migration("orders", 128, "rabbitmq", "nats");
        let before = router
            .stamp(&router.route("order-0"), "checkout", 1)
            .unwrap();
        assert_eq!((before.broker.as_str(), before.generation), ("rabbitmq", 0));
        router.offer(doc(7, 0)).unwrap();
        let after = router
            .stamp(&router.route("order-0"), "checkout", 2)
            .unwrap();
        assert_eq!((after.broker.as_str(), after.generation), ("rabbitmq", 7));
        router.offer(doc(8, 128)).unwrap();
        let moved = router
            .stamp(&router.route("order-0"), "checkout", 3)
            .unwrap();
        assert_eq!(moved.broker, "nats");
        // Without names and without a document there is no label to give: an error, not "old".
        let unnamed = Router::builder("orders").slices(128).build();
        assert!(matches!(
            unnamed.stamp(&unnamed.route("order-0"), "checkout", 1),
            Err(StampError::Missing { ref field }) if field == HEADER_BROKER
        ));
    }

    #[test]
    fn only_newer_documents_replace_the_current_one() {
        let r = Router::builder("orders").build();
        let mut rx = r.subscribe();
        assert_eq!(r.offer(doc(3, 9)).unwrap(), Offer::Accepted { previous: 0 });
        assert!(rx.has_changed().unwrap());
        assert_eq!(*rx.borrow_and_update(), 3);
        // order-0 is slice 8 of 128
        assert_eq!(r.route("order-0").target, Side::New);
        assert_eq!(r.offer(doc(3, 0)).unwrap(), Offer::NotNewer { current: 3 });
        assert_eq!(r.offer(doc(2, 0)).unwrap(), Offer::NotNewer { current: 3 });
        assert!(!rx.has_changed().unwrap());
        assert_eq!(r.route("order-0").target, Side::New);
        assert_eq!(r.offer(doc(4, 0)).unwrap(), Offer::Accepted { previous: 3 });
        assert_eq!(
            r.route("order-0"),
            Route {
                target: Side::Old,
                slice: 8,
                generation: 4
            }
        );
    }

    #[test]
    fn incoherent_or_foreign_documents_are_rejected() {
        let r = Router::builder("orders").build();
        r.offer(doc(1, 0)).unwrap();
        let mut bad = doc(2, 129);
        assert!(matches!(r.offer(bad.clone()), Err(RouterError::Invalid(_))));
        bad.slices_migrated = 0;
        bad.consume.clear();
        assert!(matches!(r.offer(bad), Err(RouterError::Invalid(_))));
        let mut other = doc(5, 0);
        other.migration = "payments".into();
        assert!(matches!(
            r.offer(other),
            Err(RouterError::OtherMigration { .. })
        ));
        assert_eq!(r.generation(), 1);
    }

    /// Regression (issue 56): `Router::for_brokers` named no migration, so an `orders` router
    /// offered the `payments` document first took it, routed over its 16 slices and stamped
    /// `nats`. A router now names its migration and refuses another's before its first document.
    #[test]
    fn an_orders_router_refuses_the_payments_document_before_its_first() {
        let router = Router::for_migration("orders", 128, "rabbitmq", "nats");
        let mut payments = doc(3, 16);
        payments.migration = "payments".into();
        payments.slices_total = 16;
        let err = router.offer(payments).unwrap_err();
        assert!(
            matches!(&err, RouterError::OtherMigration { expected, got }
                if expected == "orders" && got == "payments"),
            "{err}"
        );
        assert!(err.to_string().contains("\"payments\""), "{err}");
        assert_eq!(router.generation(), 0);
        let route = router.route("order-0");
        assert_eq!((route.target, route.slice), (Side::Old, 8));
        let stamp = router.stamp(&route, "checkout", 1).unwrap();
        assert_eq!(stamp.broker, "rabbitmq");
        assert_eq!(router.migration().as_deref(), Some("orders"));
        assert_eq!(
            router.offer(doc(1, 0)).unwrap(),
            Offer::Accepted { previous: 0 }
        );
    }

    /// Regression (issue 56): `follow_file` took no migration name and accepted the `payments`
    /// file for an `orders` router. Pointed at another migration's file it is now an error at
    /// start; a file rewritten for another migration later is refused in the status.
    #[tokio::test]
    async fn following_another_migrations_file_is_an_error_the_caller_sees() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("payments.routing.json");
        let mut payments = doc(3, 128);
        payments.migration = "payments".into();
        std::fs::write(&path, serde_json::to_vec(&payments).unwrap()).unwrap();
        let router = Router::for_migration("orders", 16, "rabbitmq", "nats");
        let err = router
            .follow_file(&path, Duration::from_millis(10))
            .unwrap_err();
        assert!(matches!(err, RouterError::OtherMigration { .. }), "{err}");
        assert_eq!(router.route("order-0").target, Side::Old);
        // The right file, later rewritten for another migration: refused, said, routes kept.
        std::fs::write(&path, serde_json::to_vec(&doc(4, 128)).unwrap()).unwrap();
        let handle = router
            .follow_file(&path, Duration::from_millis(10))
            .unwrap();
        let mut status = handle.watch_status();
        let mut changed = router.subscribe();
        changed.wait_for(|g| *g == 4).await.unwrap();
        payments.generation = 9;
        std::fs::write(&path, serde_json::to_vec(&payments).unwrap()).unwrap();
        let failing = status
            .wait_for(|s| s.last_error.is_some())
            .await
            .unwrap()
            .clone();
        let said = failing.last_error.unwrap();
        assert!(said.contains("payments"), "{said}");
        assert_eq!(router.generation(), 4);
        assert_eq!(router.route("order-0").target, Side::New);
        // follow_http of another name than the router's is refused too.
        let other = router.follow_http("http://127.0.0.1:9", "payments", None);
        assert!(matches!(other, Err(RouterError::OtherMigration { .. })));
    }

    /// The constructors kept one release: they name no migration and keep the first document's.
    #[test]
    #[allow(deprecated)]
    fn the_deprecated_constructors_keep_the_first_documents_migration() {
        for r in [
            Router::new(),
            Router::with_default_slices(16),
            Router::for_brokers(16, "rabbitmq", "nats"),
        ] {
            assert_eq!(r.migration(), None);
            r.offer(doc(1, 0)).unwrap();
            assert_eq!(r.migration().as_deref(), Some("orders"));
            let mut other = doc(2, 0);
            other.migration = "payments".into();
            assert!(matches!(
                r.offer(other),
                Err(RouterError::OtherMigration { .. })
            ));
        }
    }

    #[test]
    fn stamp_into_writes_the_headers_stamp_writes() {
        let router = Router::for_migration("orders", 128, "rabbitmq", "nats");
        let mut headers = StampHeaders::new("checkout").unwrap();
        for (generation, migrated) in [(0, 0), (7, 0), (8, 128), (9, 64)] {
            if generation > 0 {
                router.offer(doc(generation, migrated)).unwrap();
            }
            for key in ["order-0", "order-1", "order-2", ""] {
                let route = router.stamp_into(key, 42, &mut headers).unwrap();
                assert_eq!(route, router.route(key));
                let stamp = router.stamp(&route, "checkout", 42).unwrap();
                assert_eq!(
                    headers.to_stamp().unwrap(),
                    stamp,
                    "{key:?} at {generation}"
                );
            }
        }
        let unnamed = Router::builder("orders").build();
        assert!(matches!(
            unnamed.stamp_into("order-0", 1, &mut headers),
            Err(StampError::Missing { .. })
        ));
    }

    /// `stamp_into` reads the names only when the router's names changed since the buffer held
    /// them: a document naming other brokers, another router's buffer, a name outside the wire
    /// format each still give the stamp `stamp` gives.
    #[test]
    fn stamp_into_follows_the_names_whoever_held_the_buffer_last() {
        let orders = Router::for_migration("orders", 128, "rabbitmq", "nats");
        let other = Router::for_migration("orders", 128, "kafka", "redis");
        let mut headers = StampHeaders::new("checkout").unwrap();
        let check = |router: &Router, headers: &mut StampHeaders, key: &str| {
            let route = router.stamp_into(key, 42, headers).unwrap();
            let stamp = router.stamp(&route, "checkout", 42).unwrap();
            assert_eq!(headers.to_stamp().unwrap(), stamp, "{key:?}");
        };
        for key in ["order-0", "order-1", "order-2", "order-3"] {
            check(&orders, &mut headers, key);
            check(&other, &mut headers, key);
        }
        let mut renamed = doc(3, 64);
        renamed.brokers.old = "rabbitmq-eu".into();
        renamed.brokers.new = "nats-eu".into();
        orders.offer(renamed).unwrap();
        for key in ["order-0", "order-1", "order-2", "order-3"] {
            check(&orders, &mut headers, key);
        }
        // A name outside the wire format: the stamp of its side fails and keeps the last one.
        let mut bad = doc(4, 64);
        bad.brokers.new = "has space".into();
        orders.offer(bad).unwrap();
        let before = headers.to_stamp().unwrap();
        let new_key = (0..100)
            .map(|i| format!("order-{i}"))
            .find(|k| orders.route(k).target == Side::New)
            .unwrap();
        assert!(orders.stamp_into(&new_key, 43, &mut headers).is_err());
        assert_eq!(headers.to_stamp().unwrap(), before);
        let old_key = (0..100)
            .map(|i| format!("order-{i}"))
            .find(|k| orders.route(k).target == Side::Old)
            .unwrap();
        check(&orders, &mut headers, &old_key);
        assert!(orders.stamp_into(&new_key, 43, &mut headers).is_err());
    }

    #[test]
    fn routing_url_is_built_segment_by_segment() {
        let wait = Duration::from_secs(30);
        assert_eq!(
            routing_url("http://127.0.0.1:8080", "orders", wait)
                .unwrap()
                .as_str(),
            "http://127.0.0.1:8080/v1/migrations/orders/routing?wait=30s"
        );
        assert_eq!(
            routing_url("https://qm.internal/api/", "a b/c", wait)
                .unwrap()
                .as_str(),
            "https://qm.internal/api/v1/migrations/a%20b%2Fc/routing?wait=30s"
        );
        assert!(routing_url("mailto:x@y", "orders", wait).is_err());
        assert!(routing_url("not a url", "orders", wait).is_err());
        assert!(routing_url("http://h", "", wait).is_err());
    }

    #[test]
    fn readers_see_whole_documents_while_a_writer_updates() {
        let r = Router::builder("orders").build();
        r.offer(doc(1, 0)).unwrap();
        std::thread::scope(|s| {
            for _ in 0..4 {
                let r = r.clone();
                s.spawn(move || {
                    let mut last = 0;
                    for i in 0..20_000 {
                        let route = r.route(&format!("k{}", i % 97));
                        assert!(route.generation >= last, "generation went back");
                        last = route.generation;
                    }
                });
            }
            for g in 2..2_000 {
                r.offer(doc(g, (g % 129) as u32)).unwrap();
            }
        });
        assert_eq!(r.generation(), 1_999);
    }

    #[test]
    fn every_route_is_the_route_of_one_whole_document_under_swaps() {
        // doc(g, g % 129): a torn read (one document's generation, another's slices_migrated)
        // would disagree with doc(generation).route(key).
        let r = Router::builder("orders").build();
        r.offer(doc(1, 1)).unwrap();
        std::thread::scope(|s| {
            for t in 0..2 {
                let r = r.clone();
                s.spawn(move || {
                    for i in 0..50_000 {
                        let key = format!("k{}", (i * 7 + t) % 211);
                        let route = r.route(&key);
                        let expected = doc(route.generation, (route.generation % 129) as u32);
                        assert_eq!(route, expected.route(&key), "torn route for {key}");
                    }
                });
            }
            for g in 2..5_000 {
                r.offer(doc(g, (g % 129) as u32)).unwrap();
            }
        });
    }

    #[test]
    fn a_writer_stopped_while_filling_a_slot_does_not_stop_readers() {
        let r = Router::builder("orders").build();
        assert_eq!(r.inner.hot.read(), (0, 128, 0));
        r.offer(doc(5, 9)).unwrap();
        assert_eq!(r.inner.hot.read(), (5, 128, 9));
        // A writer stopped between its two stores of the next slot's `seq`, with half its words
        // stored: readers are still sent to the slot of document 5.
        let hot = &r.inner.hot;
        let next = hot.current.load(Ordering::Relaxed) + 1;
        let slot = &hot.slots[(next & 1) as usize];
        slot.seq.store(filling(next), Ordering::Relaxed);
        slot.generation.store(6, Ordering::Relaxed);
        assert_eq!(r.route("order-0"), doc(5, 9).route("order-0"));
        assert_eq!(r.route("order-0").target, Side::New);
    }

    #[test]
    fn a_filled_slot_is_not_read_before_it_is_published() {
        let r = Router::builder("orders").build();
        r.offer(doc(5, 9)).unwrap();
        let hot = &r.inner.hot;
        let before = hot.current.load(Ordering::Relaxed);
        // A writer stopped between filling the next slot and publishing it.
        let number = hot.fill(&doc(6, 10));
        assert_eq!(number, before + 1);
        assert_eq!(
            hot.current.load(Ordering::Relaxed),
            before,
            "published by fill"
        );
        assert_ne!(
            number & 1,
            before & 1,
            "filled the slot readers are sent to"
        );
        assert_eq!(hot.try_read(), Some((5, 128, 9)));
        hot.publish(number);
        assert_eq!(hot.try_read(), Some((6, 128, 10)));
    }

    #[test]
    fn a_slot_refilled_under_a_slow_reader_is_not_read() {
        let r = Router::builder("orders").build();
        r.offer(doc(5, 9)).unwrap();
        let hot = &r.inner.hot;
        let number = hot.current.load(Ordering::Relaxed);
        // The slot `current` names is being filled again (a reader late by two documents would
        // find it so): the attempt is refused rather than answering a mix.
        hot.slots[(number & 1) as usize]
            .seq
            .store(filling(number + 2), Ordering::Relaxed);
        assert_eq!(hot.try_read(), None);
        // Once that fill is done and named current, reads answer it.
        r.offer(doc(6, 10)).unwrap();
        let refilled = hot.fill(&doc(7, 11));
        assert_eq!(
            refilled,
            number + 2,
            "the slot named before is the one refilled"
        );
        hot.publish(refilled);
        assert_eq!(hot.try_read(), Some((7, 128, 11)));
    }
}

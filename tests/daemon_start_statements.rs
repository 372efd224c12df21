//! How many SQL statements a starting daemon spends on its fleet: one read of every migration,
//! whatever the fleet's size, not one statement per migration (with 1,000
//! migrations the start answered on its listener in 0.15-0.22 s against 0.24-0.34 s with one
//! statement per migration).
//! The statements are sqlx's own `sqlx::query` events, counted by a global tracing subscriber;
//! this file holds only the two tests below (one per backend, run one at a time) so that no other
//! test's statements are counted. SQLite always, PostgreSQL in a test of its own, ignored unless asked for (`--include-ignored` with
//! `QM_TEST_POSTGRES_URL` set; `scripts/services.sh start postgres`).

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use common::{MapResolve, Postgres, T0, controller, daemon_config, local_plan_named};
use queue_migrate::controller::Actor;
use queue_migrate::daemon::Shared;
use queue_migrate::indicators::fetch::Fetcher;
use queue_migrate::store::any::{self, AnyStore};
use queue_migrate::store::traits::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Every statement sqlx ran since the last [`Statements::take`], by its summary (first words).
#[derive(Default)]
struct Statements {
    seen: Mutex<Vec<String>>,
    spans: AtomicU64,
}

impl Statements {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

struct Summary(String);

impl Visit for Summary {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "summary" {
            self.0 = value.to_string();
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "summary" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for &'static Statements {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == "sqlx::query"
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(self.spans.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if event.metadata().target() == "sqlx::query" {
            let mut summary = Summary(String::new());
            event.record(&mut summary);
            self.seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(summary.0);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn resolve() -> Arc<MapResolve> {
    Arc::new(MapResolve(HashMap::from([
        ("QM_PROM_URL".to_string(), "http://127.0.0.1:9".to_string()),
        (
            "QM_SCRAPE_URL".to_string(),
            "http://127.0.0.1:9/metrics".to_string(),
        ),
    ])))
}

/// Migrations `from..to` of plans/local.yaml, initialised in `store`.
async fn init(store: &AnyStore, dir: &Path, resolve: &MapResolve, from: usize, to: usize) {
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let c = controller(store, &fetcher, resolve);
    let actor = Actor {
        name: "test".into(),
        reason: None,
    };
    for i in from..to {
        let path = local_plan_named(dir, &format!("m{i:03}"));
        c.init(&path, &actor, T0 * 1000).await.unwrap();
    }
}

/// The statements of a daemon's start on `store` (its first watch, before its listener
/// answers), but a new connection's setup (sqlx's `PRAGMA`s on SQLite: a pooled connection
/// goes back to the pool through a spawned task, so the next statement may open another one);
/// every migration is in its hub afterwards.
async fn start(store: &AnyStore, resolve: Arc<MapResolve>, statements: &Statements) -> Vec<String> {
    let config = daemon_config(Arc::new(AtomicI64::new(T0 * 1000)));
    let shared = Shared::new(store.clone(), config, resolve).unwrap();
    statements.take();
    shared.watch_once().await;
    let mut ran = statements.take();
    ran.retain(|s| !s.starts_with("PRAGMA"));
    for record in store.list().await.unwrap() {
        assert_eq!(
            shared.hub.generation(&record.name),
            Some(u64::try_from(record.generation).unwrap()),
            "{} in the hub at its generation",
            record.name
        );
    }
    ran
}

/// A fleet of 3, then the same store with 40: the start runs the same statements for either.
async fn statements_of_a_start_do_not_grow_with_the_fleet(
    url: &str,
    dir: &Path,
    statements: &Statements,
) {
    let store = any::open(url).await.unwrap();
    let resolve = resolve();
    init(&store, dir, &resolve, 0, 3).await;
    let small = start(&store, resolve.clone(), statements).await;
    init(&store, dir, &resolve, 3, 40).await;
    let large = start(&store, resolve, statements).await;
    assert!(!small.is_empty(), "no statement counted: is sqlx logging?");
    assert_eq!(
        large,
        small,
        "{}: the statements of a start with 40 migrations, and with 3",
        store.backend()
    );
}

/// The statement recorder: the one global subscriber of this test binary, and a lock so that the
/// two tests (one per backend) never record each other's statements.
fn recorder() -> (&'static Statements, std::sync::MutexGuard<'static, ()>) {
    static RECORDER: std::sync::OnceLock<&'static Statements> = std::sync::OnceLock::new();
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let statements = *RECORDER.get_or_init(|| {
        let statements: &'static Statements = Box::leak(Box::default());
        tracing::subscriber::set_global_default(statements).unwrap();
        statements
    });
    statements.take();
    (statements, guard)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_starting_daemon_reads_its_fleet_in_statements_that_do_not_grow_with_it() {
    let (statements, _one_at_a_time) = recorder();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = dir.path().join("state.db");
    runtime().block_on(statements_of_a_start_do_not_grow_with_the_fleet(
        sqlite.to_str().unwrap(),
        dir.path(),
        statements,
    ));
}

#[test]
#[ignore = "needs QM_TEST_POSTGRES_URL (scripts/services.sh start postgres)"]
fn a_starting_daemon_reads_its_fleet_in_statements_that_do_not_grow_with_it_on_postgres() {
    let (statements, _one_at_a_time) = recorder();
    let db = Postgres::fresh("start_statements");
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(statements_of_a_start_do_not_grow_with_the_fleet(
        &db.url,
        dir.path(),
        statements,
    ));
    db.drop_database();
}

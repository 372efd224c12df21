//! A command that commits and publishes while a starting daemon reads its fleet (between the
//! watcher's one read of every record and its loads of them): the daemon never publishes the
//! older read over the command's routing, and its next watch brings its hub to the command's
//! generation. A store that runs the command inside `list`, after its read, makes the race
//! happen every time.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use common::{Indicators, MapResolve, T0, controller, daemon_config, local_plan_named};
use queue_migrate::controller::Actor;
use queue_migrate::daemon::Shared;
use queue_migrate::dlq::disposition::Disposition;
use queue_migrate::indicators::fetch::Fetcher;
use queue_migrate::machine::Command;
use queue_migrate::store::any::AnyStore;
use queue_migrate::store::sqlite::SqliteStore;
use queue_migrate::store::{
    Commit, Fleet, GateKey, GateRecord, JournalEntry, Lease, MigrationRecord, NewMigration, Result,
    RoundRecord, Store, StoredPoint, StoredSeries,
};
use serde_json::json;

type Race = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The store of the world, but its next `list` runs `race` after reading (and returns that read).
#[derive(Clone)]
struct Racing {
    inner: AnyStore,
    race: Arc<Mutex<Option<Race>>>,
}

impl Store for Racing {
    async fn list(&self) -> Result<Vec<MigrationRecord>> {
        let read = self.inner.list().await;
        let race = self
            .race
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(race) = race {
            race.await;
        }
        read
    }
    fn create(&self, new: &NewMigration) -> impl Future<Output = Result<MigrationRecord>> + Send {
        self.inner.create(new)
    }
    fn get(&self, name: &str) -> impl Future<Output = Result<MigrationRecord>> + Send {
        self.inner.get(name)
    }
    fn fleet(&self) -> impl Future<Output = Result<Fleet>> + Send {
        self.inner.fleet()
    }
    fn commit(
        &self,
        name: &str,
        commit: &Commit,
    ) -> impl Future<Output = Result<MigrationRecord>> + Send {
        self.inner.commit(name, commit)
    }
    fn journal(&self, name: &str) -> impl Future<Output = Result<Vec<JournalEntry>>> + Send {
        self.inner.journal(name)
    }
    fn record_rounds(&self, rounds: &[RoundRecord]) -> impl Future<Output = Result<()>> + Send {
        self.inner.record_rounds(rounds)
    }
    fn record_evaluations(
        &self,
        name: &str,
        records: &[GateRecord],
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner.record_evaluations(name, records)
    }
    fn latest_evaluations(
        &self,
        name: &str,
        step_entered_ms: i64,
        gates: &[GateKey<'_>],
    ) -> impl Future<Output = Result<Vec<GateRecord>>> + Send {
        self.inner.latest_evaluations(name, step_entered_ms, gates)
    }
    fn mark_published(
        &self,
        name: &str,
        generation: i64,
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner.mark_published(name, generation)
    }
    fn note_publish_error(
        &self,
        name: &str,
        error: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner.note_publish_error(name, error)
    }
    fn generations(&self) -> impl Future<Output = Result<Vec<(String, i64)>>> + Send {
        self.inner.generations()
    }
    fn generations_mark(&self) -> impl Future<Output = Result<(i64, i64)>> + Send {
        self.inner.generations_mark()
    }
    fn acquire_lease(
        &self,
        lease: &str,
        holder: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> impl Future<Output = Result<Lease>> + Send {
        self.inner.acquire_lease(lease, holder, now_ms, ttl_ms)
    }
    fn release_lease(&self, lease: &str, holder: &str) -> impl Future<Output = Result<()>> + Send {
        self.inner.release_lease(lease, holder)
    }
    fn dlq_decisions(&self) -> impl Future<Output = Result<Vec<Disposition>>> + Send {
        self.inner.dlq_decisions()
    }
    fn load_series_after(
        &self,
        name: &str,
        source: &str,
        after_ms: i64,
        samples_from_ms: i64,
    ) -> impl Future<Output = Result<(Vec<StoredSeries>, Vec<i64>)>> + Send {
        self.inner
            .load_series_after(name, source, after_ms, samples_from_ms)
    }
    fn scrape_instants_through(
        &self,
        name: &str,
        source: &str,
        through_ms: i64,
    ) -> impl Future<Output = Result<(i64, i64)>> + Send {
        self.inner.scrape_instants_through(name, source, through_ms)
    }
    fn save_points(
        &self,
        name: &str,
        source: &str,
        points: &[StoredPoint],
        scrape_times: &[i64],
        keep_from_ms: i64,
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner
            .save_points(name, source, points, scrape_times, keep_from_ms)
    }
}

fn routing_generation(dir: &std::path::Path, name: &str) -> i64 {
    let path = dir.join(format!("{name}.routing.json"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["generation"].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_between_the_fleet_read_and_the_loads_is_neither_undone_nor_missed() {
    let dir = tempfile::tempdir().unwrap();
    let indicators = Indicators::start();
    indicators.all_green();
    let resolve = Arc::new(MapResolve::of(&indicators));
    let store: AnyStore = SqliteStore::open(dir.path().join("state.db").to_str().unwrap())
        .await
        .unwrap()
        .into();
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let actor = Actor {
        name: "alice".into(),
        reason: Some("the race".into()),
    };
    let person = controller(&store, &fetcher, &resolve);
    for name in ["local", "other", "third"] {
        let path = local_plan_named(dir.path(), name);
        person.init(&path, &actor, T0 * 1000).await.unwrap();
    }
    let before = store.get("local").await.unwrap();
    assert_eq!(before.published_generation, before.generation);

    // The command: `migrate pause local` as the CLI runs it, committed and published.
    let race: Race = {
        let (store, resolve) = (store.clone(), resolve.clone());
        let actor = actor.clone();
        Box::pin(async move {
            let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
            controller(&store, &fetcher, &resolve)
                .command(
                    "local",
                    &Command::Pause,
                    &actor,
                    json!({}),
                    T0 * 1000 + 5_000,
                )
                .await
                .unwrap();
        })
    };
    let racing = Racing {
        inner: store.clone(),
        race: Arc::new(Mutex::new(Some(race))),
    };
    let shared = Shared::new(
        racing.clone(),
        daemon_config(Arc::new(AtomicI64::new(T0 * 1000 + 10_000))),
        resolve.clone(),
    )
    .unwrap();
    shared.leader.store(true, Ordering::SeqCst);
    shared.watch_once().await;
    assert!(
        racing
            .race
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none(),
        "the start read the fleet with list"
    );

    let after = store.get("local").await.unwrap();
    assert_eq!(
        after.generation,
        before.generation + 1,
        "the command committed"
    );
    assert_eq!(
        after.published_generation, after.generation,
        "the command's publication stands"
    );
    assert_eq!(
        routing_generation(dir.path(), "local"),
        after.generation,
        "the routing file is the command's, not the start's older read"
    );

    // The next watch sees the command's generation and loads it.
    shared.watch_once().await;
    for name in ["local", "other", "third"] {
        let record = store.get(name).await.unwrap();
        assert_eq!(
            shared.hub.generation(name),
            Some(u64::try_from(record.generation).unwrap()),
            "{name} in the hub at its generation after the next watch"
        );
        assert_eq!(routing_generation(dir.path(), name), record.generation);
    }
}

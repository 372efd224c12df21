//! A store with faults put in by a test: the store under test, but a chosen `list` runs a
//! future after its read (a command racing a reader), so may the next `get`, the next `commit`s run one each before
//! they commit (a writer racing a decision) or after (a writer racing a retry), or
//! `acquire_lease` fails fast from a chosen call on (a store that answers errors), or the store
//! goes away (`down`: reads and leases wait, as for a pool that cannot connect, then fail).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use queue_migrate::dlq::disposition::Disposition;
use queue_migrate::store::any::AnyStore;
use queue_migrate::store::traits::*;
use queue_migrate::store::{
    Commit, Fleet, GateKey, GateRecord, JournalEntry, Lease, MigrationRecord, NewMigration,
    PlanReplace, Result, RoundRecord, StoreError, StoredPoint, StoredSeries,
};

/// What a hooked `list` runs after its read.
pub type Race = Pin<Box<dyn Future<Output = ()> + Send>>;

/// `inner`, with the faults below.
#[derive(Clone)]
pub struct Hooked {
    pub inner: AnyStore,
    /// Run (once) by the next `list`, after it read and before it answers that read.
    pub after_list: Arc<Mutex<Option<Race>>>,
    /// Run (once) by the next `get`, after it read and before it answers that read (a writer
    /// racing a check made on what was read).
    pub after_get: Arc<Mutex<Option<Race>>>,
    /// Run one each, in order, by the next `commit`s, before they commit.
    pub before_commits: Arc<Mutex<VecDeque<Race>>>,
    /// Run (once) by the next `commit`, after it committed or failed, before it answers.
    pub after_commit: Arc<Mutex<Option<Race>>>,
    /// The first `acquire_lease` call (counted from 0) that fails, and every one after it.
    pub lease_fails_from: Option<usize>,
    lease_calls: Arc<AtomicUsize>,
    /// The `now_ms` of every `acquire_lease` call, in order.
    pub lease_calls_at: Arc<Mutex<Vec<i64>>>,
    /// While set, `fleet`, `list`, `get`, `generations`, `generations_mark` and `acquire_lease`
    /// wait [`DOWN_WAIT`] and fail (a database gone away, a pool that waits for a connection).
    pub down: Arc<std::sync::atomic::AtomicBool>,
    /// Added to the database's clock as every lease answer reads it (its `db_now_ms` and the
    /// lease's end): a step of the database host's clock, as the lease holder sees it.
    pub lease_clock_step_ms: Arc<std::sync::atomic::AtomicI64>,
    /// While set, `fleet` never returns (a statement in flight on a connection gone silent: no
    /// FIN, no RST).
    pub stuck: Arc<std::sync::atomic::AtomicBool>,
}

/// How long a call to a store that is `down` waits before it fails (sqlx's pool waits 30 s).
pub const DOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

impl Hooked {
    /// Wait and fail while the store is down.
    async fn away(&self) -> Result<()> {
        if self.down.load(Ordering::SeqCst) {
            tokio::time::sleep(DOWN_WAIT).await;
            return Err(StoreError::Database(sqlx::Error::PoolTimedOut));
        }
        Ok(())
    }
}

impl Hooked {
    pub fn new(inner: AnyStore) -> Hooked {
        Hooked {
            inner,
            after_list: Arc::default(),
            after_get: Arc::default(),
            before_commits: Arc::default(),
            after_commit: Arc::default(),
            lease_fails_from: None,
            lease_calls: Arc::default(),
            lease_calls_at: Arc::default(),
            down: Arc::default(),
            lease_clock_step_ms: Arc::default(),
            stuck: Arc::default(),
        }
    }
}

impl JournalStore for Hooked {
    async fn list(&self) -> Result<Vec<MigrationRecord>> {
        self.away().await?;
        let read = self.inner.list().await;
        let race = self
            .after_list
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

    fn outbox_pending(
        &self,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<queue_migrate::store::OutboxEntry>>> + Send {
        self.inner.outbox_pending(limit)
    }

    fn outbox_delivered(&self, name: &str, seq: i64) -> impl Future<Output = Result<()>> + Send {
        self.inner.outbox_delivered(name, seq)
    }

    async fn get(&self, name: &str) -> Result<MigrationRecord> {
        self.away().await?;
        let read = self.inner.get(name).await;
        let race = self
            .after_get
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(race) = race {
            race.await;
        }
        read
    }

    async fn fleet(&self) -> Result<Fleet> {
        if self.stuck.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.away().await?;
        self.inner.fleet().await
    }

    async fn commit(&self, name: &str, commit: &Commit) -> Result<MigrationRecord> {
        let race = self
            .before_commits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        if let Some(race) = race {
            race.await;
        }
        let committed = self.inner.commit(name, commit).await;
        let race = self
            .after_commit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(race) = race {
            race.await;
        }
        committed
    }

    fn replace_plan(
        &self,
        name: &str,
        replace: &PlanReplace,
    ) -> impl Future<Output = Result<MigrationRecord>> + Send {
        self.inner.replace_plan(name, replace)
    }

    fn journal(&self, name: &str) -> impl Future<Output = Result<Vec<JournalEntry>>> + Send {
        self.inner.journal(name)
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
        generation: i64,
        error: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner.note_publish_error(name, generation, error)
    }

    async fn generations(&self) -> Result<Vec<(String, i64)>> {
        self.away().await?;
        self.inner.generations().await
    }

    async fn generations_mark(&self) -> Result<(i64, i64)> {
        self.away().await?;
        self.inner.generations_mark().await
    }

    fn clock_ms(&self, writer_ms: i64) -> impl Future<Output = Result<i64>> + Send {
        self.inner.clock_ms(writer_ms)
    }
}

impl EvaluationStore for Hooked {
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

    fn evaluation_history(
        &self,
        name: &str,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<GateRecord>>> + Send {
        self.inner.evaluation_history(name, limit)
    }

    fn prune(
        &self,
        prune: &queue_migrate::store::retention::Prune,
    ) -> impl Future<Output = Result<queue_migrate::store::retention::Pruned>> + Send {
        self.inner.prune(prune)
    }

    fn prunable(
        &self,
        prune: &queue_migrate::store::retention::Prune,
    ) -> impl Future<Output = Result<queue_migrate::store::retention::Pruned>> + Send {
        self.inner.prunable(prune)
    }
}

impl LeaseStore for Hooked {
    async fn peek_lease(&self, lease: &str) -> Result<Option<Lease>> {
        self.away().await?;
        self.inner.peek_lease(lease).await
    }

    async fn acquire_lease(
        &self,
        lease: &str,
        holder: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<Lease> {
        self.away().await?;
        let call = self.lease_calls.fetch_add(1, Ordering::SeqCst);
        self.lease_calls_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(now_ms);
        if self
            .lease_fails_from
            .is_some_and(|first_failing| call >= first_failing)
        {
            return Err(StoreError::Database(sqlx::Error::PoolTimedOut));
        }
        let step = self.lease_clock_step_ms.load(Ordering::SeqCst);
        self.inner
            .acquire_lease(lease, holder, now_ms, ttl_ms)
            .await
            .map(|l| Lease {
                expires_at_ms: l.expires_at_ms + step,
                db_now_ms: l.db_now_ms + step,
                ..l
            })
    }

    fn lease_holder(&self, lease: &str) -> impl Future<Output = Result<Option<String>>> + Send {
        self.inner.lease_holder(lease)
    }

    fn release_lease(&self, lease: &str, holder: &str) -> impl Future<Output = Result<()>> + Send {
        self.inner.release_lease(lease, holder)
    }
}

impl ScrapeStore for Hooked {
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

impl DecisionStore for Hooked {
    fn dlq_decisions(&self) -> impl Future<Output = Result<Vec<Disposition>>> + Send {
        self.inner.dlq_decisions()
    }
}

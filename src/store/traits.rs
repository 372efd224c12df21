//! The store's traits, by concern: [`JournalStore`] (migrations and their journal),
//! [`EvaluationStore`] (gate evaluations and retention), [`LeaseStore`] (the lease and the
//! fence), [`ScrapeStore`] (scrape history), [`DecisionStore`] (dead-letter decisions for the
//! drain gate). [`Store`] is all of them: every type that implements the five is a `Store`, so
//! code generic over `S: Store` calls any of them; code on a concrete store imports the trait
//! whose method it calls (or `store::traits::*`).

use std::future::Future;

use super::records::{
    Commit, Fleet, GateKey, GateRecord, JournalEntry, Lease, MigrationRecord, NewMigration,
    OutboxEntry, PlanReplace, RoundRecord, SourcePoints, StoredPoint, StoredSeries,
};
use super::{Result, dlq_rows, fence, retention};

/// Migrations and their journal: creating, reading, transitions and plan applies (each with its
/// journal entry, in one transaction), publication marks, and the clock commits are stamped by.
pub trait JournalStore: Send + Sync {
    /// Register a new migration in `planned` and journal it.
    fn create(&self, new: &NewMigration) -> impl Future<Output = Result<MigrationRecord>> + Send;
    /// One migration.
    fn get(&self, name: &str) -> impl Future<Output = Result<MigrationRecord>> + Send;
    /// Every migration, by name.
    fn list(&self) -> impl Future<Output = Result<Vec<MigrationRecord>>> + Send;
    /// Every migration with the memory of its current step's gates, as one snapshot: a
    /// daemon's round reads the fleet in two statements instead of two per migration.
    ///
    /// # Guarantees
    /// The records and the memory are read in one transaction: each migration's memory is that
    /// of the step its record is in, as [`EvaluationStore::latest_evaluations`] would have answered then.
    fn fleet(&self) -> impl Future<Output = Result<Fleet>> + Send;
    /// Apply a transition and append its journal entry, in one transaction, only if the
    /// migration is still at `commit.expected_version`.
    ///
    /// # Guarantees
    /// Nor unless every gate memory of [`Commit::memory`] still has its expected revision in
    /// the migration's current step, checked in the same transaction (the migration's row
    /// locked: a round writing memory holds it too): a decision made on a read of the memory
    /// that another writer has changed since is never applied.
    ///
    /// The journal entry's `at`, the step's start (when the transition enters another state)
    /// and the migration's last update are one instant: the database's clock read in the
    /// transaction, whatever the writer's host says (the writer's [`Commit::at_ms`] on a store
    /// with the writer's clock).
    ///
    /// # Errors
    /// [`super::StoreError::Conflict`] when the migration moved on; [`super::StoreError::StaleMemory`] when a
    /// gate's memory did (the caller decides again on a fresh read).
    fn commit(
        &self,
        name: &str,
        commit: &Commit,
    ) -> impl Future<Output = Result<MigrationRecord>> + Send;
    /// Replace the migration's plan (text, path, hash) and append a `plan apply` journal entry
    /// (from and to the migration's current state), in one transaction, only if the migration
    /// is still at `replace.expected_version`.
    ///
    /// # Guarantees
    /// The version bumps; the state and the step's start do not. The routing generation (and
    /// the last update, which the routing document carries) moves only with
    /// `replace.republish`: otherwise the caller has checked that the routing the state
    /// publishes is the same under both plans, and nothing is to be published again.
    fn replace_plan(
        &self,
        name: &str,
        replace: &PlanReplace,
    ) -> impl Future<Output = Result<MigrationRecord>> + Send;
    /// The journal, oldest first.
    fn journal(&self, name: &str) -> impl Future<Output = Result<Vec<JournalEntry>>> + Send;
    /// One page of the journal: the newest `limit` entries whose `seq` is below `before` (all
    /// when `None`), oldest first. A reader pages back with `before` = the first `seq` it got.
    ///
    /// # Guarantees
    /// At most `limit` entries are read from the store (the SQL stores; the memory store
    /// filters its own copy).
    fn journal_page(
        &self,
        name: &str,
        before: Option<i64>,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<JournalEntry>>> + Send {
        async move {
            let journal = self.journal(name).await?;
            let below: Vec<JournalEntry> = journal
                .into_iter()
                .filter(|e| before.is_none_or(|b| e.seq < b))
                .collect();
            let skip = below.len().saturating_sub(limit as usize);
            Ok(below.into_iter().skip(skip).collect())
        }
    }
    /// Note that the routing of `generation` reached every publisher, and clear a publish error
    /// noted for `generation` or an older one (the error of a newer generation still holds).
    fn mark_published(
        &self,
        name: &str,
        generation: i64,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Note why publishing `generation` failed (cleared by `mark_published` of it or a newer
    /// one). Not noted when `generation` or a newer one was published since (a slow failing
    /// write of an older routing finishing after a newer one was published), nor over the error
    /// of a newer generation.
    fn note_publish_error(
        &self,
        name: &str,
        generation: i64,
        error: &str,
    ) -> impl Future<Output = Result<()>> + Send;
    /// The outbox's undelivered rows ([`super::outbox`]), oldest first, at most `limit`, each
    /// with its journal entry: what the leader announces.
    ///
    /// # Guarantees
    /// Every transition committed (and every plan apply that republishes the routing) since
    /// schema 13 is here until [`JournalStore::outbox_delivered`] marked it.
    fn outbox_pending(&self, limit: u32) -> impl Future<Output = Result<Vec<OutboxEntry>>> + Send;
    /// Mark the outbox row of `name`'s journal entry `seq` delivered: a fenced write (see
    /// [`fence`]).
    ///
    /// # Errors
    /// [`super::StoreError::Fenced`] when this store's fence no longer holds the lease.
    fn outbox_delivered(&self, name: &str, seq: i64) -> impl Future<Output = Result<()>> + Send;
    /// The generation of every migration, by name (cheap: for watchers).
    fn generations(&self) -> impl Future<Output = Result<Vec<(String, i64)>>> + Send;
    /// The number of migrations and the sum of their generations: one row however many
    /// migrations there are. Generations only grow, so the pair changes whenever a transition
    /// commits or a migration is added, which lets a watcher poll often and read
    /// [`JournalStore::generations`] only when something moved.
    fn generations_mark(&self) -> impl Future<Output = Result<(i64, i64)>> + Send;
    /// "Now" on the clock this store stamps what it commits with: the database's (SQL stores
    /// read it in a statement), or `writer_ms` for a store on the writer's clock (a simulated
    /// one: `--now`, the demo). A person's command reads it once, so that its gates measure
    /// `observe` and `min_duration` from the step's start on the clock that stamped it.
    ///
    /// # Errors
    /// The database cannot be reached.
    fn clock_ms(&self, writer_ms: i64) -> impl Future<Output = Result<i64>> + Send;
}

/// Gate evaluations: a round's evaluations and scrapes in one commit, each gate's memory, the
/// history the console charts, and what retention deletes of them.
pub trait EvaluationStore: Send + Sync {
    /// Record a round of one migration in one transaction: its gate evaluations (as
    /// [`EvaluationStore::record_evaluations`]) and what it took from each scrape source (as
    /// [`ScrapeStore::save_points`]), so that a round costs one commit. Its gates' memory is written
    /// whatever the plan: a round evaluated under a stored plan goes through
    /// [`EvaluationStore::record_rounds`] with [`RoundRecord::plan_hash`].
    fn record_round(
        &self,
        name: &str,
        records: &[GateRecord],
        sources: &[SourcePoints],
    ) -> impl Future<Output = Result<()>> + Send {
        let round = RoundRecord {
            name: name.to_string(),
            plan_hash: None,
            records: records.to_vec(),
            sources: sources.to_vec(),
        };
        async move { self.record_rounds(std::slice::from_ref(&round)).await }
    }
    /// Record the rounds of many migrations in one transaction (a daemon's round of the whole
    /// fleet: one commit instead of one per migration). All or nothing.
    ///
    /// # Guarantees
    /// A round whose [`RoundRecord::plan_hash`] is not (any more) its migration's plan when the
    /// transaction writes (a `migrate plan apply` committed while the round waited on its
    /// sources) adds its evaluations to the history and its samples to the scrapes, but leaves
    /// its gates' memory (held-since marks, samples, peaks) as it is: what it gathered under the
    /// old definitions never comes back after the plan apply forgot it
    /// ([`PlanReplace::reset_gates`]). Except a broken streak: a gate it saw fail (its record's
    /// `held_since_ms` is `None`) loses its held-since mark, after the other rounds' memory is
    /// written (a reset wins); it never sets a mark nor moves one. The check and the writes are
    /// one transaction, with the migration's row locked against a concurrent
    /// [`JournalStore::replace_plan`].
    ///
    /// Each gate's memory is written over the row its writer read ([`GateRecord::revision`]):
    /// over a row another writer changed since, the two are merged (a missing held-since mark
    /// on either side wins, of two marks the later, the larger peak and samples), so that a
    /// failure one writer saw is never undone by another's older mark.
    fn record_rounds(&self, rounds: &[RoundRecord]) -> impl Future<Output = Result<()>> + Send;
    /// Record a round of gate evaluations.
    fn record_evaluations(
        &self,
        name: &str,
        records: &[GateRecord],
    ) -> impl Future<Output = Result<()>> + Send;
    /// The latest evaluation of each of `gates` in the step entered at `step_entered_ms`, oldest
    /// evaluation first, then by gate and kind; a gate not evaluated in that step has none.
    ///
    /// # Guarantees
    /// Read from each gate's memory (one row per gate per step), not from the history: the cost
    /// does not grow with the evaluations a step has recorded (a long soak holds one row per
    /// gate per tick). Of two evaluations of a gate, the one written last is the latest (as the
    /// newest row of the history), whatever the clocks that stamped them.
    fn latest_evaluations(
        &self,
        name: &str,
        step_entered_ms: i64,
        gates: &[GateKey<'_>],
    ) -> impl Future<Output = Result<Vec<GateRecord>>> + Send;
    /// The newest `limit` evaluations of the migration's gates from the history (every step,
    /// every gate), oldest first: what the console charts.
    fn evaluation_history(
        &self,
        name: &str,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<GateRecord>>> + Send;
    /// Delete, oldest first, at most `prune.batch` rows of each table that retention may
    /// shorten, of the rows [`retention`] allows (never the journal, nor the memory of the step a
    /// migration is in, nor the scrapes of a migration still evaluated, nor an outbox row not yet
    /// delivered); answer how many went.
    /// One statement per table, each committed by itself: a prune never holds a lock long.
    fn prune(
        &self,
        prune: &retention::Prune,
    ) -> impl Future<Output = Result<retention::Pruned>> + Send;
    /// How many rows repeating [`EvaluationStore::prune`] until nothing is left would delete now, per
    /// table (a dry run: reads only).
    fn prunable(
        &self,
        prune: &retention::Prune,
    ) -> impl Future<Output = Result<retention::Pruned>> + Send;
}

/// The leader's lease, on the database's clock, and the fence its writes carry ([`fence`]).
pub trait LeaseStore: Send + Sync {
    /// Take or renew the lease `lease` for `holder` for `ttl_ms`, unless another holder has it
    /// unexpired; returns who holds it now, with its epoch. SQL stores compare and extend on the
    /// DATABASE's clock in the statement (`now_ms`, the caller's clock, is ignored: a skewed
    /// daemon can neither take a live lease nor keep one past its time); a change of holder
    /// raises the epoch and records the acquisition in `lease_epochs`.
    fn acquire_lease(
        &self,
        lease: &str,
        holder: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> impl Future<Output = Result<Lease>> + Send;
    /// Who holds the lease `lease` now, by the database's clock: `None` when nobody does (no
    /// row, or it ran out or was given up). A read: what a view says about whether a daemon
    /// drives the migrations ([`crate::standing::Drive`]). A backend that keeps no leases
    /// answers `None`.
    fn lease_holder(&self, lease: &str) -> impl Future<Output = Result<Option<String>>> + Send {
        let _ = lease;
        async { Ok(None) }
    }
    /// The lease's row as it is (its holder, end and epoch, even when it ran out), with the
    /// database's clock: a read that never takes the lease. What a standby watches to tell a
    /// holder that stopped renewing from a step of the database's clock ([`crate::lease`]).
    /// `None` when there is no row, or the backend keeps no leases.
    fn peek_lease(&self, lease: &str) -> impl Future<Output = Result<Option<Lease>>> + Send {
        let _ = lease;
        async { Ok(None) }
    }
    /// Give the lease up (only if `holder` has it), so that a standby takes over at once. The
    /// row stays, its end set to 0 (what a standby reads as given back), so that the epoch never
    /// goes back.
    fn release_lease(&self, lease: &str, holder: &str) -> impl Future<Output = Result<()>> + Send;
    /// This store with its writes fenced by `cell` (see [`fence`]): what a daemon acts through.
    /// A backend without fencing answers itself unfenced.
    fn fenced(&self, cell: fence::FenceCell) -> Self
    where
        Self: Sized + Clone,
    {
        let _ = cell;
        self.clone()
    }
    /// The fence of this store's writes (unarmed for a store that is not [`LeaseStore::fenced`]).
    fn fence(&self) -> fence::FenceCell {
        fence::FenceCell::default()
    }
}

/// The kept history of the scrape sources.
pub trait ScrapeStore: Send + Sync {
    /// Kept samples of a scrape source, and the instants it was scraped.
    fn load_points(
        &self,
        name: &str,
        source: &str,
    ) -> impl Future<Output = Result<(Vec<StoredPoint>, Vec<i64>)>> + Send {
        self.load_points_after(name, source, i64::MIN)
    }
    /// What [`ScrapeStore::load_points`] answers, limited to samples and scrape instants after
    /// `after_ms` (what a reader holding the history up to `after_ms` lacks).
    fn load_points_after(
        &self,
        name: &str,
        source: &str,
        after_ms: i64,
    ) -> impl Future<Output = Result<(Vec<StoredPoint>, Vec<i64>)>> + Send {
        async move {
            let (series, times) = self
                .load_series_after(name, source, after_ms, i64::MIN)
                .await?;
            Ok((StoredSeries::into_points(series), times))
        }
    }
    /// The samples of [`ScrapeStore::load_points_after`] series by series, each series' name and
    /// labels read once: what the controller reads. They come ordered by series key, then (for
    /// a series whose labels changed) by the first instant of each set of labels, then by time.
    /// Samples older than `samples_from_ms` are left out (what no query can reach any more);
    /// the instants are all there.
    ///
    /// # Guarantees
    /// - The database hands over one row per source, not one per sample: the scrapes after
    ///   `after_ms` joined into one text (`scrapes::series_of`), whose instants are the
    ///   source's. A read whose samples reach less far back than its instants (`samples_from_ms`
    ///   after `after_ms`: a history read whole) asks for the instants apart first, as one
    ///   list: two rows.
    /// - The instants are read before the samples: a scrape another process commits between
    ///   the two reads brings its samples, whose instants the reader adds, never an instant
    ///   without its samples (which a check of the instants,
    ///   [`ScrapeStore::scrape_instants_through`], would never notice).
    fn load_series_after(
        &self,
        name: &str,
        source: &str,
        after_ms: i64,
        samples_from_ms: i64,
    ) -> impl Future<Output = Result<(Vec<StoredSeries>, Vec<i64>)>> + Send;
    /// How many scrape instants of the source are stored at or before `through_ms`, and their
    /// sum: what a reader holding the history through `through_ms` compares with its own
    /// ([`crate::indicators::history::History::instants_through`]) to learn, in one row, whether
    /// another process stored a scrape it lacks.
    fn scrape_instants_through(
        &self,
        name: &str,
        source: &str,
        through_ms: i64,
    ) -> impl Future<Output = Result<(i64, i64)>> + Send;
    /// Add samples and scrape instants of a scrape source; drop those older than `keep_from_ms`.
    fn save_points(
        &self,
        name: &str,
        source: &str,
        points: &[StoredPoint],
        scrape_times: &[i64],
        keep_from_ms: i64,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// The dead-letter decisions the drain gate reads (the whole ledger is
/// [`super::dispositions::DispositionStore`]).
pub trait DecisionStore: Send + Sync {
    /// The dead-letter decisions recorded in this store (oldest first), for the drain gate
    /// (what [`super::dispositions::DispositionStore::list`] answers). No default: a backend that
    /// answered "none" would hold the drain gate on groups the team closed.
    fn dlq_decisions(&self) -> impl Future<Output = Result<Vec<dlq_rows::Disposition>>> + Send;
}

/// The state store: every concern's trait (see the module doc).
pub trait Store: JournalStore + EvaluationStore + LeaseStore + ScrapeStore + DecisionStore {}

impl<T> Store for T where
    T: JournalStore + EvaluationStore + LeaseStore + ScrapeStore + DecisionStore
{
}

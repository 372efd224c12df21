//! The state store: migrations, the append-only journal, gate evaluations, scrape history.
//!
//! One trait, [`Store`], on one SQL store ([`SqlStore`]) over either database, each query
//! written once (`store/sql_store.rs`; [`any::open`] picks the database from the state URL),
//! each database with its own schema under `migrations/<database>/` ([`sqlite`], [`postgres`]). Every write that changes a migration is conditional on
//! the version the caller read (optimistic concurrency): two controllers racing on one migration
//! never both apply, the loser gets [`StoreError::Conflict`].
//!
//! # Guarantees
//! - A transition (state update + journal entry) commits in one transaction or not at all; so
//!   does a plan replaced under a migration ([`Store::replace_plan`]).
//! - The journal is append-only (both schemas refuse UPDATE and DELETE on it with triggers).
//! - A round of evaluations and the scrape samples it took commit together or not at all
//!   ([`Store::record_round`]); each gate's newest evaluation is kept apart from the history,
//!   so that reading it back does not grow with the history. A round evaluated under a plan its
//!   migration no longer has (a `plan apply` committed meanwhile) writes no gate memory
//!   ([`Store::record_rounds`]).

#[macro_use]
mod sql;
pub mod any;
mod dialect;
pub mod dispositions;
mod dispositions_sql;
pub mod dlq_rows;
mod error;
pub mod fence;
pub mod lease_keeper;
mod memory;
mod pg_session;
pub mod postgres;
pub mod retention;
mod scrape_text;
mod scrapes;
mod sql_rows;
mod sql_store;
pub mod sqlite;
mod sqlite_bits;

pub use error::{Result, StoreError};
pub use sql::SqlStore;

use std::future::Future;

use serde::Serialize;

use crate::machine::{Snapshot, State};

/// A migration as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MigrationRecord {
    pub name: String,
    pub plan_yaml: String,
    pub plan_path: String,
    pub plan_hash: String,
    #[serde(skip)]
    pub state: State,
    pub paused: bool,
    pub version: i64,
    pub generation: i64,
    pub published_generation: i64,
    /// Why the last publication failed, until one succeeds.
    pub publish_error: Option<String>,
    pub entered_at_ms: i64,
    pub updated_at_ms: i64,
    pub created_at_ms: i64,
}

impl MigrationRecord {
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            state: self.state,
            paused: self.paused,
        }
    }
}

/// What `init` stores.
#[derive(Debug, Clone)]
pub struct NewMigration {
    pub name: String,
    pub plan_yaml: String,
    pub plan_path: String,
    pub plan_hash: String,
    pub now_ms: i64,
    pub actor: String,
}

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JournalEntry {
    /// The migration's version after this transition (1 for `init`).
    pub seq: i64,
    pub at_ms: i64,
    pub command: String,
    #[serde(skip)]
    pub from: Snapshot,
    #[serde(skip)]
    pub to: Snapshot,
    pub actor: String,
    pub reason: Option<String>,
    pub forced: bool,
    /// The gate readings that justified the transition.
    pub evidence: serde_json::Value,
    pub generation: i64,
    /// The lease epoch the entry was written under (`None`: written without a lease, as by the
    /// CLI).
    pub epoch: Option<i64>,
}

/// A transition to commit.
#[derive(Debug, Clone)]
pub struct Commit {
    pub expected_version: i64,
    pub command: String,
    pub to: Snapshot,
    /// The writer's instant: stored only by a store on the writer's clock (`--now`, the demo);
    /// otherwise the journal's `at`, the step's start and the last update are the database's
    /// time, read once in the commit's transaction.
    pub at_ms: i64,
    pub actor: String,
    pub reason: Option<String>,
    pub forced: bool,
    pub evidence: serde_json::Value,
    /// The gates' memory the decision rests on, each at the revision the decider expects it to
    /// have in the migration's current step: the transition commits only if every one still
    /// has it (empty: a transition that rests on no gate memory, as a pause or a forced move).
    pub memory: Vec<MemoryRead>,
}

/// A gate's memory a transition's decision rests on (see [`Commit::memory`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryRead {
    pub gate: String,
    /// As in [`GateRecord::kind`].
    pub kind: String,
    /// The revision its row must have ([`GateRecord::revision`]); `None`: it must have no row.
    pub revision: Option<i64>,
}

/// A new plan for a migration (`migrate plan apply`), as [`Store::replace_plan`] writes it.
#[derive(Debug, Clone)]
pub struct PlanReplace {
    /// The version the caller read (and checked the plan change against).
    pub expected_version: i64,
    pub plan_yaml: String,
    pub plan_path: String,
    pub plan_hash: String,
    pub at_ms: i64,
    pub actor: String,
    pub reason: String,
    /// What the journal keeps of the change: the diff and both hashes.
    pub evidence: serde_json::Value,
    /// The routing the state publishes differs under the new plan (allowed in `planned` only,
    /// where nothing has moved yet): the generation bumps, so that it is published again.
    pub republish: bool,
    /// The gates of the current step whose definition changes, `(name, kind)`: their memory
    /// (held-since mark, samples, peak) is forgotten with the change, so that what held under
    /// the old definition never counts toward the new one.
    pub reset_gates: Vec<(String, String)>,
}

/// One stored gate evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateRecord {
    /// When the step it belongs to was entered (the step's identity).
    pub step_entered_ms: i64,
    #[serde(skip)]
    pub state: State,
    pub gate: String,
    /// The gate's kind as [`crate::plan::GateKind::as_str`] writes it: `exit` (`require_peak`
    /// and `require_deploy` included) or `guard`.
    pub kind: String,
    pub query: String,
    pub value: Option<f64>,
    pub old_value: Option<f64>,
    pub samples: u32,
    pub verdict: String,
    pub reason: String,
    /// A NO DATA verdict's cause as [`crate::gate::NoDataCause::as_str`] writes it
    /// (`source_down`, `empty`, `too_few_samples`, `unusable`); `None` for the other verdicts
    /// and for rows written before the cause was kept (migration 0012).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_data_cause: Option<String>,
    pub held_since_ms: Option<i64>,
    pub peak: Option<f64>,
    pub at_ms: i64,
    /// The revision of the gate's memory row. As read from the memory: the row's (every write
    /// increments it). As written: the one the writer read for the gate (`None`: it had no row
    /// then); a write over a row another writer changed since is merged, never lost nor
    /// overwriting a reset (see [`Store::record_rounds`]).
    #[serde(skip)]
    pub revision: Option<i64>,
}

/// One kept sample of a scrape source.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredPoint {
    pub series: String,
    pub metric: String,
    /// The labels as a JSON array of `[name, value]` pairs.
    pub labels: String,
    pub at_ms: i64,
    pub value: f64,
}

/// The kept samples of one series of a scrape source, oldest first: what a reader builds its
/// history from, each series' name and labels once.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSeries {
    pub series: String,
    pub metric: String,
    /// The labels as a JSON array of `[name, value]` pairs.
    pub labels: String,
    /// `(at_ms, value)`, oldest first.
    pub points: Vec<(i64, f64)>,
}

impl StoredSeries {
    /// Add the row `(series, metric, labels, at_ms, value)` to the series it continues, or start
    /// one: rows read in the order of their series come out one `StoredSeries` per series.
    #[cfg(test)]
    pub fn push_row(
        all: &mut Vec<StoredSeries>,
        (series, metric, labels): (&str, &str, &str),
        at_ms: i64,
        value: f64,
    ) {
        match all.last_mut() {
            Some(last)
                if last.series == series && last.metric == metric && last.labels == labels =>
            {
                last.points.push((at_ms, value));
            }
            _ => all.push(StoredSeries {
                series: series.to_owned(),
                metric: metric.to_owned(),
                labels: labels.to_owned(),
                points: vec![(at_ms, value)],
            }),
        }
    }

    /// One [`StoredPoint`] per sample.
    pub fn into_points(all: Vec<StoredSeries>) -> Vec<StoredPoint> {
        all.into_iter()
            .flat_map(|s| {
                s.points.into_iter().map(move |(at_ms, value)| StoredPoint {
                    series: s.series.clone(),
                    metric: s.metric.clone(),
                    labels: s.labels.clone(),
                    at_ms,
                    value,
                })
            })
            .collect()
    }
}

/// What one round took from one scrape source: its samples and scrape instants to add, and where
/// its history now starts when the round dropped older scrapes (see [`Store::save_points`];
/// `None`: nothing to drop, no statement).
#[derive(Debug, Clone, PartialEq)]
pub struct SourcePoints {
    pub source: String,
    pub points: Vec<StoredPoint>,
    pub scrape_times: Vec<i64>,
    pub keep_from_ms: Option<i64>,
}

/// One migration's round, as [`Store::record_round`] takes it: for writing many rounds in one
/// transaction ([`Store::record_rounds`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RoundRecord {
    pub name: String,
    /// The hash of the plan the round evaluated under (the `plan_hash` of the record it read):
    /// its gates' memory is written only while the migration still has that plan (see
    /// [`Store::record_rounds`]). `None`: written whatever the plan (a writer that evaluated
    /// none, as [`Store::record_evaluations`]).
    pub plan_hash: Option<String>,
    pub records: Vec<GateRecord>,
    pub sources: Vec<SourcePoints>,
}

/// One source's part of a round, with the migration it belongs to: a backend writes the samples
/// of every source of the fleet's round in the same statements.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SourceRows<'a> {
    pub name: &'a str,
    pub source: &'a str,
    pub points: &'a [StoredPoint],
    pub scrape_times: &'a [i64],
    pub keep_from_ms: Option<i64>,
}

impl<'a> SourceRows<'a> {
    /// Every source of every round, in the rounds' order.
    pub fn of(rounds: &'a [RoundRecord]) -> Vec<SourceRows<'a>> {
        rounds
            .iter()
            .flat_map(|round| {
                round.sources.iter().map(|s| SourceRows {
                    name: &round.name,
                    source: &s.source,
                    points: &s.points,
                    scrape_times: &s.scrape_times,
                    keep_from_ms: s.keep_from_ms,
                })
            })
            .collect()
    }
}

/// Every migration, and the memory of the gates of the step each one is in, read together: what
/// a daemon's round starts from (see [`Store::fleet`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fleet {
    /// By name.
    pub records: Vec<MigrationRecord>,
    /// By migration: the memory of each gate evaluated in the step its record is in, oldest
    /// evaluation first (as [`Store::latest_evaluations`] answers, for every gate the step
    /// remembers). A migration with none has no entry.
    pub memory: std::collections::HashMap<String, Vec<GateRecord>>,
}

/// A gate as its evaluations are stored: `(name, kind)`, the kind being `exit` or `guard`
/// (`require_peak` and `require_deploy` are exit gates of those names).
pub type GateKey<'a> = (&'a str, &'a str);

/// Who holds a lease, until when, with which epoch, as of the database's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub holder: String,
    /// When it runs out unless renewed (the database's clock).
    pub expires_at_ms: i64,
    /// Raised on every change of holder; a renewal by the same holder keeps it.
    pub epoch: i64,
    /// The database's clock when the lease was read (what the holder measures its skew by).
    pub db_now_ms: i64,
}

/// One journal row, as every backend appends it (`create`, `commit`, `replace_plan`).
pub(crate) struct JournalRow<'a> {
    pub name: &'a str,
    /// The migration's version after this entry (its sequence number in the journal).
    pub seq: i64,
    pub at_ms: i64,
    pub command: &'a str,
    pub from: Snapshot,
    pub to: Snapshot,
    pub actor: &'a str,
    pub reason: Option<String>,
    pub forced: bool,
    pub evidence: String,
    pub generation: i64,
    /// The lease epoch it is written under (set by the backend from its fence).
    pub epoch: Option<i64>,
}

impl<'a> JournalRow<'a> {
    /// The first entry of a migration `init` creates (version and generation 1).
    pub fn of_init(new: &'a NewMigration) -> JournalRow<'a> {
        let planned = Snapshot {
            state: State::Planned,
            paused: false,
        };
        JournalRow {
            name: &new.name,
            seq: 1,
            at_ms: new.now_ms,
            command: "init",
            from: planned,
            to: planned,
            actor: &new.actor,
            reason: Some(format!("plan {}", new.plan_path)),
            forced: false,
            evidence: serde_json::json!({ "plan_hash": new.plan_hash }).to_string(),
            generation: 1,
            epoch: None,
        }
    }

    /// The entry of transition `c` of `name` from `from`, to `version` and `generation`.
    pub fn of_commit(
        name: &'a str,
        c: &'a Commit,
        from: Snapshot,
        version: i64,
        generation: i64,
    ) -> JournalRow<'a> {
        JournalRow {
            name,
            seq: version,
            at_ms: c.at_ms,
            command: &c.command,
            from,
            to: c.to,
            actor: &c.actor,
            reason: c.reason.clone(),
            forced: c.forced,
            evidence: c.evidence.to_string(),
            generation,
            epoch: None,
        }
    }

    /// The entry of plan replacement `r` of `name`, which stays `at` its state.
    pub fn of_plan_apply(
        name: &'a str,
        r: &'a PlanReplace,
        at: Snapshot,
        version: i64,
        generation: i64,
    ) -> JournalRow<'a> {
        JournalRow {
            name,
            seq: version,
            at_ms: r.at_ms,
            command: "plan apply",
            from: at,
            to: at,
            actor: &r.actor,
            reason: Some(r.reason.clone()),
            forced: false,
            evidence: r.evidence.to_string(),
            generation,
            epoch: None,
        }
    }
}

/// The state store.
pub trait Store: Send + Sync {
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
    /// of the step its record is in, as [`Store::latest_evaluations`] would have answered then.
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
    /// [`StoreError::Conflict`] when the migration moved on; [`StoreError::StaleMemory`] when a
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
    /// Record a round of one migration in one transaction: its gate evaluations (as
    /// [`Store::record_evaluations`]) and what it took from each scrape source (as
    /// [`Store::save_points`]), so that a round costs one commit. Its gates' memory is written
    /// whatever the plan: a round evaluated under a stored plan goes through
    /// [`Store::record_rounds`] with [`RoundRecord::plan_hash`].
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
    /// [`Store::replace_plan`].
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
    /// The generation of every migration, by name (cheap: for watchers).
    fn generations(&self) -> impl Future<Output = Result<Vec<(String, i64)>>> + Send;
    /// The number of migrations and the sum of their generations: one row however many
    /// migrations there are. Generations only grow, so the pair changes whenever a transition
    /// commits or a migration is added, which lets a watcher poll often and read
    /// [`Store::generations`] only when something moved.
    fn generations_mark(&self) -> impl Future<Output = Result<(i64, i64)>> + Send;
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
    /// Give the lease up (only if `holder` has it), so that a standby takes over at once. The
    /// row stays (expired), so that the epoch never goes back.
    fn release_lease(&self, lease: &str, holder: &str) -> impl Future<Output = Result<()>> + Send;
    /// "Now" on the clock this store stamps what it commits with: the database's (SQL stores
    /// read it in a statement), or `writer_ms` for a store on the writer's clock (a simulated
    /// one: `--now`, the demo). A person's command reads it once, so that its gates measure
    /// `observe` and `min_duration` from the step's start on the clock that stamped it.
    ///
    /// # Errors
    /// The database cannot be reached.
    fn clock_ms(&self, writer_ms: i64) -> impl Future<Output = Result<i64>> + Send;
    /// This store with its writes fenced by `cell` (see [`fence`]): what a daemon acts through.
    /// A backend without fencing answers itself unfenced.
    fn fenced(&self, cell: fence::FenceCell) -> Self
    where
        Self: Sized + Clone,
    {
        let _ = cell;
        self.clone()
    }
    /// The fence of this store's writes (unarmed for a store that is not [`Store::fenced`]).
    fn fence(&self) -> fence::FenceCell {
        fence::FenceCell::default()
    }
    /// The dead-letter decisions recorded in this store (oldest first), for the drain gate
    /// (what [`dispositions::DispositionStore::list`] answers). No default: a backend that
    /// answered "none" would hold the drain gate on groups the team closed.
    fn dlq_decisions(&self) -> impl Future<Output = Result<Vec<dlq_rows::Disposition>>> + Send;
    /// Delete, oldest first, at most `prune.batch` rows of each table that retention may
    /// shorten, of the rows [`retention`] allows (never the journal, nor the memory of the step a
    /// migration is in, nor the scrapes of a migration still evaluated); answer how many went.
    /// One statement per table, each committed by itself: a prune never holds a lock long.
    fn prune(
        &self,
        prune: &retention::Prune,
    ) -> impl Future<Output = Result<retention::Pruned>> + Send;
    /// How many rows repeating [`Store::prune`] until nothing is left would delete now, per
    /// table (a dry run: reads only).
    fn prunable(
        &self,
        prune: &retention::Prune,
    ) -> impl Future<Output = Result<retention::Pruned>> + Send;
    /// Kept samples of a scrape source, and the instants it was scraped.
    fn load_points(
        &self,
        name: &str,
        source: &str,
    ) -> impl Future<Output = Result<(Vec<StoredPoint>, Vec<i64>)>> + Send {
        self.load_points_after(name, source, i64::MIN)
    }
    /// What [`Store::load_points`] answers, limited to samples and scrape instants after
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
    /// The samples of [`Store::load_points_after`] series by series, each series' name and
    /// labels read once: what the controller reads. They come ordered by series key, then (for
    /// a series whose labels changed) by the first instant of each set of labels, then by time.
    /// Samples older than `samples_from_ms` are left out (what no query can reach any more);
    /// the instants are all there.
    ///
    /// # Guarantees
    /// - The database hands over one row per source, not one per sample: the scrapes after
    ///   `after_ms` joined into one text ([`scrapes::series_of`]), whose instants are the
    ///   source's. A read whose samples reach less far back than its instants (`samples_from_ms`
    ///   after `after_ms`: a history read whole) asks for the instants apart first, as one
    ///   list: two rows.
    /// - The instants are read before the samples: a scrape another process commits between
    ///   the two reads brings its samples, whose instants the reader adds, never an instant
    ///   without its samples (which a check of the instants,
    ///   [`Store::scrape_instants_through`], would never notice).
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

/// The bound of `at > ?` that selects the samples after `after_ms` and at or after
/// `samples_from_ms`.
pub(crate) fn samples_after(after_ms: i64, samples_from_ms: i64) -> i64 {
    after_ms.max(samples_from_ms.saturating_sub(1))
}

/// The integers of a list separated by commas, as SQLite's `group_concat` writes them (in
/// full: exact). An empty list (no rows) is empty.
///
/// # Errors
/// [`StoreError::Corrupt`], naming `what`, for an item that is not an integer.
pub(crate) fn parse_list(list: &str, what: &str) -> Result<Vec<i64>> {
    if list.is_empty() {
        return Ok(Vec::new());
    }
    list.split(',')
        .map(|item| {
            item.parse().map_err(|_| {
                StoreError::Corrupt(format!(
                    "{what}: {item:?} in a stored list is not an integer"
                ))
            })
        })
        .collect()
}

/// The step stored beside a state (the inverse of [`parse_state`]).
pub(crate) fn step_of(state: State) -> Option<i64> {
    state.step().and_then(|s| i64::try_from(s).ok())
}

/// Map a stored (state, step) pair back to a [`State`].
pub(crate) fn parse_state(name: &str, step: Option<i64>) -> Result<State> {
    let step = step
        .map(usize::try_from)
        .transpose()
        .map_err(|_| StoreError::Corrupt(format!("negative step for state {name}")))?;
    State::from_parts(name, step)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown state {name:?} (step {step:?})")))
}

/// The error of a state URL its driver could not parse (`e`, from `from_str`): the input's
/// fault, not the database's.
fn malformed(url: &str, e: &sqlx::Error) -> StoreError {
    StoreError::MalformedUrl {
        url: crate::redact::url(url),
        why: crate::redact::text(&e.to_string()),
    }
}

#[cfg(test)]
mod tests;

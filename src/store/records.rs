//! The store's records: what is stored (a migration, its journal, gate evaluations, scrape
//! samples, leases) and what a write takes (a new migration, a transition, a plan apply, a
//! round), shared by the traits ([`super::traits`]) and every backend.

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

/// An undelivered row of the outbox ([`super::outbox`]): the migration and its journal entry.
#[derive(Debug, Clone)]
pub struct OutboxEntry {
    /// The migration the entry is of.
    pub migration: String,
    /// The journal entry to announce.
    pub entry: JournalEntry,
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

/// A new plan for a migration (`migrate plan apply`), as [`super::JournalStore::replace_plan`] writes it.
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
    /// (`source_down`, `source_http_error`, `source_unparsable`, `empty`, `too_few_samples`,
    /// `unusable`); `None` for the other verdicts
    /// and for rows written before the cause was kept (migration 0012).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_data_cause: Option<String>,
    pub held_since_ms: Option<i64>,
    pub peak: Option<f64>,
    /// A `judge` gate's ledger as JSON ([`crate::judge::Ledger`]; migration 0013): `None` for
    /// the other gates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_ledger: Option<String>,
    /// A `kafka_lag` gate's largest partition lag as JSON
    /// ([`crate::indicators::kafka_lag::LargestPartition`]; migration 0016): `None` for the
    /// other gates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_partition: Option<String>,
    pub at_ms: i64,
    /// The revision of the gate's memory row. As read from the memory: the row's (every write
    /// increments it). As written: the one the writer read for the gate (`None`: it had no row
    /// then); a write over a row another writer changed since is merged, never lost nor
    /// overwriting a reset (see [`super::EvaluationStore::record_rounds`]).
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
/// its history now starts when the round dropped older scrapes (see [`super::ScrapeStore::save_points`];
/// `None`: nothing to drop, no statement).
#[derive(Debug, Clone, PartialEq)]
pub struct SourcePoints {
    pub source: String,
    pub points: Vec<StoredPoint>,
    pub scrape_times: Vec<i64>,
    pub keep_from_ms: Option<i64>,
}

/// One migration's round, as [`super::EvaluationStore::record_round`] takes it: for writing many rounds in one
/// transaction ([`super::EvaluationStore::record_rounds`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RoundRecord {
    pub name: String,
    /// The hash of the plan the round evaluated under (the `plan_hash` of the record it read):
    /// its gates' memory is written only while the migration still has that plan (see
    /// [`super::EvaluationStore::record_rounds`]). `None`: written whatever the plan (a writer that evaluated
    /// none, as [`super::EvaluationStore::record_evaluations`]).
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
/// a daemon's round starts from (see [`super::JournalStore::fleet`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fleet {
    /// By name.
    pub records: Vec<MigrationRecord>,
    /// By migration: the memory of each gate evaluated in the step its record is in, oldest
    /// evaluation first (as [`super::EvaluationStore::latest_evaluations`] answers, for every gate the step
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

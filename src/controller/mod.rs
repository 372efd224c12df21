//! The controller: the small driver between the pure core and the edges.
//!
//! Every command follows the same path: load the migration and compile its stored plan, re-publish
//! the routing if a crash left it behind, evaluate gates when the command needs them, ask the
//! [`machine`](crate::machine), commit the transition with its evidence in one transaction, then
//! publish the routing document.
//!
//! # Guarantees
//! - Nothing changes unless the machine accepts the command and (for `advance`) every exit gate
//!   passes and the minimum time is met, or the user forces it with a reason (journaled).
//! - Two commands racing on one migration never both apply: the loser gets a conflict.

mod blockers;
mod build;
pub mod decide;
mod error;
pub mod evaluate;
#[cfg(feature = "router")]
pub mod follow;
mod gate_view;
pub mod histories;
mod loaded;
pub mod plan_apply;
pub mod plan_change;
pub mod plans;
pub mod publish;
pub mod round;
pub mod views;

use std::path::Path;

use serde::Serialize;
use sha2::{Digest, Sha256};

pub use blockers::blockers;
pub use error::{ControllerError, Result};
pub use evaluate::GateReport;
pub use gate_view::{AWAITING_FIRST_EVALUATION, GateView, not_evaluated_advice};
pub use loaded::Loaded;

use error::{expect_state, stored_plan_error};
use gate_view::stored_soak;

use crate::gate::{self, Verdict};
use crate::indicators::fetch::Fetcher;
use crate::machine::{self, Command, Ladder, Transition};
use crate::plan::{self, Compiled, Plan, Resolve, SecretsMode};
use crate::routing::RoutingDocument;
use crate::store::{
    Commit, GateKey, GateRecord, MemoryRead, MigrationRecord, NewMigration, Store, StoreError,
};

/// How many times [`Controller::advance`] decides again when another writer (a daemon's round)
/// changed the gates' memory between its evaluation and its commit.
const STALE_MEMORY_RETRIES: u32 = 3;

/// How many newer generations one publication follows (see [`Controller::publish`]).
const MAX_REPUBLISH: usize = 4;

/// Who acts and why, for the journal.
#[derive(Debug, Clone)]
pub struct Actor {
    pub name: String,
    pub reason: Option<String>,
}

/// The name of the lease the daemons of a store take (`migrate run`): who holds it drives the
/// migrations ([`crate::standing::Drive`]).
pub const LEASE: &str = "controller";

/// A committed transition and what became of its publication.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    pub command: String,
    pub from: String,
    pub to: String,
    pub paused: bool,
    pub version: i64,
    pub routing: RoutingDocument,
    /// Set when the routing could not be written: the next command retries.
    pub publish_error: Option<String>,
    /// The earliest instant (RFC 3339) the step it lands in can advance, when it is not paused:
    /// its minimum time and its exit gates' `for:` count from the step's start or this resume,
    /// never from time paused ([`Loaded::earliest_advance_ms`]). A minimum: every exit gate
    /// must pass too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub earliest_advance_at: Option<String>,
}

/// What `advance` found and did.
#[derive(Debug, Clone, Serialize)]
pub struct AdvanceOutcome {
    pub migration: String,
    pub state: String,
    pub gates: Vec<GateReport>,
    /// Why the migration stays where it is (empty when it may move).
    pub blockers: Vec<String>,
    pub forced: bool,
    pub dry_run: bool,
    /// The routing the move publishes (dry run) or published.
    pub routing: Option<RoutingDocument>,
    pub applied: Option<Applied>,
}

/// Options of `advance`.
#[derive(Debug, Clone, Default)]
pub struct AdvanceOptions {
    pub dry_run: bool,
    pub force: bool,
    pub confirm: Option<String>,
    /// Act only if the migration is in this state (as `status` prints it), else
    /// [`ControllerError::NotInState`]: a retried command does not move it twice.
    pub from: Option<String>,
    /// The preflight's findings the daemon checked before this advance (the waivers it used
    /// among them), journaled in the entry's evidence as `preflight`.
    pub preflight: Option<serde_json::Value>,
}

/// The controller over a store, an HTTP fetcher and a secret resolver: built with
/// [`Controller::new`] (a person's command) and its `with_*` methods (a daemon's round).
pub struct Controller<'a, S: Store> {
    pub store: &'a S,
    pub fetcher: &'a Fetcher,
    pub resolve: &'a (dyn Resolve + Send + Sync),
    /// What a stored plan's secret that does not resolve here is: an error (the daemon, which
    /// talks to brokers and sources and must have them all), or left unresolved so that only
    /// what uses it fails (the CLI's commands that only read and write the store).
    pub secrets: SecretsMode,
    /// A standby controller reads but never writes (no re-publication either).
    pub read_only: bool,
    /// Scrape histories kept between rounds (a daemon's); `None` reads them whole every time.
    pub histories: Option<&'a histories::Histories>,
    /// A daemon's round: evaluations are left there and committed at the round's end instead
    /// of one commit each.
    pub round: Option<&'a round::RoundBatch>,
    /// How old a step's newest evaluation may be while a daemon drives it, in its views
    /// ([`crate::standing::Drive::stale_after_ms`]): a few of the daemon's intervals.
    pub stale_after_ms: i64,
}

/// The SHA-256 of a plan's text, hex.
pub fn plan_hash(yaml: &str) -> String {
    Sha256::digest(yaml.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl<S: Store> Controller<'_, S> {
    /// Compile a plan file, its relative paths resolved against the file's directory (as
    /// [`plans::plan_location`] says, the base a migration stores) whatever the working
    /// directory.
    ///
    /// # Errors
    /// The file cannot be read, or the plan has errors (all of them).
    pub fn compile_file(&self, path: &Path) -> Result<(String, Compiled)> {
        let yaml = plan::bounds::read_file(path).map_err(|message| ControllerError::PlanFile {
            path: path.to_path_buf(),
            message,
        })?;
        let location = plans::plan_location(path);
        let compiled =
            plan::compile(&yaml, location.parent(), self.resolve).map_err(ControllerError::Plan)?;
        Ok((yaml, compiled))
    }

    /// Register the migration of the plan at `path` in `planned`, and publish its routing.
    ///
    /// # Errors
    /// The plan does not compile, or a migration of that name exists.
    pub async fn init(
        &self,
        path: &Path,
        actor: &Actor,
        now_ms: i64,
    ) -> Result<(Applied, Compiled)> {
        let (yaml, compiled) = self.compile_file(path)?;
        let abs = plans::plan_location(path);
        let record = self
            .store
            .create(&NewMigration {
                name: compiled.plan.name.clone(),
                plan_yaml: yaml.clone(),
                plan_path: abs.display().to_string(),
                plan_hash: plan_hash(&yaml),
                now_ms,
                actor: actor.name.clone(),
            })
            .await?;
        let loaded = Loaded {
            ladder: Ladder::of(&compiled.plan),
            plan: compiled.plan.clone(),
            record,
            memory: None,
        };
        let applied = self.publish(&loaded, "init", "planned").await?;
        Ok((applied, compiled))
    }

    /// Load a migration and compile its stored plan; re-publish its routing if it is behind.
    ///
    /// # Errors
    /// Unknown migration, or its stored plan no longer compiles here (a missing variable, with
    /// [`SecretsMode::Required`]; with [`SecretsMode::Deferred`] that secret stays unresolved).
    pub async fn load(&self, name: &str) -> Result<Loaded> {
        self.load_by_name(name, None).await
    }

    /// [`Controller::load`], with the plan compiled by `plans` (kept while unchanged).
    ///
    /// # Errors
    /// As [`Controller::load`].
    pub async fn load_cached(&self, name: &str, plans: &plans::PlanCache) -> Result<Loaded> {
        self.load_by_name(name, Some(plans)).await
    }

    /// A migration as a daemon's round read it with the rest of the fleet ([`crate::store::JournalStore::fleet`]):
    /// its record and its step's gate memory, its plan compiled by `plans`. One whose routing is
    /// behind is read again from the store and re-published, as [`Controller::load_cached`]
    /// does: what is published comes from the record as it is now, never from an older read.
    ///
    /// # Errors
    /// As [`Controller::load`].
    pub async fn load_read(
        &self,
        record: MigrationRecord,
        memory: Vec<GateRecord>,
        plans: &plans::PlanCache,
    ) -> Result<Loaded> {
        if !self.read_only && record.published_generation < record.generation {
            return self.load_cached(&record.name, plans).await;
        }
        let (plan, ladder) = plans
            .compile(&record, self.resolve, self.secrets)
            .map_err(|d| stored_plan_error(&record, d))?;
        Ok(Loaded {
            record,
            plan,
            ladder,
            memory: Some(memory),
        })
    }

    /// The migration `name` read from the store, then as [`Controller::load_record`].
    async fn load_by_name(&self, name: &str, plans: Option<&plans::PlanCache>) -> Result<Loaded> {
        let record = self.store.get(name).await?;
        self.load_record(record, plans).await
    }

    /// A migration from a record read already (a daemon reads the whole fleet in one statement
    /// when it starts): its plan compiled by `plans` when given (as [`Controller::load_cached`]
    /// does), else compiled afresh (as [`Controller::load`]), and its routing re-published if an
    /// earlier command left it behind. The record must be fresh when it is behind: what is
    /// published comes from it (callers with an older read re-read those, as
    /// [`Controller::load_read`] does).
    ///
    /// # Errors
    /// As [`Controller::load`], but for the read.
    pub async fn load_record(
        &self,
        record: MigrationRecord,
        plans: Option<&plans::PlanCache>,
    ) -> Result<Loaded> {
        let (plan, ladder) = match plans {
            Some(cache) => cache.compile(&record, self.resolve, self.secrets),
            None => plans::compile_stored(&record, self.resolve, self.secrets).map(|c| {
                let ladder = Ladder::of(&c.plan);
                (c.plan, ladder)
            }),
        }
        .map_err(|d| stored_plan_error(&record, d))?;
        let loaded = Loaded {
            ladder,
            plan,
            record,
            memory: None,
        };
        if !self.read_only && loaded.record.published_generation < loaded.record.generation {
            let state = loaded.record.state.to_string();
            let applied = self.publish(&loaded, "republish", &state).await?;
            if let Some(e) = applied.publish_error {
                tracing::warn!("routing still behind: {e}");
            } else {
                tracing::info!(
                    generation = loaded.record.generation,
                    "re-published routing left behind by an earlier command"
                );
            }
        }
        Ok(loaded)
    }

    /// Write the routing document to the plan's publishers and note the generation published.
    ///
    /// # Guarantees
    /// The last write to each publisher is never older than the store: a writer does not know
    /// whether a newer transition published before its own write landed (a slow etcd put, a
    /// command racing a re-publication), so once its write is done it reads the migration again
    /// and publishes the newer generation it finds. A newer transition committed after that read
    /// publishes after this write landed.
    async fn publish(&self, loaded: &Loaded, command: &str, from: &str) -> Result<Applied> {
        let doc = publish::document(&loaded.plan, &loaded.record);
        let mut publish_error = self
            .publish_once(&loaded.record, &doc, &loaded.plan)
            .await?;
        let mut published = loaded.record.generation;
        // Also after a failed write: a write that timed out here may still land at a publisher.
        // Bounded: each pass publishes a newer generation, and each of those has a writer of its own.
        for _ in 0..MAX_REPUBLISH {
            let current = self.store.get(&loaded.record.name).await?;
            if current.generation <= published {
                break;
            }
            // A plan applied meanwhile (`migrate plan apply`) may route the newer generation
            // otherwise (it never changes the publishers themselves).
            let plan = if current.plan_hash == loaded.record.plan_hash {
                loaded.plan.clone()
            } else {
                plans::compile_stored(&current, self.resolve, self.secrets)
                    .map_err(|d| stored_plan_error(&current, d))?
                    .plan
            };
            let newer = publish::document(&plan, &current);
            publish_error = self.publish_once(&current, &newer, &plan).await?;
            published = current.generation;
        }
        Ok(Applied {
            command: command.to_string(),
            from: from.to_string(),
            to: loaded.record.state.to_string(),
            paused: loaded.record.paused,
            version: loaded.record.version,
            routing: doc,
            publish_error,
            earliest_advance_at: loaded.earliest_advance_ms().map(crate::time::rfc3339),
        })
    }

    /// One write of `doc` to every publisher of `plan`, noted in the store: the publishers'
    /// errors, joined, if any failed.
    async fn publish_once(
        &self,
        record: &MigrationRecord,
        doc: &RoutingDocument,
        plan: &Plan,
    ) -> Result<Option<String>> {
        let mut errors = Vec::new();
        if let Some(path) = publish::routing_file(plan)
            && let Err(e) = publish::write_file(path, doc)
        {
            errors.push(e);
        }
        if let Some(etcd) = &plan.routing.etcd {
            // An endpoint not resolvable here (a stored plan read without its variable) is a
            // publisher that is behind, as one that is down: the transition stays committed,
            // the error is noted, and the next command or daemon round where it resolves
            // publishes again.
            let put = match etcd.endpoint.value() {
                // The fetcher's error shows the endpoint redacted; the plan's reference
                // (`${ETCD_URL}`) next to it names what to check.
                Ok(endpoint) => self
                    .fetcher
                    .etcd_put(endpoint, &etcd.key, doc)
                    .await
                    .map_err(|e| match etcd.endpoint.reference_shown() {
                        Some(reference) => format!("{e} (routing.etcd.endpoint: {reference})"),
                        None => e.to_string(),
                    }),
                Err(why) => Err(format!(
                    "cannot write the routing to etcd: routing.etcd.endpoint ({}) of the stored \
                     plan: {why}",
                    etcd.endpoint.redacted()
                )),
            };
            if let Err(e) = put {
                errors.push(e);
            }
        }
        // Stored and shown through the one text rule (secrets, control characters, 1 KiB).
        let publish_error = (!errors.is_empty())
            .then(|| crate::outgoing::reason(&errors.join("; "), &plan.known_secrets()));
        match &publish_error {
            None => {
                self.store
                    .mark_published(&record.name, record.generation)
                    .await?
            }
            Some(e) => {
                self.store
                    .note_publish_error(&record.name, record.generation, e)
                    .await?
            }
        }
        Ok(publish_error)
    }

    /// Commit a transition the machine accepted, then publish. `memory`: the gates' memory the
    /// decision rests on, as [`Commit::memory`] (empty for a command that rests on none).
    #[allow(clippy::too_many_arguments)]
    async fn apply(
        &self,
        loaded: &Loaded,
        t: &Transition,
        actor: &Actor,
        forced: bool,
        evidence: serde_json::Value,
        memory: Vec<MemoryRead>,
        now_ms: i64,
    ) -> Result<Applied> {
        let record = self
            .store
            .commit(
                &loaded.record.name,
                &Commit {
                    expected_version: loaded.record.version,
                    command: t.command.to_string(),
                    to: t.to,
                    at_ms: now_ms,
                    actor: actor.name.clone(),
                    // Stored through the one text rule: the plan's secrets masked, control
                    // characters escaped (its lines kept), at most 1 KiB.
                    reason: actor.reason.as_deref().map(|r| {
                        crate::outgoing::text(
                            r,
                            &loaded.plan.known_secrets(),
                            crate::outgoing::Shape::Block,
                            crate::outgoing::REASON_MAX,
                        )
                    }),
                    forced,
                    evidence,
                    memory,
                },
            )
            .await?;
        let after = Loaded {
            record,
            plan: loaded.plan.clone(),
            ladder: loaded.ladder.clone(),
            memory: None,
        };
        self.publish(&after, t.command, &t.from.state.to_string())
            .await
    }

    /// Evaluate the current phase's gates now (recorded unless `dry_run`).
    ///
    /// # Errors
    /// Store failures only.
    pub async fn evaluate(
        &self,
        loaded: &Loaded,
        now_ms: i64,
        dry_run: bool,
    ) -> Result<Vec<GateReport>> {
        Ok(evaluate::evaluate_phase(
            self.store,
            self.fetcher,
            loaded,
            now_ms,
            match (dry_run, self.round) {
                (true, _) => evaluate::Recording::DryRun,
                (false, None) => evaluate::Recording::Commit,
                (false, Some(batch)) => evaluate::Recording::Round(batch),
            },
            self.histories,
        )
        .await?)
    }

    /// Evaluate the exit gates now and move one step if they all pass (or if forced).
    ///
    /// # Errors
    /// Illegal for the state (paused, complete, confirmation missing), a forced advance without a
    /// reason, or store failures. Gates that do not pass are not an error: see
    /// [`AdvanceOutcome::blockers`].
    pub async fn advance(
        &self,
        name: &str,
        opts: &AdvanceOptions,
        actor: &Actor,
        now_ms: i64,
    ) -> Result<AdvanceOutcome> {
        self.advance_as(name, opts, actor, now_ms, None).await
    }

    /// [`Controller::advance`] for a caller who may not enter `complete` when `not_admin` names
    /// them (an operator of the API).
    ///
    /// # Guarantees
    /// The role check is made on the state the commit moves from: on the migration as loaded for
    /// the transition, whose commit is conditional on that version (a migration moved meanwhile
    /// is a conflict, nothing applied). However requests race, a caller who may not enter
    /// `complete` never does.
    ///
    /// # Errors
    /// Those of [`Controller::advance`], and [`ControllerError::Forbidden`] when the step enters
    /// `complete` and `not_admin` is set.
    pub async fn advance_as(
        &self,
        name: &str,
        opts: &AdvanceOptions,
        actor: &Actor,
        now_ms: i64,
        not_admin: Option<&str>,
    ) -> Result<AdvanceOutcome> {
        if opts.force && actor.reason.is_none() {
            return Err(ControllerError::ReasonRequired("advance --force"));
        }
        let mut version = None;
        let mut retries = 0;
        loop {
            let loaded = self.load(name).await?;
            let first = *version.get_or_insert(loaded.record.version);
            let outcome = if loaded.record.version == first {
                self.advance_loaded(&loaded, opts, actor, now_ms, not_admin)
                    .await
            } else {
                // The migration moved meanwhile: deciding again would advance from another step.
                expect_state(&loaded, opts.from.as_deref())?;
                Err(StoreError::Conflict {
                    name: name.to_string(),
                    expected: first,
                    actual: loaded.record.version,
                }
                .into())
            };
            match outcome {
                Err(ControllerError::Store(StoreError::StaleMemory { .. }))
                    if retries < STALE_MEMORY_RETRIES =>
                {
                    retries += 1;
                    tracing::info!(
                        migration = name,
                        retries,
                        "advance: another writer evaluated the gates meanwhile; deciding again on their memory as it is now"
                    );
                }
                other => return other,
            }
        }
    }

    /// One attempt of [`Controller::advance`] on `loaded`.
    async fn advance_loaded(
        &self,
        loaded: &Loaded,
        opts: &AdvanceOptions,
        actor: &Actor,
        now_ms: i64,
        not_admin: Option<&str>,
    ) -> Result<AdvanceOutcome> {
        expect_state(loaded, opts.from.as_deref())?;
        let snapshot = loaded.record.snapshot();
        let command = Command::Advance {
            confirm: opts.confirm.clone(),
        };
        let transition = machine::handle(&loaded.ladder, &loaded.record.name, snapshot, &command)?;
        // Checked on `loaded`, the state the commit is conditional on (its version).
        if let Some(who) = not_admin
            && transition.to.state == machine::State::Complete
        {
            return Err(ControllerError::Forbidden(format!(
                "advancing {} from {} enters complete, the point of no return: an admin does \
                 it; {who} is not one",
                loaded.record.name, snapshot.state
            )));
        }
        let gates = self.evaluate(loaded, now_ms, opts.dry_run).await?;
        self.advance_on_gates(loaded, &transition, gates, opts, actor, now_ms)
            .await
    }

    /// The second half of [`Controller::advance`]: decide on gates already evaluated, commit
    /// and publish (the daemon evaluates once per tick and comes here).
    ///
    /// # Errors
    /// Store failures (a conflict when the migration changed since `loaded` was read).
    pub async fn advance_on_gates(
        &self,
        loaded: &Loaded,
        transition: &Transition,
        gates: Vec<GateReport>,
        opts: &AdvanceOptions,
        actor: &Actor,
        now_ms: i64,
    ) -> Result<AdvanceOutcome> {
        let snapshot = loaded.record.snapshot();
        let blockers = blockers(loaded, &gates, now_ms);
        let mut outcome = AdvanceOutcome {
            migration: loaded.record.name.clone(),
            state: snapshot.state.to_string(),
            gates,
            blockers,
            forced: false,
            dry_run: opts.dry_run,
            routing: None,
            applied: None,
        };
        if !outcome.blockers.is_empty() && !opts.force {
            return Ok(outcome);
        }
        outcome.forced = !outcome.blockers.is_empty();
        if opts.dry_run {
            let mut preview = loaded.record.clone();
            preview.state = transition.to.state;
            preview.paused = transition.to.paused;
            preview.generation += 1;
            preview.updated_at_ms = now_ms;
            outcome.routing = Some(publish::document(&loaded.plan, &preview));
            return Ok(outcome);
        }
        let mut evidence = serde_json::json!({
            "gates": outcome.gates,
            "overridden": outcome.blockers,
        });
        if let (Some(p), Some(map)) = (&opts.preflight, evidence.as_object_mut()) {
            map.insert("preflight".into(), p.clone());
        }
        // An advance forced past a blocker moves whatever the gates say: it rests on no memory.
        // One with --force whose gates all pass rests on them like any other.
        let memory = if outcome.forced {
            Vec::new()
        } else {
            self.rests_on(&outcome.gates)
        };
        let applied = self
            .apply(
                loaded,
                transition,
                actor,
                outcome.forced,
                evidence,
                memory,
                now_ms,
            )
            .await?;
        outcome.routing = Some(applied.routing.clone());
        outcome.applied = Some(applied);
        Ok(outcome)
    }

    /// Rollback, pause, resume or abort.
    ///
    /// # Errors
    /// Illegal for the state, a missing reason (rollback, abort), or store failures.
    pub async fn command(
        &self,
        name: &str,
        command: &Command,
        actor: &Actor,
        evidence: serde_json::Value,
        now_ms: i64,
    ) -> Result<Applied> {
        self.command_from(name, command, None, actor, evidence, now_ms)
            .await
    }

    /// [`Controller::command`], only if the migration is in state `from` (when given).
    ///
    /// # Errors
    /// As [`Controller::command`]; [`ControllerError::NotInState`] when it is elsewhere,
    /// [`ControllerError::UnknownState`] when `from` is no state of its plan.
    pub async fn command_from(
        &self,
        name: &str,
        command: &Command,
        from: Option<&str>,
        actor: &Actor,
        evidence: serde_json::Value,
        now_ms: i64,
    ) -> Result<Applied> {
        match command {
            Command::Rollback { .. } | Command::Abort if actor.reason.is_none() => {
                return Err(ControllerError::ReasonRequired(command.name()));
            }
            _ => {}
        }
        let loaded = self.load(name).await?;
        expect_state(&loaded, from)?;
        self.command_on(&loaded, command, actor, evidence, now_ms)
            .await
    }

    /// A command on a migration as it was read: a conflict if it changed since.
    ///
    /// # Errors
    /// Illegal for the state, or store failures.
    pub async fn command_on(
        &self,
        loaded: &Loaded,
        command: &Command,
        actor: &Actor,
        evidence: serde_json::Value,
        now_ms: i64,
    ) -> Result<Applied> {
        let transition = machine::handle(
            &loaded.ladder,
            &loaded.record.name,
            loaded.record.snapshot(),
            command,
        )?;
        self.apply(
            loaded,
            &transition,
            actor,
            false,
            evidence,
            Vec::new(),
            now_ms,
        )
        .await
    }

    /// The gates' memory a decision on `gates` (evaluated by this controller) rests on, at the
    /// revision the store holds if no other writer wrote it since the evaluation read it: the
    /// one read when the evaluation's own write waits for the end of a daemon's round (which
    /// commits after its decisions), the next one when the evaluation committed its write
    /// already (a command's).
    fn rests_on(&self, gates: &[GateReport]) -> Vec<MemoryRead> {
        let written = self.round.is_none();
        gates
            .iter()
            .map(|g| MemoryRead {
                gate: g.name.clone(),
                kind: g.kind.as_str().to_string(),
                revision: if written {
                    Some(g.memory_read.unwrap_or(0).saturating_add(1))
                } else {
                    g.memory_read
                },
            })
            .collect()
    }

    /// The current phase's gates as last evaluated (`hold`, "not evaluated yet" for the others).
    ///
    /// # Errors
    /// Store failures.
    pub async fn last_gates(&self, loaded: &Loaded) -> Result<Vec<GateView>> {
        let Some(kind) = loaded.record.state.phase() else {
            return Ok(Vec::new());
        };
        let Some(phase) = loaded.plan.phase(kind) else {
            return Ok(Vec::new());
        };
        let names = phase.gate_keys();
        let keys: Vec<GateKey<'_>> = names.iter().map(|(n, k)| (*n, k.as_str())).collect();
        let latest = self
            .store
            .latest_evaluations(&loaded.record.name, loaded.record.entered_at_ms, &keys)
            .await?;
        Ok(names
            .into_iter()
            .map(|(name, k)| {
                let last = latest
                    .iter()
                    .find(|r| r.gate == name && r.kind == k.as_str());
                let verdict = last
                    .and_then(|r| Verdict::from_stored(&r.verdict, r.value, &r.reason))
                    .unwrap_or(Verdict::NoData);
                let planned = phase.gate(name, k);
                GateView {
                    phase: kind.as_str().to_string(),
                    name: name.to_string(),
                    kind: k,
                    source: phase.source_of(name, k).unwrap_or_default().to_string(),
                    verdict,
                    value: last.and_then(|r| r.value),
                    reason: last.map_or_else(
                        || AWAITING_FIRST_EVALUATION.to_string(),
                        |r| r.reason.clone(),
                    ),
                    evaluated_at: last.map(|r| crate::time::rfc3339(r.at_ms)),
                    evaluated_at_ms: last.map(|r| r.at_ms),
                    age_ms: None,
                    soak: last
                        .filter(|_| verdict == Verdict::Soaking)
                        .and_then(|r| stored_soak(r, planned?.hold_for?)),
                    cause: last
                        .filter(|_| verdict == Verdict::NoData)
                        .and_then(|r| gate::NoDataCause::parse(r.no_data_cause.as_deref()?)),
                    largest_partition: last.and_then(gate_view::stored_largest),
                }
            })
            .collect())
    }
}

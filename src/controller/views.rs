//! What the CLI prints with `--json` and the HTTP API answers: one shape for both.

use serde::Serialize;

use super::{Controller, GateView, Loaded, Result};
use crate::controller::publish::document;
use crate::machine::State;
use crate::routing::RoutingDocument;
use crate::standing::{Drive, GateInput, Pause, Snapshot, StandingView, standing};
use crate::store::{JournalEntry, Store};
use crate::time::rfc3339;

/// The `status --json` contract (also `GET /v1/migrations/{name}`).
#[derive(Debug, Clone, Serialize)]
pub struct StatusView {
    pub migration: String,
    pub state: String,
    pub step: Option<usize>,
    pub paused: bool,
    pub version: i64,
    pub entered_at: String,
    pub routing: RoutingDocument,
    /// False when the routing of the current generation has not reached every publisher yet.
    pub routing_published: bool,
    /// Why the last publication failed (a publisher that is behind), until one succeeds.
    pub publish_error: Option<String>,
    pub gates: Vec<GateView>,
    /// Why the stored plan does not compile with every secret resolved in the environment
    /// that made this view (a daemon with that environment cannot load the migration and
    /// answers `503` for its routing); absent when it compiles. Only a view made with deferred
    /// secrets (the CLI's) has one: a daemon's cannot be made at all then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_error: Option<String>,
    /// Where the migration stands and why it is not moving ([`crate::standing`]).
    pub standing: StandingView,
    /// The journal entry that paused it (shown by `status` under its head line; the API has it
    /// in `standing`).
    #[serde(skip)]
    pub pause: Option<Pause>,
}

/// One journal entry as `history --json` and `GET .../history` show it.
#[derive(Debug, Clone, Serialize)]
pub struct EntryView {
    pub seq: i64,
    pub at: String,
    pub command: String,
    pub from: String,
    pub from_paused: bool,
    pub to: String,
    pub to_paused: bool,
    pub actor: String,
    pub reason: Option<String>,
    pub forced: bool,
    pub generation: i64,
    /// The lease epoch the entry was written under (`null`: written without a lease).
    pub epoch: Option<i64>,
    pub evidence: serde_json::Value,
}

impl EntryView {
    pub fn of(e: &JournalEntry) -> EntryView {
        EntryView {
            seq: e.seq,
            at: rfc3339(e.at_ms),
            command: e.command.clone(),
            from: e.from.state.to_string(),
            from_paused: e.from.paused,
            to: e.to.state.to_string(),
            to_paused: e.to.paused,
            actor: e.actor.clone(),
            reason: e.reason.clone(),
            forced: e.forced,
            generation: e.generation,
            epoch: e.epoch,
            evidence: e.evidence.clone(),
        }
    }
}

impl<S: Store> Controller<'_, S> {
    /// The status of a loaded migration at `now_ms`, gates as last evaluated.
    ///
    /// # Errors
    /// Store failures.
    pub async fn status_view(&self, loaded: &Loaded, now_ms: i64) -> Result<StatusView> {
        let r = &loaded.record;
        let gates = self.last_gates(loaded).await?;
        let pause = if r.paused {
            Pause::of(&self.store.journal(&r.name).await?)
        } else {
            None
        };
        let drive = Drive {
            holder: self.store.lease_holder(super::LEASE).await?,
            evaluated_at_ms: gates.iter().filter_map(|g| g.evaluated_at_ms).max(),
            since_ms: loaded.counting_from_ms(),
            stale_after_ms: self.stale_after_ms,
        };
        let mut gates = gates;
        for g in &mut gates {
            g.age_ms = g.evaluated_at_ms.map(|at| now_ms.saturating_sub(at).max(0));
        }
        let standing = standing_of(loaded, &gates, pause.as_ref(), Some(&drive), now_ms).view();
        Ok(StatusView {
            migration: r.name.clone(),
            state: r.state.name().to_string(),
            step: r.state.step(),
            paused: r.paused,
            version: r.version,
            entered_at: rfc3339(r.entered_at_ms),
            routing: document(&loaded.plan, r),
            routing_published: r.published_generation >= r.generation,
            publish_error: r.publish_error.clone(),
            gates,
            plan_error: self.plan_error(r),
            standing,
            pause,
        })
    }

    /// See [`StatusView::plan_error`].
    fn plan_error(&self, record: &crate::store::MigrationRecord) -> Option<String> {
        if self.secrets != crate::plan::SecretsMode::Deferred {
            return None;
        }
        let strict = crate::controller::plans::compile_stored(
            record,
            self.resolve,
            crate::plan::SecretsMode::Required,
        );
        strict.err().map(|diags| {
            diags
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })
    }
}

/// Where `loaded` stands at `now_ms`, its gates as last evaluated; `drive` says whether a
/// daemon drives it (`None`: the view is the driving daemon's own, made in its round).
pub fn standing_of(
    loaded: &Loaded,
    gates: &[super::GateView],
    pause: Option<&Pause>,
    drive: Option<&Drive>,
    now_ms: i64,
) -> crate::standing::Standing {
    let r = &loaded.record;
    let phase = r.state.phase().and_then(|k| loaded.plan.phase(k));
    let inputs: Vec<GateInput> = gates
        .iter()
        .map(|g| GateInput {
            name: g.name.clone(),
            kind: g.kind,
            source: g.source.clone(),
            verdict: g.verdict,
            value: g.value,
            threshold: phase
                .and_then(|p| p.threshold(&g.name, g.kind))
                .map(|t| t.text()),
            reason: g.reason.clone(),
            evaluated: g.evaluated_at.is_some(),
            evaluated_at_ms: g.evaluated_at_ms,
            soak: g.soak,
            cause: g.cause,
        })
        .collect();
    let next = loaded.ladder.next(r.state).map(|n| n.to_string());
    let state = match r.state.step() {
        Some(i) => format!("{}[{i}]", r.state.name()),
        None => r.state.name().to_string(),
    };
    standing(&Snapshot {
        migration: &r.name,
        state: &state,
        complete: r.state == State::Complete,
        paused: r.paused.then_some(pause),
        gates: &inputs,
        counting_from_ms: loaded.counting_from_ms(),
        min_ms: phase.map_or(0, |p| crate::time::millis(p.min_duration)),
        next_needs_confirmation: (loaded.ladder.next(r.state) == Some(State::Complete))
            .then_some("complete"),
        next: next.as_deref(),
        auto_advance: loaded.plan.auto_advance,
        drive,
        now_ms,
    })
}

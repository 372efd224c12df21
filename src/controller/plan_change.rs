//! What a new plan may change under a migration (`migrate plan apply`), and the diff shown and
//! journaled: pure, no IO, no clock.
//!
//! # Guarantees
//! [`refusals`] is empty only when the new plan keeps every promise the migration's current
//! state has made to producers and consumers:
//! - nothing changes under a `complete` migration (its plan is the record of what ran);
//! - where the routing is published (`routing.file`, `routing.etcd`) never changes: producers
//!   and consumers follow it there, and a document left behind would never move again;
//! - the current state exists in the new plan (its phase, its slice step);
//! - past `planned`: the slice total, a bridge's key, and the routing the current state
//!   publishes (consumers, migrated slices, broker names) are the same under both plans. In
//!   `planned` nothing has moved yet, so its routing may change: it is published again
//!   ([`republishes`]).

use similar::TextDiff;

use crate::machine::{Ladder, State};
use crate::plan::{Check, Gate, GateKind, Plan, Requirement};
use crate::routing::RoutingDocument;
use crate::store::MigrationRecord;

use super::publish;

/// Why a new plan cannot replace a migration's plan in its current state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The migration is complete.
    #[error(
        "the migration is complete: its plan is the record of what ran and nothing follows it any more; for another migration, give the plan a new `name` and `migrate init` it"
    )]
    Complete,
    /// The place the routing is published moved.
    #[error(
        "routing.{what} changes ({old} -> {new}): producers and consumers follow the routing where it is published now, and a document left there would never move again; keep routing.{what} as it is"
    )]
    Publisher {
        what: &'static str,
        old: String,
        new: String,
    },
    /// The slice total changed after `planned`.
    #[error(
        "slices changes ({old} -> {new}) in state {state}: producers slice keys by the total, so every key's slice (and its per-key order across brokers) would change; keep `slices: {old}` (a different total needs a new migration)"
    )]
    SlicesTotal { old: u32, new: u32, state: State },
    /// The current slice step is not in the new plan's steps.
    #[error(
        "the migration is at slices step {step} (index from 0), but the new plan has {steps} slice step(s): keep at least {need} steps, the first {need} as they are (or roll back first with `migrate rollback`)",
        need = step + 1
    )]
    StepGone { step: usize, steps: usize },
    /// The current state's phase is gone from the new plan.
    #[error(
        "the migration is in {state}, a phase the new plan leaves out: keep the phase (or move the migration out of it first with `migrate advance` or `migrate rollback`)"
    )]
    StateGone { state: State },
    /// The routing of the current state differs under the new plan.
    #[error(
        "in state {state} the routing's {what} would change ({old} -> {new}): producers and consumers act on it now; keep it as it is (change what is published only by `migrate advance` or `migrate rollback`)"
    )]
    Routing {
        state: State,
        what: &'static str,
        old: String,
        new: String,
    },
    /// The bridge's key changed after `planned`.
    #[error(
        "bridge.key changes in state {state}: the bridge slices each message by its key, so keys would land in other slices (per-key order breaks); keep bridge.key as it is"
    )]
    BridgeKey { state: State },
}

/// Every reason why `new` cannot replace `old` under the migration `rec` (empty: it can).
pub fn refusals(old: &Plan, new: &Plan, rec: &MigrationRecord) -> Vec<Refusal> {
    let state = rec.state;
    if state == State::Complete {
        return vec![Refusal::Complete];
    }
    let mut out = publishers(old, new);
    let ladder = Ladder::of(new);
    if !ladder.knows(state) {
        out.push(match state {
            State::Slices(step) => Refusal::StepGone {
                step,
                steps: new.steps().len(),
            },
            state => Refusal::StateGone { state },
        });
    }
    if state == State::Planned {
        return out;
    }
    if old.slices != new.slices {
        out.push(Refusal::SlicesTotal {
            old: old.slices,
            new: new.slices,
            state,
        });
    }
    let key = |p: &Plan| p.bridge.as_ref().map(|b| b.key.clone());
    if let (Some(o), Some(n)) = (key(old), key(new))
        && o != n
    {
        out.push(Refusal::BridgeKey { state });
    }
    // A step that is gone has no routing to compare; the total was reported above.
    if ladder.knows(state) {
        let (a, b) = (publish::document(old, rec), publish::document(new, rec));
        out.extend(routing_changes(&a, &b, state));
    }
    out
}

/// Whether applying `new` changes what the migration publishes (only ever allowed in
/// `planned`): it must then be published again.
pub fn republishes(old: &Plan, new: &Plan, rec: &MigrationRecord) -> bool {
    publish::document(old, rec) != publish::document(new, rec)
}

/// The gates of the phase of `state` whose definition is not the same under `new` as under
/// `old` (its check, threshold, query, source, `for`, `for_max_gap`, `min_samples`; a
/// requirement's query or `at_least`; a gate only one of the plans has; not a `judge`'s
/// settings alone: see [`resets`]), as their memory is stored, `(name, kind)`.
/// Their memory (held-since mark, samples, peak) was gathered under the old definition and must
/// not count toward the new one; the unchanged gates keep theirs.
pub fn changed_gates(old: &Plan, new: &Plan, state: State) -> Vec<(String, String)> {
    let (before, after) = (definitions(old, state), definitions(new, state));
    let mut changed: Vec<(String, String)> = before
        .iter()
        .chain(after.iter())
        .map(|(key, _)| *key)
        .filter(|key| resets(find(&before, key), find(&after, key)))
        .map(|(name, kind)| (name.to_string(), kind.as_str().to_string()))
        .collect();
    changed.sort();
    changed.dedup();
    changed
}

/// What a gate's evaluation depends on.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Definition<'p> {
    Gate(&'p Gate),
    Requirement(&'p Requirement),
}

/// The definition of the gate `key` in `defs`, if it has one.
fn find<'p>(defs: &[GateDefinition<'p>], key: &(&str, GateKind)) -> Option<Definition<'p>> {
    defs.iter().find(|(k, _)| k == key).map(|(_, d)| *d)
}

/// Whether a gate defined as `before` and now as `after` loses its memory. A `judge` whose
/// settings only changed (tolerance, confidence, `min_events`, `min_failures`,
/// `max_duration`) keeps it: its ledger knows what it bet under and starts a new count itself,
/// keeping a FAIL already reached (issue 55: a tolerance change erased a FAIL).
fn resets(before: Option<Definition<'_>>, after: Option<Definition<'_>>) -> bool {
    if let (Some(Definition::Gate(a)), Some(Definition::Gate(b))) = (before, after)
        && let (Check::Judge(x), Check::Judge(y)) = (&a.check, &b.check)
    {
        let mut same_settings = b.clone();
        same_settings.check = Check::Judge(Box::new(crate::plan::JudgeCheck {
            form: y.form.clone(),
            config: x.config,
        }));
        return *a != same_settings;
    }
    before != after
}

/// A gate's memory key `(name, kind)` and its definition.
type GateDefinition<'p> = ((&'p str, GateKind), Definition<'p>);

/// Every gate of the phase of `state` under `plan`, keyed as its memory is stored.
fn definitions(plan: &Plan, state: State) -> Vec<GateDefinition<'_>> {
    let mut out = Vec::new();
    let Some(phase) = state.phase().and_then(|kind| plan.phase(kind)) else {
        return out;
    };
    out.extend(
        phase
            .exit
            .iter()
            .map(|g| ((g.name.as_str(), GateKind::Exit), Definition::Gate(g))),
    );
    if let Some(r) = &phase.require_peak {
        out.push((("require_peak", GateKind::Exit), Definition::Requirement(r)));
    }
    if let Some(r) = &phase.require_deploy {
        out.push((
            ("require_deploy", GateKind::Exit),
            Definition::Requirement(r),
        ));
    }
    out.extend(
        phase
            .guard
            .iter()
            .map(|g| ((g.name.as_str(), GateKind::Guard), Definition::Gate(g))),
    );
    out
}

fn publishers(old: &Plan, new: &Plan) -> Vec<Refusal> {
    let file = |p: &Plan| {
        p.routing
            .file
            .as_ref()
            .map_or_else(|| "none".to_string(), |f| f.display().to_string())
    };
    let etcd = |p: &Plan| {
        p.routing.etcd.as_ref().map_or_else(
            || "none".to_string(),
            |e| format!("{} key {}", e.endpoint.redacted(), e.key),
        )
    };
    let etcd_target = |p: &Plan| {
        p.routing
            .etcd
            .as_ref()
            // What the plan wrote: a `${VAR}` is the same publisher whatever it resolves to on
            // the machine that applies (a stored plan may be read without its secrets).
            .map(|e| (e.endpoint.reference.clone(), e.key.clone()))
    };
    let mut out = Vec::new();
    if old.routing.file != new.routing.file {
        out.push(Refusal::Publisher {
            what: "file",
            old: file(old),
            new: file(new),
        });
    }
    if etcd_target(old) != etcd_target(new) {
        out.push(Refusal::Publisher {
            what: "etcd",
            old: etcd(old),
            new: etcd(new),
        });
    }
    out
}

fn routing_changes(a: &RoutingDocument, b: &RoutingDocument, state: State) -> Vec<Refusal> {
    let consume = |d: &RoutingDocument| {
        d.consume
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("+")
    };
    let fields: [(&'static str, String, String); 5] = [
        ("consumers", consume(a), consume(b)),
        (
            "migrated slices",
            a.slices_migrated.to_string(),
            b.slices_migrated.to_string(),
        ),
        (
            "slice total",
            a.slices_total.to_string(),
            b.slices_total.to_string(),
        ),
        ("old broker", a.brokers.old.clone(), b.brokers.old.clone()),
        ("new broker", a.brokers.new.clone(), b.brokers.new.clone()),
    ];
    fields
        .into_iter()
        // The slice total has a refusal of its own.
        .filter(|(what, old, new)| old != new && *what != "slice total")
        .map(|(what, old, new)| Refusal::Routing {
            state,
            what,
            old,
            new,
        })
        .collect()
}

/// [`diff`] as it may be shown and journaled, through the one text rule
/// ([`crate::outgoing`]): every secret value the two parsed plans hold ([`Plan::known_secrets`]:
/// credentials raw, decoded and in every quoting, webhook tokens and paths) masked wherever
/// it appears, then every URL's userinfo and query string, then control characters escaped
/// (its lines kept). Masked by the parsed plans, not by scanning the text: a password quoted
/// `'Quot''ed'` or `"Dbl\"Quoted"` is masked as it is written. The journal is append-only: a
/// password written there could never be removed.
pub fn masked_diff(old: &str, new: &str, plans: [&Plan; 2]) -> String {
    let mut known = plans[0].known_secrets();
    known.extend(&plans[1].known_secrets());
    let redacted = known.redact(&diff(old, new));
    crate::outgoing::sanitize(&redacted, crate::outgoing::Shape::Block).into_owned()
}

/// A unified line diff of the stored plan text against the new one (3 lines of context).
/// Unmasked: what is shown goes through [`masked_diff`].
pub fn diff(old: &str, new: &str) -> String {
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header("stored plan", "new plan")
        .to_string()
}

#[cfg(test)]
mod tests;

//! The preflight before a migration first writes to the new broker (issue 58): when a tick
//! would advance into `synthetic` (or, in a plan without it, from `consume_dual` or `planned`
//! into the first `slices` step), the daemon reads both brokers' durability settings
//! ([`crate::adapters::preflight`]) and
//!
//! - advances when nothing is refused, the findings (and so every waiver used, with its
//!   reason) in the journal entry's evidence (`preflight`);
//! - pauses the migration when something is refused, the pause's reason naming each setting
//!   and its fix (`preflight refused: new nats: nats.storage: ...`): the standing says "needs a
//!   person: paused ...", a webhook (`hold`) says it once. A person fixes the broker or waives
//!   the check (`migrate plan apply`), then resumes; the next advance checks again;
//!   A broker that could not be read is refused so too (`readable`), unless waived;
//! - holds (no transition) when the reading itself outlasts the tick's source timeout, saying
//!   so once a generation: the next round tries again.
//!
//! A person's own advance (CLI, API, console) is not checked here: `migrate preflight PLAN`
//! is theirs to run.

use crate::controller::{Controller, ControllerError, Loaded};
use crate::machine::State;
use crate::store::Store;

use super::Shared;
use super::notify::EventKind;

/// Why the preflight kept a tick from advancing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Refused: the migration was paused.
    Paused,
    /// The reading outlasted the tick's source timeout: nothing changed.
    Held,
}

/// Whether moving from `from` to `to` is a migration's first write to the new broker: into
/// `synthetic` (its probes), or into `slices` from before it when the plan has no `synthetic`.
pub fn needed(from: State, to: Option<State>) -> bool {
    match to {
        Some(State::Synthetic) => true,
        Some(State::Slices(_)) => matches!(from, State::Planned | State::ConsumeDual),
        _ => false,
    }
}

/// Before the tick advances `loaded` to `next`: `Ok(Ok(evidence))` to go on (the preflight's
/// findings to journal with the advance, `None` when none was needed or this daemon reads
/// none), `Ok(Err(stopped))` when the preflight stopped it (paused on a refusal, held on an
/// unread broker).
///
/// # Errors
/// The pause could not be committed (a conflict above all: the caller's to read).
pub(super) async fn before_advance<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    c: &Controller<'_, S>,
    loaded: &Loaded,
    next: Option<State>,
    now_ms: i64,
) -> Result<Result<Option<serde_json::Value>, Stopped>, ControllerError> {
    if !needed(loaded.record.state, next) {
        return Ok(Ok(None));
    }
    let Some(reader) = shared.rounds.preflight_reader() else {
        return Ok(Ok(None));
    };
    let name = &loaded.record.name;
    // Within the tick's budget for its sources: a reading cut there is an unread broker.
    let budget = shared.config.source_timeout;
    let Ok(p) = tokio::time::timeout(budget, reader.read(loaded.plan.clone())).await else {
        hold(shared, loaded, &format!("no answer within {budget:?}"));
        return Ok(Err(Stopped::Held));
    };
    let evidence = serde_json::json!({
        "findings": p.report.findings,
        "unused_waivers": p.report.unused_waivers,
    });
    let Some(reason) = p.report.refusal_line() else {
        return Ok(Ok(Some(evidence)));
    };
    let reason = crate::outgoing::reason(&reason, &loaded.plan.known_secrets());
    tracing::warn!(migration = %name, "{reason}");
    let evidence = serde_json::json!({ "preflight": evidence });
    super::person_pause::pause_for_a_person(shared, c, loaded, &reason, evidence, now_ms).await?;
    Ok(Err(Stopped::Paused))
}

/// A broker could not be read: the step holds; said once a generation.
fn hold<S: Store + Clone + 'static>(shared: &Shared<S>, loaded: &Loaded, why: &str) {
    let name = &loaded.record.name;
    let generation = loaded.record.generation;
    let first = shared.rounds.with_memo(name, |m| {
        m.preflight_unread.replace(generation) != Some(generation)
    });
    if first {
        let text = crate::outgoing::reason(
            &format!("{name}: preflight cannot read a broker's settings, holding: {why}"),
            &loaded.plan.known_secrets(),
        );
        tracing::warn!(migration = %name, "{text}");
        shared.event(loaded, EventKind::Hold, text, serde_json::json!({}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_step_that_writes_to_the_new_broker_needs_a_preflight() {
        assert!(needed(State::ConsumeDual, Some(State::Synthetic)));
        assert!(needed(State::Planned, Some(State::Synthetic)));
        assert!(needed(State::ConsumeDual, Some(State::Slices(0))));
        assert!(!needed(State::Synthetic, Some(State::Slices(0))));
        assert!(!needed(State::Slices(0), Some(State::Slices(1))));
        assert!(!needed(State::Planned, Some(State::ConsumeDual)));
        assert!(!needed(State::Drain, Some(State::Disconnect)));
        assert!(!needed(State::Disconnect, None));
    }
}

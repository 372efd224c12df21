//! The daemon's own pause for a person (a judge that could not decide, a preflight refusal):
//! journaled with its reason and evidence, announced as a `hold` event.

use crate::controller::{Controller, ControllerError, Loaded};
use crate::machine::Command;
use crate::store::Store;

use super::Shared;
use super::notify::EventKind;

/// Pause the migration of `loaded` for a person: the journal's actor says `reason`, the entry
/// carries `evidence`, and a `hold` event says it waits for a person.
///
/// # Errors
/// The pause's commit failed (a conflict above all: someone changed the migration meanwhile).
pub(super) async fn pause_for_a_person<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    c: &Controller<'_, S>,
    loaded: &Loaded,
    reason: &str,
    evidence: serde_json::Value,
    now_ms: i64,
) -> Result<(), ControllerError> {
    let name = &loaded.record.name;
    let actor = shared.actor(reason);
    let applied = c
        .command_on(loaded, &Command::Pause, &actor, evidence.clone(), now_ms)
        .await?;
    shared.metrics.transition(name, &applied.command);
    shared.event(
        loaded,
        EventKind::Hold,
        format!("{name}: {reason} — paused until a person acts"),
        evidence,
    );
    shared.refresh(c, name).await;
    Ok(())
}

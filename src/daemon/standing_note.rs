//! Where each migration stands, as the daemon sees it after a round: `/metrics`
//! (`queue_migrate_standing`) and a webhook (`standing`) when it changes.

use crate::controller::{Controller, GateReport, Loaded};
use crate::standing::{Pause, Standing};
use crate::store::traits::*;

use super::Shared;
use super::notify::EventKind;

/// Take in where `loaded` stands given this round's `gates`: the gauge always, a webhook (by
/// the leader) when its kind changed since the last one this daemon announced.
pub(super) async fn note<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    c: &Controller<'_, S>,
    loaded: &Loaded,
    gates: &[GateReport],
    now_ms: i64,
) {
    let pause = if loaded.record.paused {
        c.store
            .journal(&loaded.record.name)
            .await
            .ok()
            .and_then(|j| Pause::of(&j))
    } else {
        None
    };
    let views: Vec<_> = gates.iter().map(GateReport::view).collect();
    let standing =
        crate::controller::views::standing_of(loaded, &views, pause.as_ref(), None, now_ms);
    announce(shared, loaded, &standing);
}

/// The gauge, and a webhook when the kind changed (never for the first one a daemon sees: a
/// restart is not news).
pub(super) fn announce<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    loaded: &Loaded,
    standing: &Standing,
) {
    let name = &loaded.record.name;
    let kind = standing.kind();
    shared.metrics.standing(name, kind);
    let previous = shared.rounds.with_memo(name, |m| m.standing.replace(kind));
    if shared.is_leader()
        && let Some(previous) = previous
        && previous != kind
    {
        let view = standing.view();
        shared.event(
            loaded,
            EventKind::Standing,
            format!("{name}: {}", view.sentence),
            serde_json::json!({ "standing": view, "was": previous }),
        );
    }
}

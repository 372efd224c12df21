//! Why a migration may not leave its current step, from fresh evaluations: the exit gates, the
//! guards and the step's minimum time as [`crate::gate::ready_to_advance`] weighs them.

use super::evaluate::GateReport;
use super::loaded::Loaded;
use crate::gate;
use crate::plan::GateKind;

/// Why the migration may not leave its current step, given fresh evaluations.
pub fn blockers(loaded: &Loaded, gates: &[GateReport], now_ms: i64) -> Vec<String> {
    let min = loaded
        .record
        .state
        .phase()
        .and_then(|k| loaded.plan.phase(k))
        .map(|p| p.min_duration)
        .unwrap_or_default();
    let exits: Vec<_> = gates
        .iter()
        .filter(|g| g.kind == GateKind::Exit)
        .map(|g| (g.name.as_str(), &g.eval))
        .collect();
    let guards: Vec<_> = gates
        .iter()
        .filter(|g| g.kind == GateKind::Guard)
        .map(|g| (g.name.as_str(), &g.eval))
        .collect();
    gate::ready_to_advance(&exits, &guards, loaded.counting_from_ms(), min, now_ms)
        .err()
        .unwrap_or_default()
}

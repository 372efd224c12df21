//! What one round of evaluation says of each gate of the current phase.

use serde::Serialize;

use crate::gate::Evaluation;
use crate::plan::GateKind;

/// One gate of the current phase, evaluated.
#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    pub phase: String,
    pub name: String,
    /// `exit` (requirements included) or `guard`.
    pub kind: GateKind,
    pub source: String,
    pub query: String,
    #[serde(flatten)]
    pub eval: Evaluation,
    /// A gate on a `kafka_lag` source: the largest partition's lag among those its query
    /// selects, beside the value (their sum, usually).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_partition: Option<crate::indicators::kafka_lag::LargestPartition>,
    pub evaluated_at_ms: i64,
    /// The revision of the gate's memory the evaluation read (`None`: the step had no row of
    /// it): its write merges with any other writer's since ([`crate::store::GateRecord::revision`]).
    #[serde(skip)]
    pub memory_read: Option<i64>,
}

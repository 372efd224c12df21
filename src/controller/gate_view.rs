//! A gate as `status` shows it ([`GateView`]): from a fresh evaluation ([`GateReport::view`]) or
//! from the store (`Controller::last_gates`), with the words every view uses for a gate not yet
//! evaluated in its step.

use serde::Serialize;

use super::evaluate::GateReport;
use crate::gate::{self, Verdict};
use crate::indicators::kafka_lag::LargestPartition;
use crate::plan::GateKind;
use crate::store::GateRecord;

/// The reason every view gives for a gate with no evaluation in the step (the CLI adds, once
/// under its table, [`not_evaluated_advice`]).
pub const AWAITING_FIRST_EVALUATION: &str = "awaiting first evaluation";

/// What `status` prints once under its table when a gate awaits its first evaluation: what
/// shows it now and what records it (a dry run records nothing: it cannot be what makes the
/// gate appear here).
pub fn not_evaluated_advice(name: &str) -> String {
    format!(
        "not evaluated yet in this step: `migrate advance {name} --dry-run` shows it now and \
         records nothing; it is recorded by a running daemon's next round, or by \
         `migrate advance {name}` (which also moves on if every exit gate passes)"
    )
}

/// How far a stored soaking gate was when evaluated: since its held-since mark, of its `for:`.
pub(super) fn stored_soak(r: &GateRecord, need: std::time::Duration) -> Option<gate::Soak> {
    Some(gate::Soak {
        held_ms: r.at_ms.saturating_sub(r.held_since_ms?).max(0),
        need_ms: crate::time::millis(need),
    })
}

/// A gate as `status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct GateView {
    pub phase: String,
    pub name: String,
    pub kind: GateKind,
    /// The source the gate reads (empty when the plan no longer names the gate).
    pub source: String,
    pub verdict: Verdict,
    pub value: Option<f64>,
    pub reason: String,
    /// `None`: awaiting its first evaluation in the step.
    pub evaluated_at: Option<String>,
    /// The same instant in ms (not served: `evaluated_at` is).
    #[serde(skip)]
    pub evaluated_at_ms: Option<i64>,
    /// How old that evaluation is at the view's "now" (ms): every view shows the age of each
    /// reading (issue 56). Absent when never evaluated, and in a round's own views.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age_ms: Option<i64>,
    /// Soaking: how long the condition has held of what its `for:` asks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soak: Option<gate::Soak>,
    /// No data: why (`source_down`, `source_http_error`, `source_unparsable`, `empty`,
    /// `too_few_samples`, `unusable`); absent for the
    /// other verdicts and for evaluations stored before the cause was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<gate::NoDataCause>,
    /// A gate on a `kafka_lag` source: the largest partition's lag among those its query
    /// selects, and which (`{"topic":"orders","partition":3,"lag":900}`), beside the value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_partition: Option<LargestPartition>,
}

/// A stored row's largest partition lag; `None` when it has none or it does not read.
pub(super) fn stored_largest(r: &GateRecord) -> Option<LargestPartition> {
    serde_json::from_str(r.largest_partition.as_deref()?).ok()
}

impl GateReport {
    /// The same gate as `status` shows it.
    pub fn view(&self) -> GateView {
        GateView {
            phase: self.phase.clone(),
            name: self.name.clone(),
            kind: self.kind,
            source: self.source.clone(),
            verdict: self.eval.verdict,
            value: self.eval.value,
            reason: self.eval.reason.clone(),
            evaluated_at: Some(crate::time::rfc3339(self.evaluated_at_ms)),
            evaluated_at_ms: Some(self.evaluated_at_ms),
            age_ms: None,
            soak: self.eval.soak,
            cause: self.eval.cause,
            largest_partition: self.largest_partition.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 57: the largest partition lag a round writes is what `status` reads back, and
    /// `status --json` serves it only for a gate that has one.
    #[test]
    fn a_stored_largest_partition_reads_back_and_is_served_only_when_present() {
        let largest = LargestPartition {
            topic: "orders".into(),
            partition: 3,
            lag: 900,
        };
        let json = serde_json::to_string(&largest).unwrap();
        assert_eq!(json, r#"{"topic":"orders","partition":3,"lag":900}"#);
        let row = |stored: Option<&str>| GateRecord {
            step_entered_ms: 0,
            state: crate::machine::State::Planned,
            gate: "lag".into(),
            kind: "exit".into(),
            query: String::new(),
            value: Some(1234.0),
            old_value: None,
            samples: 1,
            verdict: "hold".into(),
            reason: String::new(),
            no_data_cause: None,
            held_since_ms: None,
            peak: None,
            judge_ledger: None,
            largest_partition: stored.map(str::to_string),
            at_ms: 1,
            revision: None,
        };
        assert_eq!(stored_largest(&row(Some(&json))), Some(largest.clone()));
        assert_eq!(stored_largest(&row(None)), None);
        assert_eq!(stored_largest(&row(Some("not json"))), None);
        let view = |largest_partition| GateView {
            phase: "drain".into(),
            name: "lag".into(),
            kind: GateKind::Exit,
            source: "kafka".into(),
            verdict: Verdict::Pass,
            value: Some(1234.0),
            reason: String::new(),
            evaluated_at: None,
            evaluated_at_ms: None,
            age_ms: None,
            soak: None,
            cause: None,
            largest_partition,
        };
        let served = serde_json::to_value(view(Some(largest))).unwrap();
        assert_eq!(served["largest_partition"]["partition"], 3);
        assert_eq!(served["largest_partition"]["lag"], 900);
        let served = serde_json::to_value(view(None)).unwrap();
        assert!(served.get("largest_partition").is_none(), "{served}");
    }
}

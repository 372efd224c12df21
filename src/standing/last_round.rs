//! What a paused migration's guards read last: this step's evaluations, or, when none of a
//! guard is newer, the round that paused it (issue 56).
//!
//! A breach's rollback enters a step of its own, whose guards no round has evaluated yet: the
//! views read only this step's evaluations, so for up to an interval after a breach `status`
//! said "no guard fails now" while the round that had just paused it read the guard at 0.2.
//! The journal entry of the pause carries that round's readings (its evidence): a guard's
//! newest reading is the newer of the two (`paused_guards` in the parent module), and the
//! sentence says which one it is. Nothing here reads the parent's types.

use serde::Serialize;

/// A guard as the round that paused the migration read it, failing (from the pause's journal
/// evidence, as the daemon writes it: `{"breach": [...], "gates": [...]}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GuardReading {
    pub gate: String,
    pub value: Option<f64>,
    pub reason: String,
    /// When that round read it (ms).
    pub at_ms: i64,
}

/// The failing guards an entry's evidence records (none for a pause by a person).
pub fn failing_guards(evidence: &serde_json::Value) -> Vec<GuardReading> {
    let Some(gates) = evidence.get("gates").and_then(|g| g.as_array()) else {
        return Vec::new();
    };
    gates
        .iter()
        .filter(|g| g["kind"] == "guard" && g["verdict"] == "fail")
        .filter_map(|g| {
            Some(GuardReading {
                gate: g["name"].as_str()?.to_string(),
                value: g["value"].as_f64(),
                reason: g["reason"].as_str().unwrap_or_default().to_string(),
                at_ms: g["evaluated_at_ms"].as_i64()?,
            })
        })
        .collect()
}

/// The end of the paused sentence: `; guard lag still fails`, `; guard lag failed in the round
/// that paused it (0.2 at ...), not evaluated since`, `; its guards not evaluated in this step
/// yet`, `; no guard fails now`.
pub fn sentence(
    failing: Option<&str>,
    last_round: Option<&GuardReading>,
    guards_evaluated: bool,
) -> String {
    match (failing, last_round) {
        (Some(g), Some(r)) => {
            let read = r
                .value
                .map_or_else(|| r.reason.clone(), crate::gate::fmt_num);
            format!(
                "; guard {g} failed in the round that paused it ({read} at {}), not evaluated since",
                crate::time::rfc3339(r.at_ms)
            )
        }
        (Some(g), None) => format!("; guard {g} still fails"),
        (None, _) if !guards_evaluated => "; its guards not evaluated in this step yet".into(),
        (None, _) => "; no guard fails now".into(),
    }
}

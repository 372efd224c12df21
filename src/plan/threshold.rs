//! The number a gate's value is compared with, as the plan states it: what a view rounds the
//! value to and draws the value against.

use serde::Serialize;

use super::model::{Check, CmpOp, Phase};

/// How a gate passes: `value OP threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Threshold {
    pub op: CmpOp,
    pub value: f64,
}

impl Threshold {
    /// As the plan writes it: `< 0.01`.
    pub fn text(&self) -> String {
        format!("{} {}", self.op.as_str(), self.value)
    }
}

impl Phase {
    /// The fixed threshold of the gate `(name, kind)` as [`Phase::gate_keys`] names it: a
    /// `pass_if` gate's, `require_peak`'s `at_least`. `None` for a gate without one (a
    /// `compare` gate, whose bound moves with the old broker's reading; `require_deploy`) and
    /// for a gate the phase does not have.
    pub fn threshold(&self, name: &str, kind: &str) -> Option<Threshold> {
        let gates = match kind {
            "exit" => &self.exit,
            "guard" => &self.guard,
            _ => return None,
        };
        if let Some(g) = gates.iter().find(|g| g.name == name) {
            return match g.check {
                Check::Threshold { op, value, .. } => Some(Threshold { op, value }),
                Check::Compare { .. } => None,
            };
        }
        if kind == "exit" && name == "require_peak" {
            return self
                .require_peak
                .as_ref()
                .and_then(|r| r.at_least)
                .map(|value| Threshold {
                    op: CmpOp::Ge,
                    value,
                });
        }
        None
    }
}

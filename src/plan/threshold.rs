//! The number a gate's value is compared with, as the plan states it: what a view rounds the
//! value to and draws the value against.

use serde::Serialize;

use super::model::{Check, CmpOp, GateKind, Phase};

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
    /// `pass_if` gate's, `require_peak`'s `at_least`, a `judge`'s boundary (its FAIL e-value,
    /// the value it records, is held under `1/alpha`). `None` for a gate without one (a
    /// `compare` gate, whose bound moves with the old broker's reading; `require_deploy`) and
    /// for a gate the phase does not have.
    pub fn threshold(&self, name: &str, kind: GateKind) -> Option<Threshold> {
        let gates = match kind {
            GateKind::Exit => &self.exit,
            GateKind::Guard => &self.guard,
        };
        if let Some(g) = gates.iter().find(|g| g.name == name) {
            return match &g.check {
                Check::Threshold { op, value, .. } => Some(Threshold {
                    op: *op,
                    value: *value,
                }),
                Check::Compare { .. } => None,
                // The FAIL e-value stays under its boundary, `1/alpha`: what the console charts.
                Check::Judge(j) => Some(Threshold {
                    op: CmpOp::Lt,
                    value: j.config.boundary(),
                }),
                // Its value is the number of producers that lag: none passes.
                Check::RoutingApplied { .. } => Some(Threshold {
                    op: CmpOp::Le,
                    value: 0.0,
                }),
            };
        }
        if kind == GateKind::Exit && name == "require_peak" {
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

/// The decimals of `x` as Rust prints it shortest (`0.015` → 3), at most 12.
fn decimals(x: f64) -> usize {
    let s = format!("{x}");
    s.split_once('.').map_or(0, |(_, d)| d.len()).min(12)
}

/// `value` rounded to what its threshold needs: one decimal more than the threshold has, and
/// more while the rounded value would read on the other side of the threshold (or on it) than
/// the value is (`0.0100004` against `< 0.01` reads `0.0100004`, never `0.010`). Without a
/// threshold, four significant digits (whole numbers stay whole).
pub fn round_value(value: f64, threshold: Option<Threshold>) -> String {
    if !value.is_finite() {
        return format!("{value}");
    }
    let Some(t) = threshold.filter(|t| t.value.is_finite()) else {
        if value == value.trunc() && value.abs() < 1e15 {
            return format!("{value}");
        }
        let digits = 4i32;
        let magnitude = value.abs().log10().floor() as i32;
        let places = (digits - 1 - magnitude).clamp(0, 12) as usize;
        return trim(format!("{value:.places$}"));
    };
    let mut places = decimals(t.value) + 1;
    loop {
        let shown = format!("{value:.places$}");
        let reads = shown.parse::<f64>().unwrap_or(value);
        let same_side = t.op.holds(reads, t.value) == t.op.holds(value, t.value)
            && (reads == t.value) == (value == t.value);
        if same_side || places >= 12 {
            return shown;
        }
        places += 1;
    }
}

/// Trailing zeros of a fixed-point number dropped (`0.1200` → `0.12`, `3.000` → `3`).
fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

//! The Prometheus text exposition (format 0.0.4) as every `/metrics` of this crate writes it:
//! `# HELP` and `# TYPE` lines and samples, label values escaped. Always compiled, no
//! dependencies.
//!
//! ```
//! use queue_migrate_client::metrics_text::{self, Kind};
//!
//! let mut out = String::new();
//! metrics_text::family(&mut out, "jobs_total", Kind::Counter, "Jobs run.");
//! metrics_text::sample(&mut out, "jobs_total", &[("queue", "a\"b")], 3);
//! assert_eq!(
//!     out,
//!     "# HELP jobs_total Jobs run.\n# TYPE jobs_total counter\njobs_total{queue=\"a\\\"b\"} 3\n"
//! );
//! ```
//!
//! # Guarantees
//! - Every label value goes through [`escape_label`]: a backslash, a double quote or a newline in
//!   it never ends the value or the line.
//! - Each call writes whole lines, each ending in `\n`; nothing else is written (no blank line,
//!   no `# EOF`).
//! - Names and help texts are written as given: callers pass valid metric names and one-line help.

// Part of the library consumers depend on: every public item is documented.
#![warn(missing_docs)]

use std::fmt::{Display, Write as _};

/// A metric family's type, as its `# TYPE` line says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `counter`.
    Counter,
    /// `gauge`.
    Gauge,
    /// `histogram`.
    Histogram,
}

impl Kind {
    /// The word of the `# TYPE` line.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// `# HELP name help` then `# TYPE name kind`.
pub fn family(out: &mut String, name: &str, kind: Kind, help: &str) {
    help_line(out, name, help);
    type_line(out, name, kind);
}

/// `# HELP name help`.
fn help_line(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
}

/// `# TYPE name kind`.
pub fn type_line(out: &mut String, name: &str, kind: Kind) {
    let _ = writeln!(out, "# TYPE {name} {}", kind.as_str());
}

/// One sample: `name value`, or `name{label="value",...} value` with the label values escaped,
/// in the order given.
pub fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl Display) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (label, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(label);
            out.push_str("=\"");
            escape_label(out, v);
            out.push('"');
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// Append `value` escaped as a label value: backslash, double quote and newline as `\\`, `\"`
/// and `\n`; everything else as it is.
pub fn escape_label(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// `value` escaped as a label value (see [`escape_label`]).
pub fn escaped(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    escape_label(&mut out, value);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escaped("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(escaped("plain = , {}"), "plain = , {}");
    }

    #[test]
    fn a_sample_without_labels_has_no_braces() {
        let mut out = String::new();
        sample(&mut out, "up", &[], 1);
        sample(&mut out, "ratio", &[("a", "x"), ("b", "y")], 0.5);
        assert_eq!(out, "up 1\nratio{a=\"x\",b=\"y\"} 0.5\n");
    }

    #[test]
    fn a_family_is_its_help_then_its_type() {
        let mut out = String::new();
        family(&mut out, "lat", Kind::Histogram, "Latency.");
        type_line(&mut out, "g", Kind::Gauge);
        assert_eq!(
            out,
            "# HELP lat Latency.\n# TYPE lat histogram\n# TYPE g gauge\n"
        );
    }
}

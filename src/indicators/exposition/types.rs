//! What [`parse`](fn@super::parse) answers ([`Exposition`], [`Sample`], [`LineError`]) and the label
//! matchers a selector filters samples with ([`Matcher`]).

use std::collections::HashMap;
use std::fmt;

/// One sample: a line `name{labels} value [timestamp]`.
///
/// `PartialEq` compares values as floats, so a `NaN` sample is not equal to
/// itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric name, as written (`http_requests_total`, `foo_bucket`, ...).
    pub name: String,
    /// The labels, in source order, values unescaped.
    pub labels: Vec<(String, String)>,
    /// The value, including `±Inf` and `NaN`.
    pub value: f64,
    /// The timestamp in milliseconds since the epoch, if the line has one
    /// (OpenMetrics seconds are converted to milliseconds).
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    /// The value of the label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the sample's name is `metric` and every matcher holds. As in
    /// PromQL, a label the sample does not have counts as the empty string.
    pub fn matches(&self, metric: &str, matchers: &[Matcher]) -> bool {
        self.name == metric && matchers.iter().all(|m| m.holds(self))
    }
}

/// The two text formats told apart by [`parse`](fn@super::parse).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Prometheus text format 0.0.4: timestamps are integer milliseconds.
    #[default]
    Text,
    /// OpenMetrics text format: timestamps are seconds, exemplars may follow.
    OpenMetrics,
}

/// The result of [`parse`](fn@super::parse): the samples that were read exactly, and one error
/// per sample line that could not be.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// The format detected (see [`parse`](fn@super::parse)).
    pub format: Format,
    /// The samples, in source order.
    pub samples: Vec<Sample>,
    /// One error per malformed sample line, in line order.
    pub errors: Vec<LineError>,
    /// Metric family name to its `# TYPE` (`counter`, `gauge`, `histogram`,
    /// ...), from well-formed `# TYPE name type` lines; the last one wins.
    pub types: HashMap<String, String>,
}

impl Exposition {
    /// True if no sample line was malformed.
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty()
    }

    /// The samples named `metric` for which every matcher holds.
    pub fn select<'a>(
        &'a self,
        metric: &str,
        matchers: &[Matcher],
    ) -> impl Iterator<Item = &'a Sample> {
        self.samples
            .iter()
            .filter(move |s| s.matches(metric, matchers))
    }
}

/// A malformed sample line: its 1-based line number and what is wrong with it
/// (the message starts with the 1-based column, counted in characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LineError {
    /// 1-based line number in the document.
    pub line: usize,
    /// What is wrong, starting with `column N: `.
    pub message: String,
}

/// The comparison of a [`Matcher`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchOp {
    /// `label="value"`
    Eq,
    /// `label!="value"`
    Ne,
}

/// A label matcher from a selector: `name="value"` or `name!="value"` (regex
/// matchers are not supported).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    /// The label name.
    pub label: String,
    /// Equal or not equal.
    pub op: MatchOp,
    /// The value compared with (unescaped).
    pub value: String,
}

impl Matcher {
    /// `label="value"`.
    pub fn eq(label: impl Into<String>, value: impl Into<String>) -> Matcher {
        Matcher {
            label: label.into(),
            op: MatchOp::Eq,
            value: value.into(),
        }
    }

    /// `label!="value"`.
    pub fn ne(label: impl Into<String>, value: impl Into<String>) -> Matcher {
        Matcher {
            label: label.into(),
            op: MatchOp::Ne,
            value: value.into(),
        }
    }

    /// Whether the matcher holds for the sample; a missing label counts as the
    /// empty string.
    pub fn holds(&self, sample: &Sample) -> bool {
        let actual = sample.label(&self.label).unwrap_or("");
        match self.op {
            MatchOp::Eq => actual == self.value,
            MatchOp::Ne => actual != self.value,
        }
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            MatchOp::Eq => "=",
            MatchOp::Ne => "!=",
        };
        write!(
            f,
            "{}{}\"{}\"",
            self.label,
            op,
            escape_label_value(&self.value)
        )
    }
}

/// Escapes a label value for the text format: `\` → `\\`, `"` → `\"`,
/// newline → `\n`.
pub fn escape_label_value(value: &str) -> String {
    crate::metrics_text::escaped(value)
}

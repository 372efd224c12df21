//! The series selector of the `scrape:` query language (`metric{label="value",other!="x"}`)
//! and its matching, shared by the query evaluator and the history that keeps the samples
//! the selectors pick.

use std::fmt;

use crate::indicators::exposition::{
    MatchOp, Matcher, Sample, escape_label_value, is_legacy_label_name, is_legacy_metric_name,
    write_name,
};

/// A metric name with label matchers (`=` / `!=` only).
#[derive(Clone, PartialEq)]
pub struct Selector {
    pub metric: String,
    pub matchers: Vec<Matcher>,
}

impl Selector {
    /// Whether the sample belongs to a series this selector picks.
    pub fn matches(&self, s: &Sample) -> bool {
        s.name == self.metric && s.matches(&self.metric, &self.matchers)
    }

    /// Whether the series `metric{labels}` is one this selector picks.
    pub(crate) fn matches_labels(&self, metric: &str, labels: &[(String, String)]) -> bool {
        metric == self.metric && self.matches(&probe(metric, labels))
    }
}

/// A sample standing for a series, used to ask [`Sample::matches`].
fn probe(metric: &str, labels: &[(String, String)]) -> Sample {
    Sample {
        name: metric.to_owned(),
        labels: labels.to_vec(),
        value: 0.0,
        timestamp_ms: None,
    }
}

fn op_str(op: &MatchOp) -> &'static str {
    match op {
        MatchOp::Eq => "=",
        MatchOp::Ne => "!=",
    }
}

impl fmt::Debug for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Selector({self})")
    }
}

/// Canonical PromQL text: `metric{label="value",other!="x"}` (no braces when no matchers).
/// A metric name outside the legacy charset is quoted first inside the braces, a label name
/// before its operator (PromQL 3).
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let legacy = is_legacy_metric_name(&self.metric);
        if legacy && self.matchers.is_empty() {
            return f.write_str(&self.metric);
        }
        let mut out = String::new();
        if legacy {
            out.push_str(&self.metric);
            out.push('{');
        } else {
            out.push('{');
            write_name(&mut out, &self.metric, is_legacy_metric_name);
        }
        for (i, m) in self.matchers.iter().enumerate() {
            if i > 0 || !legacy {
                out.push(',');
            }
            write_name(&mut out, &m.label, is_legacy_label_name);
            out.push_str(op_str(&m.op));
            out.push('"');
            out.push_str(&escape_label_value(&m.value));
            out.push('"');
        }
        out.push('}');
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests {
    use crate::indicators::query::tests::{q, sample};

    #[test]
    fn selector_matches_samples() {
        let query = q("up{job=\"a\",env!=\"dev\"}");
        let sel = query.selectors()[0];
        assert!(sel.matches(&sample("up", &[("job", "a"), ("env", "prod")], 1.0)));
        assert!(!sel.matches(&sample("up", &[("job", "a"), ("env", "dev")], 1.0)));
        assert!(!sel.matches(&sample("up", &[("job", "b"), ("env", "prod")], 1.0)));
        assert!(!sel.matches(&sample("down", &[("job", "a"), ("env", "prod")], 1.0)));
    }

    #[test]
    fn selectors_equal_when_metric_and_matchers_are() {
        let sel = q("up{job=\"a\",env!=\"dev\"}").selectors()[0].clone();
        assert_eq!(&sel, q("up{job=\"a\",env!=\"dev\"}").selectors()[0]);
        assert_ne!(&sel, q("up{job=\"a\",env=\"dev\"}").selectors()[0]);
        assert_ne!(&sel, q("up{job=\"a\"}").selectors()[0]);
        assert_ne!(&sel, q("down{job=\"a\",env!=\"dev\"}").selectors()[0]);
    }
}

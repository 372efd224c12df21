//! The three alert signals of the dead-letter article, computed from a triage and rendered as
//! Prometheus text.
//!
//! A depth threshold fails at both ends (it fires on every incident, or never on a leak of ten a
//! day), so instead:
//! - **inflow per minute** (`dlq_inflow_per_minute`) — entries whose `deadLetteredAt` falls in the
//!   last window, per minute: catches the incident while it happens; the only one worth waking
//!   someone for;
//! - **new signatures** (`dlq_new_signatures`, and `dlq_new_signature_info{signature=...} 1` for at
//!   most `max_info` of them, the largest first, so the label set stays bounded) — a signature
//!   first seen within `new_for` and never decided: a defect shipped with today's deploy; a task,
//!   not a page;
//! - **age of the oldest unclosed dead letter** (`dlq_oldest_unclosed_age_seconds`) — grows
//!   steadily while nobody looks, whatever the volume: catches the slow leak. 0 when nothing is
//!   open.
//!
//! "Unclosed" means not covered by a decision (see [`super::disposition`]): the triage must have
//! been run with [`super::triage::TriageOptions::covered_until_ms`] from the same decisions, and
//! with `recent_since_ms` = now − window for the inflow.

use std::collections::HashMap;

use serde::Serialize;

use super::triage::Group;
use crate::metrics_text::{self, Kind};

/// Errors of this module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AlertError {
    /// A window of zero or less.
    #[error("the inflow window must be positive (got {0} ms)")]
    Window(i64),
}

/// Inputs besides the groups.
#[derive(Debug, Clone)]
pub struct AlertInputs<'a> {
    /// Now (ms).
    pub now_ms: i64,
    /// The inflow window (ms); the triage counted `recent` from `now - window`.
    pub window_ms: i64,
    /// A signature first seen within this long is new (ms).
    pub new_for_ms: i64,
    /// When each signature was first seen (the store's registry); missing means now.
    pub first_seen: &'a HashMap<String, i64>,
    /// Signatures with a recorded decision (never new).
    pub decided: &'a [String],
    /// At most this many `dlq_new_signature_info` series.
    pub max_info: usize,
}

/// A signature never seen before.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewSignature {
    /// The signature.
    pub signature: String,
    /// Its group's class.
    pub error_class: String,
    /// Its group's consumer version.
    pub consumer_version: String,
    /// Entries.
    pub count: u64,
}

/// The signals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Signals {
    /// Entries dead-lettered in the window, per minute.
    pub inflow_per_minute: f64,
    /// Entries dead-lettered in the window.
    pub inflow_entries: u64,
    /// New signatures, largest first (all of them; rendering keeps `max_info`).
    pub new_signatures: Vec<NewSignature>,
    /// Age of the oldest open entry (seconds; 0 when none is open).
    pub oldest_unclosed_age_seconds: f64,
    /// Open entries.
    pub open_entries: u64,
    /// Groups with open entries.
    pub open_groups: u64,
    /// Entries.
    pub entries: u64,
    /// At most this many info series.
    pub max_info: usize,
}

/// Compute the signals.
///
/// # Errors
/// [`AlertError::Window`].
pub fn compute(groups: &[Group], inputs: &AlertInputs<'_>) -> Result<Signals, AlertError> {
    if inputs.window_ms <= 0 {
        return Err(AlertError::Window(inputs.window_ms));
    }
    let inflow_entries: u64 = groups.iter().map(|g| g.stats.recent).sum();
    let decided: std::collections::HashSet<&str> =
        inputs.decided.iter().map(String::as_str).collect();
    let mut new_signatures: Vec<NewSignature> = Vec::new();
    let mut seen_new: HashMap<&str, usize> = HashMap::new();
    for g in groups {
        if decided.contains(g.signature.as_str()) {
            continue;
        }
        let first = inputs
            .first_seen
            .get(&g.signature)
            .copied()
            .unwrap_or(inputs.now_ms);
        if inputs.now_ms - first > inputs.new_for_ms {
            continue;
        }
        // One series per signature: groups of one signature in several versions add up.
        match seen_new.get(g.signature.as_str()) {
            Some(&i) => new_signatures[i].count += g.count,
            None => {
                seen_new.insert(&g.signature, new_signatures.len());
                new_signatures.push(NewSignature {
                    signature: g.signature.clone(),
                    error_class: g.error_class.clone(),
                    consumer_version: g.consumer_version.clone(),
                    count: g.count,
                });
            }
        }
    }
    new_signatures.sort_by_key(|s| std::cmp::Reverse(s.count));
    let oldest_open = groups
        .iter()
        .filter_map(|g| g.stats.oldest_open_dead_lettered_ms)
        .min();
    Ok(Signals {
        inflow_per_minute: inflow_entries as f64 * 60_000.0 / inputs.window_ms as f64,
        inflow_entries,
        new_signatures,
        oldest_unclosed_age_seconds: oldest_open
            .map_or(0.0, |t| ((inputs.now_ms - t).max(0)) as f64 / 1000.0),
        open_entries: groups.iter().map(|g| g.stats.open).sum(),
        open_groups: groups.iter().filter(|g| g.stats.open > 0).count() as u64,
        entries: groups.iter().map(|g| g.count).sum(),
        max_info: inputs.max_info,
    })
}

/// A label value as the text exposition carries it: control characters other than a newline
/// become spaces ([`metrics_text::sample`] escapes the rest).
fn label(value: &str) -> String {
    value
        .chars()
        // Legal in the format, but a NUL or a tab in a label breaks the tools that read it.
        .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
        .collect()
}

fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The Prometheus text exposition (version 0.0.4) of `signals` for `queue`.
pub fn render_prometheus(signals: &Signals, queue: &str) -> String {
    let q = label(queue);
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, value: f64| {
        metrics_text::family(&mut out, name, Kind::Gauge, help);
        metrics_text::sample(&mut out, name, &[("queue", &q)], num(value));
    };
    gauge(
        "dlq_inflow_per_minute",
        "Dead letters per minute over the last window, by deadLetteredAt.",
        signals.inflow_per_minute,
    );
    gauge(
        "dlq_new_signatures",
        "Signatures first seen recently and never decided.",
        signals.new_signatures.len() as f64,
    );
    gauge(
        "dlq_oldest_unclosed_age_seconds",
        "Age of the oldest dead letter not covered by a decision (0 when none).",
        signals.oldest_unclosed_age_seconds,
    );
    gauge(
        "dlq_open_entries",
        "Dead letters not covered by a decision.",
        signals.open_entries as f64,
    );
    gauge(
        "dlq_open_groups",
        "Groups with dead letters not covered by a decision.",
        signals.open_groups as f64,
    );
    gauge(
        "dlq_entries",
        "Dead letters in the export.",
        signals.entries as f64,
    );
    let name = "dlq_new_signature_info";
    let help = format!(
        "One series per new signature (at most {}, the largest first).",
        signals.max_info
    );
    metrics_text::family(&mut out, name, Kind::Gauge, &help);
    for s in signals.new_signatures.iter().take(signals.max_info) {
        let (class, version, signature) = (
            label(&s.error_class),
            label(&s.consumer_version),
            label(&s.signature),
        );
        let labels = [
            ("queue", q.as_str()),
            ("error_class", &class),
            ("consumer_version", &version),
            ("signature", &signature),
        ];
        metrics_text::sample(&mut out, name, &labels, 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::disposition::{CloseReason, Disposition, covered_until};
    use super::super::test_support::envelope_line as line;
    use super::super::triage::{TriageOptions, triage_reader};
    use super::*;
    use crate::time::parse_timestamp;

    #[test]
    fn three_signals_and_a_parseable_exposition() {
        let now = parse_timestamp("2026-03-10T12:00:00Z").expect("ts");
        let text = [
            line("old \"x\"", "2026-03-01T00:00:00Z", "2026-03-01T00:01:00Z"),
            line("closed 1", "2026-03-02T00:00:00Z", "2026-03-02T00:01:00Z"),
            line(
                "new \\ thing",
                "2026-03-10T11:58:00Z",
                "2026-03-10T11:58:30Z",
            ),
            line(
                "new \\ thing",
                "2026-03-10T11:59:00Z",
                "2026-03-10T11:59:30Z",
            ),
        ]
        .join("\n");
        let first = triage_reader(text.as_bytes(), TriageOptions::default()).expect("reads");
        let closed = first
            .groups
            .iter()
            .find(|g| g.signature == "closed <n>")
            .expect("g");
        let decisions = vec![
            Disposition::close("q", closed, CloseReason::FixedInCode, "ana", now, None).expect("d"),
        ];
        let options = TriageOptions {
            recent_since_ms: Some(now - 5 * 60_000),
            covered_until_ms: covered_until(&decisions),
            ..TriageOptions::default()
        };
        let report = triage_reader(text.as_bytes(), options).expect("reads");
        let mut first_seen = HashMap::new();
        first_seen.insert("old <v>".to_string(), now - 9 * 86_400_000);
        let decided = vec!["closed <n>".to_string()];
        let inputs = AlertInputs {
            now_ms: now,
            window_ms: 5 * 60_000,
            new_for_ms: 86_400_000,
            first_seen: &first_seen,
            decided: &decided,
            max_info: 10,
        };
        let s = compute(&report.groups, &inputs).expect("signals");
        assert_eq!(s.inflow_entries, 2);
        assert_eq!(s.inflow_per_minute, 0.4);
        assert_eq!(s.new_signatures.len(), 1);
        assert_eq!(s.new_signatures[0].signature, "new \\ thing");
        assert_eq!(
            s.oldest_unclosed_age_seconds,
            (now - parse_timestamp("2026-03-01T00:01:00Z").expect("ts")) as f64 / 1000.0
        );
        assert_eq!(s.open_groups, 2);

        let text = render_prometheus(&s, "orders.dlq");
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).expect("parses");
        let info = scrape
            .samples
            .iter()
            .find(|x| x.metric == "dlq_new_signature_info")
            .expect("info series");
        // prometheus-parse keeps escapes as written: the backslash is escaped once, per the format.
        assert_eq!(info.labels.get("signature"), Some("new \\\\ thing"));
        assert!(
            text.contains("dlq_inflow_per_minute{queue=\"orders.dlq\"} 0.4"),
            "{text}"
        );

        let none = compute(&[], &inputs).expect("signals");
        assert_eq!(none.oldest_unclosed_age_seconds, 0.0);
        assert!(
            compute(
                &[],
                &AlertInputs {
                    window_ms: 0,
                    ..inputs
                }
            )
            .is_err()
        );
    }
}

//! From a gate to its data (pure): the query a gate asks its source, a link to that query in
//! the Prometheus web UI over a step's time range (when the plan names the UI: `ui:` on a
//! `prometheus` source), and the time ranges of every visit of the migration to a step (from
//! the journal), for the charts of past steps.

use crate::machine::State;
use crate::plan::{Check, GateKind, Phase, Plan, Source};
use crate::store::JournalEntry;

/// A gate's query and where it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateData {
    pub source: String,
    /// The query as the plan writes it (a `compare` gate: both sides).
    pub query: String,
    /// "Open in Prometheus" over the step's range, when the source names its UI.
    pub link: Option<String>,
}

/// The query of gate `name` of `kind` in `phase`, and its link for `[from_ms, to_ms]`.
pub fn of(
    plan: &Plan,
    phase: &Phase,
    name: &str,
    kind: GateKind,
    range: (i64, i64),
) -> Option<GateData> {
    let gates = match kind {
        GateKind::Exit => &phase.exit,
        GateKind::Guard => &phase.guard,
    };
    let (source, queries): (&str, Vec<&str>) = match gates.iter().find(|g| g.name == name) {
        Some(g) => match &g.check {
            Check::Threshold { query, .. } => (&g.source, vec![query]),
            Check::Compare { new, old, .. } => (&g.source, vec![new, old]),
            Check::Judge(j) => (&g.source, j.queries().to_vec()),
            Check::RoutingApplied { .. } => (&g.source, Vec::new()),
        },
        None => {
            let req = match name {
                "require_peak" => phase.require_peak.as_ref(),
                "require_deploy" => phase.require_deploy.as_ref(),
                _ => None,
            }?;
            (&req.source, vec![req.query.as_str()])
        }
    };
    let latency = gates
        .iter()
        .find(|g| g.name == name)
        .and_then(|g| match &g.check {
            Check::Judge(j) => match &j.form {
                crate::plan::JudgeForm::Latency(l) => Some(l),
                crate::plan::JudgeForm::Counts { .. } => None,
            },
            _ => None,
        });
    let query = match queries.as_slice() {
        _ if latency.is_some() => latency.map_or_else(String::new, |l| {
            format!(
                "p{} of\nnew buckets: {}\nold buckets: {}\nle: {}",
                l.buckets.quantile * 100.0,
                l.new,
                l.old,
                l.le_labels.join(", ")
            )
        }),
        [new, old] => format!("new: {new}\nold: {old}"),
        [new_events, new_failures, old_events, old_failures] => format!(
            "new events: {new_events}\nnew failures: {new_failures}\nold events: {old_events}\nold failures: {old_failures}"
        ),
        _ => queries.join("\n"),
    };
    let link = match plan.sources.get(source) {
        Some(Source::Prometheus { ui: Some(ui), .. }) => Some(prometheus_link(
            ui,
            queries.first().copied().unwrap_or(""),
            range,
        )),
        _ => None,
    };
    Some(GateData {
        source: source.to_string(),
        query,
        link,
    })
}

/// Percent-encoding of a path segment or a query parameter's value (RFC 3986 unreserved bytes
/// kept).
pub(super) fn encode(text: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The Prometheus UI's graph of `query` ending at `to_ms` and spanning back to `from_ms`
/// (at least a minute), in the URL parameters both its classic and its 3.x UI read.
pub fn prometheus_link(ui: &str, query: &str, (from_ms, to_ms): (i64, i64)) -> String {
    let span_s = ((to_ms - from_ms).max(60_000) + 999) / 1000;
    // As the UI writes it itself (UTC, a space between date and time).
    let end = crate::time::rfc3339(to_ms)
        .replace('T', " ")
        .replace('Z', "");
    format!(
        "{ui}/graph?g0.expr={}&g0.tab=0&g0.range_input={span_s}s&g0.end_input={}",
        encode(query),
        encode(&end)
    )
}

/// Every visit of the migration to `state`, oldest first: when it entered and when it left
/// (`now_ms` while still there), from the journal (oldest first); empty if it never was there.
pub fn step_visits(journal: &[JournalEntry], state: State, now_ms: i64) -> Vec<(i64, i64)> {
    let mut visits = Vec::new();
    for (i, e) in journal.iter().enumerate() {
        if e.to.state != state || e.from.state == state {
            continue;
        }
        let to = journal[i + 1..]
            .iter()
            .find(|e| e.to.state != state)
            .map_or(now_ms, |e| e.at_ms);
        visits.push((e.at_ms, to));
    }
    visits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: i64, at_ms: i64, from: State, to: State) -> JournalEntry {
        let snap = |state| crate::machine::Snapshot {
            state,
            paused: false,
        };
        JournalEntry {
            seq,
            at_ms,
            command: "advance".into(),
            from: snap(from),
            to: snap(to),
            actor: "test".into(),
            reason: None,
            forced: false,
            evidence: serde_json::Value::Null,
            generation: seq,
            epoch: None,
        }
    }

    /// Issue 56: a past step's charts plot every visit, and the heading names each one.
    #[test]
    fn a_step_visited_twice_has_two_visits() {
        let s0 = State::Slices(0);
        let s1 = State::Slices(1);
        let journal = [
            entry(1, 1_000, State::Planned, s0),
            entry(2, 2_000, s0, s1),
            entry(3, 3_000, s1, s0),
            entry(4, 3_500, s0, s0),
            entry(5, 4_000, s0, s1),
        ];
        assert_eq!(
            step_visits(&journal, s0, 9_000),
            vec![(1_000, 2_000), (3_000, 4_000)]
        );
        assert_eq!(
            step_visits(&journal, s1, 9_000),
            vec![(2_000, 3_000), (4_000, 9_000)]
        );
        assert_eq!(step_visits(&journal, State::Drain, 9_000), vec![]);
    }

    #[test]
    fn the_prometheus_link_carries_the_query_and_the_step_s_range() {
        let link = prometheus_link(
            "https://prom.example.com",
            "sum(rate(x{a=\"b c\"}[5m])) > 0",
            (1_796_000_000_000, 1_796_003_600_000),
        );
        assert_eq!(
            link,
            "https://prom.example.com/graph?g0.expr=sum%28rate%28x%7Ba%3D%22b%20c%22%7D%5B5m%5D%29%29%20%3E%200&g0.tab=0&g0.range_input=3600s&g0.end_input=2026-11-30%2001%3A53%3A20"
        );
        // A step of a few seconds still shows a minute.
        assert!(prometheus_link("http://p", "up", (0, 5_000)).contains("range_input=60s"));
    }
}

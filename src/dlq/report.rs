//! The weekly review report, Markdown, pure.
//!
//! The dead-letter article's last point is process, not tooling: the dead-letter queue needs a
//! named owner and a short recurring review — fifteen minutes a week with the triage ready. This
//! is that page: recurring groups first (a closed signature that came back), then the fresh ones
//! with their hint, what was decided since last week, and the age of the oldest unclosed dead
//! letter.

use std::fmt::Write as _;

use super::disposition::{Disposition, HistorySplit, split_against_history};
use super::triage::{Group, Hint, TriageReport, human_span};
use crate::time::format_timestamp;

/// Errors of this module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// The report needs an owner: a queue nobody owns goes back to its old state within a year.
    #[error("the report needs the queue's named owner (--owner)")]
    NoOwner,
}

/// What the report is about.
#[derive(Debug, Clone)]
pub struct ReportInputs<'a> {
    /// The dead-letter queue.
    pub queue: &'a str,
    /// Its named owner.
    pub owner: &'a str,
    /// Now (ms).
    pub now_ms: i64,
    /// "Since last week" starts here (ms).
    pub since_ms: i64,
    /// Fresh groups listed one per row.
    pub top: usize,
    /// A span up to this many hours is an incident.
    pub short_span_hours: f64,
}

/// Text for a Markdown table cell, as inline code: pipes escaped, line breaks flattened, a fence
/// longer than any backtick run inside.
fn code(text: &str) -> String {
    let flat: String = text
        .chars()
        .map(|c| match c {
            '\n' | '\r' | '\t' => ' ',
            c => c,
        })
        .collect::<String>()
        .replace('|', "\\|");
    let longest = flat.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if flat.starts_with('`') || flat.ends_with('`') || flat.is_empty() {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{flat}{pad}{fence}")
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn day(ms: i64) -> String {
    format_timestamp(ms).chars().take(10).collect()
}

/// A duration for people: `3d 4h`, `5h 10m`, `12m`.
pub fn human_age(ms: i64) -> String {
    let m = ms.max(0) / 60_000;
    let (d, h, min) = (m / 1440, m / 60 % 24, m % 60);
    if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {min}m")
    } else {
        format!("{min}m")
    }
}

fn group_row(g: &Group) -> String {
    format!(
        "| {} | {} | {} | {} | {} |",
        g.count,
        cell(&g.error_class),
        cell(&g.consumer_version),
        code(&g.signature),
        human_span(g.span_hours)
    )
}

/// The report.
///
/// # Errors
/// [`ReportError::NoOwner`].
pub fn render(
    report: &TriageReport,
    dispositions: &[Disposition],
    inputs: &ReportInputs<'_>,
) -> Result<String, ReportError> {
    if inputs.owner.trim().is_empty() {
        return Err(ReportError::NoOwner);
    }
    let split = split_against_history(&report.groups, dispositions);
    let mut out = String::new();
    summary(&mut out, report, &split, inputs);
    recurring(&mut out, &split);
    fresh(&mut out, &split, inputs);
    decided(&mut out, dispositions, inputs);
    covered(&mut out, &split);
    Ok(out)
}

/// The title and the summary line.
fn summary(
    out: &mut String,
    report: &TriageReport,
    split: &HistorySplit<'_>,
    inputs: &ReportInputs<'_>,
) {
    let oldest_open = report
        .groups
        .iter()
        .filter_map(|g| g.stats.oldest_open_dead_lettered_ms)
        .min();
    let _ = writeln!(
        out,
        "# Dead-letter review: {} — {}\n",
        cell(inputs.queue),
        day(inputs.now_ms)
    );
    let _ = writeln!(
        out,
        "Owner: **{}** · {} entries in {} groups · {} recurring · {} fresh · oldest unclosed: **{}**{}\n",
        cell(inputs.owner),
        report.entries,
        report.groups.len(),
        split.recurring.len(),
        split.fresh.len(),
        oldest_open.map_or_else(|| "none".to_string(), |t| human_age(inputs.now_ms - t)),
        if report.skipped > 0 {
            format!(" · **{} lines are not envelopes**", report.skipped)
        } else {
            String::new()
        }
    );
}

/// The groups closed before that came back.
fn recurring(out: &mut String, split: &HistorySplit<'_>) {
    let _ = writeln!(out, "## Recurring: closed before, came back\n");
    if split.recurring.is_empty() {
        let _ = writeln!(out, "None.\n");
    } else {
        let _ = writeln!(
            out,
            "A decision that did not hold: look at these first.\n\n| Count | Class | Version | Signature | Span | Earlier decision |\n|---:|---|---|---|---|---|"
        );
        for r in &split.recurring {
            let _ = writeln!(
                out,
                "{} {} |",
                group_row(r.group),
                cell(&r.previous.summary())
            );
        }
        out.push('\n');
    }
}

/// The groups never decided, the `top` largest listed.
fn fresh(out: &mut String, split: &HistorySplit<'_>, inputs: &ReportInputs<'_>) {
    let _ = writeln!(out, "## Fresh: never decided\n");
    if split.fresh.is_empty() {
        let _ = writeln!(out, "None.\n");
    } else {
        let _ = writeln!(
            out,
            "| Count | Class | Version | Signature | Span | First seen | Last seen | Hint |\n|---:|---|---|---|---|---|---|---|"
        );
        for g in split.fresh.iter().take(inputs.top) {
            let _ = writeln!(
                out,
                "{} {} | {} | {} |",
                group_row(g),
                cell(&g.first_seen),
                cell(&g.last_seen),
                Hint::of(g, inputs.short_span_hours).text()
            );
        }
        if split.fresh.len() > inputs.top {
            let tail = &split.fresh[inputs.top..];
            let entries: u64 = tail.iter().map(|g| g.count).sum();
            let _ = writeln!(
                out,
                "\n…and {} more fresh groups ({} entries, {} of them one-offs).",
                tail.len(),
                entries,
                tail.iter().filter(|g| g.count == 1).count()
            );
        }
        out.push('\n');
    }
}

/// The decisions taken on the queue since `since_ms`.
fn decided(out: &mut String, dispositions: &[Disposition], inputs: &ReportInputs<'_>) {
    let _ = writeln!(out, "## Decided since {}\n", day(inputs.since_ms));
    let recent: Vec<&Disposition> = dispositions
        .iter()
        .filter(|d| d.queue == inputs.queue && d.decided_at_ms >= inputs.since_ms)
        .collect();
    if recent.is_empty() {
        let _ = writeln!(out, "Nothing.\n");
    } else {
        let _ = writeln!(
            out,
            "| When | By | Decision | Class | Version | Signature | Entries |\n|---|---|---|---|---|---|---:|"
        );
        for d in recent {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                day(d.decided_at_ms),
                cell(&d.decided_by),
                match d.action.reason() {
                    Some(r) => r.as_str().to_string(),
                    None => "replayed".to_string(),
                } + &d
                    .note
                    .as_deref()
                    .map(|n| format!(" ({})", cell(n)))
                    .unwrap_or_default(),
                cell(&d.error_class),
                cell(&d.consumer_version),
                code(&d.signature),
                d.affected_count
                    .map_or_else(|| "?".to_string(), |c| c.to_string())
            );
        }
        out.push('\n');
    }
}

/// The groups a decision covers that are still in the queue.
fn covered(out: &mut String, split: &HistorySplit<'_>) {
    if !split.covered.is_empty() {
        let entries: u64 = split.covered.iter().map(|w| w.group.count).sum();
        let _ = writeln!(
            out,
            "## Decided, still in the queue\n\n{} groups ({} entries) are covered by a decision; remove them when retention allows (`migrate dlq purge`).\n",
            split.covered.len(),
            entries
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::disposition::CloseReason;
    use super::super::test_support::envelope_line;
    use super::super::triage::{TriageOptions, triage_reader};
    use super::*;
    use crate::time::parse_timestamp;

    #[test]
    fn report_has_every_section_and_escapes_pipes() {
        let line = |msg: &str, at: &str| envelope_line(msg, at, at);
        let text = [
            line("a|b `tick` 1", "2026-03-01T00:00:00Z"),
            line("back 1", "2026-03-01T00:00:00Z"),
            line("back 2", "2026-03-08T00:00:00Z"),
        ]
        .join("\n");
        let now = parse_timestamp("2026-03-09T00:00:00Z").expect("ts");
        let first = triage_reader(text.as_bytes(), TriageOptions::default()).expect("reads");
        let back = first
            .groups
            .iter()
            .find(|g| g.signature == "back <n>")
            .expect("g");
        let mut d = Disposition::close(
            "orders.dlq",
            back,
            CloseReason::FixedInCode,
            "ana",
            now - 86_400_000,
            Some("PR 12".into()),
        )
        .expect("d");
        d.last_seen = Some("2026-03-02T00:00:00Z".into());
        let ds = vec![d];
        let options = TriageOptions {
            covered_until_ms: super::super::disposition::covered_until(&ds),
            ..TriageOptions::default()
        };
        let report = triage_reader(text.as_bytes(), options).expect("reads");
        let inputs = ReportInputs {
            queue: "orders.dlq",
            owner: "ana",
            now_ms: now,
            since_ms: now - 7 * 86_400_000,
            top: 10,
            short_span_hours: 24.0,
        };
        let md = render(&report, &ds, &inputs).expect("report");
        assert!(md.contains("## Recurring"), "{md}");
        assert!(
            md.contains("fixed_in_code by ana on 2026-03-08 (PR 12)"),
            "{md}"
        );
        assert!(md.contains("``a\\|b `tick` <n>``"), "{md}");
        assert!(md.contains("oldest unclosed: **8d 0h**"), "{md}");
        assert!(
            md.contains("| 2026-03-08 | ana | fixed_in_code (PR 12) |"),
            "{md}"
        );
        assert!(
            render(
                &report,
                &ds,
                &ReportInputs {
                    owner: "",
                    ..inputs
                }
            )
            .is_err()
        );
        assert_eq!(human_age(90 * 60_000), "1h 30m");
    }
}

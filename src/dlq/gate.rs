//! The drain gate's verdict on the old dead-letter queue, pure.
//!
//! The `drain` phase may only finish when nobody is leaving dead letters behind on the old
//! broker: the queue (an export of it, for now) is empty, or every group in it is covered by a
//! recorded decision (closed for a reason, or replayed to the end). A group is **open** when it is
//! fresh (never decided) or recurring (entries after what its decision covered), see
//! [`super::disposition`]. Lines that are not envelopes are dead letters nobody can classify:
//! they keep the gate closed too.
//!
//! For the plan's gate machinery, [`DrainReading::value`] is the number of open groups plus one
//! when lines were unreadable: the gate passes when it is 0.

use serde::Serialize;

use super::disposition::Disposition;
use super::disposition::{HistorySplit, split_against_history};
use super::triage::TriageReport;

/// Errors of this module (evaluation itself cannot fail; reading the export can, elsewhere).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrainGateError {
    /// The export could not be read; the gate holds.
    #[error("cannot read the old dead-letter export {path}: {message}")]
    Unreadable {
        /// The export.
        path: String,
        /// Why.
        message: String,
    },
}

/// One group that keeps the gate closed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpenGroup {
    /// `errorClass`.
    pub error_class: String,
    /// `consumerVersion`.
    pub consumer_version: String,
    /// Signature.
    pub signature: String,
    /// Entries in the group.
    pub count: u64,
    /// True when the signature was decided before and came back.
    pub recurring: bool,
}

/// What the gate read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DrainReading {
    /// Valid entries in the export.
    pub entries: u64,
    /// Groups in it.
    pub groups: usize,
    /// Groups covered by a decision.
    pub decided: usize,
    /// Lines that are not envelopes.
    pub unreadable_lines: u64,
    /// Groups that keep it closed, recurring first, then by count.
    pub open: Vec<OpenGroup>,
}

impl DrainReading {
    /// The gate passes.
    pub fn passes(&self) -> bool {
        self.open.is_empty() && self.unreadable_lines == 0
    }

    /// The number the gate compares with 0.
    pub fn value(&self) -> f64 {
        self.open.len() as f64 + if self.unreadable_lines > 0 { 1.0 } else { 0.0 }
    }

    /// Why, in a sentence, naming up to `show` open groups.
    pub fn reason(&self, show: usize) -> String {
        if self.entries == 0 && self.unreadable_lines == 0 {
            return "the old dead-letter queue is empty".to_string();
        }
        if self.passes() {
            return format!(
                "every group of the old dead-letter queue is closed or replayed ({} groups, {} entries)",
                self.groups, self.entries
            );
        }
        let mut parts = Vec::new();
        if !self.open.is_empty() {
            let open_entries: u64 = self.open.iter().map(|g| g.count).sum();
            let mut listed: Vec<String> = self
                .open
                .iter()
                .take(show)
                .map(|g| {
                    format!(
                        "{}{} {} {:?} ×{}",
                        if g.recurring { "RECURRING " } else { "" },
                        g.error_class,
                        g.consumer_version,
                        g.signature,
                        g.count
                    )
                })
                .collect();
            if self.open.len() > show {
                listed.push(format!("{} more", self.open.len() - show));
            }
            parts.push(format!(
                "{} open groups ({} entries) in the old dead-letter queue: {}; close (`migrate dlq close`) or replay them",
                self.open.len(),
                open_entries,
                listed.join("; ")
            ));
        }
        if self.unreadable_lines > 0 {
            parts.push(format!(
                "{} lines are not envelopes (see `migrate dlq triage`)",
                self.unreadable_lines
            ));
        }
        parts.join("; ")
    }
}

/// Evaluate the gate on a triage of the old queue and the recorded decisions (oldest first).
pub fn evaluate(report: &TriageReport, dispositions: &[Disposition]) -> DrainReading {
    let HistorySplit {
        recurring,
        covered,
        fresh,
    } = split_against_history(&report.groups, dispositions);
    let mut open: Vec<OpenGroup> = recurring
        .iter()
        .map(|w| (w.group, true))
        .chain(fresh.iter().map(|g| (*g, false)))
        .map(|(g, recurring)| OpenGroup {
            error_class: g.error_class.clone(),
            consumer_version: g.consumer_version.clone(),
            signature: g.signature.clone(),
            count: g.count,
            recurring,
        })
        .collect();
    open.sort_by(|a, b| b.recurring.cmp(&a.recurring).then(b.count.cmp(&a.count)));
    DrainReading {
        entries: report.entries,
        groups: report.groups.len(),
        decided: covered.len(),
        unreadable_lines: report.skipped,
        open,
    }
}

#[cfg(test)]
mod tests {
    use super::super::disposition::{Action, CloseReason};
    use super::super::test_support::envelope_line;
    use super::super::triage::{TriageOptions, triage_reader};
    use super::*;

    fn report(text: &str) -> TriageReport {
        triage_reader(text.as_bytes(), TriageOptions::default()).expect("reads")
    }

    fn line(msg: &str) -> String {
        envelope_line(msg, "2026-03-01T00:00:00Z", "2026-03-01T00:00:00Z")
    }

    #[test]
    fn empty_queue_passes() {
        let r = evaluate(&report(""), &[]);
        assert!(r.passes());
        assert_eq!(r.value(), 0.0);
        assert_eq!(r.reason(5), "the old dead-letter queue is empty");
    }

    #[test]
    fn open_groups_fail_until_closed_or_replayed() {
        let rep = report(&[line("a 1"), line("a 2"), line("b")].join("\n"));
        let r = evaluate(&rep, &[]);
        assert!(!r.passes());
        assert_eq!(r.value(), 2.0);
        assert!(
            r.reason(1).contains("2 open groups (3 entries)"),
            "{}",
            r.reason(1)
        );
        assert!(r.reason(1).contains("1 more"), "{}", r.reason(1));

        let close = Disposition::close(
            "q",
            &rep.groups[0],
            CloseReason::FixedInCode,
            "ana",
            0,
            None,
        )
        .expect("valid");
        let replay = Disposition::of_group("q", &rep.groups[1], Action::Replay, "ana", 0, None)
            .expect("valid");
        let r = evaluate(&rep, &[close.clone(), replay]);
        assert!(r.passes(), "{}", r.reason(5));
        assert!(r.reason(5).starts_with("every group"));
        let r = evaluate(&rep, &[close]);
        assert_eq!(r.open.len(), 1);
    }

    #[test]
    fn unreadable_lines_keep_it_closed() {
        let r = evaluate(&report("garbage\n"), &[]);
        assert!(!r.passes());
        assert_eq!(r.value(), 1.0);
        assert!(r.reason(5).contains("1 lines are not envelopes"));
    }
}

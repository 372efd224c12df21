//! Dispositions: recorded decisions about a group (the dead-letter article's `closeGroup` and
//! `splitAgainstHistory`), pure.
//!
//! Closing is a decision with a reason from a closed list, who and when — not a delete: "the
//! difference between a clean queue and an emptied one is that record". A replay that went to
//! the end is recorded too (action `replay`) for each group every message of which it published,
//! so that the drain gate can tell a replayed group from an open one.
//!
//! Matching against history is **by signature alone**, as in the article: a signature closed as
//! `fixed_in_code` for consumer 2.13 that shows up with 2.14 is the finding that matters (the fix
//! did not catch every case), so the class and version do not have to match. When a signature has
//! several decisions, the last one recorded counts (the article builds a `Map`: later entries win).
//!
//! The article splits into `recurring` (decided before) and `fresh`. Here the article's `recurring`
//! is cut in two: **recurring** — entries first attempted after what the decision covered (its
//! `lastSeen`, or its time when it has none): the signature came back; and **covered** — every
//! entry was already there when the decision was taken (the same entries, still in the queue).

use std::collections::HashMap;

use serde::{Serialize, Serializer};

use super::triage::Group;
use crate::time::{format_timestamp, parse_timestamp};

/// The decision types are the store's rows ([`crate::store::dlq_rows`]): the store keeps them
/// without reading this module; their constructors from a group and their views are here.
pub use crate::store::dlq_rows::{Action, CloseReason, Disposition, DispositionError};

impl Disposition {
    /// Close `group` (the article's `closeGroup`, without the store).
    ///
    /// # Errors
    /// [`DispositionError::NoDecider`] for an empty `decided_by`.
    pub fn close(
        queue: &str,
        group: &Group,
        reason: CloseReason,
        decided_by: &str,
        now_ms: i64,
        note: Option<String>,
    ) -> Result<Disposition, DispositionError> {
        Disposition::of_group(
            queue,
            group,
            Action::Close(reason),
            decided_by,
            now_ms,
            note,
        )
    }

    /// A decision about `group`.
    ///
    /// # Errors
    /// [`DispositionError::NoDecider`] for an empty `decided_by`.
    pub fn of_group(
        queue: &str,
        group: &Group,
        action: Action,
        decided_by: &str,
        now_ms: i64,
        note: Option<String>,
    ) -> Result<Disposition, DispositionError> {
        if decided_by.trim().is_empty() {
            return Err(DispositionError::NoDecider);
        }
        Ok(Disposition {
            id: 0,
            queue: queue.to_string(),
            signature: group.signature.clone(),
            signature_version: "v1".to_string(),
            error_class: group.error_class.clone(),
            consumer_version: group.consumer_version.clone(),
            affected_count: Some(group.count),
            first_seen: Some(group.first_seen.clone()),
            last_seen: Some(group.last_seen.clone()),
            action,
            decided_by: decided_by.trim().to_string(),
            decided_at_ms: now_ms,
            note,
        })
    }

    /// Up to when (ms, by `firstAttemptAt`) this decision covers entries: its `lastSeen`, or the
    /// time it was taken.
    pub fn covers_until_ms(&self) -> i64 {
        self.last_seen
            .as_deref()
            .and_then(|t| parse_timestamp(t).ok())
            .unwrap_or(self.decided_at_ms)
    }

    /// `fixed_in_code by ana on 2026-03-02 (note)`.
    pub fn summary(&self) -> String {
        let what = match self.action {
            Action::Close(r) => r.as_str().to_string(),
            Action::Replay => "replayed".to_string(),
        };
        let day: String = format_timestamp(self.decided_at_ms)
            .chars()
            .take(10)
            .collect();
        match &self.note {
            Some(n) => format!("{what} by {} on {day} ({n})", self.decided_by),
            None => format!("{what} by {} on {day}", self.decided_by),
        }
    }
}

impl Serialize for Disposition {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct View<'a> {
            id: i64,
            queue: &'a str,
            signature: &'a str,
            signature_version: &'a str,
            error_class: &'a str,
            consumer_version: &'a str,
            affected_count: Option<u64>,
            first_seen: Option<&'a str>,
            last_seen: Option<&'a str>,
            action: &'static str,
            reason: Option<CloseReason>,
            decided_by: &'a str,
            decided_at: String,
            note: Option<&'a str>,
        }
        View {
            id: self.id,
            queue: &self.queue,
            signature: &self.signature,
            signature_version: &self.signature_version,
            error_class: &self.error_class,
            consumer_version: &self.consumer_version,
            affected_count: self.affected_count,
            first_seen: self.first_seen.as_deref(),
            last_seen: self.last_seen.as_deref(),
            action: self.action.kind(),
            reason: self.action.reason(),
            decided_by: &self.decided_by,
            decided_at: format_timestamp(self.decided_at_ms),
            note: self.note.as_deref(),
        }
        .serialize(serializer)
    }
}

/// The decision that counts for each signature: the last one in `dispositions`' order (pass them
/// oldest first, as the store lists them).
pub fn latest_by_signature(dispositions: &[Disposition]) -> HashMap<&str, &Disposition> {
    dispositions
        .iter()
        .map(|d| (d.signature.as_str(), d))
        .collect()
}

/// Per signature, up to when its latest decision covers entries (for
/// [`super::triage::TriageOptions::covered_until_ms`]).
pub fn covered_until(dispositions: &[Disposition]) -> HashMap<String, i64> {
    latest_by_signature(dispositions)
        .into_iter()
        .map(|(s, d)| (s.to_string(), d.covers_until_ms()))
        .collect()
}

/// A group with the decision taken on its signature before.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WithPrevious<'a> {
    /// The group.
    #[serde(flatten)]
    pub group: &'a Group,
    /// The decision (the article's `previousDisposition`).
    #[serde(rename = "previousDisposition")]
    pub previous: &'a Disposition,
}

/// Groups split against the recorded decisions; each list keeps the groups' order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistorySplit<'a> {
    /// Decided before and back with new entries: the most valuable finding.
    pub recurring: Vec<WithPrevious<'a>>,
    /// Decided, and every entry predates what the decision covered.
    pub covered: Vec<WithPrevious<'a>>,
    /// Never decided.
    pub fresh: Vec<&'a Group>,
}

/// Split `groups` against `dispositions` (oldest first).
pub fn split_against_history<'a>(
    groups: &'a [Group],
    dispositions: &'a [Disposition],
) -> HistorySplit<'a> {
    let latest = latest_by_signature(dispositions);
    let mut split = HistorySplit {
        recurring: Vec::new(),
        covered: Vec::new(),
        fresh: Vec::new(),
    };
    for group in groups {
        match latest.get(group.signature.as_str()) {
            None => split.fresh.push(group),
            Some(previous) => {
                let entry = WithPrevious { group, previous };
                if group.stats.max_first_attempt_ms > previous.covers_until_ms() {
                    split.recurring.push(entry);
                } else {
                    split.covered.push(entry);
                }
            }
        }
    }
    split
}

#[cfg(test)]
mod tests {
    use super::super::test_support::envelope_line;
    use super::super::triage::{TriageOptions, triage_reader};
    use super::*;

    fn groups() -> Vec<Group> {
        let line = |msg: &str, at: &str| envelope_line(msg, at, at);
        let text = [
            line("a 1", "2026-03-01T00:00:00.000Z"),
            line("a 2", "2026-03-05T00:00:00.000Z"),
            line("b 1", "2026-03-01T00:00:00.000Z"),
            line("c 1", "2026-03-01T00:00:00.000Z"),
        ]
        .join("\n");
        triage_reader(text.as_bytes(), TriageOptions::default())
            .expect("reads")
            .groups
    }

    #[test]
    fn reasons_are_a_closed_list() {
        assert_eq!(
            CloseReason::parse("fixed_in_code"),
            Ok(CloseReason::FixedInCode)
        );
        let err = CloseReason::parse("other").expect_err("refused");
        let text = err.to_string();
        for r in CloseReason::ALL {
            assert!(text.contains(r.as_str()), "{text}");
        }
    }

    #[test]
    fn split_by_signature_with_recurring_and_covered() {
        let groups = groups();
        let g_a = groups.iter().find(|g| g.signature == "a <n>").expect("a");
        let g_b = groups.iter().find(|g| g.signature == "b <n>").expect("b");
        // a was closed when only its first entry existed; b when all of it did; version differs.
        let mut early_a =
            Disposition::close("q", g_a, CloseReason::FixedInCode, "ana", 0, None).expect("valid");
        early_a.last_seen = Some("2026-03-02T00:00:00.000Z".into());
        early_a.consumer_version = "0.9".into();
        let b =
            Disposition::close("q", g_b, CloseReason::EntityDeleted, "bo", 0, None).expect("valid");
        let older_b = Disposition {
            action: Action::Replay,
            ..b.clone()
        };
        let dispositions = vec![older_b, early_a, b];
        let split = split_against_history(&groups, &dispositions);
        assert_eq!(split.recurring.len(), 1);
        assert_eq!(split.recurring[0].group.signature, "a <n>");
        assert_eq!(split.covered.len(), 1);
        assert_eq!(
            split.covered[0].previous.action,
            Action::Close(CloseReason::EntityDeleted),
            "the last decision wins"
        );
        assert_eq!(split.fresh.len(), 1);
        let json = serde_json::to_value(&split).expect("json");
        assert_eq!(
            json["recurring"][0]["previousDisposition"]["reason"],
            "fixed_in_code"
        );
        assert_eq!(json["recurring"][0]["count"], 2);
        assert!(Disposition::close("q", g_a, CloseReason::FixedInCode, " ", 0, None).is_err());
    }

    #[test]
    fn coverage_falls_back_to_the_decision_time() {
        let groups = groups();
        let mut d =
            Disposition::close("q", &groups[0], CloseReason::WindowExpired, "ana", 42, None)
                .expect("valid");
        d.last_seen = None;
        assert_eq!(d.covers_until_ms(), 42);
        assert_eq!(covered_until(&[d]).get("a <n>"), Some(&42));
    }
}

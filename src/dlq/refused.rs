//! What a replay refuses before it sends anything: the pre-scan of an export file counts the
//! selection and applies the validity guard ([`ReplayPolicy::judge_age`]) to every entry, so that
//! an old entry (or one of unknown age) refuses the whole run up front, and the refusal names
//! the lines, the groups and what to do.

use std::collections::BTreeSet;
use std::time::Duration;

use super::replay::{Age, ReplayPolicy};
use super::selection::{GroupKey, Selected};

/// Lines a refusal names before it only counts them.
const SHOWN_LINES: usize = 5;

/// What the replay was asked, as the refusal repeats it in the commands it suggests.
#[derive(Debug, Clone, Copy)]
pub struct ReplayRequest<'a> {
    /// The export, as given.
    pub file: &'a str,
    /// `--max-age`.
    pub max_age: Duration,
    /// Who replays (`--by`).
    pub by: &'a str,
    /// The queue of the decisions.
    pub queue: &'a str,
    /// One group was selected (`--class`, `--version`, `--signature`), not the whole file.
    pub group_given: bool,
}

/// The pre-scan of a file: how many entries it selects, and those refused.
#[derive(Debug, Default)]
pub struct Prescan {
    /// Entries selected.
    pub count: u64,
    /// The entries the validity guard refuses.
    pub refused: Refused,
}

/// Reads the whole `selection` and judges each entry's age under `policy` at `now_ms`.
pub fn prescan(
    selection: impl IntoIterator<Item = Selected>,
    policy: &ReplayPolicy,
    now_ms: i64,
) -> Prescan {
    let mut scan = Prescan::default();
    for s in selection {
        scan.count += 1;
        match policy.judge_age(s.entry.first_attempt_ms(), now_ms) {
            Age::Admitted => {}
            Age::TooOld { age_ms } => scan.refused.too_old(&s, age_ms),
            Age::Unknown => scan.refused.unknown(&s),
        }
    }
    scan
}

/// The entries refused: older than `--max-age`, and those whose age cannot be computed.
#[derive(Debug, Default)]
pub struct Refused {
    old_lines: Vec<u64>,
    /// The oldest refused entry: its line, `firstAttemptAt` as written, and its age in ms.
    oldest: Option<(u64, String, i64)>,
    unknown_lines: Vec<u64>,
    unknown_first: Option<String>,
    groups: BTreeSet<GroupKey>,
}

impl Refused {
    /// Note `s`, `age_ms` old, as too old.
    pub fn too_old(&mut self, s: &Selected, age_ms: i64) {
        self.old_lines.push(s.line);
        if self.oldest.as_ref().is_none_or(|o| age_ms > o.2) {
            self.oldest = Some((s.line, s.entry.first_attempt_at.clone(), age_ms));
        }
        self.groups.insert(s.key.clone());
    }

    /// Note `s` as of unknown age.
    pub fn unknown(&mut self, s: &Selected) {
        self.unknown_lines.push(s.line);
        self.unknown_first
            .get_or_insert_with(|| s.entry.first_attempt_at.clone());
        self.groups.insert(s.key.clone());
    }

    /// The refusal: how many of `count`, which lines, why, and what to do; `None` when nothing
    /// is refused.
    pub fn message(&self, a: &ReplayRequest<'_>, count: u64) -> Option<String> {
        let mut parts = Vec::new();
        if let Some((line, at, _)) = &self.oldest {
            parts.push(format!(
                "{} of {count} selected entries first attempted more than --max-age {} ago ({} of {}; the oldest, line {line}, at {at}): replaying old events can act on a state that moved on",
                self.old_lines.len(),
                crate::time::human(a.max_age),
                lines_text(&self.old_lines),
                a.file,
            ));
        }
        if let Some(at) = &self.unknown_first {
            parts.push(format!(
                "{} of {count} selected entries with a firstAttemptAt that gives no age ({} of {}, e.g. {at:?}): --max-age cannot vouch for them",
                self.unknown_lines.len(),
                lines_text(&self.unknown_lines),
                a.file,
            ));
        }
        if parts.is_empty() {
            return None;
        }
        let close = match self.groups.iter().collect::<Vec<_>>().as_slice() {
            [(class, version, signature)] => format!(
                "Close their group if they no longer apply (`migrate dlq close --class {} --version {} --signature {} --reason window_expired --by {} --queue {} --from {}`)",
                shell_word(class),
                shell_word(version),
                shell_word(signature),
                shell_word(a.by.trim()),
                shell_word(a.queue),
                shell_word(a.file),
            ),
            groups => format!(
                "Close their {} groups if they no longer apply (`migrate dlq triage {}` lists them; `migrate dlq close ... --reason window_expired` closes one)",
                groups.len(),
                a.file,
            ),
        };
        let others = if a.group_given {
            ""
        } else {
            ", replay the other groups alone (--class, --version, --signature)"
        };
        Some(format!(
            "refused, nothing was sent: {}. {close}{others}, or replay anyway with --force-old",
            parts.join("; and "),
        ))
    }
}

/// "line 3" or "lines 3, 5, 6" (the first few, then "…").
fn lines_text(lines: &[u64]) -> String {
    let shown: Vec<String> = lines.iter().take(SHOWN_LINES).map(u64::to_string).collect();
    format!(
        "line{} {}{}",
        if lines.len() == 1 { "" } else { "s" },
        shown.join(", "),
        if lines.len() > SHOWN_LINES {
            ", …"
        } else {
            ""
        }
    )
}

/// `text` as one word of a POSIX shell command: as it is when it holds only characters no
/// shell treats specially, else in single quotes (a quote inside written `'\''`).
fn shell_word(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "._/:@%+=,-".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::envelope::{DeadLetter, Payload};
    use super::*;
    use crate::time::format_timestamp;

    const NOW: i64 = 1_772_445_600_000;
    const DAY: i64 = 86_400_000;

    fn selected(line: u64, class: &str, first_attempt_at: String) -> Selected {
        Selected {
            entry: DeadLetter {
                payload: Payload::Bytes(b"p".to_vec()),
                error_class: class.into(),
                error_message: "m".into(),
                consumer_version: "1".into(),
                trace_id: None,
                attempts: 1,
                first_attempt_at,
                dead_lettered_at: format_timestamp(NOW),
            },
            key: (class.into(), "1".into(), "sig it's".into()),
            line,
        }
    }

    fn request() -> ReplayRequest<'static> {
        ReplayRequest {
            file: "dl.ndjson",
            max_age: Duration::from_secs(7 * 86_400),
            by: " ana ",
            queue: "orders.dlq",
            group_given: false,
        }
    }

    #[test]
    fn young_entries_are_counted_and_not_refused() {
        let scan = prescan(
            (1..=3).map(|n| selected(n, "t", format_timestamp(NOW - DAY))),
            &ReplayPolicy::default(),
            NOW,
        );
        assert_eq!(scan.count, 3);
        assert_eq!(scan.refused.message(&request(), scan.count), None);
    }

    #[test]
    fn old_and_ageless_entries_are_refused_by_line_with_the_close_command() {
        let list = vec![
            selected(1, "t", format_timestamp(NOW - DAY)),
            selected(2, "t", format_timestamp(NOW - 9 * DAY)),
            selected(3, "t", format_timestamp(NOW - 30 * DAY)),
            selected(4, "t", "yesterday".into()),
        ];
        let scan = prescan(list.clone(), &ReplayPolicy::default(), NOW);
        let message = scan
            .refused
            .message(&request(), scan.count)
            .expect("refused");
        assert!(
            message.starts_with("refused, nothing was sent: 2 of 4 selected entries"),
            "{message}"
        );
        assert!(message.contains("(lines 2, 3 of dl.ndjson; the oldest, line 3, at "));
        assert!(message.contains("1 of 4 selected entries with a firstAttemptAt that gives no age (line 4 of dl.ndjson, e.g. \"yesterday\")"));
        assert!(
            message.contains("--signature 'sig it'\\''s' --reason window_expired --by ana --queue orders.dlq --from dl.ndjson`"),
            "{message}"
        );
        assert!(message.ends_with(
            ", replay the other groups alone (--class, --version, --signature), or replay anyway with --force-old"
        ));

        let forced = ReplayPolicy {
            force_old: true,
            ..ReplayPolicy::default()
        };
        let scan = prescan(list, &forced, NOW);
        assert_eq!((scan.count, scan.refused.message(&request(), 4)), (4, None));
    }

    #[test]
    fn several_groups_are_counted_and_lines_past_five_folded() {
        let list = (1..=7).map(|n| selected(n, if n % 2 == 0 { "a" } else { "b" }, "?".into()));
        let scan = prescan(list, &ReplayPolicy::default(), NOW);
        let group = ReplayRequest {
            group_given: true,
            ..request()
        };
        let message = scan.refused.message(&group, scan.count).expect("refused");
        assert!(
            message.contains("(lines 1, 2, 3, 4, 5, … of dl.ndjson"),
            "{message}"
        );
        assert!(message.contains("Close their 2 groups if they no longer apply (`migrate dlq triage dl.ndjson` lists them"));
        assert!(message.ends_with("closes one), or replay anyway with --force-old"));
    }
}

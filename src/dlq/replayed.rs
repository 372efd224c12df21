//! The decisions a completed replay records: one (action `replay`) for each group all of whose
//! messages went out, in this run or an earlier one, unless the latest decision on its
//! signature already records that same replay (a re-run that found the group sent).

use super::disposition::{Action, Disposition, latest_by_signature};
use super::replay::GroupTally;
use super::selection::GroupKey;
use super::signature::SignatureVersion;

/// The decisions to record for the groups `tally` says were replayed whole, against the
/// decisions `decided` of `queue` (oldest first), taken by `by` at `now_ms`; in group order.
pub fn replay_decisions(
    tally: &GroupTally<GroupKey>,
    decided: &[Disposition],
    queue: &str,
    by: &str,
    now_ms: i64,
) -> Vec<Disposition> {
    let latest = latest_by_signature(decided);
    tally
        .replayed()
        .filter(|((class, version, signature), count)| {
            !latest.get(signature.as_str()).is_some_and(|d| {
                d.action == Action::Replay
                    && d.error_class == *class
                    && d.consumer_version == *version
                    && d.last_seen == count.last_seen
            })
        })
        .map(|((class, version, signature), count)| Disposition {
            id: 0,
            queue: queue.to_string(),
            signature: signature.clone(),
            signature_version: SignatureVersion::V1.as_str().to_string(),
            error_class: class.clone(),
            consumer_version: version.clone(),
            affected_count: Some(count.published),
            first_seen: count.first_seen.clone(),
            last_seen: count.last_seen.clone(),
            action: Action::Replay,
            decided_by: by.trim().to_string(),
            decided_at_ms: now_ms,
            note: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::envelope::{DeadLetter, Payload};
    use super::*;

    fn entry(first_attempt_at: &str) -> DeadLetter {
        DeadLetter {
            payload: Payload::Bytes(b"p".to_vec()),
            error_class: "c".into(),
            error_message: "m".into(),
            consumer_version: "1".into(),
            trace_id: None,
            attempts: 1,
            first_attempt_at: first_attempt_at.into(),
            dead_lettered_at: first_attempt_at.into(),
        }
    }

    fn key(signature: &str) -> GroupKey {
        ("c".into(), "1".into(), signature.into())
    }

    #[test]
    fn a_group_replayed_whole_is_recorded_once_and_one_with_a_failure_not_at_all() {
        let mut tally = GroupTally::default();
        tally.observe(&key("a"), &entry("2026-03-01T10:00:00.000Z"), true);
        tally.observe(&key("a"), &entry("2026-03-02T10:00:00.000Z"), true);
        tally.observe(&key("b"), &entry("2026-03-01T10:00:00.000Z"), true);
        tally.observe(&key("b"), &entry("2026-03-01T11:00:00.000Z"), false);
        let new = replay_decisions(&tally, &[], "q", " ana ", 42);
        assert_eq!(new.len(), 1);
        let d = &new[0];
        assert_eq!(
            (
                d.signature.as_str(),
                d.affected_count,
                d.first_seen.as_deref(),
                d.last_seen.as_deref(),
                d.decided_by.as_str(),
                d.decided_at_ms,
                d.action
            ),
            (
                "a",
                Some(2),
                Some("2026-03-01T10:00:00.000Z"),
                Some("2026-03-02T10:00:00.000Z"),
                "ana",
                42,
                Action::Replay
            )
        );
        // A re-run that found the group sent records nothing new.
        assert!(replay_decisions(&tally, &new, "q", "ana", 43).is_empty());
        // Entries that came back later are a new replay of the group.
        tally.observe(&key("a"), &entry("2026-03-03T10:00:00.000Z"), true);
        assert_eq!(replay_decisions(&tally, &new, "q", "ana", 44).len(), 1);
    }
}

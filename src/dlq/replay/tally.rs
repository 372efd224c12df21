//! Per-group tallies of a run ([`GroupTally`], [`GroupCount`]).

use std::collections::BTreeMap;

use crate::dlq::envelope::DeadLetter;

/// What a run did to one group's entries (see [`GroupTally`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupCount {
    /// Published by this run.
    pub published: u64,
    /// Failed to publish in this run.
    pub failed: u64,
    /// The smallest `firstAttemptAt` of the published entries.
    pub first_seen: Option<String>,
    /// The largest `firstAttemptAt` of the published entries.
    pub last_seen: Option<String>,
    /// Not sent because the [`Ledger`](super::Ledger) holds them in doubt.
    pub in_doubt: u64,
}

/// Per group (`K`, e.g. class, version and signature), what a run published and what failed, to
/// decide which groups the run may record as replayed: only those none of whose messages failed.
/// A group with a failure stays open (the drain gate must not pass it) until a later run sends
/// what failed.
#[derive(Debug, Clone)]
pub struct GroupTally<K> {
    groups: BTreeMap<K, GroupCount>,
}

impl<K: Ord> Default for GroupTally<K> {
    fn default() -> Self {
        GroupTally {
            groups: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone> GroupTally<K> {
    /// Count `entry` of group `key`: `published`, or failed.
    pub fn observe(&mut self, key: &K, entry: &DeadLetter, published: bool) {
        let count = match self.groups.get_mut(key) {
            Some(c) => c,
            None => self.groups.entry(key.clone()).or_default(),
        };
        if !published {
            count.failed += 1;
            return;
        }
        count.published += 1;
        let at = &entry.first_attempt_at;
        if count.first_seen.as_ref().is_none_or(|f| at < f) {
            count.first_seen = Some(at.clone());
        }
        if count.last_seen.as_ref().is_none_or(|l| at > l) {
            count.last_seen = Some(at.clone());
        }
    }

    /// Count an entry of group `key` the [`Ledger`](super::Ledger) holds in doubt: the group stays open.
    pub fn observe_in_doubt(&mut self, key: &K) {
        match self.groups.get_mut(key) {
            Some(c) => c.in_doubt += 1,
            None => {
                self.groups.entry(key.clone()).or_default().in_doubt = 1;
            }
        }
    }

    /// Add what `other` counted (e.g. what the ledger says earlier runs sent).
    pub fn merge(&mut self, other: GroupTally<K>) {
        for (key, o) in other.groups {
            let c = self.groups.entry(key).or_default();
            c.published += o.published;
            c.failed += o.failed;
            c.in_doubt += o.in_doubt;
            if let Some(f) = o.first_seen
                && c.first_seen.as_ref().is_none_or(|mine| f < *mine)
            {
                c.first_seen = Some(f);
            }
            if let Some(l) = o.last_seen
                && c.last_seen.as_ref().is_none_or(|mine| l > *mine)
            {
                c.last_seen = Some(l);
            }
        }
    }

    /// The groups every message of which this run published (none failed, none in doubt), in
    /// key order: what a completed run records as replayed.
    pub fn replayed(&self) -> impl Iterator<Item = (&K, &GroupCount)> {
        self.groups
            .iter()
            .filter(|(_, c)| c.failed == 0 && c.in_doubt == 0 && c.published > 0)
    }

    /// The groups with at least one message that failed to publish or is in doubt, in key
    /// order: not replayed.
    pub fn unfinished(&self) -> impl Iterator<Item = (&K, &GroupCount)> {
        self.groups
            .iter()
            .filter(|(_, c)| c.failed > 0 || c.in_doubt > 0)
    }
}

//! What `migrate dlq replay` says on stderr while it runs: the first failures by name, each
//! held key once, a progress line every two seconds; and what it counts for the end: per group,
//! what went out and what failed, and the publishes the broker did not confirm.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::replay_summary::{SHOWN_FAILURES, held_behind};
use crate::dlq::replay::{Event, GroupTally, ReplayStats};
use crate::dlq::selection::{GroupKey, Selected};

/// The run's observer.
pub(super) struct Progress {
    /// The entries selected, when known (a file is counted first).
    total: Option<u64>,
    started: Instant,
    last_progress: Instant,
    held_keys: HashSet<String>,
    /// Per group, what this run published and what failed.
    pub(super) tally: GroupTally<GroupKey>,
    /// Publishes the broker did not confirm: they may have arrived, and stay in doubt.
    pub(super) unconfirmed: u64,
}

impl Progress {
    /// An observer for a run of `total` entries (unknown for standard input).
    pub(super) fn new(total: Option<u64>) -> Progress {
        Progress {
            total,
            started: Instant::now(),
            last_progress: Instant::now(),
            held_keys: HashSet::new(),
            tally: GroupTally::default(),
            unconfirmed: 0,
        }
    }

    /// Count `event`; say it when it is one of the first failures; say the progress when two
    /// seconds passed since it was last said.
    pub(super) fn observe(&mut self, event: &Event<'_, Selected>, stats: &ReplayStats) {
        match event {
            Event::Published(s) => self.tally.observe(&s.key, &s.entry, true),
            Event::Failed(s, e) => {
                self.tally.observe(&s.key, &s.entry, false);
                if !e.certainly_not_sent() {
                    self.unconfirmed += 1;
                }
                // The first few by name; the rest are counted in the summary.
                if stats.failed <= SHOWN_FAILURES {
                    let (class, version, signature) = &s.key;
                    eprintln!(
                        "replay: failed to publish the entry dead-lettered at {} ({} {} {signature:?}): {}",
                        crate::outgoing::line(&s.entry.dead_lettered_at),
                        crate::outgoing::line(class),
                        crate::outgoing::line(version),
                        // A broker's or a file's error, as the one text rule shows it.
                        crate::outgoing::line(&e.to_string())
                    );
                }
                if stats.failed == SHOWN_FAILURES {
                    eprintln!("replay: further failures are only counted");
                }
            }
            // Said once per key (its first held message), after the failure that holds it.
            Event::Held(s, key) => {
                self.tally.observe(&s.key, &s.entry, false);
                if self.held_keys.insert((*key).to_string())
                    && self.held_keys.len() as u64 <= SHOWN_FAILURES
                {
                    eprintln!(
                        "replay: key {key:?} is held from here on: an earlier message of it failed, and its later ones are not sent before it (run the replay again once the cause is fixed)"
                    );
                }
            }
        }
        if self.last_progress.elapsed() >= Duration::from_secs(2) {
            self.last_progress = Instant::now();
            let secs = self.started.elapsed().as_secs_f64().max(0.001);
            eprintln!(
                "replay: {}{} published, {} failed ({:.1}%){}, {:.1}/s",
                stats.published,
                self.total.map(|t| format!(" of {t}")).unwrap_or_default(),
                stats.failed,
                stats.failure_rate() * 100.0,
                held_behind(stats.held),
                stats.processed() as f64 / secs
            );
        }
    }
}

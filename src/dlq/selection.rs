//! The entries of an export that a replay sends: the export read lazily, line by line under the
//! line cap, each envelope kept when it is in the selected group (or any group, without one),
//! with its group and its line number. Lines that are not envelopes are counted and the first is
//! kept for the summary.

use std::borrow::Borrow;
use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::envelope::{DeadLetter, EnvelopeRef};
use super::lines::{Content, LineReader, too_long_message};
use super::signature::{SignatureVersion, Signer};

/// A group: (errorClass, consumerVersion, signature v1).
pub type GroupKey = (String, String, String);

/// A selected entry and its group.
#[derive(Debug, Clone, PartialEq)]
pub struct Selected {
    /// The envelope.
    pub entry: DeadLetter,
    /// Its group.
    pub key: GroupKey,
    /// Its line in the export.
    pub line: u64,
}

impl Borrow<DeadLetter> for Selected {
    fn borrow(&self) -> &DeadLetter {
        &self.entry
    }
}

/// Reads an export lazily and yields the entries of the selected group.
pub struct Selection<R> {
    reader: LineReader<R>,
    signer: Signer,
    filter: Option<GroupKey>,
    counters: SelectionCounters,
}

/// What a [`Selection`] skipped, readable after it was handed to the run that consumes it.
#[derive(Debug, Clone, Default)]
pub struct SelectionCounters {
    skipped: Arc<AtomicU64>,
    /// The first invalid line (or the read error that ended the input), for the summary.
    first_error: Arc<Mutex<Option<String>>>,
}

impl SelectionCounters {
    /// Lines skipped because they are not envelopes (over-long ones included).
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// The first invalid line (`line N: why`), or the read error that ended the input.
    pub fn first_error(&self) -> Option<String> {
        self.first_error.lock().ok().and_then(|f| f.clone())
    }
}

impl<R: BufRead> Selection<R> {
    /// The entries of `reader` (lines of at most `max_line_bytes`) in group `filter` (every
    /// group when `None`).
    pub fn new(reader: R, max_line_bytes: usize, filter: Option<GroupKey>) -> Self {
        Selection {
            reader: LineReader::new(reader, max_line_bytes),
            signer: Signer::new(SignatureVersion::V1),
            filter,
            counters: SelectionCounters::default(),
        }
    }

    /// Its counters (shared: they keep counting while the selection is read).
    pub fn counters(&self) -> SelectionCounters {
        self.counters.clone()
    }

    fn note(&self, error: impl FnOnce() -> String) {
        if let Ok(mut first) = self.counters.first_error.lock() {
            first.get_or_insert_with(error);
        }
    }

    fn skip_line(&self, error: impl FnOnce() -> String) {
        self.counters.skipped.fetch_add(1, Ordering::Relaxed);
        self.note(error);
    }
}

impl<R: BufRead> Iterator for Selection<R> {
    type Item = Selected;
    fn next(&mut self) -> Option<Selected> {
        loop {
            let max = self.reader.max();
            let line = match self.reader.next_line() {
                Ok(None) => return None,
                Ok(Some(line)) => line,
                Err(e) => {
                    self.note(|| format!("read error: {e}"));
                    return None;
                }
            };
            let number = line.number;
            let line = match line.content {
                Content::Text(text) => text,
                Content::TooLong { bytes } => {
                    self.skip_line(|| format!("line {number}: {}", too_long_message(bytes, max)));
                    continue;
                }
            };
            if line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
                continue;
            }
            let view = match EnvelopeRef::parse(line) {
                Ok(v) => v,
                Err(e) => {
                    self.skip_line(|| format!("line {number}: {e}"));
                    continue;
                }
            };
            let key = (
                view.error_class().to_string(),
                view.consumer_version().to_string(),
                self.signer.sign_wtf8(view.error_message_wtf8()),
            );
            if self.filter.as_ref().is_none_or(|f| *f == key) {
                return Some(Selected {
                    entry: view.to_dead_letter(),
                    key,
                    line: number,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(class: &str, message: &str) -> String {
        format!(
            r#"{{"payload":"p","errorClass":"{class}","errorMessage":"{message}","consumerVersion":"1","attempts":3,"firstAttemptAt":"2026-03-01T10:00:00.000Z","deadLetteredAt":"2026-03-01T10:05:00.000Z"}}"#
        )
    }

    fn export() -> String {
        [
            line("timeout", "a"),
            String::new(),
            "not json".to_string(),
            line("schema", "b"),
            line("timeout", "a"),
        ]
        .join("\n")
    }

    #[test]
    fn every_envelope_with_its_line_and_group_and_the_first_bad_line() {
        let text = export();
        let selection = Selection::new(text.as_bytes(), 1 << 20, None);
        let counters = selection.counters();
        let got: Vec<(u64, String)> = selection.map(|s| (s.line, s.key.0)).collect();
        assert_eq!(
            got,
            [
                (1, "timeout".to_string()),
                (4, "schema".to_string()),
                (5, "timeout".to_string())
            ]
        );
        assert_eq!(counters.skipped(), 1, "the blank line is not counted");
        let first = counters.first_error().expect("noted");
        assert!(first.starts_with("line 3: "), "{first}");
    }

    #[test]
    fn a_filter_keeps_one_group() {
        let all: Vec<Selected> = Selection::new(export().as_bytes(), 1 << 20, None).collect();
        let key = all[1].key.clone();
        let one: Vec<u64> = Selection::new(export().as_bytes(), 1 << 20, Some(key))
            .map(|s| s.line)
            .collect();
        assert_eq!(one, [4]);
    }

    #[test]
    fn a_line_over_the_cap_is_skipped_with_its_number() {
        let text = export();
        let selection = Selection::new(text.as_bytes(), 100, None);
        let counters = selection.counters();
        assert_eq!(selection.count(), 0);
        assert_eq!(counters.skipped(), 4);
        let first = counters.first_error().expect("noted");
        assert!(first.starts_with("line 1: "), "{first}");
    }
}

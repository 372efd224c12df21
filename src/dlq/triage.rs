//! Triage: group an export of dead letters by cause in one streaming pass (the dead-letter
//! article's `triage`).
//!
//! Groups are keyed by (`errorClass`, `consumerVersion`, signature). Memory is one accumulator
//! per group (strings, counters and the group's first envelope as its sample) plus the line being
//! read, whatever the number of lines; invalid lines are counted, and the first
//! [`TriageOptions::max_line_errors`] of them kept with their line numbers.
//!
//! What equals the seed, exactly (checked against node in `tests/integration/brokers/dlq_triage_seed.rs`):
//! - `count`; `sample` is the first envelope of the group;
//! - `firstSeen` / `lastSeen` are the smallest / largest `firstAttemptAt` **compared as
//!   strings**, as the seed's `<` and `>` do (for the UTC `...Z` instants the builder writes,
//!   that is chronological; with mixed offsets it is not, in JS or here);
//! - `spanHours` is `(Date.parse(lastSeen) - Date.parse(firstSeen)) / 3_600_000`, the same IEEE
//!   division, not rounded; it is written as an integer when it is one, as `JSON.stringify` does;
//! - the order: by `count` descending, ties in the order the groups first appeared (JS
//!   `Array#sort` is stable, and a `Map` iterates in insertion order).
//!
//! One deliberate difference: the seed keys its `Map` by the string
//! `${errorClass}|${consumerVersion}|${signature}`, so two groups whose fields contain `|` can
//! collide there (class `a|b` + version `c` and class `a` + version `b|c`); here the key is the
//! triple, and they stay two groups.
//!
//! Blank lines (only spaces, tabs, CR) are skipped silently and not counted as invalid.

use std::collections::HashMap;
use std::io::BufRead;

use serde::{Serialize, Serializer};

use super::envelope::{DeadLetter, EnvelopeError, EnvelopeRef, wtf8_to_string};
use super::lines::{Content, LineReader};
use super::scan::{self, Fields};
use super::signature::{SignatureVersion, Signer};

/// Errors of a triage run (invalid lines are not errors: they are counted and reported).
#[derive(Debug, thiserror::Error)]
pub enum TriageError {
    /// Reading the input failed (not a bad line: the stream itself).
    #[error("reading line {line}: {source}")]
    Io {
        /// The line being read.
        line: u64,
        /// The IO error.
        source: std::io::Error,
    },
}

/// A line that is not a valid envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineError {
    /// 1-based line number.
    pub line: u64,
    /// Why.
    pub message: String,
}

/// How to triage.
#[derive(Debug, Clone)]
pub struct TriageOptions {
    /// The signature rules (v1 by default).
    pub version: SignatureVersion,
    /// Count, per group, the entries dead-lettered at or after this instant (the inflow signal).
    pub recent_since_ms: Option<i64>,
    /// Per signature: entries first attempted at or before this instant are covered by a recorded
    /// decision (see [`super::disposition::covered_until`]); the others are open.
    pub covered_until_ms: HashMap<String, i64>,
    /// How many invalid lines to keep with their message (all are counted).
    pub max_line_errors: usize,
    /// The longest line read, in bytes; a longer one is skipped unread and counted invalid.
    pub max_line_bytes: usize,
}

impl Default for TriageOptions {
    fn default() -> Self {
        TriageOptions {
            version: SignatureVersion::V1,
            recent_since_ms: None,
            covered_until_ms: HashMap::new(),
            max_line_errors: 100,
            max_line_bytes: super::lines::DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// What a group knows beyond the seed's fields (not in the JSON output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupStats {
    /// `Date.parse(firstSeen)`.
    pub first_seen_ms: i64,
    /// `Date.parse(lastSeen)`.
    pub last_seen_ms: i64,
    /// Latest `firstAttemptAt` as an instant (differs from `last_seen_ms` only with mixed offsets).
    pub max_first_attempt_ms: i64,
    /// Oldest `deadLetteredAt`.
    pub oldest_dead_lettered_ms: i64,
    /// Newest `deadLetteredAt`.
    pub newest_dead_lettered_ms: i64,
    /// Entries dead-lettered at or after [`TriageOptions::recent_since_ms`].
    pub recent: u64,
    /// Entries not covered by a decision.
    pub open: u64,
    /// Oldest `deadLetteredAt` of the open entries.
    pub oldest_open_dead_lettered_ms: Option<i64>,
}

/// One group: the seed's fields, in its JSON names.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// The class of every entry in the group.
    #[serde(rename = "errorClass")]
    pub error_class: String,
    /// The consumer version of every entry.
    #[serde(rename = "consumerVersion")]
    pub consumer_version: String,
    /// The signature of every entry's message.
    pub signature: String,
    /// Entries in the group.
    pub count: u64,
    /// Smallest `firstAttemptAt` (as a string).
    #[serde(rename = "firstSeen")]
    pub first_seen: String,
    /// Largest `firstAttemptAt` (as a string).
    #[serde(rename = "lastSeen")]
    pub last_seen: String,
    /// Hours between them.
    #[serde(rename = "spanHours", serialize_with = "js_number")]
    pub span_hours: f64,
    /// The group's first envelope.
    pub sample: DeadLetter,
    /// Beyond the seed.
    #[serde(skip)]
    pub stats: GroupStats,
}

/// Write an `f64` as `JSON.stringify` would type it: integral values as integers.
fn js_number<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 {
        s.serialize_i64(*v as i64)
    } else if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_none()
    }
}

/// The result of a triage run.
#[derive(Debug, Clone, PartialEq)]
pub struct TriageReport {
    /// Groups, by count descending, ties in order of first appearance.
    pub groups: Vec<Group>,
    /// Lines read (blank ones included).
    pub lines: u64,
    /// Valid envelopes.
    pub entries: u64,
    /// Lines that were not valid envelopes.
    pub skipped: u64,
    /// The first of them, with why.
    pub errors: Vec<LineError>,
    /// The signature rules used.
    pub version: SignatureVersion,
}

/// The streaming accumulator: feed it lines, then [`Triage::finish`].
#[derive(Debug)]
pub struct Triage {
    options: TriageOptions,
    signer: Signer,
    /// Group key -> index in `groups` (foldhash: seeded per process, and several times faster
    /// than the default hasher on these ~100-byte keys, hashed once a line).
    index: HashMap<Box<[u8]>, usize, foldhash::fast::RandomState>,
    groups: Vec<Group>,
    key: Vec<u8>,
    /// The signature's WTF-8 bytes ([`Signer::sign_wtf8_bytes_into`]).
    signature: Vec<u8>,
    /// The message of the line being read, when it had escapes.
    unescaped: Vec<u8>,
    lines: u64,
    entries: u64,
    skipped: u64,
    errors: Vec<LineError>,
}

/// What triage reads of an envelope read by serde.
fn fields_of<'e, P>(e: &'e EnvelopeRef<'_, P>) -> Fields<'e> {
    Fields {
        error_class: e.error_class(),
        consumer_version: e.consumer_version(),
        error_message: e.error_message_wtf8(),
        first_attempt_at: e.first_attempt_at(),
        first_attempt_ms: e.first_attempt_ms(),
        dead_lettered_ms: e.dead_lettered_ms(),
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

impl Triage {
    /// An empty triage.
    pub fn new(options: TriageOptions) -> Triage {
        Triage {
            signer: Signer::new(options.version),
            options,
            index: HashMap::default(),
            groups: Vec::new(),
            key: Vec::new(),
            signature: Vec::new(),
            unescaped: Vec::new(),
            lines: 0,
            entries: 0,
            skipped: 0,
            errors: Vec::new(),
        }
    }

    /// Feed the next line (without or with its `\n`); line numbers count from 1 in call order.
    pub fn push_line(&mut self, line: &[u8]) {
        self.lines += 1;
        if is_blank(line) {
            return;
        }
        // The scan reads the fields triage needs and steps over the payload; a line it does not
        // vouch for goes to the skim (serde, the payload skipped unread), then to the lean read,
        // which checks everything the full one does and says what is wrong. Only the first
        // envelope of a group is kept, read again in full.
        let full = || EnvelopeRef::parse(line).map(|full| full.to_dead_letter());
        let mut unescaped = std::mem::take(&mut self.unescaped);
        if let Some(fields) = scan::skim(line, &mut unescaped) {
            self.add(&fields, full);
            self.unescaped = unescaped;
            return;
        }
        self.unescaped = unescaped;
        if let Some(entry) = EnvelopeRef::parse_skim(line) {
            self.add(&fields_of(&entry), full);
            return;
        }
        match EnvelopeRef::parse_lean(line) {
            Ok(entry) => self.add(&fields_of(&entry), || match entry.to_dead_letter() {
                Some(sample) => Ok(sample),
                None => EnvelopeRef::parse(line).map(|full| full.to_dead_letter()),
            }),
            Err(e) => self.skip(&e),
        }
    }

    fn skip(&mut self, e: &EnvelopeError) {
        self.skip_message(e.to_string());
    }

    fn skip_message(&mut self, message: String) {
        self.skipped += 1;
        if self.errors.len() < self.options.max_line_errors {
            self.errors.push(LineError {
                line: self.lines,
                message,
            });
        }
    }

    /// Count a line that was longer than [`TriageOptions::max_line_bytes`] (skipped unread) as
    /// invalid.
    pub fn push_too_long(&mut self, bytes: u64) {
        self.lines += 1;
        let message = super::lines::too_long_message(bytes, self.options.max_line_bytes);
        self.skip_message(message);
    }

    /// Feed one valid envelope.
    pub fn push(&mut self, entry: &EnvelopeRef<'_>) {
        self.add(&fields_of(entry), || Ok(entry.to_dead_letter()));
    }

    fn add(
        &mut self,
        entry: &Fields<'_>,
        sample: impl FnOnce() -> Result<DeadLetter, EnvelopeError>,
    ) {
        self.signer
            .sign_wtf8_bytes_into(entry.error_message, &mut self.signature);
        let (class, version) = (entry.error_class, entry.consumer_version);
        self.key.clear();
        // Lengths first: no two different triples give the same key.
        let mut digits = itoa::Buffer::new();
        self.key
            .extend_from_slice(digits.format(class.len()).as_bytes());
        self.key.push(b':');
        self.key.extend_from_slice(class.as_bytes());
        self.key
            .extend_from_slice(digits.format(version.len()).as_bytes());
        self.key.push(b':');
        self.key.extend_from_slice(version.as_bytes());
        self.key.extend_from_slice(&self.signature);

        let at = entry.first_attempt_at;
        let at_ms = entry.first_attempt_ms;
        let dl_ms = entry.dead_lettered_ms;
        let idx = match self.index.get(self.key.as_slice()) {
            Some(&i) => i,
            None => {
                let sample = match sample() {
                    Ok(sample) => sample,
                    Err(e) => {
                        // The lean and the full read check the same things: not expected.
                        self.skip(&e);
                        return;
                    }
                };
                let i = self.groups.len();
                self.index.insert(self.key.as_slice().into(), i);
                self.groups.push(Group {
                    error_class: class.to_string(),
                    consumer_version: version.to_string(),
                    signature: wtf8_to_string(&self.signature),
                    count: 0,
                    first_seen: at.to_string(),
                    last_seen: at.to_string(),
                    span_hours: 0.0,
                    sample,
                    stats: GroupStats {
                        first_seen_ms: at_ms,
                        last_seen_ms: at_ms,
                        max_first_attempt_ms: at_ms,
                        oldest_dead_lettered_ms: dl_ms,
                        newest_dead_lettered_ms: dl_ms,
                        ..GroupStats::default()
                    },
                });
                i
            }
        };
        self.entries += 1;
        let recent = self
            .options
            .recent_since_ms
            .is_some_and(|since| dl_ms >= since);
        let g = &mut self.groups[idx];
        g.count += 1;
        if at < g.first_seen.as_str() {
            g.first_seen.clear();
            g.first_seen.push_str(at);
            g.stats.first_seen_ms = at_ms;
        }
        if at > g.last_seen.as_str() {
            g.last_seen.clear();
            g.last_seen.push_str(at);
            g.stats.last_seen_ms = at_ms;
        }
        let s = &mut g.stats;
        s.max_first_attempt_ms = s.max_first_attempt_ms.max(at_ms);
        s.oldest_dead_lettered_ms = s.oldest_dead_lettered_ms.min(dl_ms);
        s.newest_dead_lettered_ms = s.newest_dead_lettered_ms.max(dl_ms);
        s.recent += u64::from(recent);
        let covered = !self.options.covered_until_ms.is_empty()
            && self
                .options
                .covered_until_ms
                .get(&g.signature)
                .is_some_and(|&until| at_ms <= until);
        if !covered {
            s.open += 1;
            s.oldest_open_dead_lettered_ms = Some(
                s.oldest_open_dead_lettered_ms
                    .map_or(dl_ms, |o| o.min(dl_ms)),
            );
        }
    }

    /// Append `next`, the triage of the lines that follow this one's (same options): the result is
    /// what one triage of all the lines would hold. Groups keep their order of first appearance
    /// (a group `next` saw first goes after this one's), samples stay the first envelope, the
    /// line numbers of `next`'s bad lines move past this one's lines.
    pub fn append(&mut self, next: Triage) {
        let Triage {
            index,
            groups,
            lines,
            entries,
            skipped,
            errors,
            ..
        } = next;
        let mut keys: Vec<Option<Box<[u8]>>> = vec![None; groups.len()];
        for (key, i) in index {
            if let Some(slot) = keys.get_mut(i) {
                *slot = Some(key);
            }
        }
        for (g, key) in groups.into_iter().zip(keys) {
            let Some(key) = key else { continue };
            match self.index.get(&key) {
                Some(&i) => absorb(&mut self.groups[i], g),
                None => {
                    self.index.insert(key, self.groups.len());
                    self.groups.push(g);
                }
            }
        }
        let room = self
            .options
            .max_line_errors
            .saturating_sub(self.errors.len());
        self.errors
            .extend(errors.into_iter().take(room).map(|e| LineError {
                line: e.line + self.lines,
                message: e.message,
            }));
        self.lines += lines;
        self.entries += entries;
        self.skipped += skipped;
    }

    /// Groups so far (unsorted, in order of first appearance).
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Sort, compute the spans, and hand the report over.
    pub fn finish(self) -> TriageReport {
        let mut groups = self.groups;
        for g in &mut groups {
            g.span_hours = (g.stats.last_seen_ms - g.stats.first_seen_ms) as f64 / 3_600_000.0;
        }
        // Stable: ties keep the order the groups first appeared, as JS `sort` does.
        groups.sort_by_key(|g| std::cmp::Reverse(g.count));
        TriageReport {
            groups,
            lines: self.lines,
            entries: self.entries,
            skipped: self.skipped,
            errors: self.errors,
            version: self.signer.version(),
        }
    }
}

/// Fold `later` (the same group, seen in lines after `g`'s) into `g`, as if one triage had seen
/// both: the sample stays `g`'s, the string min / max move only on a strictly smaller / larger
/// string (as [`Triage::push_line`] does).
fn absorb(g: &mut Group, later: Group) {
    g.count += later.count;
    if later.first_seen < g.first_seen {
        g.first_seen = later.first_seen;
        g.stats.first_seen_ms = later.stats.first_seen_ms;
    }
    if later.last_seen > g.last_seen {
        g.last_seen = later.last_seen;
        g.stats.last_seen_ms = later.stats.last_seen_ms;
    }
    let (s, l) = (&mut g.stats, later.stats);
    s.max_first_attempt_ms = s.max_first_attempt_ms.max(l.max_first_attempt_ms);
    s.oldest_dead_lettered_ms = s.oldest_dead_lettered_ms.min(l.oldest_dead_lettered_ms);
    s.newest_dead_lettered_ms = s.newest_dead_lettered_ms.max(l.newest_dead_lettered_ms);
    s.recent += l.recent;
    s.open += l.open;
    s.oldest_open_dead_lettered_ms = match (
        s.oldest_open_dead_lettered_ms,
        l.oldest_open_dead_lettered_ms,
    ) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
}

/// Triage everything `reader` yields, one line at a time.
///
/// # Errors
/// [`TriageError::Io`] when reading fails; invalid lines are in the report, not errors.
pub fn triage_reader<R: BufRead>(
    reader: R,
    options: TriageOptions,
) -> Result<TriageReport, TriageError> {
    let mut triage = Triage::new(options);
    triage.read(reader)?;
    Ok(triage.finish())
}

impl Triage {
    /// Feed every line `reader` yields.
    ///
    /// # Errors
    /// [`TriageError::Io`] when reading fails, with the number (in this triage) of the line.
    pub fn read<R: BufRead>(&mut self, reader: R) -> Result<(), TriageError> {
        let mut lines = LineReader::new(reader, self.options.max_line_bytes);
        // A line is read where it lies in the reader's buffer when it can be; one over the cap
        // is skipped in chunks, never held.
        loop {
            let line = lines.next_line().map_err(|source| TriageError::Io {
                line: self.lines + 1,
                source,
            })?;
            match line.map(|l| l.content) {
                None => return Ok(()),
                Some(Content::Text(text)) => self.push_line(text),
                Some(Content::TooLong { bytes }) => self.push_too_long(bytes),
            }
        }
    }

    /// Lines fed so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }
}

/// The seed's output as JSON text (an array, pretty-printed).
pub fn render_json(groups: &[Group]) -> String {
    // Strings, integers and finite floats: serializing cannot fail.
    serde_json::to_string_pretty(groups).unwrap_or_default()
}

/// What a group's span suggests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Hint {
    /// One entry: nothing to compare; read the sample.
    OneOff,
    /// A short span: an incident that ended; replaying is likely right.
    Incident,
    /// A long span: a defect that is still there; replaying only sends them back.
    LiveDefect,
}

impl Hint {
    /// The hint for `group` when a span of `short_span_hours` or less counts as an incident.
    pub fn of(group: &Group, short_span_hours: f64) -> Hint {
        if group.count == 1 {
            Hint::OneOff
        } else if group.span_hours.abs() <= short_span_hours {
            Hint::Incident
        } else {
            Hint::LiveDefect
        }
    }

    /// For the table.
    pub fn text(self) -> &'static str {
        match self {
            Hint::OneOff => "one-off: read the sample",
            Hint::Incident => "incident, ended: replay likely right",
            Hint::LiveDefect => "live defect: fix first, replay sends them back",
        }
    }
}

/// How the table looks.
#[derive(Debug, Clone, Copy)]
pub struct TableOptions {
    /// Groups shown one per line; the rest fold into one line.
    pub top: usize,
    /// Widest signature column (longer ones end in `…`).
    pub signature_width: usize,
    /// A span up to this many hours is an incident.
    pub short_span_hours: f64,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            top: 15,
            signature_width: 48,
            short_span_hours: 24.0,
        }
    }
}

fn clip(text: &str, width: usize) -> String {
    // The one text rule: control characters shown as escapes.
    let flat = crate::outgoing::sanitize(text, crate::outgoing::Shape::Line);
    if flat.chars().count() <= width {
        flat.into_owned()
    } else {
        let mut s: String = flat.chars().take(width.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// A span for people: `45m`, `2.0h`, `3.5d`.
pub fn human_span(hours: f64) -> String {
    let h = hours.abs();
    let sign = if hours < 0.0 { "-" } else { "" };
    if h < 1.0 {
        format!("{sign}{:.0}m", h * 60.0)
    } else if h < 48.0 {
        format!("{sign}{h:.1}h")
    } else {
        format!("{sign}{:.1}d", h / 24.0)
    }
}

/// Table lines for `groups` (already in the order to show), without the summary line.
pub fn render_rows(groups: &[Group], options: &TableOptions) -> String {
    let mut out = String::new();
    let class_w = groups
        .iter()
        .take(options.top)
        .map(|g| g.error_class.chars().count().min(24))
        .max()
        .unwrap_or(5)
        .max(5);
    let version_w = groups
        .iter()
        .take(options.top)
        .map(|g| g.consumer_version.chars().count().min(12))
        .max()
        .unwrap_or(7)
        .max(7);
    out.push_str(&format!(
        "{:>8}  {:>6}  {:<class_w$}  {:<version_w$}  {:<sig_w$}  HINT\n",
        "COUNT",
        "SPAN",
        "CLASS",
        "VERSION",
        "SIGNATURE",
        sig_w = options.signature_width,
    ));
    for g in groups.iter().take(options.top) {
        out.push_str(&format!(
            "{:>8}  {:>6}  {:<class_w$}  {:<version_w$}  {:<sig_w$}  {}\n",
            g.count,
            human_span(g.span_hours),
            clip(&g.error_class, class_w),
            clip(&g.consumer_version, version_w),
            clip(&g.signature, options.signature_width),
            Hint::of(g, options.short_span_hours).text(),
            sig_w = options.signature_width,
        ));
    }
    if groups.len() > options.top {
        let tail = &groups[options.top..];
        let entries: u64 = tail.iter().map(|g| g.count).sum();
        let one_offs = tail.iter().filter(|g| g.count == 1).count();
        let largest = tail.first().map_or(0, |g| g.count);
        out.push_str(&format!(
            "{:>8}  … {} more groups (the largest {} entries; {} one-offs); --top N or --format json for all\n",
            entries,
            tail.len(),
            largest,
            one_offs
        ));
    }
    out
}

/// The whole table: rows, then one summary line.
pub fn render_table(report: &TriageReport, options: &TableOptions) -> String {
    let mut out = render_rows(&report.groups, options);
    out.push_str(&summary_line(report));
    out.push('\n');
    out
}

/// `41002 entries in 324 groups (signature v1) from 41010 lines; 8 skipped`.
pub fn summary_line(report: &TriageReport) -> String {
    format!(
        "{} entries in {} groups (signature {}) from {} lines; {} skipped{}",
        report.entries,
        report.groups.len(),
        report.version.as_str(),
        report.lines,
        report.skipped,
        if report.skipped > 0 {
            " (not valid envelopes: see stderr)"
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(class: &str, version: &str, msg: &str, first: &str) -> String {
        serde_json::json!({
            "payload": "p", "errorClass": class, "errorMessage": msg, "consumerVersion": version,
            "traceId": null, "attempts": 3, "firstAttemptAt": first,
            "deadLetteredAt": "2026-03-01T00:00:00.000Z"
        })
        .to_string()
    }

    fn run(text: &str) -> TriageReport {
        triage_reader(text.as_bytes(), TriageOptions::default()).expect("reads")
    }

    #[test]
    fn groups_count_span_and_sort_stably() {
        let text = [
            line(
                "t",
                "1",
                "timeout after 30012ms",
                "2026-03-01T10:00:00.000Z",
            ),
            line("v", "1", "bad field 'x'", "2026-03-01T09:00:00.000Z"),
            line(
                "t",
                "1",
                "timeout after 30044ms",
                "2026-03-01T08:30:00.000Z",
            ),
            line("v", "1", "bad field 'y'", "2026-03-01T12:00:00.000Z"),
            line("t", "2", "timeout after 1ms", "2026-03-01T12:00:00.000Z"),
        ]
        .join("\n");
        let r = run(&text);
        assert_eq!(r.entries, 5);
        let summary: Vec<_> = r
            .groups
            .iter()
            .map(|g| {
                (
                    g.error_class.as_str(),
                    g.consumer_version.as_str(),
                    g.count,
                    g.span_hours,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [("t", "1", 2, 1.5), ("v", "1", 2, 3.0), ("t", "2", 1, 0.0)]
        );
        assert_eq!(r.groups[0].first_seen, "2026-03-01T08:30:00.000Z");
        assert_eq!(r.groups[0].last_seen, "2026-03-01T10:00:00.000Z");
        assert_eq!(r.groups[0].sample.error_message, "timeout after 30012ms");
    }

    #[test]
    fn lines_split_across_the_read_buffer_read_as_whole_ones() {
        let good = line("t", "1", "m", "2026-03-01T10:00:00.000Z");
        let other = line(
            "v",
            "2",
            "timeout after 30012ms",
            "2026-03-01T11:00:00.000Z",
        );
        // Blank and bad lines between, and a last line without its newline.
        let text = format!("{good}\n\nnot json\n{other}\r\n{good}\n{other}");
        let whole = run(&text);
        assert_eq!((whole.lines, whole.entries, whole.skipped), (6, 4, 1));
        for capacity in [1, 2, 7, 64, good.len(), good.len() + 1] {
            let reader = std::io::BufReader::with_capacity(capacity, text.as_bytes());
            let r = triage_reader(reader, TriageOptions::default()).expect("reads");
            assert_eq!(r, whole, "buffer of {capacity} bytes");
        }
    }

    #[test]
    fn bad_lines_are_counted_with_their_numbers_and_blank_lines_ignored() {
        let good = line("t", "1", "m", "2026-03-01T10:00:00.000Z");
        let positional =
            r#"["p","c","m","v",null,1,"2026-03-01T10:00:00Z","2026-03-01T10:00:00Z"]"#;
        let text =
            format!("{good}\n\nnot json\n{{\"payload\":1}}\n{good}\r\n\u{20}\n{positional}\n");
        let r = run(&text);
        assert_eq!((r.lines, r.entries, r.skipped), (7, 2, 3));
        assert_eq!(
            r.errors.iter().map(|e| e.line).collect::<Vec<_>>(),
            [3, 4, 7]
        );
        assert!(r.errors[2].message.contains("not a JSON object"));
        let mut bytes = good.clone().into_bytes();
        bytes.extend_from_slice(b"\n\xff\xfe\n");
        let r = triage_reader(bytes.as_slice(), TriageOptions::default()).expect("reads");
        assert_eq!((r.entries, r.skipped), (1, 1));
        assert!(
            r.errors[0].message.contains("UTF-8"),
            "{}",
            r.errors[0].message
        );
    }

    /// Regression (review): groups were keyed by the printed signature, where a lone surrogate is
    /// spelled `\udabc`, so a message holding it and one holding those six characters merged;
    /// JS keeps them apart (its strings differ), and so do the group keys now.
    #[test]
    fn a_lone_surrogate_and_the_text_that_spells_it_are_two_groups_as_in_js() {
        let at = "2026-03-01T00:00:00.000Z";
        // The JSON escape `\udabc` reads as the lone surrogate; `\\udabc` as six characters.
        let lone = line("c", "1", "x\u{1}", at).replace("\\u0001", "\\udabc");
        let spelled = line("c", "1", "x\\udabc", at);
        assert!(lone.contains(r#""x\udabc""#), "{lone}");
        assert!(spelled.contains(r#""x\\udabc""#), "{spelled}");
        let report = run(&format!("{lone}\n{spelled}\n{lone}\n"));
        assert_eq!(report.skipped, 0);
        let groups: Vec<(&str, u64)> = report
            .groups
            .iter()
            .map(|g| (g.signature.as_str(), g.count))
            .collect();
        assert_eq!(groups, [("x\\udabc", 2), ("x\\udabc", 1)]);
    }

    #[test]
    fn pipes_do_not_merge_groups() {
        let text = [
            line("a|b", "c", "m", "2026-03-01T10:00:00.000Z"),
            line("a", "b|c", "m", "2026-03-01T10:00:00.000Z"),
        ]
        .join("\n");
        assert_eq!(run(&text).groups.len(), 2);
    }

    #[test]
    fn first_and_last_seen_compare_as_strings_like_the_seed() {
        // 10:00+02:00 is 08:00Z, but as a string it sorts after 09:00Z.
        let text = [
            line("t", "1", "m", "2026-03-01T09:00:00.000Z"),
            line("t", "1", "m", "2026-03-01T10:00:00+02:00"),
        ]
        .join("\n");
        let g = &run(&text).groups[0];
        assert_eq!(g.last_seen, "2026-03-01T10:00:00+02:00");
        assert_eq!(g.span_hours, -1.0);
        assert_eq!(g.stats.max_first_attempt_ms, g.stats.first_seen_ms);
    }

    #[test]
    fn json_writes_integral_spans_as_integers() {
        let text = line("t", "1", "m", "2026-03-01T09:00:00.000Z");
        let json = render_json(&run(&text).groups);
        assert!(json.contains("\"spanHours\": 0,"), "{json}");
        let keys: Vec<String> = serde_json::from_str::<serde_json::Value>(&json).expect("json")[0]
            .as_object()
            .expect("object")
            .keys()
            .cloned()
            .collect();
        assert_eq!(keys.len(), 8);
    }

    #[test]
    fn coverage_and_recent_counts() {
        let text = [
            line("t", "1", "m 1", "2026-03-01T09:00:00.000Z"),
            line("t", "1", "m 2", "2026-03-02T09:00:00.000Z"),
        ]
        .join("\n");
        let mut options = TriageOptions {
            recent_since_ms: Some(0),
            ..TriageOptions::default()
        };
        options.covered_until_ms.insert(
            "m <n>".into(),
            crate::time::parse_timestamp("2026-03-01T12:00:00Z").expect("ts"),
        );
        let r = triage_reader(text.as_bytes(), options).expect("reads");
        assert_eq!(r.groups[0].stats.open, 1);
        assert_eq!(r.groups[0].stats.recent, 2);
    }

    #[test]
    fn table_folds_the_tail_and_gives_hints() {
        let mut lines = Vec::new();
        for i in 0..30_u8 {
            let name: String = [char::from(b'a' + i % 26), char::from(b'a' + i / 26)]
                .iter()
                .collect();
            lines.push(line(
                "t",
                "1",
                &format!("cause {name}"),
                "2026-03-01T09:00:00.000Z",
            ));
        }
        for _ in 0..5 {
            lines.push(line("t", "1", "big", "2026-03-01T09:00:00.000Z"));
        }
        lines.push(line("t", "1", "big", "2026-03-09T09:00:00.000Z"));
        let r = run(&lines.join("\n"));
        let table = render_table(
            &r,
            &TableOptions {
                top: 3,
                ..TableOptions::default()
            },
        );
        assert_eq!(table.lines().count(), 1 + 3 + 1 + 1, "{table}");
        assert!(table.contains("live defect"), "{table}");
        assert!(table.contains("… 28 more groups"), "{table}");
        assert_eq!(human_span(0.5), "30m");
        assert_eq!(human_span(2.0), "2.0h");
        assert_eq!(human_span(72.0), "3.0d");
    }
}

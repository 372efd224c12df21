//! A strict parser for the Prometheus text exposition format (0.0.4) and for
//! the OpenMetrics text format, as far as needed to read samples correctly.
//!
//! [`parse`] reads a whole scrape body and returns an [`Exposition`]: the
//! samples, in source order, and one [`LineError`] per malformed sample line.
//!
//! # Guarantees
//!
//! * Every line that is neither blank nor a comment (first non-blank character
//!   `#`) is a sample line, and yields **exactly one** of: a [`Sample`] holding
//!   exactly what the line says (name, labels in source order with their values
//!   unescaped, value, timestamp), or a [`LineError`] carrying its 1-based line
//!   number. No sample line is ever skipped silently, and a line is never
//!   half-read: if anything on it is malformed, no sample comes out of it.
//! * Parsing never panics and never stops early: an error on one line does not
//!   affect the others.
//! * No IO, no clock, no regex; one pass over the input, with allocations per
//!   sample (name, label names and values), not per character.
//!
//! # What is accepted
//!
//! * Metric names `[a-zA-Z_:][a-zA-Z0-9_:]*`; label names `[a-zA-Z_][a-zA-Z0-9_]*`
//!   (except the reserved `__name__`); a label name at most once per sample.
//! * The quoted UTF-8 names of the Prometheus 3 text format: a metric name
//!   quoted as the first item inside the braces, with no name before them
//!   (`{"http.server.duration", "service.name"="x"} 1`), and quoted label names
//!   (`foo{"service.name"="x"} 1`), each with the escapes of a label value,
//!   never empty; `# TYPE "http.server.duration" histogram` names the family.
//!   A quoted name anywhere else (after a name, after a label, alone with `=`
//!   missing) is an error.
//! * Label values are double-quoted; the escapes `\\`, `\"` and `\n` are
//!   unescaped, any other escape is an error; every other character (`=`, `,`,
//!   `{`, `}`, `#`, spaces, any UTF-8) is literal. A trailing comma before `}`
//!   and an empty label set `{}` are allowed. Spaces and tabs are tolerated
//!   around `{`, `,`, `=`, `}` and between tokens, and at the start and end of a
//!   line, as the Prometheus text parser does. A final `\r` on a line is ignored.
//! * Values are decimal floats as Go's `strconv.ParseFloat` reads them (but
//!   not hexadecimal): `1027`, `807283.0`, `1.458255915e9`, `+Inf`, `-Inf`,
//!   `Inf`, `NaN` (case-insensitive).
//! * The format is detected from the whole document: a `# EOF` or a `# UNIT`
//!   line makes it [`Format::OpenMetrics`], otherwise it is [`Format::Text`].
//!   - Text format: the optional timestamp is an integer number of
//!     milliseconds (negative allowed); nothing may follow it.
//!   - OpenMetrics: the optional timestamp is a number of seconds
//!     (`1520879607.789`), converted exactly (decimal arithmetic, truncated to
//!     the millisecond as Prometheus does) to milliseconds; an exemplar
//!     (`# {trace_id="x"} 0.67 [timestamp]`) may follow and is checked for
//!     syntax and then ignored; a sample line after `# EOF` is an error.
//! * Comments (`# HELP`, `# TYPE`, `# UNIT`, `# EOF`, any other `#` line) and
//!   blank lines are not samples. `# TYPE` lines are recorded in
//!   [`Exposition::types`].
//!
//! Not supported (reported as errors, never misread): hexadecimal floats, and
//! the native-histogram / protobuf formats.

use std::collections::HashMap;
use std::fmt;

/// One sample: a line `name{labels} value [timestamp]`.
///
/// `PartialEq` compares values as floats, so a `NaN` sample is not equal to
/// itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric name, as written (`http_requests_total`, `foo_bucket`, ...).
    pub name: String,
    /// The labels, in source order, values unescaped.
    pub labels: Vec<(String, String)>,
    /// The value, including `±Inf` and `NaN`.
    pub value: f64,
    /// The timestamp in milliseconds since the epoch, if the line has one
    /// (OpenMetrics seconds are converted to milliseconds).
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    /// The value of the label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether the sample's name is `metric` and every matcher holds. As in
    /// PromQL, a label the sample does not have counts as the empty string.
    pub fn matches(&self, metric: &str, matchers: &[Matcher]) -> bool {
        self.name == metric && matchers.iter().all(|m| m.holds(self))
    }
}

/// The two text formats told apart by [`parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Prometheus text format 0.0.4: timestamps are integer milliseconds.
    #[default]
    Text,
    /// OpenMetrics text format: timestamps are seconds, exemplars may follow.
    OpenMetrics,
}

/// The result of [`parse`]: the samples that were read exactly, and one error
/// per sample line that could not be.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// The format detected (see [`parse`]).
    pub format: Format,
    /// The samples, in source order.
    pub samples: Vec<Sample>,
    /// One error per malformed sample line, in line order.
    pub errors: Vec<LineError>,
    /// Metric family name to its `# TYPE` (`counter`, `gauge`, `histogram`,
    /// ...), from well-formed `# TYPE name type` lines; the last one wins.
    pub types: HashMap<String, String>,
}

impl Exposition {
    /// True if no sample line was malformed.
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty()
    }

    /// The samples named `metric` for which every matcher holds.
    pub fn select<'a>(
        &'a self,
        metric: &str,
        matchers: &[Matcher],
    ) -> impl Iterator<Item = &'a Sample> {
        self.samples
            .iter()
            .filter(move |s| s.matches(metric, matchers))
    }
}

/// A malformed sample line: its 1-based line number and what is wrong with it
/// (the message starts with the 1-based column, counted in characters).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LineError {
    /// 1-based line number in the document.
    pub line: usize,
    /// What is wrong, starting with `column N: `.
    pub message: String,
}

/// The comparison of a [`Matcher`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchOp {
    /// `label="value"`
    Eq,
    /// `label!="value"`
    Ne,
}

/// A label matcher from a selector: `name="value"` or `name!="value"` (regex
/// matchers are not supported).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    /// The label name.
    pub label: String,
    /// Equal or not equal.
    pub op: MatchOp,
    /// The value compared with (unescaped).
    pub value: String,
}

impl Matcher {
    /// `label="value"`.
    pub fn eq(label: impl Into<String>, value: impl Into<String>) -> Matcher {
        Matcher {
            label: label.into(),
            op: MatchOp::Eq,
            value: value.into(),
        }
    }

    /// `label!="value"`.
    pub fn ne(label: impl Into<String>, value: impl Into<String>) -> Matcher {
        Matcher {
            label: label.into(),
            op: MatchOp::Ne,
            value: value.into(),
        }
    }

    /// Whether the matcher holds for the sample; a missing label counts as the
    /// empty string.
    pub fn holds(&self, sample: &Sample) -> bool {
        let actual = sample.label(&self.label).unwrap_or("");
        match self.op {
            MatchOp::Eq => actual == self.value,
            MatchOp::Ne => actual != self.value,
        }
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            MatchOp::Eq => "=",
            MatchOp::Ne => "!=",
        };
        write!(
            f,
            "{}{}\"{}\"",
            self.label,
            op,
            escape_label_value(&self.value)
        )
    }
}

/// Escapes a label value for the text format: `\` → `\\`, `"` → `\"`,
/// newline → `\n`.
pub fn escape_label_value(value: &str) -> String {
    crate::metrics_text::escaped(value)
}

/// Parses a whole Prometheus text (0.0.4) or OpenMetrics exposition.
///
/// The format is [`Format::OpenMetrics`] if the document has a `# EOF` or a
/// `# UNIT` line anywhere, [`Format::Text`] otherwise; it decides how the
/// timestamps are read (seconds or milliseconds) and whether exemplars are
/// allowed. Every sample line yields exactly one sample or one error (see the
/// module documentation).
pub fn parse(text: &str) -> Exposition {
    let mut out = Exposition::default();
    // Sample lines with something after the value (a timestamp, an exemplar,
    // or garbage): how to read it depends on the format, known only at the
    // end of the document, so it is read then. Everything else is final.
    let mut pending: Vec<Pending<'_>> = Vec::new();
    let mut openmetrics = false;
    let mut eof_line: Option<usize> = None;

    for (index, raw) in text.split('\n').enumerate() {
        let line_no = index + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let content = line.trim_start_matches(BLANKS);
        if content.is_empty() {
            continue;
        }
        if let Some(comment) = content.strip_prefix('#') {
            let mut words = comment.split_ascii_whitespace();
            match words.next() {
                Some("EOF") if words.next().is_none() => {
                    openmetrics = true;
                    eof_line.get_or_insert(line_no);
                }
                Some("UNIT") => openmetrics = true,
                Some("TYPE") => {
                    if let Some((name, kind)) = type_line(comment) {
                        out.types.insert(name, kind.to_owned());
                    }
                }
                _ => {}
            }
            continue;
        }
        if let Some(eof) = eof_line {
            out.errors.push(LineError {
                line: line_no,
                message: format!(
                    "column {}: sample line after `# EOF` (line {eof}); nothing may follow it",
                    column(line, line.len() - content.len())
                ),
            });
            continue;
        }
        match parse_sample_line(line) {
            Ok((sample, rest)) => {
                if rest < line.len() {
                    pending.push(Pending {
                        sample: out.samples.len(),
                        line_no,
                        line,
                        pos: rest,
                    });
                }
                out.samples.push(sample);
            }
            Err(fail) => out.errors.push(LineError {
                line: line_no,
                message: fail.render(line),
            }),
        }
    }

    out.format = if openmetrics {
        Format::OpenMetrics
    } else {
        Format::Text
    };

    let mut dropped: Vec<usize> = Vec::new();
    let errors_before = out.errors.len();
    for p in pending {
        match parse_after_value(p.line, p.pos, out.format) {
            Ok(timestamp) => {
                if let Some(sample) = out.samples.get_mut(p.sample) {
                    sample.timestamp_ms = timestamp;
                }
            }
            Err(fail) => {
                dropped.push(p.sample);
                out.errors.push(LineError {
                    line: p.line_no,
                    message: fail.render(p.line),
                });
            }
        }
    }
    if !dropped.is_empty() {
        // `dropped` is increasing, as `pending` was.
        let mut next = dropped.iter().copied().peekable();
        let mut index = 0usize;
        out.samples.retain(|_| {
            let keep = next.peek() != Some(&index);
            if !keep {
                next.next();
            }
            index += 1;
            keep
        });
    }
    if out.errors.len() > errors_before {
        // Both runs are in line order; a stable sort merges them.
        out.errors.sort_by_key(|e| e.line);
    }
    out
}

/// The family and type of a `# TYPE name type` comment (`comment`: after the
/// `#`), its name bare or quoted (`# TYPE "http.server.duration" histogram`);
/// `None` when it is not well formed.
fn type_line(comment: &str) -> Option<(String, &str)> {
    let rest = comment.trim_start_matches(BLANKS).strip_prefix("TYPE")?;
    let after = rest.trim_start_matches(BLANKS);
    if after.len() == rest.len() {
        return None;
    }
    let (name, after_name) = if after.starts_with('"') {
        let (name, end) = quoted_value(after, 0, "").ok()?;
        (name, after.get(end..)?)
    } else {
        let (name, end) = token(after, 0);
        (name.to_owned(), after.get(end..)?)
    };
    let mut words = after_name.split_ascii_whitespace();
    match (words.next(), words.next()) {
        (Some(kind), None) if !name.is_empty() => Some((name, kind)),
        _ => None,
    }
}

/// Whether `name` is a metric name every format reads bare:
/// `[a-zA-Z_:][a-zA-Z0-9_:]*` (otherwise it is written quoted, Prometheus 3).
pub fn is_legacy_metric_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| is_name_start(b) || b == b':')
        && bytes.all(|b| is_name_char(b) || b == b':')
}

/// Whether `name` is a label name every format reads bare: `[a-zA-Z_][a-zA-Z0-9_]*`.
pub fn is_legacy_label_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(is_name_start) && bytes.all(is_name_char)
}

/// `name` as a selector or a series key writes it: bare when `legacy` says it
/// may be, else double-quoted with the escapes of a label value.
pub fn write_name(out: &mut String, name: &str, legacy: fn(&str) -> bool) {
    if legacy(name) {
        out.push_str(name);
    } else {
        out.push('"');
        crate::metrics_text::escape_label(out, name);
        out.push('"');
    }
}

/// A sample line whose text after the value is read once the format is known.
struct Pending<'a> {
    sample: usize,
    line_no: usize,
    line: &'a str,
    pos: usize,
}

const BLANKS: [char; 2] = [' ', '\t'];

/// A parse failure at byte `pos` of the line.
struct Fail {
    pos: usize,
    message: String,
}

impl Fail {
    fn new(pos: usize, message: impl Into<String>) -> Fail {
        Fail {
            pos,
            message: message.into(),
        }
    }

    fn render(&self, line: &str) -> String {
        format!("column {}: {}", column(line, self.pos), self.message)
    }
}

/// The 1-based character column of byte `pos`.
fn column(line: &str, pos: usize) -> usize {
    line.get(..pos).map_or(pos, |s| s.chars().count()) + 1
}

/// A short, quoted rendering of user text for error messages.
fn show(text: &str) -> String {
    const MAX: usize = 40;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{:?}...", &text[..cut]),
        None => format!("{text:?}"),
    }
}

/// The character at byte `pos`, for error messages.
fn char_at(line: &str, pos: usize) -> String {
    match line.get(pos..).and_then(|s| s.chars().next()) {
        Some(c) => format!("{c:?}"),
        None => "end of line".to_owned(),
    }
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn skip_blanks(bytes: &[u8], mut pos: usize) -> usize {
    while bytes.get(pos).copied().is_some_and(is_blank) {
        pos += 1;
    }
    pos
}

/// The token starting at `pos` and running up to the next blank or the end of
/// the line, and the position after it.
fn token(line: &str, pos: usize) -> (&str, usize) {
    let bytes = line.as_bytes();
    let mut end = pos;
    while end < bytes.len() && !is_blank(bytes[end]) {
        end += 1;
    }
    // `pos` and `end` are at an ASCII blank, the end, or a position the
    // caller got the same way, so both are character boundaries.
    (line.get(pos..end).unwrap_or(""), end)
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The metric name at `pos`: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn metric_name(line: &str, pos: usize) -> Result<(&str, usize), Fail> {
    let bytes = line.as_bytes();
    match bytes.get(pos) {
        Some(&b) if is_name_start(b) || b == b':' => {}
        _ => {
            return Err(Fail::new(
                pos,
                format!(
                    "invalid metric name: unexpected {} (a name is [a-zA-Z_:][a-zA-Z0-9_:]*)",
                    char_at(line, pos)
                ),
            ));
        }
    }
    let mut end = pos + 1;
    while bytes
        .get(end)
        .is_some_and(|&b| is_name_char(b) || b == b':')
    {
        end += 1;
    }
    Ok((line.get(pos..end).unwrap_or(""), end))
}

/// The label name at `pos`: `[a-zA-Z_][a-zA-Z0-9_]*`, possibly empty.
fn label_name(line: &str, pos: usize) -> (&str, usize) {
    let bytes = line.as_bytes();
    if !bytes.get(pos).copied().is_some_and(is_name_start) {
        return ("", pos);
    }
    let mut end = pos + 1;
    while bytes.get(end).copied().is_some_and(is_name_char) {
        end += 1;
    }
    (line.get(pos..end).unwrap_or(""), end)
}

/// The double-quoted value opening at `pos`, unescaped, and the position after
/// the closing quote.
fn quoted_value(line: &str, open: usize, label: &str) -> Result<(String, usize), Fail> {
    let bytes = line.as_bytes();
    let start = open + 1;
    let mut chunk = start;
    let mut owned: Option<String> = None;
    let mut i = start;
    loop {
        let Some(offset) = bytes
            .get(i..)
            .and_then(|rest| rest.iter().position(|&b| b == b'"' || b == b'\\'))
        else {
            return Err(Fail::new(
                open,
                format!("unterminated value of label {label:?} (missing closing '\"')"),
            ));
        };
        let j = i + offset;
        // `chunk` and `j` are just after / at an ASCII byte: char boundaries.
        let piece = line.get(chunk..j).unwrap_or("");
        if bytes[j] == b'"' {
            let value = match owned {
                Some(mut s) => {
                    s.push_str(piece);
                    s
                }
                None => piece.to_owned(),
            };
            return Ok((value, j + 1));
        }
        let s = owned.get_or_insert_with(|| String::with_capacity(j - start + 16));
        s.push_str(piece);
        match bytes.get(j + 1) {
            Some(b'\\') => s.push('\\'),
            Some(b'"') => s.push('"'),
            Some(b'n') => s.push('\n'),
            Some(_) => {
                let seq = line
                    .get(j..)
                    .unwrap_or("")
                    .chars()
                    .take(2)
                    .collect::<String>();
                return Err(Fail::new(
                    j,
                    format!(
                        "invalid escape sequence {} in the value of label {label:?} \
                         (only \\\\, \\\" and \\n are allowed)",
                        show(&seq)
                    ),
                ));
            }
            None => {
                return Err(Fail::new(
                    open,
                    format!("unterminated value of label {label:?} (missing closing '\"')"),
                ));
            }
        }
        i = j + 2;
        chunk = i;
    }
}

/// The label set opening with `{` at `open`; labels are appended to `out`.
/// Returns the position after the closing `}`. With `metric` (no name before
/// the braces), a quoted string alone as the first item is the metric name
/// (Prometheus 3: `{"http.server.duration", "service.name"="x"}`), written
/// there.
fn label_set(
    line: &str,
    open: usize,
    out: &mut Vec<(String, String)>,
    mut metric: Option<&mut String>,
) -> Result<usize, Fail> {
    let bytes = line.as_bytes();
    let unterminated = || Fail::new(open, "unterminated label set (missing '}')");
    let mut pos = skip_blanks(bytes, open + 1);
    let mut first = true;
    loop {
        match bytes.get(pos) {
            None => return Err(unterminated()),
            Some(b'}') => return Ok(pos + 1),
            Some(_) => {}
        }
        let quoted_at = pos;
        let quoted;
        let (name, after_name) = if bytes.get(pos) == Some(&b'"') {
            let (text, after) = quoted_value(line, pos, "").map_err(|f| Fail {
                pos: f.pos,
                message: f
                    .message
                    .replace("value of label \"\"", "quoted name")
                    .replace("the quoted name", "a quoted name"),
            })?;
            quoted = text;
            let next = skip_blanks(bytes, after);
            if bytes.get(next) != Some(&b'=') {
                // A quoted name alone: the metric name, first and only when none precedes
                // the braces.
                let Some(m) = metric.as_deref_mut().filter(|_| first) else {
                    return Err(Fail::new(
                        quoted_at,
                        format!(
                            "a quoted metric name {} may only come first inside the braces, \
                             with no name before them (`{{\"a.b\", x=\"1\"}}`); a quoted label \
                             name needs `=` and a value",
                            show(&quoted)
                        ),
                    ));
                };
                if quoted.is_empty() {
                    return Err(Fail::new(quoted_at, "empty quoted metric name"));
                }
                *m = quoted;
                first = false;
                pos = next;
                match bytes.get(pos) {
                    Some(b',') => pos = skip_blanks(bytes, pos + 1),
                    Some(b'}') => return Ok(pos + 1),
                    None => return Err(unterminated()),
                    Some(_) => {
                        return Err(Fail::new(
                            pos,
                            format!(
                                "expected ',' or '}}' after the quoted metric name, found {}",
                                char_at(line, pos)
                            ),
                        ));
                    }
                }
                continue;
            }
            if quoted.is_empty() {
                return Err(Fail::new(quoted_at, "empty quoted label name"));
            }
            (quoted.as_str(), after)
        } else {
            label_name(line, pos)
        };
        first = false;
        if name.is_empty() {
            return Err(Fail::new(
                pos,
                format!(
                    "expected a label name ([a-zA-Z_][a-zA-Z0-9_]*) or '}}', found {}",
                    char_at(line, pos)
                ),
            ));
        }
        if name == "__name__" {
            return Err(Fail::new(pos, "the label name \"__name__\" is reserved"));
        }
        pos = skip_blanks(bytes, after_name);
        if bytes.get(pos) != Some(&b'=') {
            return Err(Fail::new(
                pos,
                format!(
                    "expected '=' after label name {name:?}, found {}",
                    char_at(line, pos)
                ),
            ));
        }
        pos = skip_blanks(bytes, pos + 1);
        if bytes.get(pos) != Some(&b'"') {
            return Err(Fail::new(
                pos,
                format!(
                    "expected '\"' to open the value of label {name:?}, found {}",
                    char_at(line, pos)
                ),
            ));
        }
        let (value, after_value) = quoted_value(line, pos, name)?;
        out.push((name.to_owned(), value));
        pos = skip_blanks(bytes, after_value);
        match bytes.get(pos) {
            Some(b',') => pos = skip_blanks(bytes, pos + 1),
            Some(b'}') => return Ok(pos + 1),
            None => return Err(unterminated()),
            Some(_) => {
                return Err(Fail::new(
                    pos,
                    format!(
                        "expected ',' or '}}' after the value of label {name:?}, found {}",
                        char_at(line, pos)
                    ),
                ));
            }
        }
    }
}

/// The first label name that appears twice, if any.
fn duplicate_label(labels: &[(String, String)]) -> Option<&str> {
    if labels.len() <= 16 {
        for (i, (name, _)) in labels.iter().enumerate() {
            if labels[..i].iter().any(|(other, _)| other == name) {
                return Some(name);
            }
        }
        None
    } else {
        let mut names: Vec<&str> = labels.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.windows(2).find(|w| w[0] == w[1]).map(|w| w[0])
    }
}

fn parse_value(text: &str, pos: usize, what: &str) -> Result<f64, Fail> {
    text.parse::<f64>()
        .map_err(|_| Fail::new(pos, format!("invalid {what} {}: not a number", show(text))))
}

/// Reads a sample line up to and including its value. Returns the sample and
/// the position of whatever follows the value (the line's length if nothing).
fn parse_sample_line(line: &str) -> Result<(Sample, usize), Fail> {
    let bytes = line.as_bytes();
    let start = skip_blanks(bytes, 0);
    let mut labels = Vec::new();
    if bytes.get(start) == Some(&b'{') {
        // Prometheus 3: the name quoted inside the braces.
        let mut name = String::new();
        let pos = label_set(line, start, &mut labels, Some(&mut name))?;
        if name.is_empty() {
            return Err(Fail::new(
                start,
                "missing metric name: neither before the braces nor quoted first inside them \
                 (`{\"a.b\"}`)",
            ));
        }
        return finish_sample(line, start, name, labels, pos);
    }
    let (name, mut pos) = metric_name(line, start)?;
    match bytes.get(pos) {
        None => return Err(Fail::new(pos, "missing value after the metric name")),
        Some(b'{') => {}
        Some(&b) if is_blank(b) => {}
        Some(_) => {
            return Err(Fail::new(
                pos,
                format!(
                    "invalid character {} in metric name {} (a name is [a-zA-Z_:][a-zA-Z0-9_:]*)",
                    char_at(line, pos),
                    show(name)
                ),
            ));
        }
    }
    pos = skip_blanks(bytes, pos);
    if bytes.get(pos) == Some(&b'{') {
        let open = pos;
        pos = label_set(line, open, &mut labels, None)?;
        return finish_sample(line, open, name.to_owned(), labels, pos);
    }
    finish_sample(line, pos, name.to_owned(), labels, pos)
}

/// The rest of a sample line after its name and labels (`pos`: after them;
/// `open`: where the labels open, for a duplicate's error): the value.
fn finish_sample(
    line: &str,
    open: usize,
    name: String,
    labels: Vec<(String, String)>,
    pos: usize,
) -> Result<(Sample, usize), Fail> {
    let bytes = line.as_bytes();
    if let Some(dup) = duplicate_label(&labels) {
        return Err(Fail::new(
            open,
            format!("duplicate label name {dup:?} in one sample"),
        ));
    }
    let pos = skip_blanks(bytes, pos);
    let (value_text, after) = token(line, pos);
    if value_text.is_empty() {
        return Err(Fail::new(pos, "missing value"));
    }
    let value = parse_value(value_text, pos, "value")?;
    let rest = skip_blanks(bytes, after);
    Ok((
        Sample {
            name,
            labels,
            value,
            timestamp_ms: None,
        },
        rest,
    ))
}

/// Reads what follows the value (at `pos`, not blank): the timestamp and, in
/// OpenMetrics, an exemplar.
fn parse_after_value(line: &str, pos: usize, format: Format) -> Result<Option<i64>, Fail> {
    let bytes = line.as_bytes();
    if bytes.get(pos) == Some(&b'#') {
        return match format {
            Format::OpenMetrics => exemplar(line, pos).map(|()| None),
            Format::Text => Err(exemplar_in_text(pos)),
        };
    }
    let (ts_text, after) = token(line, pos);
    let timestamp = match format {
        Format::Text => ts_text.parse::<i64>().map_err(|_| {
            Fail::new(
                pos,
                format!(
                    "invalid timestamp {}: the text format expects an integer number of \
                     milliseconds (a document with `# EOF` or `# UNIT` is read as OpenMetrics, \
                     with timestamps in seconds)",
                    show(ts_text)
                ),
            )
        })?,
        Format::OpenMetrics => seconds_to_ms(ts_text).ok_or_else(|| {
            Fail::new(
                pos,
                format!(
                    "invalid timestamp {}: OpenMetrics expects a finite number of seconds",
                    show(ts_text)
                ),
            )
        })?,
    };
    let rest = skip_blanks(bytes, after);
    match bytes.get(rest) {
        None => Ok(Some(timestamp)),
        Some(b'#') => match format {
            Format::OpenMetrics => exemplar(line, rest).map(|()| Some(timestamp)),
            Format::Text => Err(exemplar_in_text(rest)),
        },
        Some(_) => Err(Fail::new(
            rest,
            format!(
                "unexpected {} after the timestamp",
                show(line.get(rest..).unwrap_or(""))
            ),
        )),
    }
}

fn exemplar_in_text(pos: usize) -> Fail {
    Fail::new(
        pos,
        "unexpected '#' after the value: exemplars are only valid in OpenMetrics \
         (the document has no `# EOF` or `# UNIT` line)",
    )
}

/// Checks an OpenMetrics exemplar `# {labels} value [timestamp]` starting with
/// the `#` at `hash`, up to the end of the line.
fn exemplar(line: &str, hash: usize) -> Result<(), Fail> {
    let bytes = line.as_bytes();
    let open = skip_blanks(bytes, hash + 1);
    if bytes.get(open) != Some(&b'{') {
        return Err(Fail::new(
            open,
            format!(
                "malformed exemplar: expected '{{' after '#', found {}",
                char_at(line, open)
            ),
        ));
    }
    let mut labels = Vec::new();
    let after = label_set(line, open, &mut labels, None).map_err(|f| Fail {
        pos: f.pos,
        message: format!("malformed exemplar: {}", f.message),
    })?;
    if let Some(dup) = duplicate_label(&labels) {
        return Err(Fail::new(
            open,
            format!("malformed exemplar: duplicate label name {dup:?}"),
        ));
    }
    let pos = skip_blanks(bytes, after);
    let (value_text, after) = token(line, pos);
    if value_text.is_empty() {
        return Err(Fail::new(pos, "malformed exemplar: missing value"));
    }
    parse_value(value_text, pos, "exemplar value")?;
    let pos = skip_blanks(bytes, after);
    if pos >= bytes.len() {
        return Ok(());
    }
    let (ts_text, after) = token(line, pos);
    if seconds_to_ms(ts_text).is_none() {
        return Err(Fail::new(
            pos,
            format!(
                "malformed exemplar: invalid timestamp {} (expected seconds)",
                show(ts_text)
            ),
        ));
    }
    let pos = skip_blanks(bytes, after);
    if pos < bytes.len() {
        return Err(Fail::new(
            pos,
            format!(
                "unexpected {} after the exemplar",
                show(line.get(pos..).unwrap_or(""))
            ),
        ));
    }
    Ok(())
}

/// Converts a decimal number of seconds (`1520879607.789`, `-1.5`, `1.5e9`) to
/// milliseconds exactly, truncating toward zero below the millisecond (as
/// Prometheus does). `None` if it is not such a number or does not fit.
fn seconds_to_ms(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let negative = match bytes.first() {
        Some(b'-') => {
            i = 1;
            true
        }
        Some(b'+') => {
            i = 1;
            false
        }
        _ => false,
    };
    let int_start = i;
    while bytes.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let int_digits = &bytes[int_start..i];
    let mut frac_digits: &[u8] = &[];
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        let frac_start = i;
        while bytes.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        frac_digits = &bytes[frac_start..i];
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return None;
    }
    let mut exponent: i64 = 0;
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        let exp_negative = match bytes.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let exp_start = i;
        while let Some(&d) = bytes.get(i).filter(|b| b.is_ascii_digit()) {
            // Saturate: anything this large over- or underflows anyway.
            exponent = (exponent * 10 + i64::from(d - b'0')).min(1_000_000);
            i += 1;
        }
        if i == exp_start {
            return None;
        }
        if exp_negative {
            exponent = -exponent;
        }
    }
    if i != bytes.len() {
        return None;
    }
    // The digits d0 d1 d2 ... with the decimal point after int_digits; the
    // milliseconds are the digits before position int_len + exponent + 3.
    let digit = |k: usize| -> i128 {
        let d = if k < int_digits.len() {
            int_digits[k]
        } else {
            frac_digits
                .get(k - int_digits.len())
                .copied()
                .unwrap_or(b'0')
        };
        i128::from(d - b'0')
    };
    let total = int_digits.len() + frac_digits.len();
    let leading_zeros = (0..total).take_while(|&k| digit(k) == 0).count();
    let point = int_digits.len() as i64 + exponent + 3;
    let significant_before_point = point - leading_zeros as i64;
    if leading_zeros == total || significant_before_point <= 0 {
        return Some(0);
    }
    if significant_before_point > 20 {
        return None;
    }
    let mut magnitude: i128 = 0;
    for k in leading_zeros..leading_zeros + significant_before_point as usize {
        magnitude = magnitude * 10 + digit(k);
    }
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn one(text: &str) -> Sample {
        let exposition = parse(text);
        assert!(exposition.errors.is_empty(), "{:?}", exposition.errors);
        assert_eq!(exposition.samples.len(), 1, "{:?}", exposition.samples);
        exposition.samples.into_iter().next().unwrap()
    }

    fn error(text: &str) -> LineError {
        let exposition = parse(text);
        assert!(
            exposition.samples.is_empty(),
            "expected no sample from {text:?}, got {:?}",
            exposition.samples
        );
        assert_eq!(exposition.errors.len(), 1, "{:?}", exposition.errors);
        exposition.errors.into_iter().next().unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn plain_samples() {
        assert_eq!(
            one("foo 1"),
            Sample {
                name: "foo".into(),
                labels: vec![],
                value: 1.0,
                timestamp_ms: None
            }
        );
        let s = one("a:b_c:d{x=\"1\",y=\"2\"} 807283.0 1395066363000\n");
        assert_eq!(s.name, "a:b_c:d");
        assert_eq!(s.labels, labels(&[("x", "1"), ("y", "2")]));
        assert_eq!(s.value, 807283.0);
        assert_eq!(s.timestamp_ms, Some(1395066363000));
        assert_eq!(one(":leading_colon 3").name, ":leading_colon");
        assert_eq!(one("_x 3").name, "_x");
    }

    #[test]
    fn special_values() {
        assert_eq!(one("x +Inf").value, f64::INFINITY);
        assert_eq!(one("x Inf").value, f64::INFINITY);
        assert_eq!(one("x -Inf").value, f64::NEG_INFINITY);
        assert!(one("x NaN").value.is_nan());
        assert_eq!(one("x 1.7560473e+07").value, 1.7560473e7);
        assert_eq!(one("x 1.458255915e9").value, 1.458255915e9);
        assert_eq!(one("x -0.5").value, -0.5);
        assert_eq!(one("x 1027").value, 1027.0);
    }

    #[test]
    fn label_values_are_literal_and_unescaped() {
        let s = one(
            r#"m{content_type="text/plain; version=0.0.4",a="x,y}z{",b="C:\\DIR\\F.TXT",c="say \"hi\"\nbye",d="héllo ☃ # 1 2"} 5"#,
        );
        assert_eq!(
            s.labels,
            labels(&[
                ("content_type", "text/plain; version=0.0.4"),
                ("a", "x,y}z{"),
                ("b", r"C:\DIR\F.TXT"),
                ("c", "say \"hi\"\nbye"),
                ("d", "héllo ☃ # 1 2"),
            ])
        );
        assert_eq!(one(r#"m{a=""} 1"#).labels, labels(&[("a", "")]));
        assert_eq!(one(r#"m{a="\\"} 1"#).labels, labels(&[("a", "\\")]));
        assert_eq!(one(r#"m{a="\\n"} 1"#).labels, labels(&[("a", "\\n")]));
    }

    #[test]
    fn whitespace_and_trailing_comma_are_tolerated() {
        let s = one(" \tm { a = \"1\" ,\tb=\"2\", } \t 3 \t 42 \t\r");
        assert_eq!(s.name, "m");
        assert_eq!(s.labels, labels(&[("a", "1"), ("b", "2")]));
        assert_eq!(s.value, 3.0);
        assert_eq!(s.timestamp_ms, Some(42));
        assert_eq!(one("m{} 1").labels, vec![]);
        assert_eq!(one("m{ } 1").labels, vec![]);
        assert_eq!(one("m{a=\"1\"}2").value, 2.0);
    }

    #[test]
    fn comments_and_blank_lines_are_not_samples() {
        let e = parse(
            "# HELP m Some help with \"quotes\" and {braces}\n# TYPE m counter\n\n   \n\t# indented comment\n#\nm 1\n",
        );
        assert!(e.errors.is_empty());
        assert_eq!(e.samples.len(), 1);
        assert_eq!(e.types.get("m").map(String::as_str), Some("counter"));
        assert_eq!(e.format, Format::Text);
        assert!(parse("").samples.is_empty());
        assert!(parse("").errors.is_empty());
    }

    #[test]
    fn text_format_timestamps_are_integer_milliseconds() {
        assert_eq!(one("x 1 -3982045").timestamp_ms, Some(-3982045));
        assert_eq!(one("x 1 +5").timestamp_ms, Some(5));
        let e = error("x 1 1520879607.789");
        assert!(e.message.contains("integer number of milliseconds"), "{e}");
        assert!(error("x 1 2 3").message.contains("after the timestamp"));
        assert!(
            error("x 1 99999999999999999999")
                .message
                .contains("invalid timestamp")
        );
        let e = error(r#"x 1 # {trace_id="a"} 1"#);
        assert!(e.message.contains("only valid in OpenMetrics"), "{e}");
    }

    #[test]
    fn openmetrics_timestamps_are_seconds() {
        let e = parse("a 1 1520879607.789\nb 2 -1.5\nc 3 1\nd 4 1.5e3\ne 5 0.0009\n# EOF\n");
        assert!(e.errors.is_empty(), "{:?}", e.errors);
        assert_eq!(e.format, Format::OpenMetrics);
        let ts: Vec<_> = e.samples.iter().map(|s| s.timestamp_ms).collect();
        assert_eq!(
            ts,
            vec![
                Some(1520879607789),
                Some(-1500),
                Some(1000),
                Some(1500000),
                Some(0)
            ]
        );
        // A `# UNIT` line alone is enough, wherever it is.
        let e = parse("a 1 2.5\n# UNIT a seconds\n");
        assert_eq!(e.format, Format::OpenMetrics);
        assert_eq!(e.samples[0].timestamp_ms, Some(2500));
        let e = parse("a 1 NaN\nb 1 Inf\nc 1 1e400\nd 1 0x10\n# EOF");
        assert_eq!(e.samples.len(), 0);
        assert_eq!(e.errors.len(), 4, "{:?}", e.errors);
    }

    #[test]
    fn exact_seconds_conversion() {
        assert_eq!(seconds_to_ms("1520879607.789"), Some(1520879607789));
        assert_eq!(seconds_to_ms("1520879607.7899"), Some(1520879607789));
        assert_eq!(seconds_to_ms("-0.0019"), Some(-1));
        assert_eq!(seconds_to_ms("1.520879607789e9"), Some(1520879607789));
        assert_eq!(seconds_to_ms("152087960778.9e-2"), Some(1520879607789));
        assert_eq!(seconds_to_ms(".5"), Some(500));
        assert_eq!(seconds_to_ms("5."), Some(5000));
        assert_eq!(seconds_to_ms("0e999999999999"), Some(0));
        assert_eq!(seconds_to_ms("1e-999999999999"), Some(0));
        assert_eq!(seconds_to_ms("000000000000000000000000001"), Some(1000));
        assert_eq!(seconds_to_ms("9223372036854775.807"), Some(i64::MAX));
        assert_eq!(seconds_to_ms("-9223372036854775.808"), Some(i64::MIN));
        assert_eq!(seconds_to_ms("9223372036854775.808"), None);
        assert_eq!(seconds_to_ms("1e999999999999"), None);
        for bad in [
            "", "-", ".", "e3", "1e", "1e+", "1.2.3", "1 ", "Inf", "NaN", "0x1",
        ] {
            assert_eq!(seconds_to_ms(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn exemplars_are_ignored_not_read_as_timestamps() {
        let text = "# TYPE foo histogram\n\
                    foo_bucket{le=\"1.0\"} 0 # {trace_id=\"KOO5S4vxi0o\"} 0.67\n\
                    foo_bucket{le=\"+Inf\"} 1 # {trace_id=\"oHg5SJYRHA0\"} 9.8 1520879607.789\n\
                    foo_bucket{le=\"2.0\"} 1 1520879607.5 # {a=\"x y # }\",} 9.8 1520879607.789\n\
                    foo_bucket{le=\"3.0\"} 1 #{} 1\n\
                    # EOF\n";
        let e = parse(text);
        assert!(e.errors.is_empty(), "{:?}", e.errors);
        let got: Vec<_> = e
            .samples
            .iter()
            .map(|s| (s.label("le").unwrap(), s.value, s.timestamp_ms))
            .collect();
        assert_eq!(
            got,
            vec![
                ("1.0", 0.0, None),
                ("+Inf", 1.0, None),
                ("2.0", 1.0, Some(1520879607500)),
                ("3.0", 1.0, None),
            ]
        );
        for bad in [
            "a 1 # trace_id=\"x\" 1",
            "a 1 # {trace_id=\"x\"}",
            "a 1 # {trace_id=\"x\"} abc",
            "a 1 # {trace_id=\"x} 1",
            "a 1 # {trace_id=\"x\"} 1 2 3",
            "a 1 # {trace_id=\"x\"} 1 1.2.3",
            "a 1 # {a=\"x\",a=\"y\"} 1",
            "a 1 2 garbage",
        ] {
            let e = parse(&format!("{bad}\n# EOF\n"));
            assert_eq!((e.samples.len(), e.errors.len()), (0, 1), "{bad:?}: {e:?}");
            assert_eq!(e.errors[0].line, 1);
        }
    }

    #[test]
    fn samples_after_eof_are_errors() {
        let e = parse("a 1\n# EOF\nb 2\n\n");
        assert_eq!(e.samples.len(), 1);
        assert_eq!(e.errors.len(), 1);
        assert_eq!(e.errors[0].line, 3);
        assert!(
            e.errors[0].message.contains("after `# EOF`"),
            "{:?}",
            e.errors
        );
    }

    #[test]
    fn malformed_lines_are_reported_with_their_line_number() {
        let cases: &[(&str, &str)] = &[
            ("m{a=\"x} 1", "unterminated value of label \"a\""),
            ("m{a=\"x\\", "unterminated value"),
            ("m{a=\"\\t\"} 1", "invalid escape sequence"),
            ("m{a=\"x\"", "unterminated label set"),
            ("m{a=\"x\" b=\"y\"} 1", "expected ',' or '}'"),
            ("m{a} 1", "expected '=' after label name \"a\""),
            ("m{a=x} 1", "expected '\"'"),
            ("m{1a=\"x\"} 1", "expected a label name"),
            ("m{a:b=\"x\"} 1", "expected '='"),
            ("m{a=\"x\",a=\"y\"} 1", "duplicate label name \"a\""),
            ("m{__name__=\"x\"} 1", "reserved"),
            ("m", "missing value"),
            ("m{a=\"x\"}", "missing value"),
            ("m{a=\"x\"}   ", "missing value"),
            ("m abc", "invalid value \"abc\""),
            ("m 1,5", "invalid value"),
            ("m 0x10", "invalid value"),
            ("1m 1", "invalid metric name"),
            ("m-x 1", "invalid character '-' in metric name"),
            ("m.x 1", "invalid character '.'"),
            ("m{\"x.y\"} 1", "may only come first inside the braces"),
            ("{a=\"b\", \"x.y\"} 1", "may only come first"),
            ("{\"x.y\", \"z.w\"} 1", "may only come first"),
            (
                "{\"x.y\" \"z\"} 1",
                "expected ',' or '}' after the quoted metric name",
            ),
            ("{\"\"} 1", "empty quoted metric name"),
            ("m{\"\"=\"x\"} 1", "empty quoted label name"),
            ("{\"x.y} 1", "unterminated"),
            ("{\"x\\q\"} 1", "invalid escape sequence"),
            ("{\"x.y\", \"__name__\"=\"z\"} 1", "reserved"),
            (
                "{\"x.y\", \"a\"=\"1\", a=\"2\"} 1",
                "duplicate label name \"a\"",
            ),
            ("{job=\"x\"} 1", "missing metric name"),
            ("{} 1", "missing metric name"),
            ("\"x.y\" 1", "invalid metric name"),
            ("{\"x.y\"}", "missing value"),
            ("é 1", "invalid metric name"),
            ("\u{feff}m 1", "invalid metric name"),
        ];
        for (line, expected) in cases {
            let text = format!("# TYPE m gauge\nok 1\n{line}\nok 2\n");
            let e = parse(&text);
            assert_eq!(e.samples.len(), 2, "{line:?}: {:?}", e.samples);
            assert_eq!(e.errors.len(), 1, "{line:?}: {:?}", e.errors);
            assert_eq!(e.errors[0].line, 3, "{line:?}");
            assert!(
                e.errors[0].message.contains(expected),
                "{line:?}: {:?} does not contain {expected:?}",
                e.errors[0].message
            );
            assert!(e.errors[0].to_string().starts_with("line 3: column "));
        }
    }

    /// Issue 32: the Prometheus 3 text format quotes UTF-8 names (OpenTelemetry's dotted ones):
    /// the metric name first inside the braces, label names before their `=`.
    #[test]
    fn prometheus_3_quoted_names_read_exactly() {
        let text = "# HELP \"http.server.duration\" Duration.\n\
                    # TYPE \"http.server.duration\" histogram\n\
                    {\"http.server.duration\", \"service.name\"=\"x\"} 1\n\
                    { \"http.server.duration\" , le=\"+Inf\" , } 2 1700000000000\n\
                    {\"http.server.duration\"} 3\n\
                    http_requests_total{\"service.name\"=\"a b\",code=\"200\"} 4\n\
                    {\"a\\\"b\\\\c{}=\"} 5\n\
                    {\"legacy_name\"} 6\n\
                    {\"ünï.cødé\", \"ключ\"=\"значение\"} 7\n";
        let e = parse(text);
        assert_eq!(e.errors, vec![]);
        type Read<'a> = (&'a str, Vec<(&'a str, &'a str)>, f64, Option<i64>);
        let got: Vec<Read<'_>> = e
            .samples
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.labels
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect(),
                    s.value,
                    s.timestamp_ms,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "http.server.duration",
                    vec![("service.name", "x")],
                    1.0,
                    None
                ),
                (
                    "http.server.duration",
                    vec![("le", "+Inf")],
                    2.0,
                    Some(1_700_000_000_000)
                ),
                ("http.server.duration", vec![], 3.0, None),
                (
                    "http_requests_total",
                    vec![("service.name", "a b"), ("code", "200")],
                    4.0,
                    None
                ),
                ("a\"b\\c{}=", vec![], 5.0, None),
                ("legacy_name", vec![], 6.0, None),
                ("ünï.cødé", vec![("ключ", "значение")], 7.0, None),
            ]
        );
        assert_eq!(
            e.types.get("http.server.duration").map(String::as_str),
            Some("histogram")
        );
        // Written back quoted where a name is not a legacy one.
        let mut out = String::new();
        write_name(&mut out, "http.server.duration", is_legacy_metric_name);
        out.push(' ');
        write_name(&mut out, "a\"b", is_legacy_label_name);
        out.push(' ');
        write_name(&mut out, "le", is_legacy_label_name);
        assert_eq!(out, "\"http.server.duration\" \"a\\\"b\" le");
    }

    #[test]
    fn error_columns_count_characters() {
        let e = error("m{é=\"x\"} 1");
        assert_eq!(
            e.message,
            "column 3: expected a label name ([a-zA-Z_][a-zA-Z0-9_]*) or '}', found 'é'"
        );
        let e = error("m{a=\"é\\q\"} 1");
        assert!(
            e.message
                .starts_with("column 7: invalid escape sequence \"\\\\q\""),
            "{e}"
        );
    }

    #[test]
    fn errors_stay_in_line_order_with_deferred_timestamps() {
        let e = parse("a 1 x\nb{\n c 1 2\n# EOF\n");
        let lines: Vec<_> = e.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![1, 2]);
        assert_eq!(e.samples.len(), 1);
        assert_eq!(e.samples[0].name, "c");
        assert_eq!(e.samples[0].timestamp_ms, Some(2000));
    }

    #[test]
    fn many_labels_duplicate_check() {
        let mut line = String::from("m{");
        for i in 0..100 {
            line.push_str(&format!("l{i}=\"v\","));
        }
        let ok = format!("{line}}} 1");
        assert_eq!(one(&ok).labels.len(), 100);
        let dup = format!("{line}l42=\"w\"}} 1");
        assert!(error(&dup).message.contains("duplicate label name \"l42\""));
    }

    #[test]
    fn label_lookup_and_matchers() {
        let s = one(r#"q{vhost="/",queue="orders",state=""} 3"#);
        assert_eq!(s.label("queue"), Some("orders"));
        assert_eq!(s.label("state"), Some(""));
        assert_eq!(s.label("nope"), None);
        assert!(s.matches("q", &[]));
        assert!(!s.matches("q2", &[]));
        assert!(s.matches("q", &[Matcher::eq("queue", "orders")]));
        assert!(!s.matches("q", &[Matcher::eq("queue", "other")]));
        assert!(s.matches("q", &[Matcher::ne("queue", "other")]));
        assert!(!s.matches("q", &[Matcher::ne("queue", "orders")]));
        // A missing label is the empty string.
        assert!(s.matches("q", &[Matcher::eq("missing", "")]));
        assert!(!s.matches("q", &[Matcher::ne("missing", "")]));
        assert!(s.matches("q", &[Matcher::ne("missing", "x")]));
        assert!(!s.matches("q", &[Matcher::eq("missing", "x")]));
        assert!(s.matches(
            "q",
            &[
                Matcher::eq("vhost", "/"),
                Matcher::ne("queue", "x"),
                Matcher::eq("state", "")
            ]
        ));
        assert!(!s.matches("q", &[Matcher::eq("vhost", "/"), Matcher::eq("queue", "x")]));
        let e = parse("q{queue=\"a\"} 1\nq{queue=\"b\"} 2\nr{queue=\"a\"} 3\n");
        let m = [Matcher::eq("queue", "a")];
        let found: Vec<f64> = e.select("q", &m).map(|s| s.value).collect();
        assert_eq!(found, vec![1.0]);
        assert!(e.is_clean());
        assert_eq!(Matcher::eq("a", "x\"y").to_string(), r#"a="x\"y""#);
        assert_eq!(Matcher::ne("a", "").to_string(), r#"a!="""#);
    }

    #[test]
    fn escape_round_trips() {
        let raw = "a\\b\"c\nd=e,f{g}h ☃";
        let line = format!("m{{v=\"{}\"}} 1", escape_label_value(raw));
        assert_eq!(one(&line).label("v"), Some(raw));
    }

    // ---- property tests -------------------------------------------------

    fn metric_name_strategy() -> impl Strategy<Value = String> {
        "[a-zA-Z_:][a-zA-Z0-9_:]{0,20}"
    }

    fn label_name_strategy() -> impl Strategy<Value = String> {
        "[a-zA-Z_][a-zA-Z0-9_]{0,12}".prop_filter("reserved", |n| n != "__name__")
    }

    fn label_value_strategy() -> impl Strategy<Value = String> {
        let tricky = prop_oneof![
            Just('\\'),
            Just('"'),
            Just('\n'),
            Just('='),
            Just(','),
            Just('{'),
            Just('}'),
            Just(' '),
            Just('\t'),
            Just('#'),
            Just('n'),
            Just('é'),
            Just('☃'),
            Just('😀'),
            any::<char>(),
        ];
        prop_oneof![
            prop::collection::vec(tricky, 0..16).prop_map(|v| v.into_iter().collect::<String>()),
            any::<String>(),
        ]
    }

    fn labels_strategy() -> impl Strategy<Value = Vec<(String, String)>> {
        prop::collection::btree_map(label_name_strategy(), label_value_strategy(), 0..6)
            .prop_map(|m| m.into_iter().collect::<Vec<_>>())
            .prop_shuffle()
    }

    fn finite_strategy() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>().prop_filter("finite", |v| v.is_finite()),
            any::<i32>().prop_map(f64::from),
            Just(0.0),
            Just(-0.0),
        ]
    }

    fn sample_strategy() -> impl Strategy<Value = Sample> {
        (
            metric_name_strategy(),
            labels_strategy(),
            finite_strategy(),
            prop::option::of(any::<i64>()),
        )
            .prop_map(|(name, labels, value, timestamp_ms)| Sample {
                name,
                labels,
                value,
                timestamp_ms,
            })
    }

    /// How a document is laid out: padding around `{`, `,`, `=`, `}`; the
    /// separator between tokens; trailing commas; `{}` for no labels; the
    /// float notation; exemplars (OpenMetrics only).
    #[derive(Debug, Clone)]
    struct Style {
        pad: &'static str,
        sep: &'static str,
        trailing_comma: bool,
        empty_braces: bool,
        float: u8,
        exemplars: bool,
        crlf: bool,
    }

    fn style_strategy() -> impl Strategy<Value = Style> {
        (
            prop_oneof![Just(""), Just(" "), Just("\t"), Just("  ")],
            prop_oneof![Just(" "), Just("\t"), Just("   ")],
            any::<bool>(),
            any::<bool>(),
            0u8..3,
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(
                |(pad, sep, trailing_comma, empty_braces, float, exemplars, crlf)| Style {
                    pad,
                    sep,
                    trailing_comma,
                    empty_braces,
                    float,
                    exemplars,
                    crlf,
                },
            )
    }

    fn render_float(v: f64, style: &Style) -> String {
        match style.float {
            0 => format!("{v}"),
            1 => format!("{v:?}"),
            _ => format!("{v:e}"),
        }
    }

    fn render_seconds(ms: i64) -> String {
        let sign = if ms < 0 { "-" } else { "" };
        let abs = ms.unsigned_abs();
        format!("{sign}{}.{:03}", abs / 1000, abs % 1000)
    }

    fn render(samples: &[Sample], style: &Style, format: Format) -> String {
        let mut out = String::new();
        let eol = if style.crlf { "\r\n" } else { "\n" };
        out.push_str("# HELP whatever help text with {braces} and \"quotes\"");
        out.push_str(eol);
        for s in samples {
            out.push_str(&s.name);
            if !s.labels.is_empty() || style.empty_braces {
                out.push_str(style.pad);
                out.push('{');
                for (i, (k, v)) in s.labels.iter().enumerate() {
                    if i > 0 {
                        out.push_str(style.pad);
                        out.push(',');
                    }
                    out.push_str(style.pad);
                    out.push_str(k);
                    out.push_str(style.pad);
                    out.push('=');
                    out.push_str(style.pad);
                    out.push('"');
                    out.push_str(&escape_label_value(v));
                    out.push('"');
                }
                if style.trailing_comma && !s.labels.is_empty() {
                    out.push(',');
                }
                out.push_str(style.pad);
                out.push('}');
            }
            out.push_str(style.sep);
            out.push_str(&render_float(s.value, style));
            if let Some(ts) = s.timestamp_ms {
                out.push_str(style.sep);
                match format {
                    Format::Text => out.push_str(&ts.to_string()),
                    Format::OpenMetrics => out.push_str(&render_seconds(ts)),
                }
            }
            if format == Format::OpenMetrics && style.exemplars {
                out.push_str(" # {trace_id=\"a # 1 2\",span=\"}\"} 0.67 1520879607.789");
            }
            out.push_str(eol);
        }
        if format == Format::OpenMetrics {
            out.push_str("# EOF");
            out.push_str(eol);
        }
        out
    }

    /// Lines that must yield exactly one sample or one error.
    fn sample_lines(text: &str) -> Vec<usize> {
        text.split('\n')
            .enumerate()
            .filter(|(_, raw)| {
                let line = raw.strip_suffix('\r').unwrap_or(raw);
                let content = line.trim_start_matches([' ', '\t']);
                !content.is_empty() && !content.starts_with('#')
            })
            .map(|(i, _)| i + 1)
            .collect()
    }

    fn check_accounting(text: &str) -> Result<(), TestCaseError> {
        let e = parse(text);
        let candidates = sample_lines(text);
        prop_assert_eq!(e.samples.len() + e.errors.len(), candidates.len());
        let error_lines: Vec<usize> = e.errors.iter().map(|e| e.line).collect();
        prop_assert!(
            error_lines.windows(2).all(|w| w[0] < w[1]),
            "error lines not strictly increasing: {:?}",
            error_lines
        );
        for line in &error_lines {
            prop_assert!(
                candidates.binary_search(line).is_ok(),
                "error on line {}",
                line
            );
        }
        Ok(())
    }

    /// Inputs built from the characters that matter to the grammar.
    fn grammar_soup() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("{"),
            Just("}"),
            Just("\""),
            Just("\\"),
            Just("\\n"),
            Just("="),
            Just("!="),
            Just(","),
            Just(" "),
            Just("\t"),
            Just("\n"),
            Just("\r"),
            Just("#"),
            Just("# EOF\n"),
            Just("# UNIT x s\n"),
            Just("# {"),
            Just("m"),
            Just("le"),
            Just("_:"),
            Just("1"),
            Just("-"),
            Just("+"),
            Just("."),
            Just("e"),
            Just("9223372036854775807"),
            Just("Inf"),
            Just("NaN"),
            Just("é"),
            Just("\u{feff}"),
        ];
        prop::collection::vec(piece, 0..64).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn text_format_round_trips(
            samples in prop::collection::vec(sample_strategy(), 0..12),
            style in style_strategy(),
        ) {
            let text = render(&samples, &style, Format::Text);
            let e = parse(&text);
            prop_assert!(e.errors.is_empty(), "{:?}\n{}", e.errors, text);
            prop_assert_eq!(e.format, Format::Text);
            prop_assert_eq!(&e.samples, &samples, "{}", text);
        }

        #[test]
        fn openmetrics_round_trips(
            samples in prop::collection::vec(sample_strategy(), 0..12),
            style in style_strategy(),
        ) {
            let text = render(&samples, &style, Format::OpenMetrics);
            let e = parse(&text);
            prop_assert!(e.errors.is_empty(), "{:?}\n{}", e.errors, text);
            prop_assert_eq!(e.format, Format::OpenMetrics);
            prop_assert_eq!(&e.samples, &samples, "{}", text);
        }

        #[test]
        fn non_finite_values_round_trip(
            name in metric_name_strategy(),
            which in 0usize..6,
        ) {
            let (text, expected) = [
                ("+Inf", f64::INFINITY),
                ("Inf", f64::INFINITY),
                ("-Inf", f64::NEG_INFINITY),
                ("inf", f64::INFINITY),
                ("NaN", f64::NAN),
                ("nan", f64::NAN),
            ][which];
            let e = parse(&format!("{name} {text}\n"));
            prop_assert!(e.errors.is_empty());
            prop_assert_eq!(e.samples.len(), 1);
            let v = e.samples[0].value;
            prop_assert!(v == expected || (v.is_nan() && expected.is_nan()));
        }

        #[test]
        fn arbitrary_input_never_panics_and_every_line_is_accounted(text in any::<String>()) {
            check_accounting(&text)?;
        }

        #[test]
        fn grammar_soup_never_panics_and_every_line_is_accounted(text in grammar_soup()) {
            check_accounting(&text)?;
        }

        #[test]
        fn corrupted_documents_keep_every_line_accounted(
            samples in prop::collection::vec(sample_strategy(), 1..6),
            style in style_strategy(),
            cut in any::<prop::sample::Index>(),
            insert in prop_oneof![Just(""), Just("\""), Just("\\"), Just("{"), Just("}"), Just(","), Just("x"), Just(" "), Just("\n")],
        ) {
            // Delete one character of a valid document, or insert one,
            // anywhere: every sample line still yields one sample or one
            // error, and nothing panics.
            let text = render(&samples, &style, Format::Text);
            let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
            let at = boundaries[cut.index(boundaries.len())];
            let mut broken = String::with_capacity(text.len() + 1);
            broken.push_str(&text[..at]);
            if insert.is_empty() {
                let skip = text[at..].chars().next().map_or(0, char::len_utf8);
                broken.push_str(&text[at + skip..]);
            } else {
                broken.push_str(insert);
                broken.push_str(&text[at..]);
            }
            check_accounting(&broken)?;
        }
    }
}

//! The parser: a document's lines into samples, `# TYPE`s and line errors (see the guarantees
//! of [`super`]).

use super::names::{is_name_char, is_name_start};
use super::types::{Exposition, Format, LineError, Sample};

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
            let (text, after) = quoted_name(line, pos)?;
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
        pos = value_opening(line, pos, name, after_name)?;
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

/// The quoted label or metric name opening with `"` at `pos`, and the position after it.
fn quoted_name(line: &str, pos: usize) -> Result<(String, usize), Fail> {
    quoted_value(line, pos, "").map_err(|f| Fail {
        pos: f.pos,
        message: f
            .message
            .replace("value of label \"\"", "quoted name")
            .replace("the quoted name", "a quoted name"),
    })
}

/// Where the value of the label `name` (read at `pos`, ending at `after_name`) opens: the
/// position of its `"`, past the `=`; the name must be usable.
fn value_opening(line: &str, mut pos: usize, name: &str, after_name: usize) -> Result<usize, Fail> {
    let bytes = line.as_bytes();
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
    Ok(pos)
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
pub(super) fn seconds_to_ms(text: &str) -> Option<i64> {
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

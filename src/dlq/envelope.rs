//! The dead-letter envelope of the dead-letter article, written by a consumer at the moment it
//! gives up on a message, and read back by triage, replay and the drain gate.
//!
//! # The JSON form (one object per line in an export)
//!
//! ```json
//! {"payload":"{\"order\":4711}","errorClass":"dependency_timeout",
//!  "errorMessage":"timeout after 30012ms","consumerVersion":"2.14.0","traceId":"4bf92f35",
//!  "attempts":3,"firstAttemptAt":"2026-03-02T10:15:00.000Z",
//!  "deadLetteredAt":"2026-03-02T10:16:30.512Z"}
//! ```
//!
//! The field names are the article's, in camelCase. Unknown fields are ignored (and not kept).
//!
//! - `payload` — the message body byte for byte. JSON cannot carry arbitrary bytes, so:
//!   a body that is valid UTF-8 is written as a JSON **string**; any other body is written as an
//!   object with one key, `{"base64": "<standard alphabet, padded>"}`. Reading accepts both, and
//!   also Node's `Buffer#toJSON` form `{"type":"Buffer","data":[...]}` (what the article's JS
//!   writes when the body is a `Buffer`). Any other JSON value (an object that a JS consumer put
//!   there after parsing the body, a number...) is kept as that JSON value ([`Payload::Json`]) and
//!   republished as its compact JSON text; it round-trips as a value, key order aside. Bytes
//!   round-trip exactly: `Payload::Bytes(b)` → JSON → `Payload::Bytes(b)`.
//! - `errorClass` — from an [`ErrorClassifier`] ([`SeedClassifier`] by default).
//! - `errorMessage` — cut like the article's `slice(0, 500)`: at 500 UTF-16 code units, so that an
//!   envelope written here and one written by a JS consumer agree; where that cut would split a
//!   surrogate pair we stop one unit earlier (JS would keep half a character). Reading accepts
//!   what JS writes in that case (a lone surrogate escape such as `\ud83d`, which Rust strings
//!   cannot hold): it is kept as the six characters `\ud83d` (lowercase hex).
//! - `consumerVersion`, `traceId` (string or null), `attempts` (a non-negative integer).
//! - `firstAttemptAt`, `deadLetteredAt` — instants as `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`
//!   (see [`parse_timestamp`]); the builder writes UTC with milliseconds, as JS `toISOString()`
//!   does, so that comparing them as strings (which the article's triage does) is comparing
//!   instants.
//!
//! A line is a valid envelope when it is UTF-8, parses as one JSON object, has every field above
//! with its type (`traceId` may be absent), and both instants parse.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

/// The article's `MAX_ERROR_MESSAGE`, in UTF-16 code units (JS string length).
pub const MAX_ERROR_MESSAGE: usize = 500;

/// Errors of the envelope: reading one, or an instant in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// The line is not UTF-8 (JSON text must be; a binary body belongs base64 in `payload`).
    #[error(
        "not UTF-8 (byte {offset}): JSON text must be; binary bodies go in payload as {{\"base64\": ...}}"
    )]
    NotUtf8 {
        /// Offset of the first invalid byte in the line.
        offset: usize,
    },
    /// Not JSON, not an object, a field missing or of the wrong type.
    #[error("{0}")]
    Json(String),
    /// An instant field that is not `YYYY-MM-DDTHH:MM:SS[.f](Z|±HH:MM)`.
    #[error("{field}: {message}")]
    Timestamp {
        /// The field (`firstAttemptAt`, `deadLetteredAt`).
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// `payload` is `{"base64": ...}` but the text is not standard base64.
    #[error("payload.base64: {0}")]
    Base64(String),
}

// ---------------------------------------------------------------------------------------------
// Instants
// ---------------------------------------------------------------------------------------------

fn digits(bytes: &[u8], at: usize, n: usize) -> Option<i64> {
    let part = bytes.get(at..at + n)?;
    let mut v = 0_i64;
    for b in part {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i64::from(b - b'0');
    }
    Some(v)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Parse an envelope instant into milliseconds since the epoch.
///
/// Accepted: `YYYY-MM-DDTHH:MM:SS`, then optionally `.` and one or more digits (kept to the
/// millisecond, the rest dropped, as JS `Date.parse` does), then `Z` or `±HH:MM`. Upper-case `T`
/// and `Z` only; the date must exist (no February 30th, no hour 24, no leap second). On what it
/// accepts, the result equals JS `Date.parse` (checked against node in the tests).
///
/// # Errors
/// A message naming what is wrong.
pub fn parse_timestamp(text: &str) -> Result<i64, String> {
    let b = text.as_bytes();
    let bad = || format!("{text:?} is not an instant like 2026-03-02T10:15:00.000Z");
    let sep = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(sep(4, b'-') && sep(7, b'-') && sep(10, b'T') && sep(13, b':') && sep(16, b':')) {
        return Err(bad());
    }
    let (year, month, day) = (
        digits(b, 0, 4).ok_or_else(bad)?,
        digits(b, 5, 2).ok_or_else(bad)?,
        digits(b, 8, 2).ok_or_else(bad)?,
    );
    let (hour, minute, second) = (
        digits(b, 11, 2).ok_or_else(bad)?,
        digits(b, 14, 2).ok_or_else(bad)?,
        digits(b, 17, 2).ok_or_else(bad)?,
    );
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return Err(format!("{text:?} is not a date and time that exists"));
    }
    let mut i = 19;
    let mut millis = 0_i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 3 {
                millis = millis * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return Err(bad());
        }
        for _ in (i - start)..3 {
            millis *= 10;
        }
    }
    let offset_minutes = match b.get(i) {
        Some(b'Z') if b.len() == i + 1 => 0,
        Some(sign @ (b'+' | b'-')) if b.len() == i + 6 && b[i + 3] == b':' => {
            let h = digits(b, i + 1, 2).ok_or_else(bad)?;
            let m = digits(b, i + 4, 2).ok_or_else(bad)?;
            if h > 23 || m > 59 {
                return Err(format!("{text:?}: offset out of range"));
            }
            if *sign == b'+' {
                h * 60 + m
            } else {
                -(h * 60 + m)
            }
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(year, month, day);
    Ok(((days * 24 + hour) * 60 + minute - offset_minutes) * 60_000 + second * 1000 + millis)
}

/// An instant as JS `Date#toISOString()` writes it: `2026-03-02T10:15:00.000Z`.
pub fn format_timestamp(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, min, s, milli) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    );
    let year = if (0..=9999).contains(&y) {
        format!("{y:04}")
    } else if y < 0 {
        format!("-{:06}", -y)
    } else {
        format!("+{y:06}")
    };
    format!("{year}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{milli:03}Z")
}

// ---------------------------------------------------------------------------------------------
// Text helpers
// ---------------------------------------------------------------------------------------------

/// The longest prefix of `text` of at most `max_units` UTF-16 code units that does not split a
/// surrogate pair (JS `slice(0, max_units)`, one unit shorter where JS would keep half a pair).
pub fn truncate_utf16(text: &str, max_units: usize) -> &str {
    let mut units = 0;
    for (at, c) in text.char_indices() {
        units += c.len_utf16();
        if units > max_units {
            return &text[..at];
        }
    }
    text
}

/// Decode WTF-8 (UTF-8 that may hold surrogate code points, as a JSON string with a lone
/// `\uD83D` escape decodes to) into a `String`, writing each lone surrogate as the six characters
/// `\udXXX` (lowercase hex), as JSON would escape it.
pub fn wtf8_to_string(bytes: &[u8]) -> String {
    let mut out = String::new();
    push_wtf8(&mut out, bytes);
    out
}

/// [`wtf8_to_string`], appending to `out`.
pub fn push_wtf8(out: &mut String, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(s) => out.push_str(s),
        Err(_) => {
            out.reserve(bytes.len() + 8);
            let mut rest = bytes;
            while !rest.is_empty() {
                match std::str::from_utf8(rest) {
                    Ok(s) => {
                        out.push_str(s);
                        break;
                    }
                    Err(e) => {
                        let (good, bad) = rest.split_at(e.valid_up_to());
                        out.push_str(std::str::from_utf8(good).unwrap_or_default());
                        match bad {
                            [0xED, b1 @ 0xA0..=0xBF, b2 @ 0x80..=0xBF, ..] => {
                                let unit =
                                    0xD000 | (u32::from(b1 & 0x3F) << 6) | u32::from(b2 & 0x3F);
                                out.push_str(&format!("\\u{unit:04x}"));
                                rest = &bad[3..];
                            }
                            _ => {
                                out.push(char::REPLACEMENT_CHARACTER);
                                rest = &bad[e.error_len().unwrap_or(bad.len()).max(1)..];
                            }
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Base64 (standard alphabet, padded; decoding also accepts no padding)
// ---------------------------------------------------------------------------------------------

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(B64[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decode standard base64 (padding optional; no whitespace).
///
/// # Errors
/// A character outside the alphabet, or a length no encoding has.
pub fn base64_decode(text: &str) -> Result<Vec<u8>, EnvelopeError> {
    let trimmed = text.trim_end_matches('=');
    if text.len() - trimmed.len() > 2
        || (text.len() != trimmed.len() && !text.len().is_multiple_of(4))
    {
        return Err(EnvelopeError::Base64("bad padding".into()));
    }
    if trimmed.len() % 4 == 1 {
        return Err(EnvelopeError::Base64(format!(
            "{} characters is no base64 length",
            trimmed.len()
        )));
    }
    let mut out = Vec::with_capacity(trimmed.len() * 3 / 4);
    let mut acc = 0_u32;
    let mut bits = 0;
    for (i, c) in trimmed.bytes().enumerate() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => {
                return Err(EnvelopeError::Base64(format!(
                    "character {:?} at {i} is not in the standard alphabet",
                    char::from(c)
                )));
            }
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xFF) as u8);
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Payload
// ---------------------------------------------------------------------------------------------

/// The original message body.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// The body as the broker delivered it, byte for byte.
    Bytes(Vec<u8>),
    /// A JSON value an other writer put in `payload` instead of the body's bytes (republished as
    /// its compact JSON text).
    Json(serde_json::Value),
}

impl Payload {
    /// The bytes to republish.
    pub fn to_bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Payload::Bytes(b) => Cow::Borrowed(b),
            Payload::Json(v) => Cow::Owned(v.to_string().into_bytes()),
        }
    }

    /// Read the non-string forms (an object or another JSON value).
    ///
    /// # Errors
    /// `{"base64": ...}` whose text is not base64.
    pub fn from_value(value: serde_json::Value) -> Result<Payload, EnvelopeError> {
        use serde_json::Value;
        match value {
            Value::String(s) => Ok(Payload::Bytes(s.into_bytes())),
            Value::Object(map) => {
                if let (1, Some(b64)) = (map.len(), map.get("base64")) {
                    return match b64 {
                        Value::String(s) => Ok(Payload::Bytes(base64_decode(s)?)),
                        _ => Err(EnvelopeError::Base64("is not a string".into())),
                    };
                }
                if let (2, Some("Buffer"), Some(Value::Array(data))) = (
                    map.len(),
                    map.get("type").and_then(Value::as_str),
                    map.get("data"),
                ) {
                    let bytes: Option<Vec<u8>> = data
                        .iter()
                        .map(|v| v.as_u64().and_then(|n| u8::try_from(n).ok()))
                        .collect();
                    if let Some(bytes) = bytes {
                        return Ok(Payload::Bytes(bytes));
                    }
                }
                Ok(Payload::Json(Value::Object(map)))
            }
            other => Ok(Payload::Json(other)),
        }
    }
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Payload::Bytes(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => serializer.serialize_str(text),
                Err(_) => {
                    let mut map = serializer.serialize_map(Some(1))?;
                    map.serialize_entry("base64", &base64_encode(bytes))?;
                    map.end()
                }
            },
            Payload::Json(value) => value.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match PayloadProbe::deserialize(deserializer)? {
            PayloadProbe::Text(text) => Ok(Payload::Bytes(text.into_owned().into_bytes())),
            PayloadProbe::Other(payload) => Ok(payload),
        }
    }
}

/// `payload` as the fast reader sees it: a string is only borrowed.
#[derive(Debug)]
pub enum PayloadProbe<'a> {
    /// A string: the body's bytes.
    Text(Cow<'a, str>),
    /// Any other form, read.
    Other(Payload),
}

/// `payload` as triage's first read sees it: checked exactly as [`PayloadProbe`] checks it (the
/// same visitor), but a string that had escapes is not copied out, since only the first envelope
/// of each group is kept (see [`EnvelopeRef::parse_lean`]).
#[derive(Debug)]
pub enum PayloadLean<'a> {
    /// A string without escapes, as it is in the line.
    Borrowed(&'a str),
    /// A string with escapes (valid; read the line again with [`EnvelopeRef::parse`] to get it).
    Escaped,
    /// Any other form.
    Other(Payload),
}

/// The one visitor of `payload`; `KEEP` says whether an escaped string is copied out.
struct PayloadVisitor<'a, const KEEP: bool>(std::marker::PhantomData<&'a ()>);

/// What [`PayloadVisitor`] yields: [`PayloadLean`], where `Escaped` carries the copy if kept.
enum Seen<'a> {
    Borrowed(&'a str),
    Escaped(Option<String>),
    Other(Payload),
}

impl<'de: 'a, 'a, const KEEP: bool> Visitor<'de> for PayloadVisitor<'a, KEEP> {
    type Value = Seen<'a>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string, {\"base64\": ...} or a JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Seen::Borrowed(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Seen::Escaped(KEEP.then(|| v.to_string())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Seen::Escaped(KEEP.then_some(v)))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Seen::Other(Payload::Json(v.into())))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Seen::Other(Payload::Json(v.into())))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Seen::Other(Payload::Json(v.into())))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Seen::Other(Payload::Json(v.into())))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Seen::Other(Payload::Json(serde_json::Value::Null)))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        let v = serde_json::Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
        Ok(Seen::Other(Payload::Json(v)))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let v = serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Payload::from_value(v)
            .map(Seen::Other)
            .map_err(de::Error::custom)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for PayloadProbe<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(
            match deserializer.deserialize_any(PayloadVisitor::<true>(std::marker::PhantomData))? {
                Seen::Borrowed(v) => PayloadProbe::Text(Cow::Borrowed(v)),
                Seen::Escaped(v) => PayloadProbe::Text(Cow::Owned(v.unwrap_or_default())),
                Seen::Other(p) => PayloadProbe::Other(p),
            },
        )
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for PayloadLean<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(
            match deserializer.deserialize_any(PayloadVisitor::<false>(std::marker::PhantomData))? {
                Seen::Borrowed(v) => PayloadLean::Borrowed(v),
                Seen::Escaped(_) => PayloadLean::Escaped,
                Seen::Other(p) => PayloadLean::Other(p),
            },
        )
    }
}

// ---------------------------------------------------------------------------------------------
// The envelope
// ---------------------------------------------------------------------------------------------

/// One dead letter (the dead-letter article's `buildDeadLetter` result).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeadLetter {
    /// The original body, byte for byte.
    pub payload: Payload,
    /// What grouping starts from (see [`ErrorClassifier`]).
    #[serde(rename = "errorClass")]
    pub error_class: String,
    /// The error's message, cut at [`MAX_ERROR_MESSAGE`] UTF-16 units.
    #[serde(rename = "errorMessage")]
    pub error_message: String,
    /// The consumer build that failed: "does this failure still exist in the current code?".
    #[serde(rename = "consumerVersion")]
    pub consumer_version: String,
    /// Links the dead letter to the rest of the request while the trace exists.
    #[serde(rename = "traceId")]
    pub trace_id: Option<String>,
    /// How many times the consumer tried.
    pub attempts: u32,
    /// The first attempt (not the last): it locates the deploy or incident that started it.
    #[serde(rename = "firstAttemptAt")]
    pub first_attempt_at: String,
    /// When the consumer gave up.
    #[serde(rename = "deadLetteredAt")]
    pub dead_lettered_at: String,
}

impl DeadLetter {
    /// `firstAttemptAt` in ms (it parsed when the envelope was read or built).
    pub fn first_attempt_ms(&self) -> Option<i64> {
        parse_timestamp(&self.first_attempt_at).ok()
    }

    /// `deadLetteredAt` in ms.
    pub fn dead_lettered_ms(&self) -> Option<i64> {
        parse_timestamp(&self.dead_lettered_at).ok()
    }

    /// Read one export line.
    ///
    /// # Errors
    /// The line is not a valid envelope (see the module documentation).
    pub fn from_line(line: &[u8]) -> Result<DeadLetter, EnvelopeError> {
        Ok(EnvelopeRef::parse(line)?.to_dead_letter())
    }

    /// The envelope as one JSON line (no newline).
    pub fn to_line(&self) -> String {
        // Serializing plain strings, numbers and a Value cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl<'de> Deserialize<'de> for DeadLetter {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut view: EnvelopeRef<'_> = EnvelopeRef::deserialize(deserializer)?;
        view.validate().map_err(de::Error::custom)?;
        Ok(view.to_dead_letter())
    }
}

/// An envelope read without copying what it does not need to: triage reads millions.
///
/// `P` is how `payload` is held: [`PayloadProbe`] (the default, what [`EnvelopeRef::parse`]
/// gives) or, for triage's first read, [`PayloadLean`] ([`EnvelopeRef::parse_lean`]); both are
/// read by the same visitor, so a line is valid under one exactly when it is under the other.
#[derive(Debug, Deserialize)]
pub struct EnvelopeRef<'a, P = PayloadProbe<'a>> {
    payload: P,
    #[serde(rename = "errorClass", borrow)]
    error_class: Cow<'a, str>,
    /// WTF-8: JSON allows lone surrogate escapes, which JS writers produce.
    #[serde(rename = "errorMessage", borrow)]
    error_message: Cow<'a, [u8]>,
    #[serde(rename = "consumerVersion", borrow)]
    consumer_version: Cow<'a, str>,
    #[serde(rename = "traceId", default, borrow)]
    trace_id: Option<Cow<'a, str>>,
    attempts: u32,
    #[serde(rename = "firstAttemptAt", borrow)]
    first_attempt_at: Cow<'a, str>,
    #[serde(rename = "deadLetteredAt", borrow)]
    dead_lettered_at: Cow<'a, str>,
    #[serde(skip)]
    first_attempt_ms: i64,
    #[serde(skip)]
    dead_lettered_ms: i64,
}

/// Check what every reader of a line checks before serde: UTF-8, and an object.
fn line_text(line: &[u8]) -> Result<&str, EnvelopeError> {
    let text = std::str::from_utf8(line).map_err(|e| EnvelopeError::NotUtf8 {
        offset: e.valid_up_to(),
    })?;
    // serde's derive would also take a JSON array, field by field: an envelope is an object.
    if text.trim_start().as_bytes().first() != Some(&b'{') {
        return Err(EnvelopeError::Json(
            "not a JSON object (an export has one envelope object per line)".into(),
        ));
    }
    Ok(text)
}

impl<'a> EnvelopeRef<'a> {
    /// Parse and validate one line (without its newline).
    ///
    /// # Errors
    /// The line is not a valid envelope.
    pub fn parse(line: &'a [u8]) -> Result<EnvelopeRef<'a>, EnvelopeError> {
        let mut view: EnvelopeRef<'a> = serde_json::from_str(line_text(line)?)
            .map_err(|e| EnvelopeError::Json(e.to_string()))?;
        view.validate()?;
        Ok(view)
    }
}

impl<'a> EnvelopeRef<'a, PayloadLean<'a>> {
    /// Parse and validate one line as [`EnvelopeRef::parse`] does (same result, same error),
    /// without copying out a payload string that had escapes.
    ///
    /// # Errors
    /// The line is not a valid envelope.
    pub(crate) fn parse_lean(line: &'a [u8]) -> Result<Self, EnvelopeError> {
        let mut view: Self = serde_json::from_str(line_text(line)?)
            .map_err(|e| EnvelopeError::Json(e.to_string()))?;
        view.validate()?;
        Ok(view)
    }

    /// The owned envelope, when the payload was kept (not [`PayloadLean::Escaped`]).
    pub(crate) fn to_dead_letter(&self) -> Option<DeadLetter> {
        let payload = match &self.payload {
            PayloadLean::Borrowed(t) => Payload::Bytes(t.as_bytes().to_vec()),
            PayloadLean::Escaped => return None,
            PayloadLean::Other(p) => p.clone(),
        };
        Some(self.owned(payload))
    }
}

impl<'a> EnvelopeRef<'a, &'a serde_json::value::RawValue> {
    /// Triage's fast read: `payload` is checked as JSON and skipped, never unescaped or copied.
    ///
    /// `Some` only when the line is valid exactly as [`EnvelopeRef::parse`] says it is: the
    /// payload is a JSON string that holds no `\uD...` escape (the one thing skipping a string
    /// checks less than reading it as text: a lone surrogate). `None` for anything else (an
    /// invalid line, another payload form, such an escape): read the line with
    /// [`EnvelopeRef::parse_lean`] then, which gives the verdict and the message.
    pub(crate) fn parse_skim(line: &'a [u8]) -> Option<Self> {
        let text = line_text(line).ok()?;
        let mut view: Self = serde_json::from_str(text).ok()?;
        let raw = view.payload.get().as_bytes();
        if raw.first() != Some(&b'"') || may_hold_surrogate_escape(raw) {
            return None;
        }
        view.validate().ok()?;
        Some(view)
    }
}

/// Whether the JSON text `raw` has a `\u` followed by `d`/`D` (a surrogate escape, or a
/// backslash-escaped text that looks like one: either way the careful read decides).
fn may_hold_surrogate_escape(raw: &[u8]) -> bool {
    memchr::memmem::find_iter(raw, b"\\u").any(|i| matches!(raw.get(i + 2), Some(b'd' | b'D')))
}

impl<'a, P> EnvelopeRef<'a, P> {
    fn validate(&mut self) -> Result<(), EnvelopeError> {
        self.first_attempt_ms = parse_timestamp(&self.first_attempt_at).map_err(|message| {
            EnvelopeError::Timestamp {
                field: "firstAttemptAt",
                message,
            }
        })?;
        self.dead_lettered_ms = parse_timestamp(&self.dead_lettered_at).map_err(|message| {
            EnvelopeError::Timestamp {
                field: "deadLetteredAt",
                message,
            }
        })?;
        Ok(())
    }

    /// `errorClass`.
    pub fn error_class(&self) -> &str {
        &self.error_class
    }
    /// `consumerVersion`.
    pub fn consumer_version(&self) -> &str {
        &self.consumer_version
    }
    /// `errorMessage` as WTF-8 bytes (exactly what the JSON string held).
    pub fn error_message_wtf8(&self) -> &[u8] {
        &self.error_message
    }
    /// `firstAttemptAt` as written.
    pub fn first_attempt_at(&self) -> &str {
        &self.first_attempt_at
    }
    /// `firstAttemptAt` in ms.
    pub fn first_attempt_ms(&self) -> i64 {
        self.first_attempt_ms
    }
    /// `deadLetteredAt` as written.
    pub fn dead_lettered_at(&self) -> &str {
        &self.dead_lettered_at
    }
    /// `deadLetteredAt` in ms.
    pub fn dead_lettered_ms(&self) -> i64 {
        self.dead_lettered_ms
    }

    fn owned(&self, payload: Payload) -> DeadLetter {
        DeadLetter {
            payload,
            error_class: self.error_class.to_string(),
            error_message: wtf8_to_string(&self.error_message),
            consumer_version: self.consumer_version.to_string(),
            trace_id: self.trace_id.as_ref().map(|t| t.to_string()),
            attempts: self.attempts,
            first_attempt_at: self.first_attempt_at.to_string(),
            dead_lettered_at: self.dead_lettered_at.to_string(),
        }
    }
}

impl EnvelopeRef<'_> {
    /// The owned envelope.
    pub fn to_dead_letter(&self) -> DeadLetter {
        self.owned(match &self.payload {
            PayloadProbe::Text(t) => Payload::Bytes(t.as_bytes().to_vec()),
            PayloadProbe::Other(p) => p.clone(),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Classifying and building
// ---------------------------------------------------------------------------------------------

/// What a consumer knows about the error that made it give up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorInfo {
    /// The error's kind as the consumer names it (JS `error.name`: `ValidationError`...).
    pub name: Option<String>,
    /// An HTTP-like status from a dependency, when there is one.
    pub status: Option<u16>,
    /// The message.
    pub message: String,
}

impl ErrorInfo {
    /// An error with only a message.
    pub fn new(message: impl Into<String>) -> ErrorInfo {
        ErrorInfo {
            message: message.into(),
            ..ErrorInfo::default()
        }
    }
    /// With a name.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> ErrorInfo {
        self.name = Some(name.into());
        self
    }
    /// With a status.
    #[must_use]
    pub fn status(mut self, status: u16) -> ErrorInfo {
        self.status = Some(status);
        self
    }
}

/// Turns an error into the class that groups it. Return `None` to let the next classifier of a
/// chain decide (see [`ErrorClassifier::or`]).
pub trait ErrorClassifier {
    /// The class of `error`, or `None` when this classifier has no opinion.
    fn classify(&self, error: &ErrorInfo) -> Option<String>;

    /// This classifier first, then `next` for what it leaves.
    fn or<N: ErrorClassifier>(self, next: N) -> Chain<Self, N>
    where
        Self: Sized,
    {
        Chain(self, next)
    }
}

impl<F: Fn(&ErrorInfo) -> Option<String>> ErrorClassifier for F {
    fn classify(&self, error: &ErrorInfo) -> Option<String> {
        self(error)
    }
}

/// Two classifiers, the first one first.
#[derive(Debug, Clone)]
pub struct Chain<A, B>(pub A, pub B);

impl<A: ErrorClassifier, B: ErrorClassifier> ErrorClassifier for Chain<A, B> {
    fn classify(&self, error: &ErrorInfo) -> Option<String> {
        self.0.classify(error).or_else(|| self.1.classify(error))
    }
}

/// The article's `classifyError`: always answers.
///
/// `ValidationError` → `validation`, `TimeoutError` → `dependency_timeout`, status 404 →
/// `reference_not_found`, status ≥ 500 → `dependency_unavailable`, else `unknown`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SeedClassifier;

impl ErrorClassifier for SeedClassifier {
    fn classify(&self, error: &ErrorInfo) -> Option<String> {
        let class = match (error.name.as_deref(), error.status) {
            (Some("ValidationError"), _) => "validation",
            (Some("TimeoutError"), _) => "dependency_timeout",
            (_, Some(404)) => "reference_not_found",
            (_, Some(s)) if s >= 500 => "dependency_unavailable",
            _ => "unknown",
        };
        Some(class.to_string())
    }
}

/// The message a consumer gives up on, as it received it.
#[derive(Debug, Clone, Copy)]
pub struct FailedMessage<'a> {
    /// The body, byte for byte.
    pub body: &'a [u8],
    /// Its headers (looked up by exact name: `x-trace-id`, `x-first-attempt-at`).
    pub headers: &'a [(String, String)],
    /// When this consumer received it (ms), used when no `x-first-attempt-at` header says better.
    pub received_at_ms: i64,
}

impl FailedMessage<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Builds envelopes at dead-letter time (the dead-letter article's `buildDeadLetter`), with a
/// classifier the consumer can extend:
/// `DeadLetterBuilder::new("2.14.0").classifier(my_rules.or(SeedClassifier))`.
#[derive(Debug, Clone)]
pub struct DeadLetterBuilder<C = SeedClassifier> {
    consumer_version: String,
    classifier: C,
}

impl DeadLetterBuilder<SeedClassifier> {
    /// A builder for this consumer build, with the article's classifier.
    pub fn new(consumer_version: impl Into<String>) -> Self {
        DeadLetterBuilder {
            consumer_version: consumer_version.into(),
            classifier: SeedClassifier,
        }
    }
}

impl<C: ErrorClassifier> DeadLetterBuilder<C> {
    /// Use another classifier (chain it with `.or(SeedClassifier)` to keep the article's rules as
    /// the fallback; a classifier that answers `None` for everything yields `unknown`).
    pub fn classifier<N: ErrorClassifier>(self, classifier: N) -> DeadLetterBuilder<N> {
        DeadLetterBuilder {
            consumer_version: self.consumer_version,
            classifier,
        }
    }

    /// The envelope for `message`, which failed `attempts` times with `error`, at `now_ms`.
    ///
    /// `firstAttemptAt` is the `x-first-attempt-at` header when it is an instant (rewritten in
    /// UTC with milliseconds), else the reception time; `traceId` is the `x-trace-id` header.
    pub fn build(
        &self,
        message: &FailedMessage<'_>,
        error: &ErrorInfo,
        attempts: u32,
        now_ms: i64,
    ) -> DeadLetter {
        let first_attempt_ms = message
            .header("x-first-attempt-at")
            .and_then(|h| parse_timestamp(h).ok())
            .unwrap_or(message.received_at_ms);
        DeadLetter {
            payload: Payload::Bytes(message.body.to_vec()),
            error_class: self
                .classifier
                .classify(error)
                .unwrap_or_else(|| "unknown".to_string()),
            error_message: truncate_utf16(&error.message, MAX_ERROR_MESSAGE).to_string(),
            consumer_version: self.consumer_version.clone(),
            trace_id: message.header("x-trace-id").map(str::to_string),
            attempts,
            first_attempt_at: format_timestamp(first_attempt_ms),
            dead_lettered_at: format_timestamp(now_ms),
        }
    }
}

/// A dead letter of class `dependency_timeout` with `payload`, for the crate's tests.
#[cfg(test)]
pub(crate) fn sample_dead_letter(payload: Payload) -> DeadLetter {
    DeadLetter {
        payload,
        error_class: "dependency_timeout".into(),
        error_message: "t".into(),
        consumer_version: "1".into(),
        trace_id: None,
        attempts: 3,
        first_attempt_at: "2026-11-29T10:00:00.000Z".into(),
        dead_lettered_at: "2026-11-29T10:05:00.000Z".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(payload: Payload) -> DeadLetter {
        DeadLetter {
            payload,
            error_class: "validation".into(),
            error_message: "bad".into(),
            consumer_version: "1.0.0".into(),
            trace_id: None,
            attempts: 3,
            first_attempt_at: "2026-03-02T10:15:00.000Z".into(),
            dead_lettered_at: "2026-03-02T10:16:00.000Z".into(),
        }
    }

    #[test]
    fn non_utf8_payload_round_trips_through_base64() {
        let bytes: Vec<u8> = (0..=255).collect();
        let dl = envelope(Payload::Bytes(bytes.clone()));
        let line = dl.to_line();
        assert!(line.contains(r#""payload":{"base64":""#), "{line}");
        let back = DeadLetter::from_line(line.as_bytes()).expect("reads back");
        assert_eq!(back, dl);
        assert_eq!(back.payload.to_bytes().as_ref(), bytes.as_slice());
    }

    #[test]
    fn utf8_payload_is_a_json_string_and_round_trips() {
        let body = "{\"order\":\"ação 🚀\"}\n\u{0}";
        let dl = envelope(Payload::Bytes(body.as_bytes().to_vec()));
        let line = dl.to_line();
        let v: serde_json::Value = serde_json::from_str(&line).expect("json");
        assert_eq!(v["payload"], serde_json::Value::String(body.into()));
        assert_eq!(DeadLetter::from_line(line.as_bytes()), Ok(dl));
    }

    #[test]
    fn every_field_has_the_seed_name() {
        let v: serde_json::Value =
            serde_json::from_str(&envelope(Payload::Bytes(b"x".to_vec())).to_line()).expect("json");
        let mut keys: Vec<_> = v.as_object().expect("object").keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "attempts",
                "consumerVersion",
                "deadLetteredAt",
                "errorClass",
                "errorMessage",
                "firstAttemptAt",
                "payload",
                "traceId"
            ]
        );
    }

    #[test]
    fn node_buffer_and_json_payloads_are_read() {
        let line = r#"{"payload":{"type":"Buffer","data":[255,0,1]},"errorClass":"a","errorMessage":"m","consumerVersion":"v","traceId":null,"attempts":1,"firstAttemptAt":"2026-01-01T00:00:00Z","deadLetteredAt":"2026-01-01T00:00:00Z"}"#;
        let dl = DeadLetter::from_line(line.as_bytes()).expect("valid");
        assert_eq!(dl.payload, Payload::Bytes(vec![255, 0, 1]));
        let line = line.replace(r#"{"type":"Buffer","data":[255,0,1]}"#, r#"{"order":1}"#);
        let dl = DeadLetter::from_line(line.as_bytes()).expect("valid");
        assert_eq!(dl.payload.to_bytes().as_ref(), br#"{"order":1}"#);
        let bad = line.replace(r#"{"order":1}"#, r#"{"base64":"@@"}"#);
        assert!(matches!(
            DeadLetter::from_line(bad.as_bytes()),
            Err(EnvelopeError::Json(m)) if m.contains("base64")
        ));
    }

    #[test]
    fn lone_surrogate_from_a_js_writer_is_kept_as_its_escape() {
        let line = r#"{"payload":"x","errorClass":"a","errorMessage":"boom \ud83d","consumerVersion":"v","attempts":1,"firstAttemptAt":"2026-01-01T00:00:00Z","deadLetteredAt":"2026-01-01T00:00:00Z"}"#;
        let dl = DeadLetter::from_line(line.as_bytes()).expect("valid");
        assert_eq!(dl.error_message, "boom \\ud83d");
        assert_eq!(dl.trace_id, None);
    }

    #[test]
    fn invalid_lines_say_why() {
        assert!(matches!(
            DeadLetter::from_line(b"{\"payload\":\"\xff\"}"),
            Err(EnvelopeError::NotUtf8 { offset: 12 })
        ));
        assert!(matches!(
            DeadLetter::from_line(b"[]"),
            Err(EnvelopeError::Json(_))
        ));
        let line = r#"{"payload":"x","errorClass":"a","errorMessage":"m","consumerVersion":"v","attempts":1,"firstAttemptAt":"2026-02-30T00:00:00Z","deadLetteredAt":"2026-01-01T00:00:00Z"}"#;
        assert!(matches!(
            DeadLetter::from_line(line.as_bytes()),
            Err(EnvelopeError::Timestamp {
                field: "firstAttemptAt",
                ..
            })
        ));
    }

    #[test]
    fn timestamps_parse_like_date_parse_and_format_like_to_iso_string() {
        let cases = [
            ("2025-01-01T00:00:00Z", 1_735_689_600_000),
            ("2025-01-01T00:00:00.1Z", 1_735_689_600_100),
            ("2025-01-01T00:00:00.123456Z", 1_735_689_600_123),
            ("2025-01-01T00:00:00+02:00", 1_735_682_400_000),
            ("2025-01-01T00:00:00+23:59", 1_735_603_260_000),
            ("2024-02-29T00:00:00Z", 1_709_164_800_000),
            ("1969-12-31T23:59:59.999Z", -1),
            ("0000-01-01T00:00:00Z", -62_167_219_200_000),
        ];
        for (text, ms) in cases {
            assert_eq!(parse_timestamp(text), Ok(ms), "{text}");
        }
        for bad in [
            "2025-02-29T00:00:00Z",
            "2025-01-01T24:00:00Z",
            "2025-01-01T23:59:60Z",
            "2025-01-01t00:00:00z",
            "2025-01-01 00:00:00Z",
            "2025-01-01T00:00:00",
            "2025-01-01T00:00:00.Z",
            "2025-01-01T00:00:00+24:00",
            "2025-01-01T00:00:00+0200",
            "2025-01-01",
        ] {
            assert!(parse_timestamp(bad).is_err(), "{bad}");
        }
        assert_eq!(
            format_timestamp(1_735_689_600_123),
            "2025-01-01T00:00:00.123Z"
        );
        assert_eq!(format_timestamp(-1), "1969-12-31T23:59:59.999Z");
        for ms in [0, 951_782_400_000, 1_709_164_800_000, 4_102_444_799_999] {
            assert_eq!(parse_timestamp(&format_timestamp(ms)), Ok(ms));
        }
    }

    #[test]
    fn truncation_counts_utf16_units_and_never_splits_a_pair() {
        let s = format!("{}🚀", "a".repeat(499));
        assert_eq!(truncate_utf16(&s, 500), "a".repeat(499));
        let s = format!("{}🚀", "a".repeat(498));
        assert_eq!(truncate_utf16(&s, 500), s);
        let s = "é".repeat(600);
        assert_eq!(truncate_utf16(&s, 500).chars().count(), 500);
    }

    #[test]
    fn base64_matches_known_vectors() {
        for (plain, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(plain.as_bytes()), enc);
            assert_eq!(base64_decode(enc).expect("decodes"), plain.as_bytes());
        }
        assert_eq!(base64_decode("Zg").expect("unpadded"), b"f");
        assert!(base64_decode("Z").is_err());
        assert!(base64_decode("Zg===").is_err());
        assert!(base64_decode("Zm 9v").is_err());
    }

    #[test]
    fn builder_follows_the_seed() {
        let headers = vec![
            ("x-trace-id".to_string(), "abc".to_string()),
            (
                "x-first-attempt-at".to_string(),
                "2026-03-02T12:00:00+02:00".to_string(),
            ),
        ];
        let msg = FailedMessage {
            body: b"\xff\x00body",
            headers: &headers,
            received_at_ms: 0,
        };
        let long = "x".repeat(700);
        let error = ErrorInfo::new(long).status(503);
        let dl = DeadLetterBuilder::new("2.0.0").build(&msg, &error, 3, 1_772_445_600_000);
        assert_eq!(dl.error_class, "dependency_unavailable");
        assert_eq!(dl.error_message.len(), MAX_ERROR_MESSAGE);
        assert_eq!(dl.trace_id.as_deref(), Some("abc"));
        assert_eq!(dl.first_attempt_at, "2026-03-02T10:00:00.000Z");
        assert_eq!(dl.dead_lettered_at, "2026-03-02T10:00:00.000Z");
        assert_eq!(dl.payload, Payload::Bytes(b"\xff\x00body".to_vec()));

        let seed = |e: ErrorInfo| SeedClassifier.classify(&e);
        assert_eq!(
            seed(ErrorInfo::new("").name("ValidationError").status(503)).as_deref(),
            Some("validation")
        );
        assert_eq!(
            seed(ErrorInfo::new("").name("TimeoutError")).as_deref(),
            Some("dependency_timeout")
        );
        assert_eq!(
            seed(ErrorInfo::new("").status(404)).as_deref(),
            Some("reference_not_found")
        );
        assert_eq!(
            seed(ErrorInfo::new("").status(500)).as_deref(),
            Some("dependency_unavailable")
        );
        assert_eq!(
            seed(ErrorInfo::new("").status(499)).as_deref(),
            Some("unknown")
        );

        let custom = |e: &ErrorInfo| {
            e.message
                .contains("stock")
                .then(|| "out_of_stock".to_string())
        };
        let b = DeadLetterBuilder::new("2.0.0").classifier(custom.or(SeedClassifier));
        let no_headers = FailedMessage {
            body: b"",
            headers: &[],
            received_at_ms: 5,
        };
        assert_eq!(
            b.build(&no_headers, &ErrorInfo::new("no stock"), 1, 0)
                .error_class,
            "out_of_stock"
        );
        let other = b.build(&no_headers, &ErrorInfo::new("x").status(404), 1, 0);
        assert_eq!(other.error_class, "reference_not_found");
        assert_eq!(other.first_attempt_at, "1970-01-01T00:00:00.005Z");
    }
}

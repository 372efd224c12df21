//! Triage's fast read of one export line: the fields grouping needs, found in one pass over the
//! line's bytes, without a JSON parser; the payload is stepped over (its escapes checked, never
//! decoded or copied), and nothing is allocated.
//!
//! [`skim`] vouches for a line or declines it. It returns `Some` only for a line that the careful
//! read ([`EnvelopeRef::parse`](super::envelope::EnvelopeRef::parse)) accepts, with the same
//! values; for anything else it returns `None`, which is not a verdict: triage then reads the
//! line the careful way, which accepts it or says why not. What it takes is the shape writers
//! produce:
//! - one JSON object, spaces around its tokens, and no control character anywhere (a tab between
//!   tokens, for one, is left to the careful read);
//! - the eight envelope fields, each once (`traceId` may be missing), and no other;
//! - `payload` a string; `traceId` `null` or a string; `attempts` an integer that fits a `u32`,
//!   written plainly; `errorClass`, `consumerVersion` and the two instants strings without
//!   escapes; `errorMessage` a string, its escapes decoded into the caller's buffer;
//! - no `\u` escape of a surrogate anywhere (`\uD...`: whether it pairs is the careful read's
//!   call).

use crate::time::parse_timestamp;

/// What triage reads from an envelope: the grouping key's parts and the instants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields<'a> {
    /// `errorClass`.
    pub error_class: &'a str,
    /// `consumerVersion`.
    pub consumer_version: &'a str,
    /// `errorMessage`, unescaped, as WTF-8 bytes (JSON allows lone surrogate escapes).
    pub error_message: &'a [u8],
    /// `firstAttemptAt` as written.
    pub first_attempt_at: &'a str,
    /// `firstAttemptAt` in ms since the epoch.
    pub first_attempt_ms: i64,
    /// `deadLetteredAt` in ms since the epoch.
    pub dead_lettered_ms: i64,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Whether `bytes` holds a byte below 0x20 (a control character): eight bytes at a time, no
/// branch in the loop.
fn has_control(bytes: &[u8]) -> bool {
    let mut control = 0_u64;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let x = word_at(word, 0);
        // Some byte is below 0x20 exactly when this has a high bit set (0x20 <= 0x80).
        control |= x.wrapping_sub(0x20 * ONES) & !x;
    }
    control & HIGH != 0 || words.remainder().iter().any(|&b| b < 0x20)
}

/// The eight bytes of `s` from `i` (which has them) as a little-endian word.
fn word_at(s: &[u8], i: usize) -> u64 {
    let mut w = [0_u8; 8];
    w.copy_from_slice(&s[i..i + 8]);
    u64::from_le_bytes(w)
}

/// The first `"` or `\\` in `s` from `i`: eight bytes at a time, inline (the runs between two
/// escapes of a payload are short, shorter than a call to a vector search pays off on).
fn quote_or_backslash(s: &[u8], mut i: usize) -> Option<usize> {
    while i + 8 <= s.len() {
        let x = word_at(s, i);
        let (q, b) = (x ^ (u64::from(b'"') * ONES), x ^ (u64::from(b'\\') * ONES));
        // A zero byte of `q` or `b`; the lowest flagged byte is exact (a borrow only flags bytes
        // above a zero one).
        let hit = (q.wrapping_sub(ONES) & !q | b.wrapping_sub(ONES) & !b) & HIGH;
        if hit != 0 {
            return Some(i + (hit.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    s.get(i..)?
        .iter()
        .position(|&c| c == b'"' || c == b'\\')
        .map(|k| i + k)
}

/// The escape at `s[k]` (a backslash): the code it stands for and its length in bytes. `None`
/// for an invalid escape and for a surrogate (`\uD800`–`\uDFFF`).
fn escape_at(s: &[u8], k: usize) -> Option<(u32, usize)> {
    let code = match *s.get(k + 1)? {
        b'"' => 0x22,
        b'\\' => 0x5C,
        b'/' => 0x2F,
        b'b' => 0x08,
        b'f' => 0x0C,
        b'n' => 0x0A,
        b'r' => 0x0D,
        b't' => 0x09,
        b'u' => {
            let hex = s.get(k + 2..k + 6)?;
            let mut v = 0_u32;
            for &h in hex {
                v = v * 16 + char::from(h).to_digit(16)?;
            }
            if (0xD800..=0xDFFF).contains(&v) {
                return None;
            }
            return Some((v, 6));
        }
        _ => return None,
    };
    Some((code, 2))
}

/// Decode the escapes of JSON string content `s` (checked by [`Cursor::string`]) into `out`.
fn unescape(s: &[u8], out: &mut Vec<u8>) -> Option<()> {
    out.clear();
    let mut i = 0;
    while let Some(k) = memchr::memchr(b'\\', &s[i..]).map(|k| i + k) {
        out.extend_from_slice(&s[i..k]);
        let (code, len) = escape_at(s, k)?;
        let c = char::from_u32(code)?;
        out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
        i = k + len;
    }
    out.extend_from_slice(&s[i..]);
    Some(())
}

/// A JSON string's content: `start..end` in the line, and whether it holds escapes.
#[derive(Debug, Clone, Copy)]
struct Str {
    start: usize,
    end: usize,
    escaped: bool,
}

/// A position in a line that holds no control character (so the only whitespace is spaces).
struct Cursor<'a> {
    /// The line, checked UTF-8 once.
    text: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn spaces(&mut self) {
        while self.b.get(self.i) == Some(&b' ') {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.spaces();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string (escapes checked, not decoded).
    fn string(&mut self) -> Option<Str> {
        self.eat(b'"')?;
        let start = self.i;
        let mut escaped = false;
        loop {
            let k = quote_or_backslash(self.b, self.i)?;
            if self.b[k] == b'"' {
                self.i = k + 1;
                return Some(Str {
                    start,
                    end: k,
                    escaped,
                });
            }
            escaped = true;
            self.i = k + escape_at(self.b, k)?.1;
        }
    }

    /// A string without escapes.
    fn plain(&mut self) -> Option<&'a str> {
        let s = self.string()?;
        if s.escaped {
            return None;
        }
        // A string's quotes are ASCII, so its content starts and ends on character boundaries.
        self.text.get(s.start..s.end)
    }

    /// `null` or a string.
    fn null_or_string(&mut self) -> Option<()> {
        if self.peek()? == b'n' {
            let end = self.i + 4;
            (self.b.get(self.i..end)? == b"null").then(|| self.i = end)
        } else {
            self.string().map(|_| ())
        }
    }

    /// An integer written plainly (no sign, fraction, exponent or leading zero) that fits a
    /// `u32`.
    fn attempts(&mut self) -> Option<u32> {
        self.spaces();
        let digits = self.b[self.i..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let text = &self.b[self.i..self.i + digits];
        if digits == 0 || digits > 10 || (digits > 1 && text[0] == b'0') {
            return None;
        }
        self.i += digits;
        let v = text
            .iter()
            .fold(0_u64, |v, &d| v * 10 + u64::from(d - b'0'));
        u32::try_from(v).ok()
    }
}

/// The grouping fields of `line` (one export line, without or with its line end), when the line
/// is an envelope of the shape this scan takes (see the module documentation); `None` otherwise.
/// `unescaped` holds the message when it had escapes.
pub fn skim<'a>(line: &'a [u8], unescaped: &'a mut Vec<u8>) -> Option<Fields<'a>> {
    let end = line
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))?
        + 1;
    let b = &line[..end];
    let text = std::str::from_utf8(b).ok()?;
    if has_control(b) {
        return None;
    }
    let mut c = Cursor { text, b, i: 0 };
    c.eat(b'{')?;
    let (mut class, mut version, mut message, mut first, mut dead) = (None, None, None, None, None);
    let mut seen = 0_u8;
    loop {
        let key = c.string()?;
        if key.escaped {
            return None;
        }
        c.eat(b':')?;
        let bit = match &b[key.start..key.end] {
            b"payload" => c.string().map(|_| 0)?,
            b"errorClass" => {
                class = Some(c.plain()?);
                1
            }
            b"errorMessage" => {
                message = Some(c.string()?);
                2
            }
            b"consumerVersion" => {
                version = Some(c.plain()?);
                3
            }
            b"traceId" => c.null_or_string().map(|()| 4)?,
            b"attempts" => c.attempts().map(|_| 5)?,
            b"firstAttemptAt" => {
                first = Some(c.plain()?);
                6
            }
            b"deadLetteredAt" => {
                dead = Some(c.plain()?);
                7
            }
            _ => return None,
        };
        if seen & (1 << bit) != 0 {
            return None;
        }
        seen |= 1 << bit;
        match c.peek()? {
            b',' => c.i += 1,
            b'}' => {
                c.i += 1;
                break;
            }
            _ => return None,
        }
    }
    c.spaces();
    // Everything but `traceId` is required.
    if c.i != b.len() || seen | (1 << 4) != 0xFF {
        return None;
    }
    let (first_attempt_at, dead_lettered_at, message) = (first?, dead?, message?);
    let first_attempt_ms = parse_timestamp(first_attempt_at).ok()?;
    let dead_lettered_ms = parse_timestamp(dead_lettered_at).ok()?;
    let text = &b[message.start..message.end];
    let error_message = if message.escaped {
        unescape(text, unescaped)?;
        unescaped.as_slice()
    } else {
        text
    };
    Some(Fields {
        error_class: class?,
        consumer_version: version?,
        error_message,
        first_attempt_at,
        first_attempt_ms,
        dead_lettered_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dlq::envelope::EnvelopeRef;
    use crate::dlq::generate::{GenerateOptions, Generator};
    use proptest::prelude::*;

    /// The careful read's fields of `line`, when it accepts it.
    fn careful(line: &[u8]) -> Option<(String, String, Vec<u8>, String, i64, i64)> {
        let e = EnvelopeRef::parse(line).ok()?;
        Some((
            e.error_class().to_string(),
            e.consumer_version().to_string(),
            e.error_message_wtf8().to_vec(),
            e.first_attempt_at().to_string(),
            e.first_attempt_ms(),
            e.dead_lettered_ms(),
        ))
    }

    /// `skim` vouches only for lines the careful read accepts, with its values; returns whether
    /// it vouched.
    fn agrees(line: &[u8]) -> bool {
        let mut buf = Vec::new();
        let Some(f) = skim(line, &mut buf) else {
            return false;
        };
        let want = careful(line).unwrap_or_else(|| {
            panic!(
                "skim took a line the careful read refuses: {}",
                String::from_utf8_lossy(line)
            )
        });
        let got = (
            f.error_class.to_string(),
            f.consumer_version.to_string(),
            f.error_message.to_vec(),
            f.first_attempt_at.to_string(),
            f.first_attempt_ms,
            f.dead_lettered_ms,
        );
        assert_eq!(got, want, "{}", String::from_utf8_lossy(line));
        true
    }

    const GOOD: &str = r#"{"attempts":3,"consumerVersion":"2.14.0","deadLetteredAt":"2026-03-01T00:10:00.000Z","errorClass":"validation","errorMessage":"field 'x' value \"4\" is bad \u00e9\n","firstAttemptAt":"2026-03-01T00:00:00.000Z","payload":"{\"orderId\":\"a\\/b\u0041\"}","traceId":"abc"}"#;

    #[test]
    fn takes_the_writers_shape_with_the_careful_reads_values() {
        assert!(agrees(GOOD.as_bytes()));
        let mut buf = Vec::new();
        let f = skim(GOOD.as_bytes(), &mut buf).expect("skims");
        assert_eq!(
            f.error_message,
            "field 'x' value \"4\" is bad é\n".as_bytes()
        );
        for line in [
            format!("  {GOOD}  \r"),
            GOOD.replace("\"traceId\":\"abc\"", "\"traceId\":null"),
            GOOD.replace(",\"traceId\":\"abc\"", ""),
            GOOD.replace(",\"", " , \"")
                .replace("\":", "\" : ")
                .replacen('{', "{ ", 1),
            GOOD.replace("\"attempts\":3", "\"attempts\":4294967295"),
            GOOD.replace("\"attempts\":3", "\"attempts\":0"),
            GOOD.replace("bad", "mauvais — 日本語 🚀"),
        ] {
            assert!(agrees(line.as_bytes()), "{line}");
        }
    }

    #[test]
    fn declines_what_it_does_not_take_and_every_invalid_line() {
        let declined = [
            // Invalid: the careful read says why.
            GOOD.replace("\"attempts\":3", "\"attempts\":-3"),
            GOOD.replace("\"attempts\":3", "\"attempts\":03"),
            GOOD.replace("\"attempts\":3", "\"attempts\":3.0"),
            GOOD.replace("\"attempts\":3", "\"attempts\":4294967296"),
            GOOD.replace("\"attempts\":3", "\"attempts\":\"3\""),
            GOOD.replace("\"attempts\":3,", ""),
            GOOD.replace("\"errorClass\"", "\"errorKlass\""),
            GOOD.replace("\"payload\":", "\"payload\":1,\"x\":"),
            GOOD.replace("T00:00", "X00:00"),
            GOOD.replace("\\n", "\\x"),
            GOOD.replace("\\u00e9", "\\u00g9"),
            GOOD.replace("\\u0041", "\\u041"),
            GOOD.replace("bad", "b\u{1}ad"),
            GOOD.replace("\"abc\"", "nul"),
            GOOD.replace("\"abc\"", "true"),
            format!("{GOOD},"),
            format!("{GOOD}}}"),
            format!("[{GOOD}]"),
            GOOD[..GOOD.len() - 1].to_string(),
            GOOD.replace(",\"traceId\"", ",,\"traceId\""),
            GOOD.replace(",\"traceId\":\"abc\"", ",}"),
            "{}".to_string(),
            "{".to_string(),
            String::new(),
            // Valid, but left to the careful read.
            GOOD.replace(",\"traceId\"", ",\t\"traceId\""),
            format!("{GOOD},\"extra\":1}}").replacen('}', "", 1),
            GOOD.replace(
                "\"errorClass\":\"validation\"",
                "\"errorClass\":\"valid\\u0061tion\"",
            ),
            GOOD.replace("\"payload\":\"", "\"payload\":\"\\ud83d\\ude80"),
            GOOD.replace("bad", "bad \\ud83d\\ude80"),
            GOOD.replace("\"payload\":\"{", "\"payload\":{\"a\":1},\"p\":\"{"),
            GOOD.replace(
                "\"traceId\":\"abc\"",
                "\"traceId\":\"abc\",\"traceId\":null",
            ),
        ];
        for line in &declined {
            assert!(!agrees(line.as_bytes()), "{line}");
        }
        let mut bytes = GOOD.as_bytes().to_vec();
        bytes.insert(40, 0xFF);
        assert!(!agrees(&bytes));
    }

    #[test]
    fn takes_almost_every_generated_line_and_agrees_on_all() {
        let options = GenerateOptions {
            lines: 4000,
            seed: 11,
            tail: 0.1,
            tricky: 0.05,
            binary: 0.02,
            corrupt: 0.02,
            ..GenerateOptions::default()
        };
        let (mut taken, mut total) = (0, 0);
        for line in Generator::new(options) {
            total += 1;
            taken += usize::from(agrees(&line));
        }
        // Declined: binary payloads (an object), corrupt lines, lone surrogates.
        assert!(taken * 100 >= total * 90, "{taken} of {total}");
    }

    fn mutated() -> impl Strategy<Value = Vec<u8>> {
        let byte = prop::sample::select(
            b"\"\\{}[],: \t\r0123456789-.eEnulltrueuUdD/bfnrt\x01\xc3\xa9\xff".to_vec(),
        );
        prop::collection::vec((0..GOOD.len(), 0_u8..3, byte), 1..4).prop_map(|edits| {
            let mut line = GOOD.as_bytes().to_vec();
            for (at, op, b) in edits {
                let at = at.min(line.len());
                match op {
                    0 => line.insert(at, b),
                    1 if at < line.len() => {
                        line.remove(at);
                    }
                    _ if at < line.len() => line[at] = b,
                    _ => {}
                }
            }
            line
        })
    }

    proptest! {
        #[test]
        fn the_word_search_finds_the_first_quote_or_backslash(
            s in prop::collection::vec(prop::sample::select(b"ab\"\\\\\x00\xff\x22\x5c\xa2\xdc".to_vec()), 0..40),
            from in 0_usize..44,
        ) {
            let want = s.get(from..).and_then(|rest| rest.iter().position(|&c| c == b'"' || c == b'\\').map(|k| from + k));
            prop_assert_eq!(quote_or_backslash(&s, from), want);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn never_vouches_for_what_the_careful_read_refuses(line in mutated()) {
            agrees(&line);
        }
    }
}

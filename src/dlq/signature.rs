//! The error signature: an error message with what varies between occurrences taken out, so
//! that `timeout after 30012ms` and `timeout after 30044ms` fall in one group.
//!
//! **v1** (the default, and what recorded decisions are keyed by) is exactly the dead-letter
//! article's `signatureOf` (docs/design.md, "Dead letters"):
//!
//! ```js
//! errorMessage
//!   .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '<id>')
//!   .replace(/\d+/g, '<n>')
//!   .replace(/'[^']*'|"[^"]*"/g, '<v>')
//!   .slice(0, 120);
//! ```
//!
//! How it is matched without a regex engine, and why that is the same thing: every pattern is
//! ASCII, so the three passes run over the UTF-8 bytes, where no byte of a multibyte character is
//! ASCII (a hex digit, a digit, a quote or a dash never appears inside one). JS `\d` is `[0-9]`
//! only, and the `i` flag makes `[0-9a-f]` exactly `[0-9a-fA-F]` (no non-ASCII character folds
//! to those in JS's non-unicode mode). Each pass is a left-to-right scan that takes the leftmost
//! match and goes on after it, as a global `replace` does; for the quotes, at each position a
//! single-quoted run is tried first, then a double-quoted one; a quote with no closing partner is
//! left as it is (and cannot have one later).
//!
//! The cut counts UTF-16 code units, as JS `slice` does: a character outside the Basic
//! Multilingual Plane (an emoji...) counts two. **When unit 120 falls inside such a pair**, JS
//! keeps the high surrogate alone. A Rust string cannot hold it, so the signature ends with the
//! six ASCII characters `\udXXX` (lowercase hex, the way `JSON.stringify` escapes it). A lone
//! surrogate already in the message (a JS writer cut it at 500) is written the same way. Groups
//! are not keyed by that text but by the signature's WTF-8 bytes
//! ([`Signer::sign_wtf8_bytes_into`]), which hold a lone surrogate as itself: two messages fall in
//! the same group exactly when their JS signatures are equal strings, even when one holds a lone
//! surrogate and the other the six characters that spell it.

use super::envelope::wtf8_to_string;

/// The longest signature, in UTF-16 code units (the article's `slice(0, 120)`).
pub const MAX_SIGNATURE_UNITS: usize = 120;

/// Errors of this module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// `--signature-version` names a version this build does not have.
    #[error("unknown signature version {0:?} (known: v1)")]
    UnknownVersion(String),
}

/// The normalization rules. Decisions record the version they were taken under; v1 stays the
/// default so that they stay comparable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SignatureVersion {
    /// The dead-letter article's `signatureOf`, exactly.
    #[default]
    V1,
}

impl SignatureVersion {
    /// `v1`.
    pub fn as_str(self) -> &'static str {
        match self {
            SignatureVersion::V1 => "v1",
        }
    }

    /// Parse `v1`.
    ///
    /// # Errors
    /// [`SignatureError::UnknownVersion`].
    pub fn parse(text: &str) -> Result<SignatureVersion, SignatureError> {
        match text {
            "v1" | "1" => Ok(SignatureVersion::V1),
            other => Err(SignatureError::UnknownVersion(other.to_string())),
        }
    }
}

/// Computes signatures, reusing its buffers (triage calls it once per line).
#[derive(Debug, Default)]
pub struct Signer {
    version: SignatureVersion,
    normalized: Vec<u8>,
}

/// The hex digits, either case.
const HEX: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = (b as u8).is_ascii_hexdigit();
        b += 1;
    }
    t
};

/// Whether every byte of `b` is a hex digit (no early exit: the runs are short and fixed).
fn all_hex(b: &[u8]) -> bool {
    b.iter().fold(true, |ok, &c| ok & HEX[usize::from(c)])
}

fn is_uuid_at(s: &[u8], i: usize) -> bool {
    let Some(w) = s.get(i..i + 36) else {
        return false;
    };
    w[8] == b'-'
        && w[13] == b'-'
        && w[18] == b'-'
        && w[23] == b'-'
        && all_hex(&w[..8])
        && all_hex(&w[9..13])
        && all_hex(&w[14..18])
        && all_hex(&w[19..23])
        && all_hex(&w[24..])
}

/// The start of the leftmost UUID at or after `from`, or `usize::MAX`. A UUID has a dash 8
/// bytes in, so only the bytes 8 before each dash are candidates, tried in order.
fn next_uuid(s: &[u8], from: usize) -> usize {
    let mut d = from + 8;
    while let Some(k) = s.get(d..).and_then(|rest| memchr::memchr(b'-', rest)) {
        if is_uuid_at(s, d + k - 8) {
            return d + k - 8;
        }
        d += k + 1;
    }
    usize::MAX
}

/// The bytes that may start a digit run or a quoted run.
const RUN_START: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = b'0';
    while b <= b'9' {
        t[b as usize] = true;
        b += 1;
    }
    t[b'\'' as usize] = true;
    t[b'"' as usize] = true;
    t
};

/// Once the normalized text holds this many bytes, it holds more than
/// [`MAX_SIGNATURE_UNITS`] whole UTF-16 units (a unit takes at most 3 bytes), so what follows
/// would be cut anyway.
const ENOUGH_BYTES: usize = 3 * MAX_SIGNATURE_UNITS + 4;

/// The article's three global replaces (UUIDs, then digit runs, then quoted runs) in one pass over
/// the message, into `out`, stopping once `out` holds more than the cut keeps.
///
/// One pass gives what the three give because the substitutes (`<id>`, `<n>`, `<v>`) hold no
/// digit, hex digit or quote, and UUIDs and digit runs hold no quote: a UUID is taken wherever
/// one starts outside a quoted run before a digit run is (a digit run ends where a UUID starts),
/// and the quotes pair up in the message as they do in the text the first two passes leave. A
/// quote with no partner has none further on either, so the search is not repeated.
fn normalize_v1(src: &[u8], out: &mut Vec<u8>) {
    out.clear();
    // Whether `'` / `"` has no partner left in the rest of the message.
    let mut unpaired = [false; 2];
    let mut uuid = next_uuid(src, 0);
    let mut i = 0;
    while i < src.len() && out.len() < ENOUGH_BYTES {
        if uuid < i {
            // A quoted run held it.
            uuid = next_uuid(src, i);
        }
        if i == uuid {
            out.extend_from_slice(b"<id>");
            i += 36;
            uuid = next_uuid(src, i);
            continue;
        }
        let c = src[i];
        if c.is_ascii_digit() {
            out.extend_from_slice(b"<n>");
            i += 1;
            while i < src.len() && i != uuid && src[i].is_ascii_digit() {
                i += 1;
            }
            continue;
        }
        if c == b'\'' || c == b'"' {
            let k = usize::from(c == b'"');
            if !unpaired[k] {
                match memchr::memchr(c, &src[i + 1..]) {
                    Some(close) => {
                        out.extend_from_slice(b"<v>");
                        i += close + 2;
                        continue;
                    }
                    None => unpaired[k] = true,
                }
            }
        }
        // `c` stays; so does every byte after it up to the next run or UUID.
        let start = i;
        let stop = uuid.min(src.len());
        i += 1;
        while i < stop && !RUN_START[usize::from(src[i])] {
            i += 1;
        }
        out.extend_from_slice(&src[start..i]);
    }
}

/// Cut WTF-8 `text` at `max` UTF-16 units as JS `slice(0, max)` does, into `out` (cleared first);
/// a cut inside a pair keeps the high surrogate alone, as WTF-8.
fn cut_utf16(text: &[u8], max: usize, out: &mut Vec<u8>) {
    out.clear();
    if text.len() <= max {
        // No more units than bytes: nothing to cut.
        out.extend_from_slice(text);
        return;
    }
    let mut units = 0;
    let mut i = 0;
    while i < text.len() {
        let lead = text[i];
        let (len, w) = match lead {
            0x00..=0x7F => (1, 1),
            0xC0..=0xDF => (2, 1),
            0xE0..=0xEF => (3, 1),
            _ => (4, 2),
        };
        if units + w > max {
            out.extend_from_slice(&text[..i]);
            if units < max {
                // Unit `max` falls inside a pair: JS keeps its high surrogate.
                if let Some(c) = text
                    .get(i..i + len)
                    .and_then(|b| std::str::from_utf8(b).ok())
                    .and_then(|s| s.chars().next())
                {
                    let mut pair = [0_u16; 2];
                    c.encode_utf16(&mut pair);
                    let high = pair[0];
                    // The generalized UTF-8 of a surrogate code point: ED, A0..AF, 80..BF.
                    out.extend_from_slice(&[
                        0xED,
                        0x80 | ((high >> 6) & 0x3F) as u8,
                        0x80 | (high & 0x3F) as u8,
                    ]);
                }
            }
            return;
        }
        units += w;
        i += len;
    }
    out.extend_from_slice(text);
}

impl Signer {
    /// A signer for `version`.
    pub fn new(version: SignatureVersion) -> Signer {
        Signer {
            version,
            ..Signer::default()
        }
    }

    /// The version it computes.
    pub fn version(&self) -> SignatureVersion {
        self.version
    }

    /// The signature of a message given as WTF-8 (what a JSON string decodes to; plain UTF-8 is
    /// WTF-8).
    pub fn sign_wtf8(&mut self, message: &[u8]) -> String {
        let mut bytes = Vec::new();
        self.sign_wtf8_bytes_into(message, &mut bytes);
        wtf8_to_string(&bytes)
    }

    /// The signature as WTF-8 bytes, into `out` (cleared first): a lone surrogate is kept as
    /// itself, not spelled out, so two signatures have equal bytes exactly when JS gives equal
    /// strings (what groups are keyed by). [`wtf8_to_string`] gives [`Signer::sign_wtf8`]'s text.
    pub fn sign_wtf8_bytes_into(&mut self, message: &[u8], out: &mut Vec<u8>) {
        match self.version {
            SignatureVersion::V1 => {
                normalize_v1(message, &mut self.normalized);
                cut_utf16(&self.normalized, MAX_SIGNATURE_UNITS, out);
            }
        }
    }

    /// The signature of a message.
    pub fn sign(&mut self, message: &str) -> String {
        self.sign_wtf8(message.as_bytes())
    }
}

/// The v1 signature of `message` (one-off; use a [`Signer`] in loops).
pub fn signature_v1(message: &str) -> String {
    Signer::new(SignatureVersion::V1).sign(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // The article's three replaces as three passes, the way the JS reads: the oracle of the fused
    // pass.
    fn is_hex(b: u8) -> bool {
        b.is_ascii_hexdigit()
    }

    fn is_uuid_at_oracle(s: &[u8], i: usize) -> bool {
        let Some(w) = s.get(i..i + 36) else {
            return false;
        };
        w.iter().enumerate().all(|(k, &c)| match k {
            8 | 13 | 18 | 23 => c == b'-',
            _ => is_hex(c),
        })
    }

    fn replace_uuids(src: &[u8], out: &mut Vec<u8>) {
        out.clear();
        let mut i = 0;
        while i < src.len() {
            if is_hex(src[i]) && is_uuid_at_oracle(src, i) {
                out.extend_from_slice(b"<id>");
                i += 36;
            } else {
                out.push(src[i]);
                i += 1;
            }
        }
    }

    fn replace_digits(src: &[u8], out: &mut Vec<u8>) {
        out.clear();
        let mut i = 0;
        while i < src.len() {
            if src[i].is_ascii_digit() {
                while i < src.len() && src[i].is_ascii_digit() {
                    i += 1;
                }
                out.extend_from_slice(b"<n>");
            } else {
                out.push(src[i]);
                i += 1;
            }
        }
    }

    fn replace_quoted(src: &[u8], out: &mut Vec<u8>) {
        out.clear();
        let mut i = 0;
        while i < src.len() {
            let c = src[i];
            if (c == b'\'' || c == b'"')
                && let Some(close) = src[i + 1..].iter().position(|&d| d == c)
            {
                out.extend_from_slice(b"<v>");
                i += close + 2;
                continue;
            }
            out.push(c);
            i += 1;
        }
    }

    fn three_passes(message: &[u8]) -> Vec<u8> {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        replace_uuids(message, &mut a);
        replace_digits(&a, &mut b);
        replace_quoted(&b, &mut a);
        a
    }

    /// Texts made of what the passes look at: UUIDs (some one digit short or with a wrong
    /// dash), digit runs, hex letters, dashes, both quotes, and a multibyte character.
    fn tricky() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("3f2504e0-4f89-11d3-9a0c-0305e82c3301".to_string()),
            Just("3F2504E0-4F89-11D3-9A0C-0305E82C330".to_string()),
            Just("3f2504e0-4f89-11d3-9a0c_0305e82c3301".to_string()),
            "[0-9]{1,4}",
            "[a-fA-F]{1,3}",
            Just("-".to_string()),
            Just("'".to_string()),
            Just("\"".to_string()),
            Just(" ".to_string()),
            Just("é🚀".to_string()),
            Just("€".to_string()),
            "[g-z]{1,3}",
        ];
        prop::collection::vec(piece, 0..24).prop_map(|v| v.concat())
    }

    /// The cut of the three passes' text, unit by unit: the oracle of the whole signature.
    fn cut_oracle(text: &[u8]) -> String {
        let s = String::from_utf8_lossy(text);
        let mut units = 0;
        let mut out = String::new();
        for c in s.chars() {
            let w = c.len_utf16();
            if units + w > MAX_SIGNATURE_UNITS {
                if units < MAX_SIGNATURE_UNITS {
                    let mut pair = [0_u16; 2];
                    c.encode_utf16(&mut pair);
                    out.push_str(&format!("\\u{:04x}", pair[0]));
                }
                break;
            }
            units += w;
            out.push(c);
        }
        out
    }

    proptest! {
        #[test]
        fn one_pass_is_the_three_passes(text in tricky()) {
            let mut fused = Vec::new();
            normalize_v1(text.as_bytes(), &mut fused);
            if fused.len() < ENOUGH_BYTES {
                prop_assert_eq!(fused, three_passes(text.as_bytes()));
            } else {
                // It stopped early: what it wrote is where the three passes' text starts.
                prop_assert!(three_passes(text.as_bytes()).starts_with(&fused));
            }
        }

        #[test]
        fn signature_is_the_three_passes_cut(pieces in prop::collection::vec(tricky(), 1..8)) {
            // Long texts too (up to a few hundred units), so that the cut and the early stop
            // are reached.
            let text = pieces.concat();
            prop_assert_eq!(signature_v1(&text), cut_oracle(&three_passes(text.as_bytes())));
        }
    }

    #[test]
    fn a_long_message_stops_early_with_the_same_signature() {
        // Stopped after 390 bytes of `€` (3 bytes, 1 unit each): the quote and digits after the
        // stop never matter.
        let long = format!("{}'{}", "€".repeat(130), "7".repeat(400));
        let mut out = Vec::new();
        normalize_v1(long.as_bytes(), &mut out);
        assert_eq!(out, "€".repeat(130).as_bytes());
        assert_eq!(signature_v1(&long), "€".repeat(120));
        // Regression (review): 119 three-byte characters are 357 bytes and 119 units, so the stop
        // must wait for the `<n>` whose `<` is unit 120 (a bound of two bytes a unit stopped
        // before it).
        let text = format!("{}1", "€".repeat(119));
        assert_eq!(signature_v1(&text), format!("{}<", "€".repeat(119)));
        let uuids = "3f2504e0-4f89-11d3-9a0c-0305e82c3301 ".repeat(40);
        assert_eq!(signature_v1(&uuids), "<id> ".repeat(24));
        // A quote opened before the cut and closed far after it still makes `<v>`.
        let quoted = format!(
            "{} 'x{}' tail 3f2504e0-4f89-11d3-9a0c-0305e82c3301",
            "a".repeat(100),
            "b".repeat(500)
        );
        assert_eq!(
            signature_v1(&quoted),
            format!("{} <v> tail <id>", "a".repeat(100))
        );
    }

    #[test]
    fn key_bytes_keep_a_lone_surrogate_apart_from_the_text_that_spells_it() {
        let mut signer = Signer::new(SignatureVersion::V1);
        let (mut lone, mut spelled) = (Vec::new(), Vec::new());
        // "x" + U+DABC as a JSON reader decodes it (WTF-8), and the six characters `\udabc`.
        signer.sign_wtf8_bytes_into(b"x\xed\xaa\xbc", &mut lone);
        signer.sign_wtf8_bytes_into(b"x\\udabc", &mut spelled);
        assert_eq!(lone, b"x\xed\xaa\xbc");
        assert_ne!(lone, spelled);
        // Both print the same (JSON.stringify writes the lone one escaped too).
        assert_eq!(signer.sign_wtf8(b"x\xed\xaa\xbc"), "x\\udabc");
        assert_eq!(signer.sign_wtf8(b"x\\udabc"), "x\\udabc");
        // A cut inside a pair keeps the high surrogate as WTF-8, equal to the same lone one.
        let cut = format!("{}🚀tail", "a".repeat(119));
        let mut bytes = Vec::new();
        signer.sign_wtf8_bytes_into(cut.as_bytes(), &mut bytes);
        let mut want = "a".repeat(119).into_bytes();
        want.extend_from_slice(b"\xed\xa0\xbd");
        assert_eq!(bytes, want);
        let mut lone_high = Vec::new();
        signer.sign_wtf8_bytes_into(&want, &mut lone_high);
        assert_eq!(lone_high, want);
    }

    #[test]
    fn seed_examples_fall_in_one_group() {
        assert_eq!(signature_v1("timeout after 30012ms"), "timeout after <n>ms");
        assert_eq!(
            signature_v1("timeout after 30044ms"),
            signature_v1("timeout after 30012ms")
        );
    }

    #[test]
    fn uuids_in_any_case_then_digits_then_quotes() {
        assert_eq!(
            signature_v1("order 3F2504E0-4F89-11D3-9A0C-0305E82C3301 missing"),
            "order <id> missing"
        );
        assert_eq!(
            signature_v1("id 3f2504e0-4F89-11d3-9a0C-0305e82c3301x"),
            "id <id>x"
        );
        // A UUID with one hex digit short is digits and words.
        assert_eq!(
            signature_v1("3f2504e0-4f89-11d3-9a0c-0305e82c330"),
            "<n>f<n>e<n>-<n>f<n>-<n>d<n>-<n>a<n>c-<n>e<n>c<n>"
        );
        // Digits inside words, then quotes (after digits: the digits in quotes go with them).
        assert_eq!(signature_v1("v2beta10 'ab1' \"x\""), "v<n>beta<n> <v> <v>");
        // A UUID glued to more hex: the leftmost 36 match.
        assert_eq!(
            signature_v1("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaab"),
            "<id>b"
        );
    }

    #[test]
    fn quotes_follow_js_alternation() {
        assert_eq!(signature_v1(r#"a 'b "c' d" e"#), r#"a <v> d" e"#);
        assert_eq!(signature_v1(r#"a "b 'c" d' e"#), r#"a <v> d' e"#);
        assert_eq!(signature_v1("it's 'x'"), "it<v>x'");
        assert_eq!(
            signature_v1(r#"unclosed ' then "q""#),
            r#"unclosed ' then <v>"#
        );
        assert_eq!(signature_v1(r#"escaped \"x\" y"#), r#"escaped \<v> y"#);
        assert_eq!(signature_v1("''\"\""), "<v><v>");
        assert_eq!(signature_v1("'multi\nline'"), "<v>");
    }

    #[test]
    fn cut_counts_utf16_units() {
        let s = "é".repeat(200);
        assert_eq!(signature_v1(&s).chars().count(), 120);
        let s = "🚀".repeat(100);
        assert_eq!(signature_v1(&s), "🚀".repeat(60));
        // Unit 120 inside a pair: the high surrogate stays, spelled out.
        let s = format!("{}🚀tail", "a".repeat(119));
        assert_eq!(signature_v1(&s), format!("{}\\ud83d", "a".repeat(119)));
        // Different high surrogates stay different groups, same ones merge, as in JS.
        let t = format!("{}🤖tail", "a".repeat(119));
        assert_ne!(signature_v1(&s), signature_v1(&t));
        let u = format!("{}😀tail", "a".repeat(119));
        assert_eq!(signature_v1(&s), signature_v1(&u));
        // Replacements can grow the text past the cut.
        assert_eq!(signature_v1(&"1 ".repeat(100)), "<n> ".repeat(30));
    }

    #[test]
    fn lone_surrogates_from_wtf8_are_spelled_out() {
        // "x\ud83d" as serde_json decodes it into bytes: ED A0 BD.
        let mut signer = Signer::new(SignatureVersion::V1);
        assert_eq!(signer.sign_wtf8(b"x\xed\xa0\xbd 12"), "x\\ud83d <n>");
    }

    #[test]
    fn version_parses() {
        assert_eq!(SignatureVersion::parse("v1"), Ok(SignatureVersion::V1));
        assert!(SignatureVersion::parse("v9").is_err());
    }
}

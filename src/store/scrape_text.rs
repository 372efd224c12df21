//! A reader of the scrapes' text as the database joins it (`[[at, [[bits, series, metric,
//! labels], ...]], ...]`, see [`super::scrapes`]): the tokens of that one shape, with the strings
//! borrowed as they are written (quotes and escapes included), whitespace allowed between tokens.
//!
//! It exists for the speed of a daemon's first round, which reads every stored history: it
//! walks the text once, allocates nothing, and lets its caller skip a sample's three strings by
//! comparing bytes with the ones a previous scrape wrote at the same position
//! ([`Reader::skip`]).
//!
//! # Guarantees
//! - A string is answered only when it is a JSON string token as far as its bounds go (opening
//!   and closing quote, no unescaped quote or control character between); its escapes are left
//!   to the caller's decoding.
//! - An integer is answered only when it is an optional `-` and digits that fit an `i64`, not
//!   followed by a fraction or an exponent.

/// Where a text stopped being the shape it should be, as a sentence.
pub(super) type Bad = String;

/// A cursor over the text.
pub(super) struct Reader<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(text: &'a str) -> Self {
        Reader { text, pos: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes().get(self.pos) {
            self.pos += 1;
        }
    }

    fn bad(&self, expected: &str) -> Bad {
        match self.bytes().get(self.pos) {
            Some(&b) => format!(
                "expected {expected} at byte {}, found {:?}",
                self.pos,
                char::from(b)
            ),
            None => format!("expected {expected} at byte {}, found the end", self.pos),
        }
    }

    /// Take `byte` (after any whitespace).
    ///
    /// # Errors
    /// When the next token is not `byte`.
    pub fn expect(&mut self, byte: u8) -> Result<(), Bad> {
        if self.eat(byte) {
            Ok(())
        } else {
            Err(self.bad(&format!("{:?}", char::from(byte))))
        }
    }

    /// Take `byte` (after any whitespace) if it comes next.
    pub fn eat(&mut self, byte: u8) -> bool {
        self.ws();
        if self.bytes().get(self.pos) == Some(&byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Take `written` if the text goes on with exactly those bytes (after any whitespace).
    pub fn skip(&mut self, written: &str) -> bool {
        self.ws();
        let rest = &self.bytes()[self.pos..];
        if rest.starts_with(written.as_bytes()) {
            self.pos += written.len();
            true
        } else {
            false
        }
    }

    /// Where the next token starts (after any whitespace), for [`Reader::since`].
    pub fn mark(&mut self) -> usize {
        self.ws();
        self.pos
    }

    /// The text from `mark` to here.
    pub fn since(&self, mark: usize) -> &'a str {
        self.text.get(mark..self.pos).unwrap_or_default()
    }

    /// Take an integer.
    ///
    /// # Errors
    /// When the next token is not an integer that fits an `i64`.
    pub fn int(&mut self) -> Result<i64, Bad> {
        self.ws();
        let start = self.pos;
        let negative = self.bytes().get(self.pos) == Some(&b'-');
        if negative {
            self.pos += 1;
        }
        let mut value: i64 = 0;
        let mut digits = 0;
        while let Some(&b) = self.bytes().get(self.pos) {
            if !b.is_ascii_digit() {
                break;
            }
            let d = i64::from(b - b'0');
            value = value
                .checked_mul(10)
                .and_then(|v| {
                    if negative {
                        v.checked_sub(d)
                    } else {
                        v.checked_add(d)
                    }
                })
                .ok_or_else(|| {
                    self.pos = start;
                    self.bad("an integer that fits 64 bits")
                })?;
            digits += 1;
            self.pos += 1;
        }
        if digits == 0 || matches!(self.bytes().get(self.pos), Some(b'.' | b'e' | b'E')) {
            self.pos = start;
            return Err(self.bad("an integer"));
        }
        Ok(value)
    }

    /// Take a string token, answered as written, quotes included.
    ///
    /// # Errors
    /// When the next token is not a string, or the text ends inside it.
    pub fn string(&mut self) -> Result<&'a str, Bad> {
        self.ws();
        let start = self.pos;
        if self.bytes().get(self.pos) != Some(&b'"') {
            return Err(self.bad("a string"));
        }
        let mut i = self.pos + 1;
        loop {
            match self.bytes().get(i) {
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(self.since(start));
                }
                Some(b'\\') => i += 2,
                Some(&b) if b < 0x20 => {
                    self.pos = i;
                    return Err(self.bad("no control character in a string"));
                }
                Some(_) => i += 1,
                None => {
                    self.pos = self.bytes().len();
                    return Err(self.bad("the end of a string"));
                }
            }
        }
    }

    /// Check that only whitespace is left.
    ///
    /// # Errors
    /// When something else is.
    pub fn end(&mut self) -> Result<(), Bad> {
        self.ws();
        if self.pos == self.bytes().len() {
            Ok(())
        } else {
            Err(self.bad("the end"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_fit_64_bits_and_are_not_fractions() {
        for (text, expected) in [
            ("0", Some(0)),
            (" -12 ", Some(-12)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("1.5", None),
            ("1e3", None),
            ("-", None),
            ("\"1\"", None),
            ("", None),
        ] {
            assert_eq!(Reader::new(text).int().ok(), expected, "{text:?}");
        }
    }

    #[test]
    fn strings_are_answered_as_written_up_to_their_closing_quote() {
        let mut r = Reader::new(r#" "a\"b\\" , "c""#);
        assert_eq!(r.string().unwrap(), r#""a\"b\\""#);
        r.expect(b',').unwrap();
        assert_eq!(r.string().unwrap(), r#""c""#);
        r.end().unwrap();
        for bad in ["\"open", "\"\\\"", "x", "\"a\nb\"", ""] {
            assert!(Reader::new(bad).string().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn written_bytes_are_skipped_only_when_they_come_next() {
        let mut r = Reader::new(r#"[1, "s","m"]"#);
        r.expect(b'[').unwrap();
        assert_eq!(r.int().unwrap(), 1);
        r.expect(b',').unwrap();
        assert!(!r.skip(r#""s","n""#));
        let mark = r.mark();
        assert!(r.skip(r#""s","m""#));
        assert_eq!(r.since(mark), r#""s","m""#);
        r.expect(b']').unwrap();
        r.end().unwrap();
        let err = Reader::new("[1] x").end().unwrap_err();
        assert!(err.contains("byte 0"), "{err}");
    }
}

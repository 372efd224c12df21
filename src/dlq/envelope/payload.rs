//! The `payload` field: the body byte for byte ([`Payload`]), its `{"base64": ...}` form, and how
//! it is read (one visitor for every reader: [`PayloadProbe`] borrows a string,
//! [`PayloadLean`] does not even copy an escaped one).

use std::borrow::Cow;
use std::fmt;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use super::error::EnvelopeError;

/// The standard alphabet; encoding pads. Decoding is given text whose padding was already
/// checked and taken off, and ignores the bits past the last whole byte.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_encode_padding(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// Standard base64 with padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
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
    BASE64.decode(trimmed).map_err(|e| {
        // With the padding and the length checked, only a character can be wrong: name the first.
        let first_bad = trimmed
            .bytes()
            .enumerate()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == b'+' || c == b'/'));
        EnvelopeError::Base64(match first_bad {
            Some((i, c)) => format!(
                "character {:?} at {i} is not in the standard alphabet",
                char::from(c)
            ),
            None => e.to_string(),
        })
    })
}

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
/// of each group is kept (see [`EnvelopeRef::parse_lean`](super::EnvelopeRef::parse_lean)).
#[derive(Debug)]
pub enum PayloadLean<'a> {
    /// A string without escapes, as it is in the line.
    Borrowed(&'a str),
    /// A string with escapes (valid; read the line again with
    /// [`EnvelopeRef::parse`](super::EnvelopeRef::parse) to get it).
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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The hand-written base64 the crate replaced, kept as the oracle of
    /// `base64_crate_gives_the_hand_written_results_and_errors`.
    mod hand_written {
        use super::super::EnvelopeError;

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
    }

    #[test]
    fn base64_crate_gives_the_hand_written_results_and_errors() {
        let edge_cases = [
            "",
            "=",
            "==",
            "===",
            "====",
            "Z",
            "Z=",
            "Z==",
            "Z===",
            "Zg",
            "Zg=",
            "Zg==",
            "Zg===",
            "Zm8",
            "Zm8=",
            "Zm8==",
            "Zm9v",
            "Zm9v=",
            "Zm9v==",
            "Zm9v===",
            "Zm9vYg",
            "Zm9vYg=",
            "Zm9vYg==",
            "Zh",
            "Zh==",
            "Zm9",
            "Zm9=",
            "////",
            "++++",
            "Zm 9v",
            " Zm9v",
            "Zm9v ",
            "Zm9v\n",
            "Zg==Zg==",
            "=Zg",
            "Z=g=",
            "Zg=A",
            "-_-_",
            "Zm9v@",
            "@",
            "@@",
            "é",
            "Zé==",
            "Zm9vYmFy",
            "Zm9vYmF",
            "Zm9vYmFyZ",
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA@AAA",
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        ];
        for text in edge_cases {
            assert_eq!(
                base64_decode(text),
                hand_written::base64_decode(text),
                "{text:?}"
            );
        }
        // Every text of up to five characters over a mix of the alphabet, padding and strangers.
        let chars = ['A', 'Z', 'g', 'h', '8', '+', '/', '=', '@', '-', ' '];
        let mut level = vec![String::new()];
        let mut texts = level.clone();
        for _ in 0..5 {
            level = level
                .iter()
                .flat_map(|t| chars.iter().map(move |c| format!("{t}{c}")))
                .collect();
            texts.extend(level.iter().cloned());
        }
        assert_eq!(texts.len(), 1 + 11 + 121 + 1331 + 14_641 + 161_051);
        for text in &texts {
            assert_eq!(
                base64_decode(text),
                hand_written::base64_decode(text),
                "{text:?}"
            );
        }
        // Encoding: every body of up to two bytes, then longer ones.
        let mut bodies: Vec<Vec<u8>> = vec![vec![]];
        bodies.extend((0..=255_u8).map(|a| vec![a]));
        bodies.extend((0..=255_u8).flat_map(|a| (0..=255_u8).map(move |b| vec![a, b])));
        bodies.extend((3..70_usize).map(|n| (0..n).map(|i| (i * 37 + n) as u8).collect()));
        for body in &bodies {
            let text = base64_encode(body);
            assert_eq!(text, hand_written::base64_encode(body), "{body:?}");
            assert_eq!(base64_decode(&text).as_deref(), Ok(body.as_slice()));
        }
    }
}

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
            .char_indices()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '+' || c == '/'));
        EnvelopeError::Base64(match first_bad {
            Some((i, c)) => format!("character {c:?} at {i} is not in the standard alphabet"),
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

    #[test]
    fn base64_decodes_and_refuses_the_edge_cases_as_pinned() {
        // Padding optional but at most two `=` and only to a multiple of four; a length no
        // encoding has; trailing bits allowed; the first character outside the alphabet named.
        let cases: &[(&str, Result<&[u8], &str>)] = &[
            ("", Ok(&[])),
            ("=", Err("bad padding")),
            ("==", Err("bad padding")),
            ("===", Err("bad padding")),
            ("====", Err("bad padding")),
            ("Z", Err("1 characters is no base64 length")),
            ("Z=", Err("bad padding")),
            ("Z==", Err("bad padding")),
            ("Z===", Err("bad padding")),
            ("Zg", Ok(&[102])),
            ("Zg=", Err("bad padding")),
            ("Zg==", Ok(&[102])),
            ("Zg===", Err("bad padding")),
            ("Zm8", Ok(&[102, 111])),
            ("Zm8=", Ok(&[102, 111])),
            ("Zm8==", Err("bad padding")),
            ("Zm9v", Ok(&[102, 111, 111])),
            ("Zm9v=", Err("bad padding")),
            ("Zm9v==", Err("bad padding")),
            ("Zm9v===", Err("bad padding")),
            ("Zm9vYg", Ok(&[102, 111, 111, 98])),
            ("Zm9vYg=", Err("bad padding")),
            ("Zm9vYg==", Ok(&[102, 111, 111, 98])),
            ("Zh", Ok(&[102])),
            ("Zh==", Ok(&[102])),
            ("Zm9", Ok(&[102, 111])),
            ("Zm9=", Ok(&[102, 111])),
            ("////", Ok(&[255, 255, 255])),
            ("++++", Ok(&[251, 239, 190])),
            ("Zm 9v", Err("5 characters is no base64 length")),
            (" Zm9v", Err("5 characters is no base64 length")),
            ("Zm9v ", Err("5 characters is no base64 length")),
            ("Zm9v\n", Err("5 characters is no base64 length")),
            (
                "Zg==Zg==",
                Err("character '=' at 2 is not in the standard alphabet"),
            ),
            (
                "=Zg",
                Err("character '=' at 0 is not in the standard alphabet"),
            ),
            (
                "Z=g=",
                Err("character '=' at 1 is not in the standard alphabet"),
            ),
            (
                "Zg=A",
                Err("character '=' at 2 is not in the standard alphabet"),
            ),
            (
                "-_-_",
                Err("character '-' at 0 is not in the standard alphabet"),
            ),
            ("Zm9v@", Err("5 characters is no base64 length")),
            ("@", Err("1 characters is no base64 length")),
            (
                "@@",
                Err("character '@' at 0 is not in the standard alphabet"),
            ),
            // The character as written, not its first byte (which read "'Ã'").
            (
                "é",
                Err("character 'é' at 0 is not in the standard alphabet"),
            ),
            (
                "AAé",
                Err("character 'é' at 2 is not in the standard alphabet"),
            ),
            ("Zé==", Err("bad padding")),
            ("Zm9vYmFy", Ok(&[102, 111, 111, 98, 97, 114])),
            ("Zm9vYmF", Ok(&[102, 111, 111, 98, 97])),
            ("Zm9vYmFyZ", Err("9 characters is no base64 length")),
            (
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA@AAA",
                Err("character '@' at 43 is not in the standard alphabet"),
            ),
            (
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
                Err("bad padding"),
            ),
        ];
        for &(text, want) in cases {
            let got = base64_decode(text);
            match want {
                Ok(bytes) => assert_eq!(got.as_deref(), Ok(bytes), "{text:?}"),
                Err(message) => {
                    assert_eq!(got, Err(EnvelopeError::Base64(message.into())), "{text:?}")
                }
            }
        }
    }

    #[test]
    fn base64_round_trips_every_short_body() {
        let mut bodies: Vec<Vec<u8>> = vec![vec![]];
        bodies.extend((0..=255_u8).map(|a| vec![a]));
        bodies.extend((0..=255_u8).flat_map(|a| (0..=255_u8).map(move |b| vec![a, b])));
        bodies.extend((3..70_usize).map(|n| (0..n).map(|i| (i * 37 + n) as u8).collect()));
        for body in &bodies {
            let text = base64_encode(body);
            assert_eq!(text.len(), body.len().div_ceil(3) * 4, "{body:?}");
            assert_eq!(base64_decode(&text).as_deref(), Ok(body.as_slice()));
            // Unpadded too.
            assert_eq!(
                base64_decode(text.trim_end_matches('=')).as_deref(),
                Ok(body.as_slice())
            );
        }
    }
}

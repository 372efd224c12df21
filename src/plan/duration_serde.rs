//! Durations as people write them: serialized as `"20m"`, `"1h 30m"`, `"90d"`, `"30d 1h 10m"`.
//!
//! Used by the model (`#[serde(with = "crate::plan::duration_serde")]`, and `::option` for
//! `Option<Duration>`); only serialization is needed since the model is built by `compile`, never
//! deserialized. The text uses the units `d`, `h`, `m`, `s`, `ms`, `us`, `ns` and always parses
//! back to the same value with `humantime::parse_duration`. (`humantime::format_duration` is not
//! used: it writes months of 30.44 days, so a 90-day dedup window reads "2months 29days 2h 52m 48s".)

use std::time::Duration;

use serde::Serializer;

/// `Duration` → `"30d 1h 10m"`; zero is `"0s"` (the one writer of durations: [`crate::time`]'s).
pub use crate::time::format_duration as format;

/// Serializes a `Duration` as its human text (see [`format`]).
///
/// # Errors
/// Only those of the serializer.
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*d))
}

/// The same for `Option<Duration>` (`None` → null).
pub mod option {
    use std::time::Duration;

    use serde::Serializer;

    /// Serializes `Some(d)` as its human text, `None` as null.
    ///
    /// # Errors
    /// Only those of the serializer.
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&super::format(*d)),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_people_write() {
        let cases: &[(u64, u32, &str)] = &[
            (0, 0, "0s"),
            (90, 0, "1m 30s"),
            (1200, 0, "20m"),
            (5400, 0, "1h 30m"),
            (7 * 86_400, 0, "7d"),
            (90 * 86_400, 0, "90d"),
            (30 * 86_400 + 4_200, 0, "30d 1h 10m"),
            (1, 500_000_000, "1s 500ms"),
            (0, 1_002_003, "1ms 2us 3ns"),
        ];
        for &(secs, nanos, want) in cases {
            let d = Duration::new(secs, nanos);
            assert_eq!(format(d), want);
            assert_eq!(humantime::parse_duration(want).ok(), Some(d), "{want}");
        }
    }

    #[test]
    fn serializes_plain_and_optional() {
        #[derive(serde::Serialize)]
        struct T {
            #[serde(with = "crate::plan::duration_serde")]
            a: Duration,
            #[serde(with = "crate::plan::duration_serde::option")]
            b: Option<Duration>,
            #[serde(with = "crate::plan::duration_serde::option")]
            c: Option<Duration>,
        }
        let t = T {
            a: Duration::from_secs(1200),
            b: Some(Duration::from_secs(3600)),
            c: None,
        };
        assert_eq!(
            serde_json::to_string(&t).ok().as_deref(),
            Some(r#"{"a":"20m","b":"1h","c":null}"#)
        );
    }
}

//! Instants as text the way JS handles them: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` read as
//! JS `Date.parse` reads it, written as JS `Date#toISOString()` writes it (the dead-letter
//! envelope's `firstAttemptAt` and `deadLetteredAt`). The calendar arithmetic is the proleptic
//! Gregorian one, without dependencies. Instants are ms since the epoch, as
//! [`Millis`](super::Millis).

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

#[cfg(test)]
mod tests {
    use super::*;

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
}

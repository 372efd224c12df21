//! Text as a JS writer counts and escapes it: cuts in UTF-16 code units, lone surrogates (WTF-8)
//! kept as their JSON escape.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_utf16_units_and_never_splits_a_pair() {
        let s = format!("{}🚀", "a".repeat(499));
        assert_eq!(truncate_utf16(&s, 500), "a".repeat(499));
        let s = format!("{}🚀", "a".repeat(498));
        assert_eq!(truncate_utf16(&s, 500), s);
        let s = "é".repeat(600);
        assert_eq!(truncate_utf16(&s, 500).chars().count(), 500);
    }
}

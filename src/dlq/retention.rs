//! Retention (`migrate dlq purge`): an export's lines copied through but for the dead letters
//! older than a cut. Lines that are not envelopes are kept as they are (they may hold personal
//! data too: the command says so), over-long ones copied through in chunks without being held.

use std::io::{BufRead, Write};

use super::envelope::EnvelopeRef;
use super::lines::{Content, LineReader};

/// Over-long lines a purge names before it only counts them.
const SHOWN_LINES: usize = 5;

/// What [`keep_recent`] did with the lines of an export.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PurgeTally {
    /// Envelopes kept.
    pub kept: u64,
    /// Envelopes dropped.
    pub dropped: u64,
    /// Lines that are not envelopes (over-long ones included), kept as they are.
    pub unreadable: u64,
    /// The first over-long lines: number and length.
    pub too_long: Vec<(u64, u64)>,
}

/// Copies the lines of an export to `out`, but for the envelopes dead-lettered before `cut`.
/// A line that is not an envelope is kept as it is; one over the line cap too, copied through in
/// chunks without being held.
pub fn keep_recent<R: BufRead>(
    mut reader: LineReader<R>,
    out: &mut impl Write,
    cut: i64,
) -> std::io::Result<PurgeTally> {
    let mut t = PurgeTally::default();
    loop {
        let Some(line) = reader.next_line_forwarding_overflow(|chunk| out.write_all(chunk))? else {
            return Ok(t);
        };
        match line.content {
            Content::TooLong { bytes } => {
                t.unreadable += 1;
                if t.too_long.len() < SHOWN_LINES {
                    t.too_long.push((line.number, bytes));
                }
            }
            Content::Text(body) => match EnvelopeRef::parse(body) {
                Ok(v) if v.dead_lettered_ms() < cut => {
                    t.dropped += 1;
                    continue;
                }
                Ok(_) => {
                    t.kept += 1;
                    out.write_all(body)?;
                }
                Err(_) => {
                    t.unreadable += 1;
                    out.write_all(body)?;
                }
            },
        }
        if line.newline {
            out.write_all(b"\n")?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{format_timestamp, parse_timestamp};

    fn envelope(dead_lettered_at: &str) -> String {
        format!(
            r#"{{"payload":"p","errorClass":"c","errorMessage":"m","consumerVersion":"1","attempts":1,"firstAttemptAt":"{dead_lettered_at}","deadLetteredAt":"{dead_lettered_at}"}}"#
        )
    }

    #[test]
    fn drops_the_old_envelopes_and_keeps_everything_else_byte_for_byte() {
        let old = envelope("2026-03-01T10:00:00.000Z");
        let new = envelope("2026-03-03T10:00:00.000Z");
        let long = format!("{{\"x\":\"{}\"}}", "y".repeat(500));
        let export = format!("{old}\n{new}\nnot json\n{long}\n{old}\n{new}");
        let cut = parse_timestamp("2026-03-02T00:00:00.000Z").expect("instant");
        let mut out = Vec::new();
        let tally =
            keep_recent(LineReader::new(export.as_bytes(), 300), &mut out, cut).expect("in memory");
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            format!("{new}\nnot json\n{long}\n{new}"),
            "the last line keeps its missing line end"
        );
        assert_eq!(
            tally,
            PurgeTally {
                kept: 2,
                dropped: 2,
                unreadable: 2,
                too_long: vec![(4, 508)],
            }
        );
        assert_eq!(format_timestamp(cut), "2026-03-02T00:00:00.000Z");
    }
}

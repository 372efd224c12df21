//! Text that fits the terminal: the width to fit (`$COLUMNS`, else the terminal's, else 80),
//! words wrapped to it, and a gate's value rounded to what its threshold needs.

use std::io::IsTerminal;

pub use crate::plan::round_value;

/// The narrowest width wrapped to: below it a line is cut wherever it must.
pub const MIN_WIDTH: usize = 20;
/// The width when standard output is not a terminal and `$COLUMNS` is not set.
pub const DEFAULT_WIDTH: usize = 80;

/// The width output should fit: `$COLUMNS` when it is a positive number, else the terminal's
/// when standard output is one, else [`DEFAULT_WIDTH`]. Never below [`MIN_WIDTH`].
pub fn width() -> usize {
    let columns = std::env::var("COLUMNS").ok();
    let terminal = || {
        std::io::stdout()
            .is_terminal()
            .then(crossterm::terminal::size)
            .and_then(Result::ok)
            .map(|(w, _)| usize::from(w))
    };
    width_of(columns.as_deref(), terminal)
}

/// [`width`] from its inputs: `$COLUMNS` and the terminal's width, when asked.
pub fn width_of(columns: Option<&str>, terminal: impl FnOnce() -> Option<usize>) -> usize {
    columns
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&w| w > 0)
        .or_else(terminal)
        .filter(|&w| w > 0)
        .unwrap_or(DEFAULT_WIDTH)
        .max(MIN_WIDTH)
}

/// `text` cut into lines of at most `width` characters: at spaces where it can, inside a word
/// longer than a line where it must. The first line starts with `first`, the next ones with
/// `indent` (both counted in the width); a prefix as wide as the width goes on a line of its
/// own.
pub fn wrap(text: &str, width: usize, first: &str, indent: &str) -> Vec<String> {
    let mut lines = Vec::new();
    // A prefix that leaves no room: on a line of its own (cut to the width); so is the text.
    let indent = if indent.chars().count() < width {
        indent
    } else {
        ""
    };
    let first = if first.chars().count() < width {
        first
    } else {
        lines.push(truncate(first.trim_end(), width));
        indent
    };
    let mut line = first.to_string();
    let mut prefix_len = first.chars().count();
    let mut len = prefix_len;
    let room = |prefix_len: usize| width.saturating_sub(prefix_len).max(1);
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let gap = usize::from(len > prefix_len);
            if len + gap + word.len() <= prefix_len + room(prefix_len) {
                if gap == 1 {
                    line.push(' ');
                }
                line.extend(word.iter());
                len += gap + word.len();
                break;
            }
            if len > prefix_len {
                // The word goes to the next line.
                lines.push(std::mem::take(&mut line));
            } else {
                // Longer than a whole line: cut it.
                let cut = room(prefix_len);
                line.extend(word.drain(..cut));
                lines.push(std::mem::take(&mut line));
            }
            line = indent.to_string();
            prefix_len = indent.chars().count();
            len = prefix_len;
            if word.is_empty() {
                break;
            }
        }
    }
    if len > prefix_len || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// `text` cut to at most `width` characters, `…` marking the cut.
pub fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    if width > 0 {
        cut.push('…');
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{CmpOp, Threshold};

    #[test]
    fn columns_wins_then_the_terminal_then_80() {
        assert_eq!(width_of(Some("120"), || Some(90)), 120);
        assert_eq!(width_of(Some("nope"), || Some(90)), 90);
        assert_eq!(width_of(Some("0"), || None), 80);
        assert_eq!(width_of(None, || None), 80);
        assert_eq!(width_of(Some("3"), || None), MIN_WIDTH);
    }

    #[test]
    fn wrapped_lines_never_exceed_the_width() {
        let text = "a reason with words and onewordthatislongerthanawholelineofthisnarrowwidth end";
        for width in [20, 25, 33, 80] {
            let lines = wrap(text, width, "  exit FAIL gate  ", "      ");
            for l in &lines {
                assert!(l.chars().count() <= width, "{width}: {l:?} in {lines:?}");
            }
            let words: String = lines
                .iter()
                .map(|l| l.trim())
                .collect::<Vec<_>>()
                .join(" ")
                .replace(' ', "");
            let want = format!("exitFAILgate{}", text.replace(' ', ""));
            assert_eq!(words, want, "no character lost at {width}");
        }
        assert_eq!(wrap("", 80, "  x", "  "), vec!["  x".to_string()]);
        // A prefix as wide as the line: alone, then the text.
        assert_eq!(
            wrap("a b", 10, "0123456789ab", "  "),
            vec!["012345678…".to_string(), "  a b".to_string()]
        );
    }

    #[test]
    fn a_value_is_rounded_to_what_its_threshold_needs() {
        let lt = |v| {
            Some(Threshold {
                op: CmpOp::Lt,
                value: v,
            })
        };
        assert_eq!(round_value(0.001_234_567_891, lt(0.01)), "0.001");
        assert_eq!(round_value(0.012_345_678, lt(0.01)), "0.012");
        // Rounded onto the threshold it would read as passing or on it: more decimals.
        assert_eq!(round_value(0.010_000_4, lt(0.01)), "0.0100004");
        assert_eq!(round_value(0.009_999_7, lt(0.01)), "0.0099997");
        assert_eq!(
            round_value(
                1.0,
                Some(Threshold {
                    op: CmpOp::Ge,
                    value: 1.0
                })
            ),
            "1.0"
        );
        assert_eq!(round_value(1_234.567_89, lt(1000.0)), "1234.6");
        assert_eq!(round_value(0.333_333_333_3, None), "0.3333");
        assert_eq!(round_value(12_345.678, None), "12346");
        assert_eq!(round_value(42.0, None), "42");
    }
}

//! Free text (a `reason`, a source's error, a plan's names) on one line: what logs and webhook
//! texts show, so that nobody forges a log line or a chat message with a newline. The text is
//! stored as given; only what is printed line by line is escaped.

use std::borrow::Cow;

/// `text` with `\n`, `\r`, `\t`, every other control character, invisible line break (U+2028,
/// U+2029) and bidirectional override written as escapes (`\n`, `\r`, `\t`, `\u{1b}`);
/// unchanged (borrowed) when it has none. The one rule's [`crate::outgoing::sanitize`], one line.
pub fn escape(text: &str) -> Cow<'_, str> {
    crate::outgoing::sanitize(text, crate::outgoing::Shape::Line)
}

/// A log line's text (a whole formatted event, ending with its newline) with every line break
/// and control character inside it escaped, the final newline kept, and the formatter's colour
/// sequences kept ([`crate::outgoing::sanitize_keeping_colours`]: a reason's own ESC sequences
/// that set the title, move the cursor or hide text are escaped). What the CLI's log writer
/// passes on.
pub fn log_line(line: &str) -> Cow<'_, str> {
    let (body, end) = match line.strip_suffix('\n') {
        Some(body) => (body, "\n"),
        None => (line, ""),
    };
    match crate::outgoing::sanitize_keeping_colours(body) {
        Cow::Borrowed(_) => Cow::Borrowed(line),
        Cow::Owned(mut s) => {
            s.push_str(end);
            Cow::Owned(s)
        }
    }
}

/// A log writer that passes each event on one line ([`log_line`]): the CLI's `tracing` output.
/// The formatter writes an event whole (one `write_all`); bytes that are not UTF-8 pass as they
/// are.
#[derive(Debug)]
pub struct LogWriter<W>(pub W);

impl<W: std::io::Write> std::io::Write for LogWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match std::str::from_utf8(buf) {
            Ok(text) => self.0.write_all(log_line(text).as_bytes())?,
            Err(_) => self.0.write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_breaks_and_control_characters_are_escaped_and_plain_text_borrowed() {
        assert!(matches!(escape("plain text: ünïcode"), Cow::Borrowed(_)));
        assert_eq!(
            escape("deploy\nINFO forged line\r\tx\u{7}\u{2028}"),
            "deploy\\nINFO forged line\\r\\tx\\u{7}\\u{2028}"
        );
        assert_eq!(escape("esc \u{1b}[31m"), "esc \\u{1b}[31m");
    }

    /// Regression: a `reason` with a newline wrote a second, forged line into the daemon's log.
    #[test]
    fn a_forged_line_in_a_logged_reason_stays_on_its_line() {
        use std::io::Write as _;
        let mut w = LogWriter(Vec::new());
        w.write_all(b"INFO local: pause by api: done\nERROR lost everything\n")
            .unwrap();
        let out = String::from_utf8(w.0).unwrap();
        assert_eq!(out.lines().count(), 1, "{out}");
        assert_eq!(
            out,
            "INFO local: pause by api: done\\nERROR lost everything\n"
        );
    }

    /// Regression (issue 43): a reason's ESC sequences (set the title, erase the line, hide
    /// text) reached the terminal through the log: only the formatter's colours pass.
    #[test]
    fn a_reason_s_escape_sequences_are_escaped_in_the_log() {
        let line =
            "\u{1b}[32m INFO\u{1b}[0m pause: x\u{1b}]0;ok\u{7}\u{1b}[2K\rINFO resume approved\n";
        let out = log_line(line);
        assert_eq!(
            out,
            "\u{1b}[32m INFO\u{1b}[0m pause: x\\u{1b}]0;ok\\u{7}\\u{1b}[2K\\rINFO resume approved\n"
        );
    }

    #[test]
    fn a_log_line_keeps_its_final_newline_and_the_formatter_s_colours() {
        assert!(matches!(log_line("one line\n"), Cow::Borrowed(_)));
        assert_eq!(
            log_line("\u{1b}[32m INFO\u{1b}[0m a\nb\n"),
            "\u{1b}[32m INFO\u{1b}[0m a\\nb\n"
        );
        assert_eq!(log_line("a\r\nb"), "a\\r\\nb");
    }
}

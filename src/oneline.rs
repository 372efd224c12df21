//! Free text (a `reason`, a source's error, a plan's names) on one line: what logs and webhook
//! texts show, so that nobody forges a log line or a chat message with a newline. The text is
//! stored as given; only what is printed line by line is escaped.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with `\n`, `\r`, `\t`, `\\`-free control characters and other invisible line breaks
/// (U+0085, U+2028, U+2029) written as escapes (`\n`, `\r`, `\t`, `\u{1b}`); unchanged (borrowed)
/// when it has none.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

/// A log line's text (a whole formatted event, ending with its newline) with every line break
/// and control character inside it escaped, the final newline kept. What the CLI's log writer
/// passes on.
pub fn log_line(line: &str) -> Cow<'_, str> {
    let (body, end) = match line.strip_suffix('\n') {
        Some(body) => (body, "\n"),
        None => (line, ""),
    };
    // ANSI colours (ESC) are the formatter's own when it colours: keep them.
    let escaped = escape_keeping_ansi(body);
    match escaped {
        Cow::Borrowed(_) => Cow::Borrowed(line),
        Cow::Owned(mut s) => {
            s.push_str(end);
            Cow::Owned(s)
        }
    }
}

fn escape_keeping_ansi(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| needs_escape(c) && c != '\u{1b}') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for part in text.split('\u{1b}').enumerate() {
        let (i, part) = part;
        if i > 0 {
            out.push('\u{1b}');
        }
        out.push_str(&escape(part));
    }
    Cow::Owned(out)
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

//! The one rule for every text that leaves the process: stored, printed, logged, served or
//! posted. [`text`] applies it whole: [`Secrets::redact`] (the known secrets of this process in
//! every form they travel in, and every URL's credentials), then [`sanitize`] (no control
//! character survives), then [`cap`] (a bounded length, ending in `... (N bytes cut)`).
//!
//! The parts are public for the places that need one step only (a webhook's chat text adds
//! [`chat`]; a log writer keeps its formatter's colours, [`sanitize_keeping_colours`]).
//!
//! # Guarantees
//! - [`sanitize`]: no C0 or C1 control character, DEL, invisible line break (U+2028, U+2029)
//!   or bidirectional override (U+202A..U+202E, U+2066..U+2069) is left in the output; each is
//!   written as a visible escape (`\n`, `\r`, `\t`, `\u{1b}`). [`Shape::Block`] keeps `\n` and
//!   `\t` (the text is several lines by design); nothing else.
//! - [`cap`]: the output is never longer than the cap, in bytes, and is cut on a character
//!   boundary; a cut text ends with `... (N bytes cut)`.
//! - [`Secrets::redact`]: a known secret never survives in its raw form, percent-decoded form,
//!   `Authorization: Basic` form (base64 of `user:password`), or YAML/JSON-quoted forms.
//! - Pure: no IO, no clock.

use std::borrow::Cow;
use std::fmt::Write as _;

use base64::Engine as _;

/// The longest reason or error text kept in the store, in bytes (a gate's reason, a journal
/// entry's reason, a publish error). Longer ones are cut ([`cap`]).
pub const REASON_MAX: usize = 1024;

/// The longest text a source (an error page, a Prometheus error, a line it served) puts in a
/// gate's reason, in bytes: a gate is evaluated every round and its reason stored each time, so
/// a source answering megabytes of error adds at most this much a gate a round (with the
/// evaluation's other columns, under 5 MB an hour for two gates at a 1-s interval; the start
/// of an error says what went wrong).
pub const SOURCE_TEXT_MAX: usize = 256;

/// The longest free text printed or logged on one line, in bytes.
pub const LINE_MAX: usize = 4096;

/// What the text is, once out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One line (a log line, a table cell, a reason): line breaks are escaped too.
    Line,
    /// Several lines by design (a diff, a report): `\n` and `\t` stay.
    Block,
}

/// The secrets this process knows (a plan's credentials, a token), each in every form a
/// server may echo it in. Values shorter than 4 bytes are not masked (masking every `a` would
/// garble the text and hide nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    /// Longest first, so that a secret containing another is masked whole.
    values: Vec<String>,
}

impl Secrets {
    /// No secret known: [`Secrets::redact`] still masks every URL's credentials.
    pub fn none() -> Secrets {
        Secrets::default()
    }

    /// The secrets of these values (URLs or tokens, see [`forms`]).
    pub fn of<S: AsRef<str>>(values: impl IntoIterator<Item = S>) -> Secrets {
        let mut s = Secrets::none();
        for v in values {
            s.add(v.as_ref());
        }
        s
    }

    /// Know `value` (a URL or a token) too, in every [`forms`] of it.
    pub fn add(&mut self, value: &str) -> &mut Self {
        self.add_parts(forms(value));
        self
    }

    /// Know a webhook URL too: its credentials and its path beyond the host (Slack's
    /// `/services/T000/B000/XXXX`, Discord's `/api/webhooks/ID/TOKEN` are the secret): the
    /// path whole when it has 8 bytes or more, and each of its segments that looks like a
    /// token (16 bytes or more, or 8 or more with a digit), for a server that echoes it alone.
    /// A short path (`/hook`) is no secret, and masking it would garble every `webhook`.
    pub fn add_webhook(&mut self, url: &str) -> &mut Self {
        self.add(url);
        if let Some(path) = webhook_path(url) {
            let mut parts = Vec::new();
            if path.len() >= 8 {
                parts.extend(quoted_forms(path));
            }
            for segment in path.split('/').filter(|s| looks_like_token(s)) {
                parts.extend(quoted_forms(segment));
            }
            self.add_parts(parts);
        }
        self
    }

    /// Know `other`'s secrets too.
    pub fn extend(&mut self, other: &Secrets) -> &mut Self {
        self.add_parts(other.values.clone());
        self
    }

    fn add_parts(&mut self, parts: Vec<String>) {
        for p in parts {
            if p.len() >= 4 && !self.values.contains(&p) {
                self.values.push(p);
            }
        }
        self.values.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// Every value masked, longest first.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// `text` with every known secret masked wherever it appears, then every URL's
    /// credentials ([`crate::redact::text`]).
    pub fn redact(&self, text: &str) -> String {
        crate::redact::known(text, self.values.iter().map(String::as_str))
    }
}

/// The rule whole: `text` redacted ([`Secrets::redact`]), sanitized ([`sanitize`] as `shape`
/// says), capped at `max` bytes ([`cap`]).
pub fn text(text: &str, secrets: &Secrets, shape: Shape, max: usize) -> String {
    let redacted = secrets.redact(text);
    let clean = sanitize(&redacted, shape);
    cap(&clean, max).into_owned()
}

/// [`text`] for a reason or an error that is stored: one line, at most [`REASON_MAX`] bytes.
pub fn reason(why: &str, secrets: &Secrets) -> String {
    text(why, secrets, Shape::Line, REASON_MAX)
}

/// [`text`] for free text printed on one line of a terminal or a log (a reason in `status`,
/// `history`, a source's error in `plan backtest`): no known secret beyond URL credentials,
/// at most [`LINE_MAX`] bytes.
pub fn line(text: &str) -> String {
    self::text(text, &Secrets::none(), Shape::Line, LINE_MAX)
}

/// The parts of `value` that must never be shown, in every form they may come back in:
/// [`crate::redact::secret_parts`] (a URL's userinfo, password, query and its values,
/// fragment; a token whole), each also percent-decoded (`%40` is `@` once sent), YAML/JSON
/// quoted (`''`, `\"`); and for a URL with userinfo the `Authorization: Basic` value a client
/// builds from it (base64 of the decoded `user:password`, and of the raw one).
pub fn forms(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parts = crate::redact::secret_parts(value);
    for p in &parts {
        out.extend(quoted_forms(p));
        let decoded = percent_decode(p);
        if decoded != *p {
            out.extend(quoted_forms(&decoded));
        }
    }
    if let Some(userinfo) = userinfo(value) {
        let decoded = percent_decode(userinfo);
        for u in [userinfo, decoded.as_str()] {
            // Without padding: a prefix of the padded form, so it masks both.
            out.push(base64::engine::general_purpose::STANDARD_NO_PAD.encode(u));
        }
    }
    out.retain(|p| !p.is_empty());
    out.dedup();
    out
}

/// `value` and the forms YAML and JSON quoting give it.
fn quoted_forms(value: &str) -> Vec<String> {
    let mut out = vec![value.to_string()];
    if value.contains('\'') {
        out.push(value.replace('\'', "''"));
    }
    if value.contains(['"', '\\']) {
        out.push(value.replace('\\', "\\\\").replace('"', "\\\""));
    }
    out
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// The userinfo of a URL (between `scheme://` and the last `@` of its authority).
fn userinfo(url: &str) -> Option<&str> {
    let after = &url[url.find("://")? + 3..];
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let authority = &after[..end];
    authority.rfind('@').map(|at| &authority[..at])
}

/// A webhook URL's path beyond the host, without its leading `/`, query or fragment; `None`
/// when it has none.
fn webhook_path(url: &str) -> Option<&str> {
    webhook_path_range(url).map(|r| &url[r])
}

fn webhook_path_range(url: &str) -> Option<std::ops::Range<usize>> {
    let authority = url.find("://")? + 3;
    let start = authority + url[authority..].find('/')? + 1;
    let end = start + url[start..].find(['?', '#']).unwrap_or(url.len() - start);
    (end > start).then_some(start..end)
}

/// A webhook URL as it may be shown: [`crate::redact::url`], and its path beyond the host
/// masked (`https://hooks.slack.com/***`): the path of a chat webhook is its secret.
pub fn webhook_url(url: &str) -> String {
    let mut shown = crate::redact::url(url);
    if let Some(r) = webhook_path_range(&shown) {
        shown.replace_range(r, crate::redact::MASK);
    }
    shown
}

/// Whether a webhook URL's path looks like it holds a secret (Slack's `/services/...`,
/// Discord's `/api/webhooks/...`, or a path segment of 16 or more letters and digits), for
/// `plan check`'s warning about one written inline.
pub fn webhook_path_looks_secret(url: &str) -> bool {
    let Some(path) = webhook_path(url) else {
        return false;
    };
    path.starts_with("services/")
        || path.contains("webhooks/")
        || path.split('/').any(|seg| {
            seg.len() >= 16
                && seg.bytes().any(|b| b.is_ascii_digit())
                && seg.bytes().any(|b| b.is_ascii_alphabetic())
        })
}

/// Whether a path segment looks like a token: 16 bytes or more, or 8 or more with a digit.
fn looks_like_token(segment: &str) -> bool {
    segment.len() >= 16 || (segment.len() >= 8 && segment.bytes().any(|b| b.is_ascii_digit()))
}

/// Whether `c` may not leave the process as it is.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every control character (and invisible line break, bidirectional override)
/// written as a visible escape (`\n`, `\r`, `\t`, `\u{1b}`); [`Shape::Block`] keeps `\n` and
/// `\t`. Borrowed when there is nothing to escape.
pub fn sanitize(text: &str, shape: Shape) -> Cow<'_, str> {
    let keep = |c: char| shape == Shape::Block && matches!(c, '\n' | '\t');
    if !text.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if keep(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`sanitize`] as one line, keeping the colour sequences a log formatter writes
/// (`ESC [ params m`, Select Graphic Rendition, whose parameters are digits and `;` only, and
/// none of them 8, "conceal"): they change colours, never the cursor, the title or what is
/// hidden. Every other ESC is escaped.
pub fn sanitize_keeping_colours(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c) && c != '\u{1b}') && !has_foreign_escape(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(i) = rest.find('\u{1b}') {
        out.push_str(&sanitize(&rest[..i], Shape::Line));
        let after = &rest[i..];
        match colour_len(after) {
            Some(n) => {
                out.push_str(&after[..n]);
                rest = &after[n..];
            }
            None => {
                out.push_str("\\u{1b}");
                rest = &after[1..];
            }
        }
    }
    out.push_str(&sanitize(rest, Shape::Line));
    Cow::Owned(out)
}

fn has_foreign_escape(text: &str) -> bool {
    text.match_indices('\u{1b}')
        .any(|(i, _)| colour_len(&text[i..]).is_none())
}

/// The length of the colour sequence `s` starts with (`ESC [ 0;32 m`), if it is one.
fn colour_len(s: &str) -> Option<usize> {
    let body = s.strip_prefix("\u{1b}[")?;
    let end = body.find(|c: char| !(c.is_ascii_digit() || c == ';'))?;
    if !body[end..].starts_with('m') || end > 32 {
        return None;
    }
    if body[..end].split(';').any(|p| p == "8" || p == "08") {
        return None;
    }
    Some(2 + end + 1)
}

/// `text` cut to at most `max` bytes (on a character boundary), ending with
/// `... (N bytes cut)` when anything was cut; unchanged (borrowed) when it fits. A `max` too
/// small for the note gives the text's first bytes only.
pub fn cap(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    // The note's length with the most digits N can have.
    let longest_note = note(text.len()).len();
    if max < longest_note {
        return Cow::Owned(text[..floor_boundary(text, max)].to_string());
    }
    let keep = floor_boundary(text, max - longest_note);
    let mut out = String::with_capacity(max);
    out.push_str(&text[..keep]);
    out.push_str(&note(text.len() - keep));
    Cow::Owned(out)
}

fn note(cut: usize) -> String {
    format!("... ({cut} bytes cut)")
}

fn floor_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// `text` as a Slack-style chat payload shows it literally: `&`, `<` and `>` written as
/// `&amp;`, `&lt;`, `&gt;` (so `<!channel>` pings nobody and `<https://x|approve>` is no link).
pub fn chat(text: &str) -> Cow<'_, str> {
    if !text.contains(['&', '<', '>']) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests;

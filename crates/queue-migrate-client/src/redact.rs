//! The one redaction rule: what may carry a secret is shown and stored only through here.
//!
//! Anything that came from a plan, an environment variable or a URL may hold a credential: a
//! password or token in a URL's userinfo (`amqp://user:pw@host`, `nats://TOKEN@host`), or a token
//! in its query string (`?token=...`). [`url`] masks both in one URL; [`text`] masks every URL
//! inside free text, such as the message of a client error that embeds the URL it failed on.
//!
//! # Guarantees
//! - The userinfo of a URL (everything between `scheme://` and the last `@` of its authority)
//!   becomes `***`; its query string and fragment become `***`. The scheme, host, port and path
//!   stay, so an operator can still tell which endpoint failed.
//! - Idempotent: redacting a redacted text changes nothing.
//! - No allocation of new secret material: the output is built from the input's non-secret parts
//!   and the mask only.

/// The mask that stands where a secret was.
pub const MASK: &str = "***";

/// `url` with its userinfo, query string and fragment masked:
/// `http://user:pw@host:9090/api?token=x` becomes `http://***@host:9090/api?***`.
///
/// A value that is not a URL (no `scheme://`) is returned unchanged: it holds no URL credential
/// (callers that hold a known secret value mask it where they print it, see [`known`]).
pub fn url(url: &str) -> String {
    match split(url) {
        Some(parts) => parts.join(),
        None => url.to_string(),
    }
}

/// `text` with every URL in it redacted as [`url`] does: for error messages of HTTP, SQL and
/// broker clients, which quote the URL they failed on.
pub fn text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(sep) = rest.find("://") {
        let start = scheme_start(rest, sep);
        let end = url_end(rest, sep + 3);
        out.push_str(&rest[..start]);
        let candidate = &rest[start..end];
        // Closing punctuation that ends a sentence or a parenthesis belongs to the text.
        let trimmed = candidate.trim_end_matches(['.', ',', ';', ':', ')', ']', '}']);
        let trimmed = if trimmed.len() <= sep - start + 3 {
            candidate
        } else {
            trimmed
        };
        out.push_str(&url(trimmed));
        out.push_str(&candidate[trimmed.len()..]);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `text` with every occurrence of each known secret value masked (values shorter than 4 bytes
/// are skipped: masking every `a` would garble the text and hide nothing), then every URL
/// redacted as [`text`] does.
pub fn known<S: AsRef<str>>(text: &str, secrets: impl IntoIterator<Item = S>) -> String {
    let mut out = text.to_string();
    let owned: Vec<S> = secrets.into_iter().collect();
    let mut values: Vec<&str> = owned
        .iter()
        .map(AsRef::as_ref)
        .filter(|s| s.len() >= 4)
        .collect();
    // Longest first, so that a secret containing another is masked whole.
    values.sort_by_key(|s| std::cmp::Reverse(s.len()));
    for value in values {
        if out.contains(value) {
            out = out.replace(value, MASK);
        }
    }
    self::text(&out)
}

/// An error and its sources, joined with `: `, with every URL in them redacted as [`text`]
/// does: for the errors of reqwest, sqlx and the broker clients, whose messages may quote the
/// URL (credentials included) they failed on. Never format such an error with `{e}` where a
/// person or a store can read it: use this.
pub fn error(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        // Some clients repeat their source's message in their own: say it once.
        if !msg.contains(&more) {
            msg.push_str(": ");
            msg.push_str(&more);
        }
        source = s.source();
    }
    text(&msg)
}

/// The parts of a secret value that must never be shown, for [`known`]: of a URL, its
/// userinfo, password, query string (and each of its values) and fragment (so that a credential is masked even where the
/// URL around it is cut, quoted or echoed apart from it; the rest of a URL is no secret); of
/// any other value (a token), the value itself.
pub fn secret_parts(value: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let Some(sep) = value.find("://") else {
        parts.push(value);
        parts.retain(|p| !p.is_empty());
        return parts;
    };
    let after = &value[sep + 3..];
    let (before_fragment, fragment) = match after.find('#') {
        Some(i) => (&after[..i], Some(&after[i + 1..])),
        None => (after, None),
    };
    let (before_query, query) = match before_fragment.find('?') {
        Some(i) => (&before_fragment[..i], Some(&before_fragment[i + 1..])),
        None => (before_fragment, None),
    };
    let authority = &before_query[..before_query.find('/').unwrap_or(before_query.len())];
    if let Some(at) = authority.rfind('@') {
        let userinfo = &authority[..at];
        parts.push(userinfo);
        if let Some((_, password)) = userinfo.split_once(':') {
            parts.push(password);
        }
    }
    if let Some(query) = query {
        parts.push(query);
        // Each value alone too: a server may echo `s3cret` without its `token=`.
        parts.extend(
            query
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .map(|(_, v)| v),
        );
    }
    parts.extend(fragment);
    parts.retain(|p| !p.is_empty());
    parts
}

struct Parts<'a> {
    scheme: &'a str,
    userinfo: bool,
    host_and_path: &'a str,
    query: bool,
    fragment: bool,
}

impl Parts<'_> {
    fn join(&self) -> String {
        let mut out = String::with_capacity(self.scheme.len() + self.host_and_path.len() + 12);
        out.push_str(self.scheme);
        out.push_str("://");
        if self.userinfo {
            out.push_str(MASK);
            out.push('@');
        }
        out.push_str(self.host_and_path);
        if self.query {
            out.push('?');
            out.push_str(MASK);
        }
        if self.fragment {
            out.push('#');
            out.push_str(MASK);
        }
        out
    }
}

fn split(url: &str) -> Option<Parts<'_>> {
    let sep = url.find("://")?;
    let scheme = &url[..sep];
    if scheme.is_empty() || !scheme.bytes().all(is_scheme_byte) {
        return None;
    }
    let after = &url[sep + 3..];
    let (before_fragment, fragment) = match after.find('#') {
        Some(i) => (&after[..i], true),
        None => (after, false),
    };
    let (before_query, query) = match before_fragment.find('?') {
        Some(i) => (&before_fragment[..i], true),
        None => (before_fragment, false),
    };
    let authority_end = before_query.find('/').unwrap_or(before_query.len());
    let authority = &before_query[..authority_end];
    let (userinfo, host_and_path) = match authority.rfind('@') {
        Some(at) => (true, &before_query[at + 1..]),
        None => (false, before_query),
    };
    Some(Parts {
        scheme,
        userinfo,
        host_and_path,
        query,
        fragment,
    })
}

fn is_scheme_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')
}

/// Where the scheme before `sep` (the index of `://`) starts.
fn scheme_start(text: &str, sep: usize) -> usize {
    let bytes = text.as_bytes();
    let mut start = sep;
    while start > 0 && is_scheme_byte(bytes[start - 1]) {
        start -= 1;
    }
    start
}

/// Where a URL that continues at `from` ends: at white space, a quote or an angle bracket.
fn url_end(text: &str, from: usize) -> usize {
    text[from..]
        .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>'))
        .map_or(text.len(), |i| from + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_userinfo_query_and_fragment() {
        assert_eq!(
            url("http://user:hunter2@host:9090/api/v1/query?token=s3cret#frag"),
            "http://***@host:9090/api/v1/query?***#***"
        );
        assert_eq!(
            url("nats://TOKEN123@127.0.0.1:4222"),
            "nats://***@127.0.0.1:4222"
        );
        assert_eq!(url("http://host:9090/metrics"), "http://host:9090/metrics");
        assert_eq!(url("${PROM_URL}"), "${PROM_URL}");
        assert_eq!(
            url("postgres://u:p@db/state?sslmode=require"),
            "postgres://***@db/state?***"
        );
    }

    #[test]
    fn an_at_sign_in_the_path_is_not_userinfo() {
        assert_eq!(url("http://host/a@b"), "http://host/a@b");
    }

    #[test]
    fn masks_every_url_in_a_client_error() {
        let e = "error sending request for url (http://u:pw@127.0.0.1:1/api?token=abc): connection refused";
        let shown = text(e);
        assert_eq!(
            shown,
            "error sending request for url (http://***@127.0.0.1:1/api?***): connection refused"
        );
        assert!(!shown.contains("pw") && !shown.contains("abc"));
        let two = "from nats://tok@a:1 to \"amqp://g:g@b:2/%2f\".";
        assert_eq!(text(two), "from nats://***@a:1 to \"amqp://***@b:2/%2f\".");
    }

    #[test]
    fn is_idempotent() {
        for s in [
            "http://user:pw@host/x?q=1",
            "see http://***@host/x?*** and nats://***@h:1",
            "no url at all",
        ] {
            assert_eq!(text(&text(s)), text(s));
            assert_eq!(url(&url(s)), url(s));
        }
    }

    #[test]
    fn known_values_are_masked_anywhere() {
        let shown = known(
            "password: hunter22 (was hunter2)",
            ["hunter22", "hunter2", "ab"],
        );
        assert_eq!(shown, "password: *** (was ***)");
    }

    #[test]
    fn an_error_chain_is_shown_with_its_urls_redacted() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(
                    f,
                    "error sending request for url (http://u:pw99@h:1/?token=tk99)"
                )
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::other("nats://tok99@h:4222 refused"));
        let shown = error(&e);
        assert_eq!(
            shown,
            "error sending request for url (http://***@h:1/?***): nats://***@h:4222 refused"
        );
    }

    #[test]
    fn the_secret_parts_of_a_url_are_its_credentials() {
        assert_eq!(
            secret_parts("http://u:pw@h:1/p?token=xyzw&a=b#f"),
            ["u:pw", "pw", "token=xyzw&a=b", "xyzw", "b", "f"]
        );
        assert_eq!(secret_parts("nats://TOKEN@h"), ["TOKEN"]);
        assert_eq!(secret_parts("hook-token"), ["hook-token"]);
        assert!(secret_parts("http://h/a@b").is_empty());
    }

    #[test]
    fn text_without_a_scheme_is_untouched() {
        assert_eq!(text("a :// b"), "a :// b");
        assert_eq!(text("://host"), "://host");
    }
}

//! What a request to a source looks like on the wire: the Prometheus endpoint of a base URL, an
//! instant's text, the redirect policy, and the series count of an exposition.

/// The instant-query endpoint of the Prometheus at `base`: the API path after `base`'s path,
/// before its query string (a proxy's `?token=...` stays a query parameter; the request's own
/// parameters are added to it).
pub(super) fn query_url(base: &str) -> String {
    let (path, query) = match base.find(['?', '#']) {
        Some(i) if base[i..].starts_with('?') => (&base[..i], &base[i..]),
        Some(i) => (&base[..i], ""),
        None => (base, ""),
    };
    format!("{}/api/v1/query{query}", path.trim_end_matches('/'))
}

/// The sample lines of an exposition (one per series): lines that are neither blank nor a
/// comment, counted without parsing or allocating.
pub(super) fn sample_lines(text: &str) -> usize {
    text.split('\n')
        .filter(|line| {
            let content = line.trim_start_matches([' ', '\t']);
            !content.is_empty() && content != "\r" && !content.starts_with('#')
        })
        .count()
}

/// The evaluation time of an instant query: seconds with milliseconds.
pub(super) fn instant(at_ms: i64) -> String {
    format!("{}.{:03}", at_ms.div_euclid(1000), at_ms.rem_euclid(1000))
}

/// Most redirects followed for one request (all within the request's origin).
pub const MAX_REDIRECTS: usize = 10;

/// The redirect policy of every request to a source: a redirect is followed only within the
/// origin (scheme, host and port) first asked, at most [`MAX_REDIRECTS`] times; one to another
/// origin is not followed, and the redirect itself is the answer (a hold that says so). A source
/// must not get the controller to fetch `http://localhost:.../internal` for it.
pub(super) fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first().map(reqwest::Url::origin);
        if first.is_some_and(|first| first != attempt.url().origin()) {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error("too many redirects")
        } else {
            attempt.follow()
        }
    })
}

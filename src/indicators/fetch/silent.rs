//! A round's memory of the sources that did not answer in time (issue 54): a source that timed
//! out once is not asked again while the round lives, so that a silent source (one that accepts
//! connections and never answers) costs a round one source timeout, not one per query.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Mutex, PoisonError};

use crate::redact;

/// The sources of one round that timed out, by URL (a Prometheus base URL or a `/metrics` URL,
/// without a trailing `/`), with the reason every later read of them gets.
#[derive(Debug, Default)]
pub(super) struct Silent(Mutex<HashMap<String, String>>);

/// The key of a source: its URL without a trailing `/`.
fn key(source: &str) -> String {
    source.trim_end_matches('/').to_string()
}

impl Silent {
    /// Why `source` is not asked again this round, when it timed out already.
    pub(super) fn reason(&self, source: &str) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key(source))
            .cloned()
    }

    /// `source` timed out, `why`: it is silent for the rest of the round (the first reason is
    /// kept).
    pub(super) fn note(&self, source: &str, why: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key(source))
            .or_insert_with(|| format!("{why}; not asked again this round"));
    }
}

/// `request` to `source`: at once the reason of a timeout when `silent` already holds one for
/// it; else the request, cut at `deadline` (`timed_out` of the round's reason then), a timeout
/// (what `is_timeout` reads in an error) noted in `silent`.
pub(super) async fn within<T, E>(
    silent: Option<&Silent>,
    deadline: Option<tokio::time::Instant>,
    source: &str,
    request: impl Future<Output = Result<T, E>>,
    is_timeout: impl Fn(&E) -> Option<String>,
    timed_out: impl Fn(String) -> E,
) -> Result<T, E> {
    if let Some(why) = silent.and_then(|s| s.reason(source)) {
        return Err(timed_out(why));
    }
    let answer = match deadline {
        None => request.await,
        Some(deadline) => tokio::time::timeout_at(deadline, request)
            .await
            .unwrap_or_else(|_| Err(timed_out(out_of_budget(source)))),
    };
    if let (Some(silent), Err(e)) = (silent, &answer)
        && let Some(why) = is_timeout(e)
    {
        silent.note(source, &why);
    }
    answer
}

/// The reason of a request cut at the round's deadline: the URL redacted.
fn out_of_budget(source: &str) -> String {
    format!(
        "{}: no answer within the round's budget (the source timeout)",
        redact::url(source)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_noted_silent_keeps_its_first_reason() {
        let silent = Silent::default();
        assert_eq!(silent.reason("http://p:9090"), None);
        silent.note("http://p:9090/", "p: timed out");
        silent.note("http://p:9090", "second");
        assert_eq!(
            silent.reason("http://p:9090").as_deref(),
            Some("p: timed out; not asked again this round")
        );
        assert_eq!(silent.reason("http://other:9090"), None);
    }
}

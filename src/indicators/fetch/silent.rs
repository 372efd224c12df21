//! A round's memory of the sources that did not answer in time (issue 54): a source that timed
//! out once is not asked again while the round lives, so that a silent source (one that accepts
//! connections and never answers) costs a round one source timeout, not one per query.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::FetchError;
use crate::redact;

/// The sources of one round that timed out, by URL (a Prometheus base URL or a `/metrics` URL,
/// without a trailing `/`), with the reason every later read of them gets.
#[derive(Debug, Default)]
pub(super) struct Silent(Mutex<HashMap<String, FetchError>>);

/// The key of a source: its URL without a trailing `/`.
fn key(source: &str) -> String {
    source.trim_end_matches('/').to_string()
}

impl Silent {
    /// Why `source` is not asked again this round, when it timed out already.
    pub(super) fn reason(&self, source: &str) -> Option<FetchError> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key(source))
            .cloned()
    }

    /// Note `answer`'s failure of `source`: a timeout makes the source silent for the round
    /// (the first reason is kept); any other failure does not.
    pub(super) fn note(&self, source: &str, failure: &FetchError) {
        let FetchError::TimedOut(why) = failure else {
            return;
        };
        let again = FetchError::TimedOut(format!("{why}; not asked again this round"));
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key(source))
            .or_insert(again);
    }
}

/// The reason of a request cut at the round's deadline: the URL redacted.
pub(super) fn out_of_budget(source: &str) -> FetchError {
    FetchError::TimedOut(format!(
        "{}: no answer within the round's budget (the source timeout)",
        redact::url(source)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_makes_a_source_silent_other_failures_do_not() {
        let silent = Silent::default();
        silent.note("http://p:9090/", &FetchError::Request("refused".into()));
        assert_eq!(silent.reason("http://p:9090"), None);
        silent.note(
            "http://p:9090/",
            &FetchError::TimedOut("p: timed out".into()),
        );
        silent.note("http://p:9090", &FetchError::TimedOut("second".into()));
        assert_eq!(
            silent.reason("http://p:9090"),
            Some(FetchError::TimedOut(
                "p: timed out; not asked again this round".into()
            ))
        );
        assert_eq!(silent.reason("http://other:9090"), None);
    }
}

//! Why a source gave a gate no usable number, as the source adapters know it: the source could
//! not be read at all (unreachable, an HTTP error, an answer that could not be parsed), or it answered with no series, with too few samples yet, or with
//! something that is not one usable number. A gate's NO DATA verdict carries it
//! ([`crate::gate::Evaluation::cause`]), the store keeps it with the evaluation, and
//! [`crate::standing`] calls a migration blind only when its source could not be read, and says
//! which of the three it was.
//!
//! Pure, and a leaf: the gate, the store and the adapters all name it.

use serde::{Deserialize, Serialize};

/// Why a gate has no data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoDataCause {
    /// The source could not be reached: no connection, no answer in time, a scrape gone
    /// stale, a URL not resolvable on this machine.
    SourceDown,
    /// The source answered with an HTTP error status (4xx, 5xx): it is up, and refused.
    SourceHttpError,
    /// The source answered, and its answer could not be parsed (a malformed `/metrics` line,
    /// text that is not UTF-8 or not metrics at all) or was refused for its size.
    SourceUnparsable,
    /// The source answered: the query matched no series.
    Empty,
    /// The source answered, with too few samples for the query yet (a `rate()`/`increase()`
    /// window holding one sample, a gate's `min_samples` not reached): only time helps.
    TooFewSamples,
    /// The source answered with something that is not one usable number: NaN or ±Inf, a
    /// division by zero, several series, a query the source refused.
    Unusable,
}

impl NoDataCause {
    /// Every cause, in the order the docs list them.
    pub const ALL: [NoDataCause; 6] = [
        NoDataCause::SourceDown,
        NoDataCause::SourceHttpError,
        NoDataCause::SourceUnparsable,
        NoDataCause::Empty,
        NoDataCause::TooFewSamples,
        NoDataCause::Unusable,
    ];

    /// As stored and served: `source_down`, `source_http_error`, `source_unparsable`, `empty`,
    /// `too_few_samples`, `unusable`.
    pub fn as_str(self) -> &'static str {
        match self {
            NoDataCause::SourceDown => "source_down",
            NoDataCause::SourceHttpError => "source_http_error",
            NoDataCause::SourceUnparsable => "source_unparsable",
            NoDataCause::Empty => "empty",
            NoDataCause::TooFewSamples => "too_few_samples",
            NoDataCause::Unusable => "unusable",
        }
    }

    /// One of the stored names; `None` for anything else (a row written by a later version).
    pub fn parse(s: &str) -> Option<NoDataCause> {
        NoDataCause::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Whether the source could not be read at all (unreachable, an HTTP error, an answer that
    /// could not be parsed): the causes that make a migration blind.
    pub fn source_unread(self) -> bool {
        matches!(
            self,
            NoDataCause::SourceDown | NoDataCause::SourceHttpError | NoDataCause::SourceUnparsable
        )
    }

    /// In the words of a sentence: `the query returned no series`.
    pub fn text(self) -> &'static str {
        match self {
            NoDataCause::SourceDown => "source unreachable",
            NoDataCause::SourceHttpError => "source answered with an HTTP error",
            NoDataCause::SourceUnparsable => "source's answer could not be parsed",
            NoDataCause::Empty => "the query returned no series",
            NoDataCause::TooFewSamples => "too few samples yet",
            NoDataCause::Unusable => "the source answered with no usable number",
        }
    }
}

/// A reading that gave no usable number: why, as a cause and as a sentence (naming the source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread {
    pub cause: NoDataCause,
    pub why: String,
}

impl Unread {
    pub fn new(cause: NoDataCause, why: impl Into<String>) -> Unread {
        Unread {
            cause,
            why: why.into(),
        }
    }

    /// The source could not be read.
    pub fn down(why: impl Into<String>) -> Unread {
        Unread::new(NoDataCause::SourceDown, why)
    }

    /// The same cause, its sentence rewritten by `f` (a prefix naming the source or the side).
    #[must_use]
    pub fn map(self, f: impl FnOnce(String) -> String) -> Unread {
        Unread {
            cause: self.cause,
            why: f(self.why),
        }
    }
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cause_reads_back_from_its_stored_name() {
        for c in NoDataCause::ALL {
            assert_eq!(NoDataCause::parse(c.as_str()), Some(c));
            assert_eq!(
                serde_json::to_value(c).ok(),
                Some(serde_json::Value::String(c.as_str().into()))
            );
        }
        assert_eq!(NoDataCause::parse("hold"), None);
    }
}

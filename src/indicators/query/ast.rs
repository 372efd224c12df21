//! The parsed form of a scrape query and its canonical text.

use std::fmt;
use std::time::Duration;

use crate::indicators::selector::Selector;

/// A query whose latest scrape is older than this (relative to `now_ms`) is no data.
pub const STALENESS: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Aggregation {
    Sum,
    Min,
    Max,
}

impl Aggregation {
    pub(super) fn name(self) -> &'static str {
        match self {
            Aggregation::Sum => "sum",
            Aggregation::Min => "min",
            Aggregation::Max => "max",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RangeFunction {
    Rate,
    Increase,
}

impl RangeFunction {
    pub(super) fn name(self) -> &'static str {
        match self {
            RangeFunction::Rate => "rate",
            RangeFunction::Increase => "increase",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Source {
    Instant(Selector),
    Range {
        function: RangeFunction,
        selector: Selector,
        window: Duration,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Instant(s) => write!(f, "{s}"),
            Source::Range {
                function,
                selector,
                window,
            } => write!(
                f,
                "{}({selector}[{}])",
                function.name(),
                window_text(*window)
            ),
        }
    }
}

/// One side of the query: an aggregation over the per-series values of a source.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Operand {
    pub(super) aggregation: Aggregation,
    pub(super) source: Source,
    /// Written with an explicit aggregation (`sum(x)`) rather than bare (`x`).
    pub(super) explicit: bool,
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.explicit {
            write!(f, "{}({})", self.aggregation.name(), self.source)
        } else {
            write!(f, "{}", self.source)
        }
    }
}

/// A parsed, validated scrape query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub(super) numerator: Operand,
    pub(super) denominator: Option<Operand>,
}

/// Canonical text of the query (re-parses to an equal [`Query`]).
impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.numerator)?;
        if let Some(d) = &self.denominator {
            write!(f, " / {d}")?;
        }
        Ok(())
    }
}

impl Query {
    /// The selectors whose samples the controller must keep (for storage between runs).
    pub fn selectors(&self) -> Vec<&Selector> {
        let mut out = vec![self.numerator.source.selector()];
        if let Some(d) = &self.denominator {
            out.push(d.source.selector());
        }
        out
    }

    /// The longest range window used (how much history to keep), if any.
    pub fn max_window(&self) -> Option<Duration> {
        let a = self.numerator.source.window();
        let b = self.denominator.as_ref().and_then(|d| d.source.window());
        a.max(b)
    }

    /// How far back history must reach for this query: the longest window, and at
    /// least [`STALENESS`]. Prune with `now_ms - retention` (as ms).
    pub fn retention(&self) -> Duration {
        self.max_window().unwrap_or(STALENESS).max(STALENESS)
    }
}

/// Why a query is not the one shape a judge reads as raw counters ([`Query::summed_increase`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotACount {
    /// `a / b`: a ratio, not a count.
    Ratio,
    /// `min(...)`/`max(...)`: one series' value, not the sum of all.
    NotSummed,
    /// `rate(...)`: per second, not a count.
    Rate,
    /// A selector without `increase(...[...])`.
    NoIncrease,
}

impl NotACount {
    /// The reason in words, with what to write instead.
    pub fn describe(self) -> &'static str {
        match self {
            NotACount::Ratio => {
                "a ratio `a / b` is not a count: give the events and the failures as two counts"
            }
            NotACount::NotSummed => {
                "min()/max() reads one series, not the count of all: write `sum(increase(x[$step]))`"
            }
            NotACount::Rate => "rate() is per second, not a count: write `sum(increase(x[$step]))`",
            NotACount::NoIncrease => {
                "a bare selector is not a count since the step began: write `sum(increase(x[$step]))`"
            }
        }
    }
}

impl Query {
    /// The selector and window of `sum(increase(SEL[W]))` or `increase(SEL[W])` (the counts a
    /// judge reads from the raw counters underneath), or why the query is not of that shape.
    ///
    /// # Errors
    /// [`NotACount`] for any other shape.
    pub fn summed_increase(&self) -> Result<(&Selector, Duration), NotACount> {
        if self.denominator.is_some() {
            return Err(NotACount::Ratio);
        }
        let operand = &self.numerator;
        let Source::Range {
            function,
            selector,
            window,
        } = &operand.source
        else {
            return Err(NotACount::NoIncrease);
        };
        if *function == RangeFunction::Rate {
            return Err(NotACount::Rate);
        }
        if operand.aggregation != Aggregation::Sum {
            return Err(NotACount::NotSummed);
        }
        Ok((selector, *window))
    }
}

impl Source {
    pub(super) fn selector(&self) -> &Selector {
        match self {
            Source::Instant(s) | Source::Range { selector: s, .. } => s,
        }
    }

    pub(super) fn window(&self) -> Option<Duration> {
        match self {
            Source::Instant(_) => None,
            Source::Range { window, .. } => Some(*window),
        }
    }
}

/// A window in its largest whole unit (`90m`, `7d`, `1500ms`): PromQL-like, and read
/// back by `humantime::parse_duration`.
pub(super) fn window_text(d: Duration) -> String {
    const UNITS: [(&str, u128); 7] = [
        ("d", 86_400_000_000_000),
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
    ];
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".to_owned();
    }
    for (name, size) in UNITS {
        if ns.is_multiple_of(size) {
            return format!("{}{name}", ns / size);
        }
    }
    format!("{ns}ns")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::indicators::query::tests::q;

    #[test]
    fn selectors_and_max_window() {
        let query = q("rate(a[5m]) / increase(b{x=\"y\"}[1h])");
        let sels: Vec<String> = query.selectors().iter().map(|s| s.to_string()).collect();
        assert_eq!(sels, ["a", "b{x=\"y\"}"]);
        assert_eq!(query.max_window(), Some(Duration::from_secs(3600)));
        assert_eq!(query.retention(), Duration::from_secs(3600));
        let instant = q("sum(up)");
        assert_eq!(instant.max_window(), None);
        assert_eq!(instant.retention(), STALENESS);
        assert_eq!(q("rate(a[30s])").retention(), STALENESS);
    }
}

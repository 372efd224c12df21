//! The query language of `scrape:` indicator sources: a tiny PromQL subset that the
//! controller evaluates itself over the samples it scraped from a `/metrics` endpoint.
//!
//! Grammar (whitespace is allowed between tokens):
//!
//! ```text
//! query    := operand [ "/" operand ]
//! operand  := "(" operand ")" | agg "(" inner ")" | range | selector
//! agg      := "sum" | "min" | "max"
//! inner    := range | selector
//! range    := ("rate" | "increase") "(" selector "[" duration "]" ")"
//! selector := metric_name [ "{" [ matcher { "," matcher } [","] ] "}" ]
//!           | "{" "\"metric.name\"" { "," matcher } [","] "}"
//! matcher  := (label | "\"label.name\"") ("=" | "!=") "\"value\""
//! ```
//!
//! As PromQL 3 writes them, a metric or label name outside `[a-zA-Z_:][a-zA-Z0-9_:]*` is
//! quoted: the metric name first inside the braces (`{"http.server.duration"}`,
//! `{"http.server.duration", "service.name"="x"}`), a label name before its operator
//! (`http_requests_total{"service.name"="x"}`).
//!
//! Guarantees:
//! - pure: no IO and no clock; evaluation time is always passed in as `now_ms`;
//! - [`parse_query`] never panics and reports every rejection as a [`QueryError`]
//!   that says what to write instead (with the 1-based character column where useful);
//! - [`Query::evaluate`] returns either a finite number or [`NoData`] with a reason —
//!   never NaN or ±Inf, so a gate never compares a non-number;
//! - instant selectors read only the latest scrape (series that vanished from it are not
//!   summed from stale points), and every query is "no data" when that scrape is older
//!   than [`STALENESS`];
//! - `rate`/`increase` handle counter resets like Prometheus (a drop means a reset and
//!   the new value is the increase since it) but do not extrapolate to the window edges.
//!   The window is `(now_ms - window, now_ms]`; every matching series with at least two
//!   points in it counts (also one that has since vanished, as in Prometheus), series
//!   with fewer are skipped, and no series with two points is "not enough samples";
//! - a bare selector or range function is summed over series; `sum`/`min`/`max` around
//!   either aggregate the per-series values (so `max(rate(x[5m]))` works too).

use std::fmt;
use std::time::Duration;

use crate::indicators::exposition::{MatchOp, Matcher};
use crate::indicators::history::History;
use crate::indicators::selector::Selector;

/// A query whose latest scrape is older than this (relative to `now_ms`) is no data.
pub const STALENESS: Duration = Duration::from_secs(5 * 60);

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

const OPERAND_HINT: &str =
    "a metric name or sum(...), min(...), max(...), rate(...), increase(...)";

/// Why a query text was rejected. Columns are 1-based and count characters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueryError {
    /// The query text is empty or only whitespace.
    #[error(
        "empty query: write a metric selector such as `up{{job=\"consumer\"}}` or `rate(errors_total[5m])`"
    )]
    Empty,

    /// The text ends where more was needed.
    #[error("query ends too early: expected {expected}")]
    UnexpectedEnd {
        /// What the parser was waiting for.
        expected: String,
    },

    /// A character or word that does not fit at this place.
    #[error("unexpected `{found}` at column {column}: expected {expected}")]
    Unexpected {
        column: usize,
        found: String,
        expected: String,
    },

    /// A function other than `sum`, `min`, `max`, `rate`, `increase`.
    #[error(
        "unknown function `{name}` at column {column}: scrape queries support only sum(), min(), max(), rate() and increase(); use a prometheus: source for anything else"
    )]
    UnknownFunction { column: usize, name: String },

    /// `sum`, `min`, `max`, `rate` or `increase` written without `(`.
    #[error("`{name}` at column {column} must be followed by `(`: write `{name}(metric_name)`")]
    MissingCallParen { column: usize, name: String },

    /// An aggregation inside an aggregation, e.g. `sum(max(x))`.
    #[error(
        "nested aggregation `{name}(...)` at column {column}: sum/min/max take a selector or a rate()/increase(), e.g. `max(x)` or `sum(rate(x[5m]))`"
    )]
    NestedAggregation { column: usize, name: String },

    /// `by (...)` / `without (...)` grouping, which would give several numbers.
    #[error(
        "grouping with `{keyword}` at column {column} is not supported: a gate needs one number, so drop `{keyword} (...)` (the aggregation then runs over all series)"
    )]
    Grouping { column: usize, keyword: String },

    /// `=~` or `!~` in a selector.
    #[error(
        "regex matchers (`=~`, `!~`) are not supported on scrape sources (column {column}): match exact values with `=` or `!=`, or use a prometheus: source"
    )]
    RegexMatcher { column: usize },

    /// A `__name__` matcher inside braces.
    #[error(
        "`__name__` matcher at column {column} is not supported: write the metric name before the braces, e.g. `my_metric{{job=\"x\"}}`"
    )]
    NameMatcher { column: usize },

    /// A selector with no metric name: braces with no name before them nor quoted first inside.
    #[error(
        "selector at column {column} has no metric name: write `metric_name{{label=\"value\"}}`, or quote a name such as `http.server.duration` first inside the braces: `{{\"http.server.duration\", label=\"value\"}}`"
    )]
    MissingMetricName { column: usize },
    /// A quoted string alone inside braces that is not the metric name (not first, or after a
    /// name before the braces).
    #[error(
        "quoted name at column {column} has no operator: only the metric name may stand alone, first inside the braces with no name before them (`{{\"http.server.duration\"}}`); a quoted label name needs `=` or `!=` and a value"
    )]
    StrayQuotedName { column: usize },
    /// `{""}` or `{""="x"}`.
    #[error("empty quoted name at column {column}: a metric or label name is never empty")]
    EmptyQuotedName { column: usize },

    /// A label value in single quotes or backticks.
    #[error("label value at column {column} must be in double quotes: write `label=\"value\"`")]
    NotDoubleQuoted { column: usize },

    /// A label value whose closing `"` is missing.
    #[error("label value starting at column {column} is not closed: add the closing `\"`")]
    UnterminatedString { column: usize },

    /// A backslash escape other than `\"`, `\\`, `\n`.
    #[error(
        "unknown escape `\\{found}` at column {column}: only `\\\"`, `\\\\` and `\\n` are allowed in label values"
    )]
    BadEscape { column: usize, found: char },

    /// `rate(x)` / `increase(x)` without a `[window]`.
    #[error(
        "{function}() at column {column} needs a range window: write `{function}({selector}[5m])`"
    )]
    MissingWindow {
        column: usize,
        function: String,
        selector: String,
    },

    /// A `[window]` outside `rate()` / `increase()`.
    #[error(
        "range window at column {column} is only allowed inside rate() or increase(): write `rate({selector}[...])` or drop the window"
    )]
    UnexpectedWindow { column: usize, selector: String },

    /// A window that `humantime` cannot read.
    #[error(
        "invalid range window `{text}` at column {column} ({reason}): write a duration such as `30s`, `5m`, `1h` or `7d`"
    )]
    InvalidWindow {
        column: usize,
        text: String,
        reason: String,
    },

    /// A zero-length window.
    #[error("range window at column {column} is zero: write a positive duration such as `5m`")]
    ZeroWindow { column: usize },

    /// A second top-level `/`.
    #[error(
        "second `/` at column {column}: a query may divide only once (`a / b`); compute the rest in the gate"
    )]
    MoreThanOneDivision { column: usize },

    /// A `/` inside parentheses.
    #[error(
        "`/` at column {column} is inside parentheses: write the division at the top level, `a / b`, with at most parentheses around each side"
    )]
    DivisionInParentheses { column: usize },

    /// `+`, `-`, `*`, comparisons, `and`/`or`/`unless`, ...
    #[error(
        "operator `{op}` at column {column} is not supported: only one `/` between two values is; comparisons belong in the gate's threshold"
    )]
    UnsupportedOperator { column: usize, op: String },

    /// A number where a value expression was expected.
    #[error(
        "number at column {column} is not supported: write a metric selector or function here, and put constants in the gate's threshold"
    )]
    NumberLiteral { column: usize },

    /// Anything left after a complete query (e.g. `offset 5m`, `@ 123`).
    #[error(
        "unexpected `{found}` at column {column} after the end of the query: remove it (offset, @ and other modifiers are not supported)"
    )]
    TrailingInput { column: usize, found: String },
}

// ---------------------------------------------------------------------------
// AST
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aggregation {
    Sum,
    Min,
    Max,
}

impl Aggregation {
    fn name(self) -> &'static str {
        match self {
            Aggregation::Sum => "sum",
            Aggregation::Min => "min",
            Aggregation::Max => "max",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RangeFunction {
    Rate,
    Increase,
}

impl RangeFunction {
    fn name(self) -> &'static str {
        match self {
            RangeFunction::Rate => "rate",
            RangeFunction::Increase => "increase",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Source {
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
struct Operand {
    aggregation: Aggregation,
    source: Source,
    /// Written with an explicit aggregation (`sum(x)`) rather than bare (`x`).
    explicit: bool,
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
    numerator: Operand,
    denominator: Option<Operand>,
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

// ---------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------

/// Parse and validate a scrape query.
pub fn parse_query(text: &str) -> Result<Query, QueryError> {
    let mut p = Parser {
        chars: text.chars().collect(),
        pos: 0,
    };
    p.skip_ws();
    if p.at_end() {
        return Err(QueryError::Empty);
    }
    let numerator = p.operand()?;
    p.skip_ws();
    let denominator = match p.peek() {
        None => None,
        Some('/') => {
            p.pos += 1;
            let d = p.operand()?;
            p.skip_ws();
            match p.peek() {
                None => Some(d),
                Some('/') => return Err(QueryError::MoreThanOneDivision { column: p.col() }),
                Some(_) => return Err(p.trailing()),
            }
        }
        Some(_) => return Err(p.trailing()),
    };
    Ok(Query {
        numerator,
        denominator,
    })
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

fn is_label_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_label_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl Parser {
    fn col(&self) -> usize {
        self.pos + 1
    }

    fn at_end(&self) -> bool {
        self.pos >= self.chars.len()
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    /// Read `[start][char]*` at the cursor, if there is one.
    fn word(&mut self, start: fn(char) -> bool, rest: fn(char) -> bool) -> Option<String> {
        if !self.peek().is_some_and(start) {
            return None;
        }
        let begin = self.pos;
        while self.peek().is_some_and(rest) {
            self.pos += 1;
        }
        Some(self.chars[begin..self.pos].iter().collect())
    }

    /// The token at the cursor, for messages (a word, an operator or one character).
    fn token(&self) -> String {
        let Some(c) = self.peek() else {
            return String::new();
        };
        if is_ident_char(c) || c == '.' {
            return self.chars[self.pos..]
                .iter()
                .take_while(|c| is_ident_char(**c) || **c == '.')
                .take(40)
                .collect();
        }
        let two: String = self.chars[self.pos..].iter().take(2).collect();
        if ["==", "!=", ">=", "<=", "=~", "!~"].contains(&two.as_str()) {
            return two;
        }
        c.to_string()
    }

    fn unexpected(&self, expected: &str) -> QueryError {
        if self.at_end() {
            QueryError::UnexpectedEnd {
                expected: expected.to_owned(),
            }
        } else {
            QueryError::Unexpected {
                column: self.col(),
                found: self.token(),
                expected: expected.to_owned(),
            }
        }
    }

    /// Classify what follows a complete expression.
    fn trailing(&self) -> QueryError {
        let column = self.col();
        let found = self.token();
        match found.as_str() {
            "by" | "without" => QueryError::Grouping {
                column,
                keyword: found,
            },
            "+" | "-" | "*" | "%" | "^" | "<" | ">" | "==" | "!=" | ">=" | "<=" | "and" | "or"
            | "unless" => QueryError::UnsupportedOperator { column, op: found },
            _ => QueryError::TrailingInput { column, found },
        }
    }

    fn expect_close_paren(&self) -> Result<(), QueryError> {
        match self.peek() {
            Some(')') => Ok(()),
            Some('/') => Err(QueryError::DivisionInParentheses { column: self.col() }),
            Some('[') => Err(QueryError::Unexpected {
                column: self.col(),
                found: "[".to_owned(),
                expected: "`)`".to_owned(),
            }),
            Some(_) => Err(match self.trailing() {
                QueryError::TrailingInput { column, found } => QueryError::Unexpected {
                    column,
                    found,
                    expected: "`)`".to_owned(),
                },
                other => other,
            }),
            None => Err(self.unexpected("`)`")),
        }
    }

    fn operand(&mut self) -> Result<Operand, QueryError> {
        self.skip_ws();
        match self.peek() {
            None => Err(self.unexpected(OPERAND_HINT)),
            Some('(') => {
                self.pos += 1;
                let inner = self.operand()?;
                self.skip_ws();
                self.expect_close_paren()?;
                self.pos += 1;
                Ok(inner)
            }
            Some('{') => {
                let selector = self.selector_rest(None)?;
                Ok(Operand {
                    aggregation: Aggregation::Sum,
                    source: self.instant(selector)?,
                    explicit: false,
                })
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                Err(QueryError::NumberLiteral { column: self.col() })
            }
            Some(c) if is_ident_start(c) => {
                let column = self.col();
                let name = self.word(is_ident_start, is_ident_char).unwrap_or_default();
                self.skip_ws();
                self.named_operand(column, name)
            }
            Some(_) => Err(self.unexpected(OPERAND_HINT)),
        }
    }

    /// After an identifier at `column`: a function call or a selector.
    fn named_operand(&mut self, column: usize, name: String) -> Result<Operand, QueryError> {
        let aggregation = match name.as_str() {
            "sum" => Some(Aggregation::Sum),
            "min" => Some(Aggregation::Min),
            "max" => Some(Aggregation::Max),
            _ => None,
        };
        let range = match name.as_str() {
            "rate" => Some(RangeFunction::Rate),
            "increase" => Some(RangeFunction::Increase),
            _ => None,
        };
        let is_call = self.peek() == Some('(');
        if let Some(aggregation) = aggregation {
            if !is_call {
                return Err(self.not_a_call(column, &name));
            }
            self.pos += 1;
            let source = self.aggregated_source()?;
            self.skip_ws();
            self.expect_close_paren()?;
            self.pos += 1;
            return Ok(Operand {
                aggregation,
                source,
                explicit: true,
            });
        }
        if let Some(function) = range {
            if !is_call {
                return Err(self.not_a_call(column, &name));
            }
            self.pos += 1;
            let source = self.range_call(column, function)?;
            return Ok(Operand {
                aggregation: Aggregation::Sum,
                source,
                explicit: false,
            });
        }
        if is_call || (is_known_promql_function(&name) && is_grouping_next(self)) {
            return Err(QueryError::UnknownFunction { column, name });
        }
        let selector = self.selector_rest(Some(name))?;
        Ok(Operand {
            aggregation: Aggregation::Sum,
            source: self.instant(selector)?,
            explicit: false,
        })
    }

    /// An instant selector, read: refused when a range window follows it.
    fn instant(&mut self, selector: Selector) -> Result<Source, QueryError> {
        self.skip_ws();
        if self.peek() == Some('[') {
            return Err(QueryError::UnexpectedWindow {
                column: self.col(),
                selector: selector.to_string(),
            });
        }
        Ok(Source::Instant(selector))
    }

    fn not_a_call(&mut self, column: usize, name: &str) -> QueryError {
        if is_grouping_next(self) {
            let keyword_col = self.col();
            let keyword = self.token();
            return QueryError::Grouping {
                column: keyword_col,
                keyword,
            };
        }
        QueryError::MissingCallParen {
            column,
            name: name.to_owned(),
        }
    }

    /// The argument of sum/min/max: a range call or a selector.
    fn aggregated_source(&mut self) -> Result<Source, QueryError> {
        self.skip_ws();
        match self.peek() {
            Some('{') => {
                let selector = self.selector_rest(None)?;
                return self.instant(selector);
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                return Err(QueryError::NumberLiteral { column: self.col() });
            }
            Some(c) if is_ident_start(c) => {}
            _ => return Err(self.unexpected("a metric name, rate(...) or increase(...)")),
        }
        let column = self.col();
        let name = self.word(is_ident_start, is_ident_char).unwrap_or_default();
        self.skip_ws();
        let is_call = self.peek() == Some('(');
        match name.as_str() {
            "rate" | "increase" if is_call => {
                self.pos += 1;
                let function = if name == "rate" {
                    RangeFunction::Rate
                } else {
                    RangeFunction::Increase
                };
                self.range_call(column, function)
            }
            "rate" | "increase" => Err(self.not_a_call(column, &name)),
            "sum" | "min" | "max" => Err(QueryError::NestedAggregation { column, name }),
            _ if is_call => Err(QueryError::UnknownFunction { column, name }),
            _ => {
                let selector = self.selector_rest(Some(name))?;
                self.instant(selector)
            }
        }
    }

    /// After `rate(` / `increase(`: `selector[window])`.
    fn range_call(&mut self, column: usize, function: RangeFunction) -> Result<Source, QueryError> {
        self.skip_ws();
        let selector = match self.peek() {
            Some('{') => self.selector_rest(None)?,
            Some(c) if c.is_ascii_digit() || c == '.' => {
                return Err(QueryError::NumberLiteral { column: self.col() });
            }
            Some(c) if is_ident_start(c) => self.range_selector(function)?,
            _ => return Err(self.unexpected("a metric selector with a window, e.g. `x[5m]`")),
        };
        self.range_window(column, function, selector)
    }

    /// The named selector inside `rate(` / `increase(` (a function there is refused).
    fn range_selector(&mut self, function: RangeFunction) -> Result<Selector, QueryError> {
        let name_col = self.col();
        let name = self.word(is_ident_start, is_ident_char).unwrap_or_default();
        self.skip_ws();
        if self.peek() == Some('(') {
            return Err(match name.as_str() {
                "sum" | "min" | "max" | "rate" | "increase" => QueryError::Unexpected {
                    column: name_col,
                    found: name,
                    expected: format!(
                        "a metric selector: {}() takes `metric{{...}}[5m]`, aggregate outside it as `sum({}(x[5m]))`",
                        function.name(),
                        function.name()
                    ),
                },
                _ => QueryError::UnknownFunction {
                    column: name_col,
                    name,
                },
            });
        }
        self.selector_rest(Some(name))
    }

    /// After the selector of `rate(` / `increase(`: `[window])`.
    fn range_window(
        &mut self,
        column: usize,
        function: RangeFunction,
        selector: Selector,
    ) -> Result<Source, QueryError> {
        self.skip_ws();
        if self.peek() != Some('[') {
            if self.at_end() || self.peek() == Some(')') {
                return Err(QueryError::MissingWindow {
                    column,
                    function: function.name().to_owned(),
                    selector: selector.to_string(),
                });
            }
            return Err(self.unexpected("a range window such as `[5m]`"));
        }
        let window_col = self.col();
        self.pos += 1;
        let begin = self.pos;
        while self.peek().is_some_and(|c| c != ']') {
            self.pos += 1;
        }
        if self.at_end() {
            return Err(QueryError::UnexpectedEnd {
                expected: "`]` closing the range window".to_owned(),
            });
        }
        let text: String = self.chars[begin..self.pos].iter().collect();
        self.pos += 1; // ']'
        let trimmed = text.trim();
        let window = humantime::parse_duration(trimmed).map_err(|e| QueryError::InvalidWindow {
            column: window_col,
            text: trimmed.to_owned(),
            reason: e.to_string(),
        })?;
        if window.is_zero() {
            return Err(QueryError::ZeroWindow { column: window_col });
        }
        self.skip_ws();
        self.expect_close_paren()?;
        self.pos += 1;
        Ok(Source::Range {
            function,
            selector,
            window,
        })
    }

    /// After the metric name (`Some`), or at braces with none before them (`None`: the name
    /// is then quoted first inside them): optional `{matchers}`.
    fn selector_rest(&mut self, metric: Option<String>) -> Result<Selector, QueryError> {
        self.skip_ws();
        let braces = self.col();
        let mut matchers = Vec::new();
        if self.peek() != Some('{') {
            return Ok(Selector {
                metric: metric.unwrap_or_default(),
                matchers,
            });
        }
        let named = metric.is_some();
        let mut metric = metric.unwrap_or_default();
        self.pos += 1;
        let mut first = true;
        loop {
            self.skip_ws();
            if self.peek() == Some('}') {
                self.pos += 1;
                break;
            }
            let label_col = self.col();
            let label = if self.peek() == Some('"') {
                let quoted = self.string()?;
                self.skip_ws();
                if !matches!(self.peek(), Some('=' | '!')) {
                    if named || !first {
                        return Err(QueryError::StrayQuotedName { column: label_col });
                    }
                    if quoted.is_empty() {
                        return Err(QueryError::EmptyQuotedName { column: label_col });
                    }
                    metric = quoted;
                    first = false;
                    match self.peek() {
                        Some(',') => {
                            self.pos += 1;
                            continue;
                        }
                        Some('}') => {
                            self.pos += 1;
                            break;
                        }
                        _ => return Err(self.unexpected("`,`, `}` or `=`")),
                    }
                }
                if quoted.is_empty() {
                    return Err(QueryError::EmptyQuotedName { column: label_col });
                }
                quoted
            } else {
                let Some(label) = self.word(is_label_start, is_label_char) else {
                    return Err(self.unexpected("a label name or `}`"));
                };
                label
            };
            first = false;
            if label == "__name__" {
                return Err(QueryError::NameMatcher { column: label_col });
            }
            self.skip_ws();
            let op = match (self.peek(), self.peek_at(1)) {
                (Some('=' | '!'), Some('~')) => {
                    return Err(QueryError::RegexMatcher { column: self.col() });
                }
                (Some('!'), Some('=')) => {
                    self.pos += 2;
                    MatchOp::Ne
                }
                (Some('='), Some('=')) => {
                    return Err(QueryError::Unexpected {
                        column: self.col(),
                        found: "==".to_owned(),
                        expected: "`=` or `!=` (a single `=` for equality)".to_owned(),
                    });
                }
                (Some('='), _) => {
                    self.pos += 1;
                    MatchOp::Eq
                }
                _ => return Err(self.unexpected("`=` or `!=`")),
            };
            self.skip_ws();
            let value = self.string()?;
            matchers.push(Matcher { label, op, value });
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some('}') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.unexpected("`,` or `}`")),
            }
        }
        if metric.is_empty() {
            return Err(QueryError::MissingMetricName { column: braces });
        }
        Ok(Selector { metric, matchers })
    }

    /// A double-quoted label value with `\"`, `\\`, `\n` escapes.
    fn string(&mut self) -> Result<String, QueryError> {
        let start = self.col();
        match self.peek() {
            Some('"') => {}
            Some('\'' | '`') => return Err(QueryError::NotDoubleQuoted { column: start }),
            _ => return Err(self.unexpected("a double-quoted label value")),
        }
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Err(QueryError::UnterminatedString { column: start }),
                Some('"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some('\\') => {
                    let column = self.col();
                    self.pos += 1;
                    match self.peek() {
                        None => return Err(QueryError::UnterminatedString { column: start }),
                        Some('"') => out.push('"'),
                        Some('\\') => out.push('\\'),
                        Some('n') => out.push('\n'),
                        Some(found) => return Err(QueryError::BadEscape { column, found }),
                    }
                    self.pos += 1;
                }
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }
}

fn is_grouping_next(p: &Parser) -> bool {
    let t = p.token();
    t == "by" || t == "without"
}

/// PromQL functions and aggregations that are not supported here, so that e.g. `avg by`
/// or `abs x` reads as an unknown function rather than a metric name.
fn is_known_promql_function(name: &str) -> bool {
    matches!(
        name,
        "avg"
            | "count"
            | "stddev"
            | "stdvar"
            | "topk"
            | "bottomk"
            | "quantile"
            | "group"
            | "count_values"
            | "limitk"
            | "limit_ratio"
    )
}

// ---------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------

/// A usable value: finite, with the number of stored points it rests on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub value: f64,
    /// How many points the value rests on (series for an instant selector, points used
    /// for rate/increase; both sides added for a division).
    pub samples: u32,
}

/// Why a query has no value now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no data: {reason}")]
pub struct NoData {
    pub reason: String,
}

fn no_data(reason: impl Into<String>) -> NoData {
    NoData {
        reason: reason.into(),
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A window in its largest whole unit (`90m`, `7d`, `1500ms`): PromQL-like, and read
/// back by `humantime::parse_duration`.
fn window_text(d: Duration) -> String {
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

fn check_finite(value: f64) -> Result<f64, NoData> {
    if value.is_nan() {
        Err(no_data("NaN"))
    } else if value.is_infinite() {
        Err(no_data(format!(
            "not a finite number ({})",
            if value > 0.0 { "+Inf" } else { "-Inf" }
        )))
    } else {
        Ok(value)
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

    /// Evaluate at `now_ms` over the history. Points after `now_ms` are ignored. The
    /// whole query is no data when the newest scrape at or before `now_ms` is more than
    /// [`STALENESS`] old.
    pub fn evaluate(&self, history: &History, now_ms: i64) -> Result<Reading, NoData> {
        let Some((latest, latest_ms)) = history.latest_scrape(now_ms) else {
            return Err(no_data("no scrape recorded yet"));
        };
        let age_ms = now_ms.saturating_sub(latest_ms);
        if age_ms > crate::time::millis(STALENESS) {
            return Err(no_data(format!(
                "stale: last scrape {} s ago",
                age_ms / 1000
            )));
        }
        let a = self.numerator.evaluate(history, latest, now_ms)?;
        let Some(den) = &self.denominator else {
            return Ok(a);
        };
        let b = den.evaluate(history, latest, now_ms)?;
        if b.value == 0.0 {
            return Err(no_data("division by zero"));
        }
        Ok(Reading {
            value: check_finite(a.value / b.value)?,
            samples: a.samples.saturating_add(b.samples),
        })
    }
}

impl Source {
    fn selector(&self) -> &Selector {
        match self {
            Source::Instant(s) | Source::Range { selector: s, .. } => s,
        }
    }

    fn window(&self) -> Option<Duration> {
        match self {
            Source::Instant(_) => None,
            Source::Range { window, .. } => Some(*window),
        }
    }
}

impl Operand {
    /// Per-series values, then the aggregation over them.
    /// `latest` is the index of the newest scrape at or before `now_ms`.
    fn evaluate(&self, history: &History, latest: usize, now_ms: i64) -> Result<Reading, NoData> {
        let (values, samples) = match &self.source {
            Source::Instant(sel) => {
                let values: Vec<f64> = history
                    .series()
                    .filter(|s| sel.matches_labels(s.metric(), s.labels()))
                    .filter_map(|s| s.value(latest))
                    .collect();
                if values.is_empty() {
                    return Err(no_data(format!(
                        "no series matching `{sel}` in the latest scrape"
                    )));
                }
                let n = values.len();
                (values, n)
            }
            Source::Range {
                function,
                selector,
                window,
            } => range_values(history, *function, selector, *window, now_ms)?,
        };
        let value = aggregate(self.aggregation, &values);
        Ok(Reading {
            value: check_finite(value)?,
            samples: count(samples),
        })
    }
}

/// NaN-propagating aggregation over a non-empty list.
fn aggregate(aggregation: Aggregation, values: &[f64]) -> f64 {
    if values.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    match aggregation {
        Aggregation::Sum => values.iter().sum(),
        Aggregation::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
        Aggregation::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// Per-series rate or increase over `(now_ms - window, now_ms]`, and the points used.
fn range_values(
    history: &History,
    function: RangeFunction,
    selector: &Selector,
    window: Duration,
    now_ms: i64,
) -> Result<(Vec<f64>, usize), NoData> {
    let from = now_ms.saturating_sub(crate::time::millis(window));
    let mut values = Vec::new();
    let mut used = 0usize;
    let mut most_points = 0usize;
    let mut any_series = false;
    let scrapes = history.scrapes_between(from, now_ms);
    for s in history
        .series()
        .filter(|s| selector.matches_labels(s.metric(), s.labels()))
    {
        let pts: Vec<(i64, f64)> = history.points_of(s, scrapes.clone()).collect();
        if pts.is_empty() {
            continue;
        }
        any_series = true;
        most_points = most_points.max(pts.len());
        let (Some(first), Some(last)) = (pts.first(), pts.last()) else {
            continue;
        };
        if pts.len() < 2 {
            continue;
        }
        let mut increase = 0.0;
        for pair in pts.windows(2) {
            let (prev, cur) = (pair[0].1, pair[1].1);
            increase += if cur < prev { cur } else { cur - prev };
        }
        if pts.iter().any(|p| p.1.is_nan()) {
            increase = f64::NAN;
        }
        used += pts.len();
        values.push(match function {
            RangeFunction::Increase => increase,
            // Distinct times, so the span is positive.
            RangeFunction::Rate => increase / (last.0.saturating_sub(first.0) as f64 / 1000.0),
        });
    }
    if !any_series {
        return Err(no_data(format!(
            "no series matching `{selector}` in the last {}",
            window_text(window)
        )));
    }
    if values.is_empty() {
        return Err(no_data(format!(
            "not enough samples (have {most_points}, need 2 within {})",
            window_text(window)
        )));
    }
    Ok((values, used))
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::indicators::exposition::Sample;
    use proptest::prelude::*;

    /// A sample of series `name{labels}` (shared with the history's tests).
    pub(crate) fn sample(name: &str, labels: &[(&str, &str)], value: f64) -> Sample {
        Sample {
            name: name.to_owned(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            value,
            timestamp_ms: None,
        }
    }

    /// `text` parsed, or the test fails (shared with the history's tests).
    pub(crate) fn q(text: &str) -> Query {
        match parse_query(text) {
            Ok(q) => q,
            Err(e) => panic!("`{text}` should parse: {e}"),
        }
    }

    /// Record scrapes `(at_ms, samples)` keeping what the query needs.
    fn history_for(query: &Query, scrapes: &[(i64, Vec<Sample>)]) -> History {
        let mut h = History::new();
        for (at, samples) in scrapes {
            h.record(*at, samples, &query.selectors());
        }
        h
    }

    const MIN: i64 = 60_000;

    #[test]
    fn parse_valid_queries() {
        // (input, canonical rendering)
        let cases = [
            ("up", "up"),
            ("  up  ", "up"),
            ("up{}", "up"),
            ("up{job=\"consumer\"}", "up{job=\"consumer\"}"),
            (
                "up{ job = \"a\" , env != \"dev\" , }",
                "up{job=\"a\",env!=\"dev\"}",
            ),
            ("ns:metric_total", "ns:metric_total"),
            ("sum(up)", "sum(up)"),
            ("sum (up{job=\"x\"})", "sum(up{job=\"x\"})"),
            (
                "min(process_start_time_seconds{job=\"consumer\"})",
                "min(process_start_time_seconds{job=\"consumer\"})",
            ),
            ("max(queue_depth)", "max(queue_depth)"),
            ("rate(errors_total[5m])", "rate(errors_total[5m])"),
            (
                "rate( errors_total{a=\"b\"} [ 30s ] )",
                "rate(errors_total{a=\"b\"}[30s])",
            ),
            ("increase(x[1h])", "increase(x[1h])"),
            ("increase(x[7d])", "increase(x[7d])"),
            ("sum(rate(x[5m]))", "sum(rate(x[5m]))"),
            ("max(increase(x[5m]))", "max(increase(x[5m]))"),
            ("a / b", "a / b"),
            ("a/b", "a / b"),
            ("(a) / (b)", "a / b"),
            ("((a))/((b))", "a / b"),
            (
                "rate(errors_total[5m]) / rate(requests_total[5m])",
                "rate(errors_total[5m]) / rate(requests_total[5m])",
            ),
            (
                "x{v=\"q\\\"uote\\\\back\\nnl\"}",
                "x{v=\"q\\\"uote\\\\back\\nnl\"}",
            ),
            ("x{v=\"ünï/cødé\"}", "x{v=\"ünï/cødé\"}"),
        ];
        for (input, canonical) in cases {
            let parsed = q(input);
            assert_eq!(parsed.to_string(), canonical, "rendering of `{input}`");
            assert_eq!(q(canonical), parsed, "re-parse of `{canonical}`");
        }
    }

    #[test]
    fn parse_label_value_escapes() {
        let parsed = q(r#"x{v="a\"b\\c\nd"}"#);
        let sel = parsed.selectors()[0];
        assert_eq!(sel.metric, "x");
        assert_eq!(sel.matchers.len(), 1);
        assert_eq!(sel.matchers[0].label, "v");
        assert!(matches!(sel.matchers[0].op, MatchOp::Eq));
        assert_eq!(sel.matchers[0].value, "a\"b\\c\nd");
    }

    #[test]
    fn parse_invalid_queries() {
        use QueryError as E;
        let unexpected = |column, found: &str, expected: &str| E::Unexpected {
            column,
            found: found.to_owned(),
            expected: expected.to_owned(),
        };
        let cases: Vec<(&str, QueryError)> = vec![
            ("", E::Empty),
            ("   ", E::Empty),
            ("up{job=~\"a.*\"}", E::RegexMatcher { column: 7 }),
            ("up{job!~\"a\"}", E::RegexMatcher { column: 7 }),
            ("up{job=\"a\"", unexpected_end("`,` or `}`")),
            ("up{job=\"a", E::UnterminatedString { column: 8 }),
            ("up{job='a'}", E::NotDoubleQuoted { column: 8 }),
            ("up{job=`a`}", E::NotDoubleQuoted { column: 8 }),
            (
                "up{job=\"a\\t\"}",
                E::BadEscape {
                    column: 10,
                    found: 't',
                },
            ),
            (
                "up{job==\"a\"}",
                unexpected(7, "==", "`=` or `!=` (a single `=` for equality)"),
            ),
            ("up{job}", unexpected(7, "}", "`=` or `!=`")),
            (
                "up{job=a}",
                unexpected(8, "a", "a double-quoted label value"),
            ),
            ("up{1=\"a\"}", unexpected(4, "1", "a label name or `}`")),
            ("up{__name__=\"x\"}", E::NameMatcher { column: 4 }),
            ("{job=\"a\"}", E::MissingMetricName { column: 1 }),
            ("sum({job=\"a\"})", E::MissingMetricName { column: 5 }),
            (
                "avg(up)",
                E::UnknownFunction {
                    column: 1,
                    name: "avg".into(),
                },
            ),
            (
                "sum(abs(up))",
                E::UnknownFunction {
                    column: 5,
                    name: "abs".into(),
                },
            ),
            (
                "sum(max(up))",
                E::NestedAggregation {
                    column: 5,
                    name: "max".into(),
                },
            ),
            (
                "sum by (job) (up)",
                E::Grouping {
                    column: 5,
                    keyword: "by".into(),
                },
            ),
            (
                "sum(up) by (job)",
                E::Grouping {
                    column: 9,
                    keyword: "by".into(),
                },
            ),
            (
                "max without (a) (up)",
                E::Grouping {
                    column: 5,
                    keyword: "without".into(),
                },
            ),
            (
                "sum",
                E::MissingCallParen {
                    column: 1,
                    name: "sum".into(),
                },
            ),
            (
                "rate(x)",
                E::MissingWindow {
                    column: 1,
                    function: "rate".into(),
                    selector: "x".into(),
                },
            ),
            (
                "increase(x{a=\"b\"})",
                E::MissingWindow {
                    column: 1,
                    function: "increase".into(),
                    selector: "x{a=\"b\"}".into(),
                },
            ),
            (
                "x[5m]",
                E::UnexpectedWindow {
                    column: 2,
                    selector: "x".into(),
                },
            ),
            (
                "sum(x[5m])",
                E::UnexpectedWindow {
                    column: 6,
                    selector: "x".into(),
                },
            ),
            ("rate(x[0s])", E::ZeroWindow { column: 7 }),
            ("rate(x[5m)", unexpected_end("`]` closing the range window")),
            ("a / b / c", E::MoreThanOneDivision { column: 7 }),
            ("(a / b)", E::DivisionInParentheses { column: 4 }),
            (
                "a + b",
                E::UnsupportedOperator {
                    column: 3,
                    op: "+".into(),
                },
            ),
            (
                "a * 100",
                E::UnsupportedOperator {
                    column: 3,
                    op: "*".into(),
                },
            ),
            (
                "up > 0",
                E::UnsupportedOperator {
                    column: 4,
                    op: ">".into(),
                },
            ),
            (
                "up == 1",
                E::UnsupportedOperator {
                    column: 4,
                    op: "==".into(),
                },
            ),
            (
                "up or down",
                E::UnsupportedOperator {
                    column: 4,
                    op: "or".into(),
                },
            ),
            ("a / 100", E::NumberLiteral { column: 5 }),
            ("42", E::NumberLiteral { column: 1 }),
            ("rate(x[5m] offset 1h)", unexpected(12, "offset", "`)`")),
            (
                "up offset 5m",
                E::TrailingInput {
                    column: 4,
                    found: "offset".into(),
                },
            ),
            ("a /", unexpected_end(OPERAND_HINT)),
            ("(a", unexpected_end("`)`")),
            (
                "sum(",
                unexpected_end("a metric name, rate(...) or increase(...)"),
            ),
            ("-up", unexpected(1, "-", OPERAND_HINT)),
            (
                "rate(sum(x)[5m])",
                unexpected(
                    6,
                    "sum",
                    "a metric selector: rate() takes `metric{...}[5m]`, aggregate outside it as `sum(rate(x[5m]))`",
                ),
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_query(input), Err(expected), "input `{input}`");
        }
    }

    fn unexpected_end(expected: &str) -> QueryError {
        QueryError::UnexpectedEnd {
            expected: expected.to_owned(),
        }
    }

    #[test]
    fn parse_invalid_windows() {
        for (input, text) in [
            ("rate(x[5])", "5"),
            ("rate(x[5mins x])", "5mins x"),
            ("rate(x[])", ""),
            ("rate(x[5m:1m])", "5m:1m"),
            ("rate(x[-5m])", "-5m"),
        ] {
            match parse_query(input) {
                Err(QueryError::InvalidWindow {
                    column, text: t, ..
                }) => {
                    assert_eq!(column, 7, "input `{input}`");
                    assert_eq!(t, text, "input `{input}`");
                }
                other => panic!("`{input}`: expected InvalidWindow, got {other:?}"),
            }
        }
        // A huge window parses or is rejected, but never panics or overflows later.
        let _ = parse_query("rate(x[99999999999999999999999d])");
        if let Ok(big) = parse_query("rate(x[500000000000d])") {
            let h = History::new();
            assert!(big.evaluate(&h, 0).is_err());
        }
    }

    #[test]
    fn error_messages_say_what_to_write() {
        let msg = |t: &str| match parse_query(t) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("`{t}` should fail"),
        };
        assert!(msg("up{job=~\"a\"}").contains("regex matchers"));
        assert!(msg("up{job=~\"a\"}").contains("prometheus: source"));
        assert!(msg("rate(x)").contains("rate(x[5m])"));
        assert!(msg("rate(x[5q])").contains("`5m`"));
        assert!(msg("sum by (a) (x)").contains("drop `by (...)`"));
        assert!(msg("up{job='a'}").contains("label=\"value\""));
    }

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

    /// Issue 32: OpenTelemetry exporters name metrics and labels with dots; PromQL 3 selects
    /// them quoted, the metric name first inside the braces.
    #[test]
    fn quoted_utf8_names_select_as_promql_3_writes_them() {
        let cases = [
            (r#"{"http.server.duration"}"#, r#"{"http.server.duration"}"#),
            (
                r#"{ "http.server.duration" , "service.name" = "x" , }"#,
                r#"{"http.server.duration","service.name"="x"}"#,
            ),
            (
                r#"http_requests_total{"service.name"!="x",code="200"}"#,
                r#"http_requests_total{"service.name"!="x",code="200"}"#,
            ),
            // A legacy name quoted reads as the name itself.
            (r#"{"up", job="a"}"#, r#"up{job="a"}"#),
            (
                r#"sum(rate({"http.requests"}[5m]))"#,
                r#"sum(rate({"http.requests"}[5m]))"#,
            ),
            (r#"max({"a.b"})"#, r#"max({"a.b"})"#),
            (
                r#"increase({"a\"b"}[1m]) / {"c.d"}"#,
                r#"increase({"a\"b"}[1m]) / {"c.d"}"#,
            ),
        ];
        for (input, canonical) in cases {
            let parsed = q(input);
            assert_eq!(parsed.to_string(), canonical, "rendering of `{input}`");
            assert_eq!(q(canonical), parsed, "re-parse of `{canonical}`");
        }
        let query = q(r#"{"http.server.duration", "service.name"="x"}"#);
        let sel = query.selectors()[0];
        assert_eq!(sel.metric, "http.server.duration");
        assert!(sel.matches(&sample(
            "http.server.duration",
            &[("service.name", "x")],
            1.0
        )));
        assert!(!sel.matches(&sample(
            "http.server.duration",
            &[("service.name", "y")],
            1.0
        )));
        assert!(!sel.matches(&sample(
            "http_server_duration",
            &[("service.name", "x")],
            1.0
        )));
        // Evaluated over a history of such series.
        let scrapes = vec![(
            MIN,
            vec![
                sample("http.server.duration", &[("service.name", "x")], 2.0),
                sample("http.server.duration", &[("service.name", "y")], 5.0),
            ],
        )];
        let h = history_for(&query, &scrapes);
        assert_eq!(query.evaluate(&h, MIN).map(|r| r.value), Ok(2.0));
    }

    /// Anything else with a quoted name is refused, saying what to write.
    #[test]
    fn quoted_names_anywhere_else_are_refused() {
        use QueryError as E;
        for (text, want) in [
            (r#"up{"a.b"}"#, E::StrayQuotedName { column: 4 }),
            (r#"{job="a", "a.b"}"#, E::StrayQuotedName { column: 11 }),
            (r#"{"a.b", "c.d"}"#, E::StrayQuotedName { column: 9 }),
            (r#"{""}"#, E::EmptyQuotedName { column: 2 }),
            (r#"up{""="x"}"#, E::EmptyQuotedName { column: 4 }),
            (r#"{"a.b", "__name__"="x"}"#, E::NameMatcher { column: 9 }),
            (r#"{job="a"}"#, E::MissingMetricName { column: 1 }),
            (r#"rate({job="a"}[1m])"#, E::MissingMetricName { column: 6 }),
        ] {
            assert_eq!(parse_query(text).err(), Some(want), "{text}");
        }
        let e = parse_query(r#"{"a.b" "c"}"#).unwrap_err();
        assert!(matches!(e, E::Unexpected { column: 8, .. }), "{e:?}");
        let e = parse_query(r#"{"a.b"=~"x"}"#).unwrap_err();
        assert!(matches!(e, E::RegexMatcher { .. }), "{e:?}");
        assert!(
            E::MissingMetricName { column: 1 }
                .to_string()
                .contains(r#"{"http.server.duration", label="value"}"#)
        );
    }

    /// One evaluation case: query, scrapes, evaluation time, expected outcome.
    struct Case {
        name: &'static str,
        query: &'static str,
        scrapes: Vec<(i64, Vec<Sample>)>,
        now: i64,
        expect: Result<(f64, u32), &'static str>,
    }

    fn check(cases: Vec<Case>) {
        for c in cases {
            let query = q(c.query);
            let h = history_for(&query, &c.scrapes);
            let got = query.evaluate(&h, c.now);
            match (&c.expect, &got) {
                (Ok((v, n)), Ok(r)) => {
                    assert!(
                        (r.value - v).abs() <= 1e-9 * v.abs().max(1.0),
                        "{}: value {} != {v}",
                        c.name,
                        r.value
                    );
                    assert_eq!(r.samples, *n, "{}: samples", c.name);
                }
                (Err(reason), Err(e)) => assert_eq!(&e.reason, reason, "{}", c.name),
                _ => panic!("{}: expected {:?}, got {got:?}", c.name, c.expect),
            }
        }
    }

    #[test]
    fn evaluate_instant_queries() {
        let depth = |at: i64, vals: &[(&str, f64)]| {
            (
                at,
                vals.iter()
                    .map(|(q, v)| sample("depth", &[("queue", q)], *v))
                    .chain([sample("other", &[], 99.0)])
                    .collect::<Vec<_>>(),
            )
        };
        check(vec![
            Case {
                name: "sum over series",
                query: "depth",
                scrapes: vec![depth(0, &[("a", 1.0), ("b", 2.0), ("c", 4.0)])],
                now: 1000,
                expect: Ok((7.0, 3)),
            },
            Case {
                name: "explicit sum equals bare",
                query: "sum(depth)",
                scrapes: vec![depth(0, &[("a", 1.0), ("b", 2.0)])],
                now: 0,
                expect: Ok((3.0, 2)),
            },
            Case {
                name: "matchers filter",
                query: "depth{queue!=\"a\"}",
                scrapes: vec![depth(0, &[("a", 1.0), ("b", 2.0), ("c", 4.0)])],
                now: 0,
                expect: Ok((6.0, 2)),
            },
            Case {
                name: "min",
                query: "min(depth)",
                scrapes: vec![depth(0, &[("a", 5.0), ("b", -2.0), ("c", 4.0)])],
                now: 0,
                expect: Ok((-2.0, 3)),
            },
            Case {
                name: "max",
                query: "max(depth)",
                scrapes: vec![depth(0, &[("a", 5.0), ("b", -2.0), ("c", 4.0)])],
                now: 0,
                expect: Ok((5.0, 3)),
            },
            Case {
                name: "latest scrape wins",
                query: "depth",
                scrapes: vec![depth(0, &[("a", 1.0)]), depth(MIN, &[("a", 10.0)])],
                now: MIN,
                expect: Ok((10.0, 1)),
            },
            Case {
                name: "scrapes after now are ignored",
                query: "depth",
                scrapes: vec![depth(0, &[("a", 1.0)]), depth(MIN, &[("a", 10.0)])],
                now: MIN - 1,
                expect: Ok((1.0, 1)),
            },
            Case {
                name: "vanished series not summed",
                query: "depth",
                scrapes: vec![
                    depth(0, &[("a", 1.0), ("b", 100.0)]),
                    depth(MIN, &[("a", 2.0)]),
                ],
                now: MIN,
                expect: Ok((2.0, 1)),
            },
            Case {
                name: "all series vanished",
                query: "depth",
                scrapes: vec![depth(0, &[("a", 1.0)]), depth(MIN, &[])],
                now: MIN,
                expect: Err("no series matching `depth` in the latest scrape"),
            },
            Case {
                name: "no matching series is no data, not 0",
                query: "depth{queue=\"zzz\"}",
                scrapes: vec![depth(0, &[("a", 1.0)])],
                now: 0,
                expect: Err("no series matching `depth{queue=\"zzz\"}` in the latest scrape"),
            },
            Case {
                name: "empty history",
                query: "depth",
                scrapes: vec![],
                now: 0,
                expect: Err("no scrape recorded yet"),
            },
            Case {
                name: "stale",
                query: "depth",
                scrapes: vec![depth(0, &[("a", 1.0)])],
                now: 5 * MIN + 1000,
                expect: Err("stale: last scrape 301 s ago"),
            },
            Case {
                name: "exactly 5 minutes is not stale",
                query: "depth",
                scrapes: vec![depth(0, &[("a", 1.0)])],
                now: 5 * MIN,
                expect: Ok((1.0, 1)),
            },
            Case {
                name: "NaN value",
                query: "depth",
                scrapes: vec![depth(0, &[("a", 1.0), ("b", f64::NAN)])],
                now: 0,
                expect: Err("NaN"),
            },
            Case {
                name: "NaN in min is not skipped",
                query: "min(depth)",
                scrapes: vec![depth(0, &[("a", 1.0), ("b", f64::NAN)])],
                now: 0,
                expect: Err("NaN"),
            },
            Case {
                name: "infinite value",
                query: "max(depth)",
                scrapes: vec![depth(0, &[("a", f64::INFINITY)])],
                now: 0,
                expect: Err("not a finite number (+Inf)"),
            },
        ]);
    }

    fn counter(at: i64, value: f64) -> (i64, Vec<Sample>) {
        (at, vec![sample("errors_total", &[("pod", "p1")], value)])
    }

    #[test]
    fn evaluate_range_queries() {
        check(vec![
            Case {
                name: "increase of a monotone counter",
                query: "increase(errors_total[5m])",
                scrapes: vec![counter(0, 10.0), counter(MIN, 20.0), counter(2 * MIN, 35.0)],
                now: 2 * MIN,
                expect: Ok((25.0, 3)),
            },
            Case {
                name: "rate of a monotone counter",
                query: "rate(errors_total[5m])",
                scrapes: vec![counter(0, 10.0), counter(MIN, 20.0), counter(2 * MIN, 34.0)],
                now: 2 * MIN,
                expect: Ok((24.0 / 120.0, 3)),
            },
            Case {
                name: "rate across a counter reset",
                query: "rate(errors_total[5m])",
                scrapes: vec![
                    counter(0, 10.0),
                    counter(MIN, 20.0),
                    counter(2 * MIN, 5.0),
                    counter(3 * MIN, 15.0),
                ],
                now: 3 * MIN,
                // 10 + 5 (reset: the new value) + 10 over 180 s
                expect: Ok((25.0 / 180.0, 4)),
            },
            Case {
                name: "increase across a counter reset",
                query: "increase(errors_total[5m])",
                scrapes: vec![counter(0, 10.0), counter(MIN, 3.0)],
                now: MIN,
                expect: Ok((3.0, 2)),
            },
            Case {
                name: "window excludes old points (left-open)",
                query: "increase(errors_total[2m])",
                scrapes: vec![
                    counter(0, 0.0),
                    counter(MIN, 100.0),
                    counter(2 * MIN, 110.0),
                    counter(3 * MIN, 130.0),
                ],
                now: 3 * MIN,
                // the point at exactly now - 2m is outside: 110 -> 130
                expect: Ok((20.0, 2)),
            },
            Case {
                name: "rate summed over series",
                query: "sum(rate(errors_total[5m]))",
                scrapes: vec![
                    (
                        0,
                        vec![
                            sample("errors_total", &[("pod", "a")], 0.0),
                            sample("errors_total", &[("pod", "b")], 100.0),
                        ],
                    ),
                    (
                        MIN,
                        vec![
                            sample("errors_total", &[("pod", "a")], 60.0),
                            sample("errors_total", &[("pod", "b")], 220.0),
                        ],
                    ),
                ],
                now: MIN,
                expect: Ok((1.0 + 2.0, 4)),
            },
            Case {
                name: "max of per-series rates",
                query: "max(rate(errors_total[5m]))",
                scrapes: vec![
                    (
                        0,
                        vec![
                            sample("errors_total", &[("pod", "a")], 0.0),
                            sample("errors_total", &[("pod", "b")], 100.0),
                        ],
                    ),
                    (
                        MIN,
                        vec![
                            sample("errors_total", &[("pod", "a")], 60.0),
                            sample("errors_total", &[("pod", "b")], 220.0),
                        ],
                    ),
                ],
                now: MIN,
                expect: Ok((2.0, 4)),
            },
            Case {
                name: "series with one point in window is skipped",
                query: "increase(errors_total[5m])",
                scrapes: vec![
                    (0, vec![sample("errors_total", &[("pod", "a")], 1.0)]),
                    (
                        MIN,
                        vec![
                            sample("errors_total", &[("pod", "a")], 4.0),
                            sample("errors_total", &[("pod", "new")], 50.0),
                        ],
                    ),
                ],
                now: MIN,
                expect: Ok((3.0, 2)),
            },
            Case {
                name: "not enough samples",
                query: "rate(errors_total[5m])",
                scrapes: vec![counter(0, 10.0)],
                now: MIN,
                expect: Err("not enough samples (have 1, need 2 within 5m)"),
            },
            Case {
                name: "not enough samples inside the window",
                query: "rate(errors_total[1m])",
                scrapes: vec![counter(0, 10.0), counter(MIN, 12.0), counter(2 * MIN, 14.0)],
                now: 2 * MIN + 30_000,
                expect: Err("not enough samples (have 1, need 2 within 1m)"),
            },
            Case {
                name: "range over no series",
                query: "rate(missing_total[5m])",
                scrapes: vec![counter(0, 10.0), counter(MIN, 12.0)],
                now: MIN,
                expect: Err("no series matching `missing_total` in the last 5m"),
            },
            Case {
                name: "NaN in a counter",
                query: "increase(errors_total[5m])",
                scrapes: vec![
                    counter(0, 10.0),
                    counter(MIN, f64::NAN),
                    counter(2 * MIN, 12.0),
                ],
                now: 2 * MIN,
                expect: Err("NaN"),
            },
            Case {
                name: "stale range",
                query: "rate(errors_total[1h])",
                scrapes: vec![counter(0, 10.0), counter(MIN, 12.0)],
                now: 7 * MIN,
                expect: Err("stale: last scrape 360 s ago"),
            },
        ]);
    }

    #[test]
    fn evaluate_division() {
        let scrape = |at: i64, err: f64, req: f64| {
            (
                at,
                vec![
                    sample("errors_total", &[], err),
                    sample("requests_total", &[], req),
                    sample("ready", &[("pod", "a")], 1.0),
                    sample("ready", &[("pod", "b")], 0.0),
                    sample("pods", &[], 4.0),
                ],
            )
        };
        check(vec![
            Case {
                name: "ratio of rates",
                query: "rate(errors_total[5m]) / rate(requests_total[5m])",
                scrapes: vec![scrape(0, 0.0, 0.0), scrape(MIN, 5.0, 100.0)],
                now: MIN,
                expect: Ok((0.05, 4)),
            },
            Case {
                name: "ratio of instants",
                query: "(sum(ready)) / pods",
                scrapes: vec![scrape(0, 0.0, 0.0)],
                now: 0,
                expect: Ok((0.25, 3)),
            },
            Case {
                name: "division by zero",
                query: "increase(errors_total[5m]) / increase(requests_total[5m])",
                scrapes: vec![scrape(0, 1.0, 7.0), scrape(MIN, 3.0, 7.0)],
                now: MIN,
                expect: Err("division by zero"),
            },
            Case {
                name: "min over a zero is a zero denominator",
                query: "pods / min(ready)",
                scrapes: vec![scrape(0, 0.0, 0.0)],
                now: 0,
                expect: Err("division by zero"),
            },
            Case {
                name: "numerator no data",
                query: "absent_metric / pods",
                scrapes: vec![scrape(0, 0.0, 0.0)],
                now: 0,
                expect: Err("no series matching `absent_metric` in the latest scrape"),
            },
            Case {
                name: "denominator no data",
                query: "pods / rate(requests_total[5m])",
                scrapes: vec![scrape(0, 0.0, 0.0)],
                now: 0,
                expect: Err("not enough samples (have 1, need 2 within 5m)"),
            },
            Case {
                name: "overflowing quotient",
                query: "pods / ready{pod=\"a\"}",
                scrapes: vec![(
                    0,
                    vec![
                        sample("pods", &[], f64::MAX),
                        sample("ready", &[("pod", "a")], 0.5),
                    ],
                )],
                now: 0,
                expect: Err("not a finite number (+Inf)"),
            },
        ]);
    }

    proptest! {
        #[test]
        fn parse_query_never_panics(text in any::<String>()) {
            let _ = parse_query(&text);
        }

        #[test]
        fn parse_query_never_panics_on_query_like_text(
            text in r#"[a-z_(){}\[\]=!~"\\/, 0-9smhd+*<>'`.:-]{0,40}"#
        ) {
            if let Ok(query) = parse_query(&text) {
                // What parses renders to text that parses back to the same query.
                prop_assert_eq!(parse_query(&query.to_string()), Ok(query));
            }
        }

        #[test]
        fn rate_of_monotone_counter_is_slope(
            start in 0.0f64..1e9,
            steps in prop::collection::vec((1i64..120_000, 0.0f64..1e6), 1..30),
        ) {
            let query = q("rate(c_total[7d])");
            let mut h = History::new();
            let (mut t, mut v) = (1_000_000i64, start);
            h.record(t, &[sample("c_total", &[], v)], &query.selectors());
            let first = (t, v);
            for (dt, dv) in &steps {
                t += dt;
                v += dv;
                h.record(t, &[sample("c_total", &[], v)], &query.selectors());
            }
            let expected = (v - first.1) / ((t - first.0) as f64 / 1000.0);
            let got = query.evaluate(&h, t);
            prop_assert!(got.is_ok(), "{:?}", got);
            if let Ok(r) = got {
                prop_assert!(
                    (r.value - expected).abs() <= 1e-6 * expected.abs().max(1.0),
                    "rate {} != {}", r.value, expected
                );
                prop_assert_eq!(r.samples as usize, steps.len() + 1);
            }
        }
    }
}

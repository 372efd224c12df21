//! Parsing and validating the text of a scrape query.

use crate::indicators::exposition::{MatchOp, Matcher};
use crate::indicators::selector::Selector;

use super::ast::{Aggregation, Operand, Query, RangeFunction, Source};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::indicators::history::History;
    use crate::indicators::query::tests::q;
    use proptest::prelude::*;

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
    }
}

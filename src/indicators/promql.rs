//! Decoding the body of a Prometheus HTTP API instant query (`GET /api/v1/query`) into
//! the one number a `prometheus:` indicator source needs.
//!
//! Guarantees:
//! - pure: no IO; the caller fetches the body and hands it over as text;
//! - never panics, whatever the input;
//! - a success is exactly one finite number: a `vector` result with exactly one sample,
//!   or a `scalar` result; everything else is a [`PromError`] that says why and, where
//!   it can, what to change in the query;
//! - several queries can be asked as one ([`batch_query`]) and the answer split back into one
//!   number per query ([`decode_batch`]); a query whose part is not exactly one finite number is
//!   asked again alone, so that its error is its own.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// How many label sets a [`PromError::SeveralSeries`] lists.
const LISTED_SERIES: usize = 3;

/// Why an instant-query response gave no usable number.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PromError {
    /// The body is not JSON at all (e.g. an HTML error page from a proxy).
    #[error(
        "response is not JSON ({reason}); body starts with `{start}`: check that the source URL points at Prometheus' /api/v1/query"
    )]
    InvalidJson { reason: String, start: String },

    /// JSON, but not shaped like a Prometheus API response.
    #[error(
        "response is not a Prometheus query response: {reason}; check that the source URL points at Prometheus' /api/v1/query"
    )]
    Malformed { reason: String },

    /// `"status": "error"`: Prometheus rejected or failed the query.
    #[error("Prometheus answered with an error ({error_type}): {error}")]
    QueryFailed { error_type: String, error: String },

    /// A `status` other than `success` or `error`.
    #[error("unknown response status `{status}`: expected `success` or `error`")]
    UnknownStatus { status: String },

    /// A vector with no sample.
    #[error("empty result: the query matched no series; check the metric name and label matchers")]
    EmptyResult,

    /// A vector with more than one sample.
    #[error(
        "{count} series: aggregate with sum()/max() (or narrow the label matchers) so the query gives one number; got {listed}"
    )]
    SeveralSeries {
        count: usize,
        /// Up to three label sets, rendered `metric{label="value",...}`, then `and N more`.
        listed: String,
    },

    /// NaN, +Inf or -Inf.
    #[error(
        "not a finite number: the query gave {value}; guard divisions against zero (e.g. `a / (b > 0)`)"
    )]
    NotFinite { value: String },

    /// `matrix` or `string` (or an unknown) result type.
    #[error(
        "result type `{result_type}` cannot be used: the query must give one number (an instant vector with one series, or a scalar){hint}"
    )]
    UnusableResultType { result_type: String, hint: String },

    /// The sample value is not a number.
    #[error("value `{value}` is not a number")]
    InvalidValue { value: String },
}

#[derive(Deserialize)]
struct Response {
    status: String,
    #[serde(default)]
    data: Option<Value>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    #[serde(default)]
    result: Value,
}

#[derive(Deserialize)]
struct VectorSample {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    value: (Value, Value),
}

fn malformed(reason: impl Into<String>) -> PromError {
    PromError::Malformed {
        reason: reason.into(),
    }
}

/// Decode the JSON body of GET /api/v1/query. A usable result is exactly one finite number:
/// resultType "vector" with exactly one sample, or "scalar". Everything else is an error saying why:
/// status "error" (with errorType/error text), empty vector ("empty result: the query matched no
/// series"), several series ("N series: aggregate with sum()/max() ..." listing up to 3 label
/// sets), NaN/±Inf ("not a finite number"), a matrix/string result, malformed JSON, value not
/// parseable.
pub fn decode_instant(body: &str) -> Result<f64, PromError> {
    let data = success_data(body)?;
    match data.result_type.as_str() {
        "vector" => decode_vector(data.result),
        "scalar" => {
            let (_, v): (Value, Value) = serde_json::from_value(data.result)
                .map_err(|e| malformed(format!("scalar result: {e}")))?;
            sample_value(&v)
        }
        "matrix" => Err(PromError::UnusableResultType {
            result_type: "matrix".to_owned(),
            hint: "; a range selector `x[5m]` needs a function around it, e.g. `sum(rate(x[5m]))`"
                .to_owned(),
        }),
        other => Err(PromError::UnusableResultType {
            result_type: other.to_owned(),
            hint: String::new(),
        }),
    }
}

/// One series' raw samples, `(at_ms, value)`, as a range selector's answer gives them.
pub type SeriesSamples = Vec<(i64, f64)>;

#[derive(Deserialize)]
struct MatrixSeries {
    #[serde(default)]
    values: Vec<(Value, Value)>,
}

/// Decode the JSON body of GET /api/v1/query for a range selector (`x{a="b"}[5m]`): each
/// matching series' raw samples, in the answer's order (what a judge reads its counters from).
///
/// # Errors
/// As [`decode_instant`], and a result that is not a `matrix`; an empty matrix is
/// [`PromError::EmptyResult`]. A sample value that is not a number is
/// [`PromError::InvalidValue`]; NaN and infinities are given as they are (the caller judges).
pub fn decode_matrix(body: &str) -> Result<Vec<SeriesSamples>, PromError> {
    let data = success_data(body)?;
    if data.result_type != "matrix" {
        return Err(PromError::UnusableResultType {
            result_type: data.result_type,
            hint: "; the raw samples of a counter are read with a range selector `x[5m]`"
                .to_owned(),
        });
    }
    let series: Vec<MatrixSeries> = serde_json::from_value(data.result)
        .map_err(|e| malformed(format!("matrix result: {e}")))?;
    if series.is_empty() {
        return Err(PromError::EmptyResult);
    }
    series
        .into_iter()
        .map(|s| {
            s.values
                .iter()
                .map(|(at, v)| {
                    let at = at
                        .as_f64()
                        .ok_or_else(|| malformed(format!("sample time `{at}` is not a number")))?;
                    let value = match sample_value(v) {
                        Ok(n) => n,
                        Err(PromError::NotFinite { .. }) => f64::NAN,
                        Err(e) => return Err(e),
                    };
                    // Seconds with millisecond precision, as Prometheus writes them.
                    #[allow(clippy::cast_possible_truncation)]
                    let at_ms = (at * 1000.0).round() as i64;
                    Ok((at_ms, value))
                })
                .collect()
        })
        .collect()
}

/// The `data` of a `"status": "success"` answer, or the error the answer is.
fn success_data(body: &str) -> Result<Data, PromError> {
    let value: Value = serde_json::from_str(body).map_err(|e| PromError::InvalidJson {
        reason: e.to_string(),
        start: body.trim_start().chars().take(60).collect(),
    })?;
    let response: Response = serde_json::from_value(value).map_err(|e| malformed(e.to_string()))?;
    match response.status.as_str() {
        "success" => {}
        "error" => {
            return Err(PromError::QueryFailed {
                error_type: response.error_type.unwrap_or_else(|| "unknown".to_owned()),
                error: response
                    .error
                    .unwrap_or_else(|| "no error text given".to_owned()),
            });
        }
        other => {
            return Err(PromError::UnknownStatus {
                status: other.to_owned(),
            });
        }
    }
    let data = response
        .data
        .ok_or_else(|| malformed("status is success but `data` is missing"))?;
    let data: Data =
        serde_json::from_value(data).map_err(|e| malformed(format!("in `data`: {e}")))?;
    Ok(data)
}

/// The samples of a `vector` result.
fn vector_samples(result: Value) -> Result<Vec<VectorSample>, PromError> {
    serde_json::from_value(result).map_err(|e| malformed(format!("vector result: {e}")))
}

fn decode_vector(result: Value) -> Result<f64, PromError> {
    let samples = vector_samples(result)?;
    match samples.as_slice() {
        [] => Err(PromError::EmptyResult),
        [one] => sample_value(&one.value.1),
        several => {
            let mut listed: Vec<String> = several
                .iter()
                .take(LISTED_SERIES)
                .map(|s| label_set(&s.metric))
                .collect();
            if several.len() > LISTED_SERIES {
                listed.push(format!("and {} more", several.len() - LISTED_SERIES));
            }
            Err(PromError::SeveralSeries {
                count: several.len(),
                listed: listed.join(", "),
            })
        }
    }
}

/// `name{a="x",b="y"}` (the `__name__` label as the prefix), `{}` for no labels.
pub(crate) fn label_set(metric: &BTreeMap<String, String>) -> String {
    let name = metric.get("__name__").map(String::as_str).unwrap_or("");
    let labels: Vec<String> = metric
        .iter()
        .filter(|(k, _)| k.as_str() != "__name__")
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect();
    if labels.is_empty() && !name.is_empty() {
        return name.to_owned();
    }
    format!("{name}{{{}}}", labels.join(","))
}

/// A sample value: a string such as `"42"`, `"NaN"`, `"+Inf"` (or, leniently, a JSON number).
fn sample_value(v: &Value) -> Result<f64, PromError> {
    let (number, text) = match v {
        Value::String(s) => match s.trim().parse::<f64>() {
            Ok(n) => (n, s.clone()),
            Err(_) => return Err(PromError::InvalidValue { value: s.clone() }),
        },
        Value::Number(n) => match n.as_f64() {
            Some(f) => (f, n.to_string()),
            None => {
                return Err(PromError::InvalidValue {
                    value: n.to_string(),
                });
            }
        },
        other => {
            return Err(PromError::InvalidValue {
                value: other.to_string(),
            });
        }
    };
    if number.is_finite() {
        Ok(number)
    } else {
        Err(PromError::NotFinite { value: text })
    }
}

/// The label that tells the parts of a batched query apart (see [`batch_query`]).
pub const BATCH_LABEL: &str = "queue_migrate_part";

/// Several instant queries as one: `label_replace((q0), "queue_migrate_part", "0", "", "") or
/// label_replace((q1), …, "1", …) or …`. Each part's series carry the part's index, so no part's
/// series hides another's in the `or`, and [`decode_batch`] gives each part its own answer. A
/// line feed closes each part, so that a `#` comment in a query cannot swallow the rest.
///
/// A part that is not an instant vector (a scalar, a range vector) fails the whole query: the
/// caller asks such parts one by one.
pub fn batch_query(parts: &[&str]) -> String {
    let mut text = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            text.push_str(" or ");
        }
        text.push_str(&format!(
            "label_replace(({part}\n), \"{BATCH_LABEL}\", \"{i}\", \"\", \"\")"
        ));
    }
    text
}

/// Whether `query` can be a part of a [`batch_query`]: one self-contained expression (its
/// brackets balanced outside strings and comments, its strings closed), so that the parentheses
/// around it cannot join it with the text around it (`x) or vector(1`, an error alone, would
/// read as a number in a batch); and not plainly a scalar (a number, `scalar(…)`), which would
/// fail every batch it is in.
pub fn batchable(query: &str) -> bool {
    let trimmed = query.trim();
    if trimmed.is_empty() || trimmed.parse::<f64>().is_ok() || trimmed.starts_with("scalar(") {
        return false;
    }
    let mut open: Vec<char> = Vec::new();
    let mut chars = query.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => loop {
                match chars.next() {
                    None => return false,
                    Some('\\') => {
                        if chars.next().is_none() {
                            return false;
                        }
                    }
                    Some(q) if q == c => break,
                    Some(_) => {}
                }
            },
            // A raw string: its end must come.
            '`' if !chars.by_ref().any(|q| q == '`') => return false,
            '#' => {
                let _ = chars.by_ref().find(|&q| q == '\n');
            }
            '(' => open.push(')'),
            '[' => open.push(']'),
            '{' => open.push('}'),
            // A closing bracket must close the last one opened.
            ')' | ']' | '}' if open.pop() != Some(c) => return false,
            _ => {}
        }
    }
    open.is_empty()
}

/// Decode the answer to a [`batch_query`] of `parts` queries: for each part, its number when it
/// gave exactly one series with a finite value, `None` otherwise (no series, several, NaN): the
/// caller asks that part alone, whose own answer says why.
///
/// # Errors
/// The answer as a whole is not a usable vector (the same errors as [`decode_instant`]), or a
/// series carries no part index, or one out of range: nothing in it can be trusted to a part.
pub fn decode_batch(body: &str, parts: usize) -> Result<Vec<Option<f64>>, PromError> {
    let data = success_data(body)?;
    if data.result_type != "vector" {
        return Err(PromError::UnusableResultType {
            result_type: data.result_type,
            hint: String::new(),
        });
    }
    let samples = vector_samples(data.result)?;
    let mut seen = vec![0_usize; parts];
    let mut values = vec![None; parts];
    for sample in samples {
        let part = sample
            .metric
            .get(BATCH_LABEL)
            .and_then(|i| i.parse::<usize>().ok())
            .filter(|&i| i < parts)
            .ok_or_else(|| malformed(format!("a series without a valid `{BATCH_LABEL}` label")))?;
        seen[part] += 1;
        values[part] = sample_value(&sample.value.1).ok();
    }
    Ok(values
        .into_iter()
        .zip(seen)
        .map(|(value, seen)| value.filter(|_| seen == 1))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn vector(samples: &str) -> String {
        format!(r#"{{"status":"success","data":{{"resultType":"vector","result":[{samples}]}}}}"#)
    }

    fn one(labels: &str, value: &str) -> String {
        format!(r#"{{"metric":{{{labels}}},"value":[1700000000.123,{value}]}}"#)
    }

    #[test]
    fn decodes_usable_results() {
        let cases = [
            (vector(&one(r#""__name__":"up","job":"a""#, r#""42""#)), 42.0),
            (vector(&one("", r#""0.25""#)), 0.25),
            (vector(&one("", r#""-1e3""#)), -1000.0),
            (vector(&one("", "7")), 7.0),
            (
                r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"3.5"]}}"#
                    .to_owned(),
                3.5,
            ),
            (
                r#"{"status":"success","warnings":["w"],"infos":["i"],"data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}"#
                    .to_owned(),
                1.0,
            ),
            // metric may be omitted
            (
                r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"2"]}]}}"#
                    .to_owned(),
                2.0,
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(decode_instant(&body), Ok(expected), "body {body}");
        }
    }

    #[test]
    fn rejects_unusable_results() {
        use PromError as E;
        let cases: Vec<(String, PromError)> = vec![
            (
                r#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#
                    .to_owned(),
                E::QueryFailed {
                    error_type: "bad_data".into(),
                    error: "parse error at char 5".into(),
                },
            ),
            (
                r#"{"status":"error"}"#.to_owned(),
                E::QueryFailed {
                    error_type: "unknown".into(),
                    error: "no error text given".into(),
                },
            ),
            (
                r#"{"status":"pending","data":{}}"#.to_owned(),
                E::UnknownStatus {
                    status: "pending".into(),
                },
            ),
            (vector(""), E::EmptyResult),
            (
                vector(&[one(r#""job":"a""#, r#""1""#), one(r#""job":"b""#, r#""2""#)].join(",")),
                E::SeveralSeries {
                    count: 2,
                    listed: r#"{job="a"}, {job="b"}"#.into(),
                },
            ),
            (
                vector(
                    &(0..5)
                        .map(|i| one(&format!(r#""__name__":"up","i":"{i}""#), r#""1""#))
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                E::SeveralSeries {
                    count: 5,
                    listed: r#"up{i="0"}, up{i="1"}, up{i="2"}, and 2 more"#.into(),
                },
            ),
            (
                vector(&one("", r#""NaN""#)),
                E::NotFinite {
                    value: "NaN".into(),
                },
            ),
            (
                vector(&one("", r#""+Inf""#)),
                E::NotFinite {
                    value: "+Inf".into(),
                },
            ),
            (
                vector(&one("", r#""-Inf""#)),
                E::NotFinite {
                    value: "-Inf".into(),
                },
            ),
            (
                vector(&one("", r#""1e999""#)),
                E::NotFinite {
                    value: "1e999".into(),
                },
            ),
            (
                vector(&one("", r#""forty-two""#)),
                E::InvalidValue {
                    value: "forty-two".into(),
                },
            ),
            (
                vector(&one("", "null")),
                E::InvalidValue {
                    value: "null".into(),
                },
            ),
            (
                r#"{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}"#
                    .to_owned(),
                E::NotFinite {
                    value: "NaN".into(),
                },
            ),
            (
                r#"{"status":"success","data":{"resultType":"string","result":[1,"hello"]}}"#
                    .to_owned(),
                E::UnusableResultType {
                    result_type: "string".into(),
                    hint: String::new(),
                },
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(decode_instant(&body), Err(expected), "body {body}");
        }
    }

    #[test]
    fn rejects_matrix_with_hint() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"],[2,"2"]]}]}}"#;
        match decode_instant(body) {
            Err(e @ PromError::UnusableResultType { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains("`matrix`"), "{msg}");
                assert!(msg.contains("sum(rate(x[5m]))"), "{msg}");
            }
            other => panic!("expected UnusableResultType, got {other:?}"),
        }
    }

    #[test]
    fn rejects_malformed_bodies() {
        for body in [
            "",
            "<html><body>502 Bad Gateway</body></html>",
            "{",
            "[1,2]",
        ] {
            assert!(
                matches!(
                    decode_instant(body),
                    Err(PromError::InvalidJson { .. } | PromError::Malformed { .. })
                ),
                "body {body:?}"
            );
        }
        for body in [
            r#"{}"#,
            r#"{"status":1}"#,
            r#"{"status":"success"}"#,
            r#"{"status":"success","data":{"result":[]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":{}}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"1"]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}"#,
            r#"{"status":"success","data":{"resultType":"scalar","result":"3"}}"#,
        ] {
            assert!(
                matches!(decode_instant(body), Err(PromError::Malformed { .. })),
                "body {body}: {:?}",
                decode_instant(body)
            );
        }
        let html = decode_instant("<html>oops</html>");
        match html {
            Err(e @ PromError::InvalidJson { .. }) => {
                assert!(e.to_string().contains("<html>oops"), "{e}");
            }
            other => panic!("expected InvalidJson, got {other:?}"),
        }
    }

    #[test]
    fn error_messages() {
        let msg = |b: &str| match decode_instant(b) {
            Err(e) => e.to_string(),
            Ok(v) => panic!("expected an error, got {v}"),
        };
        assert!(msg(&vector("")).starts_with("empty result: the query matched no series"));
        assert!(
            msg(&vector(&[one("", r#""1""#), one("", r#""2""#)].join(",")))
                .starts_with("2 series: aggregate with sum()/max()")
        );
        assert!(msg(&vector(&one("", r#""NaN""#))).starts_with("not a finite number"));
        assert!(
            msg(r#"{"status":"error","errorType":"timeout","error":"query timed out"}"#)
                .contains("(timeout): query timed out")
        );
    }

    #[test]
    fn a_batch_wraps_each_part_in_its_own_label_and_closes_its_comments() {
        assert_eq!(
            batch_query(&["up # the scrape", "sum(x) or vector(0)"]),
            "label_replace((up # the scrape\n), \"queue_migrate_part\", \"0\", \"\", \"\") or \
             label_replace((sum(x) or vector(0)\n), \"queue_migrate_part\", \"1\", \"\", \"\")"
        );
        assert_eq!(batch_query(&[]), "");
    }

    #[test]
    fn only_a_self_contained_expression_that_is_not_plainly_a_scalar_goes_in_a_batch() {
        for yes in [
            "sum(rate(x[5m]))",
            r#"max(up{job="a)"}) or vector(0)"#,
            r#"sum(x{a='[', b="\"("}) # a comment ) with ( brackets"#,
            "sum(x{a=`)`})",
            "vector(1)",
            "time() - max(x)",
        ] {
            assert!(batchable(yes), "{yes}");
        }
        for no in [
            "",
            "  ",
            "x) or vector(1",
            "(x",
            "x]",
            "sum(x{a=\"}",
            "sum(x{a=`}",
            "x{a=\"\\",
            "(x]",
            "42",
            " 1e3 ",
            "scalar(sum(x))",
        ] {
            assert!(!batchable(no), "{no:?}");
        }
    }

    #[test]
    fn a_batch_answer_gives_each_part_its_number_or_none_when_it_must_be_asked_alone() {
        let part =
            |i: usize, value: &str| one(&format!(r#""job":"a","queue_migrate_part":"{i}""#), value);
        let body = vector(
            &[
                part(0, r#""1.5""#),
                part(2, r#""7""#),
                part(3, r#""1""#),
                part(3, r#""2""#),
                part(4, r#""NaN""#),
                part(5, r#""x""#),
            ]
            .join(","),
        );
        // Part 1 matched nothing, part 3 gave two series, 4 is NaN, 5 not a number.
        assert_eq!(
            decode_batch(&body, 6),
            Ok(vec![Some(1.5), None, Some(7.0), None, None, None])
        );
        assert_eq!(decode_batch(&vector(""), 2), Ok(vec![None, None]));
    }

    #[test]
    fn a_batch_answer_that_cannot_be_split_by_part_is_an_error() {
        let failed = r#"{"status":"error","errorType":"bad_data","error":"expected type instant vector in call to function \"label_replace\", got scalar"}"#;
        assert!(matches!(
            decode_batch(failed, 2),
            Err(PromError::QueryFailed { .. })
        ));
        // A series without the part label, or with an index beyond the parts asked.
        for labels in [
            r#""job":"a""#,
            r#""queue_migrate_part":"2""#,
            r#""queue_migrate_part":"-1""#,
            r#""queue_migrate_part":"one""#,
        ] {
            let body = vector(&one(labels, r#""1""#));
            assert!(
                matches!(decode_batch(&body, 2), Err(PromError::Malformed { .. })),
                "{labels}: {:?}",
                decode_batch(&body, 2)
            );
        }
        let scalar = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"3"]}}"#;
        assert!(matches!(
            decode_batch(scalar, 1),
            Err(PromError::UnusableResultType { .. })
        ));
        assert!(matches!(
            decode_batch("<html>", 1),
            Err(PromError::InvalidJson { .. })
        ));
    }

    fn json_like() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("\"success\"".to_owned()),
            Just("\"vector\"".to_owned()),
            Just("\"scalar\"".to_owned()),
            Just("\"NaN\"".to_owned()),
            Just("\"1\"".to_owned()),
            any::<f64>().prop_map(|f| format!("\"{f}\"")),
            any::<i64>().prop_map(|i| i.to_string()),
            "[a-z\"{}\\[\\],:]{0,8}",
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec(
                    (
                        prop_oneof![
                            Just("status"),
                            Just("data"),
                            Just("resultType"),
                            Just("result"),
                            Just("metric"),
                            Just("queue_migrate_part"),
                            Just("value"),
                            Just("errorType"),
                            Just("error"),
                        ],
                        inner
                    ),
                    0..4
                )
                .prop_map(|kv| {
                    let body: Vec<String> = kv
                        .into_iter()
                        .map(|(k, v)| format!("\"{k}\":{v}"))
                        .collect();
                    format!("{{{}}}", body.join(","))
                }),
            ]
        })
    }

    proptest! {
        #[test]
        fn decode_instant_never_panics(body in any::<String>()) {
            let _ = decode_instant(&body);
        }

        #[test]
        fn decode_batch_never_panics(body in json_like(), parts in 0_usize..4) {
            if let Ok(values) = decode_batch(&body, parts) {
                prop_assert_eq!(values.len(), parts);
                prop_assert!(values.iter().flatten().all(|v| v.is_finite()));
            }
        }

        #[test]
        fn decode_instant_never_panics_on_json_like_bodies(body in json_like()) {
            if let Ok(v) = decode_instant(&body) {
                prop_assert!(v.is_finite());
            }
        }

        #[test]
        fn decode_instant_reads_any_finite_value(v in any::<f64>().prop_filter("finite", |v| v.is_finite())) {
            let body = vector(&one(r#""job":"x""#, &format!("\"{v}\"")));
            prop_assert_eq!(decode_instant(&body), Ok(v));
        }
    }
}

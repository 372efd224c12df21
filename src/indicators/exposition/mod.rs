//! A strict parser for the Prometheus text exposition format (0.0.4) and for
//! the OpenMetrics text format, as far as needed to read samples correctly.
//!
//! [`parse`](fn@parse) reads a whole scrape body and returns an [`Exposition`]: the
//! samples, in source order, and one [`LineError`] per malformed sample line.
//!
//! # Guarantees
//!
//! * Every line that is neither blank nor a comment (first non-blank character
//!   `#`) is a sample line, and yields **exactly one** of: a [`Sample`] holding
//!   exactly what the line says (name, labels in source order with their values
//!   unescaped, value, timestamp), or a [`LineError`] carrying its 1-based line
//!   number. No sample line is ever skipped silently, and a line is never
//!   half-read: if anything on it is malformed, no sample comes out of it.
//! * Parsing never panics and never stops early: an error on one line does not
//!   affect the others.
//! * No IO, no clock, no regex; one pass over the input, with allocations per
//!   sample (name, label names and values), not per character.
//!
//! # What is accepted
//!
//! * Metric names `[a-zA-Z_:][a-zA-Z0-9_:]*`; label names `[a-zA-Z_][a-zA-Z0-9_]*`
//!   (except the reserved `__name__`); a label name at most once per sample.
//! * The quoted UTF-8 names of the Prometheus 3 text format: a metric name
//!   quoted as the first item inside the braces, with no name before them
//!   (`{"http.server.duration", "service.name"="x"} 1`), and quoted label names
//!   (`foo{"service.name"="x"} 1`), each with the escapes of a label value,
//!   never empty; `# TYPE "http.server.duration" histogram` names the family.
//!   A quoted name anywhere else (after a name, after a label, alone with `=`
//!   missing) is an error.
//! * Label values are double-quoted; the escapes `\\`, `\"` and `\n` are
//!   unescaped, any other escape is an error; every other character (`=`, `,`,
//!   `{`, `}`, `#`, spaces, any UTF-8) is literal. A trailing comma before `}`
//!   and an empty label set `{}` are allowed. Spaces and tabs are tolerated
//!   around `{`, `,`, `=`, `}` and between tokens, and at the start and end of a
//!   line, as the Prometheus text parser does. A final `\r` on a line is ignored.
//! * Values are decimal floats as Go's `strconv.ParseFloat` reads them (but
//!   not hexadecimal): `1027`, `807283.0`, `1.458255915e9`, `+Inf`, `-Inf`,
//!   `Inf`, `NaN` (case-insensitive).
//! * The format is detected from the whole document: a `# EOF` or a `# UNIT`
//!   line makes it [`Format::OpenMetrics`], otherwise it is [`Format::Text`].
//!   - Text format: the optional timestamp is an integer number of
//!     milliseconds (negative allowed); nothing may follow it.
//!   - OpenMetrics: the optional timestamp is a number of seconds
//!     (`1520879607.789`), converted exactly (decimal arithmetic, truncated to
//!     the millisecond as Prometheus does) to milliseconds; an exemplar
//!     (`# {trace_id="x"} 0.67 [timestamp]`) may follow and is checked for
//!     syntax and then ignored; a sample line after `# EOF` is an error.
//! * Comments (`# HELP`, `# TYPE`, `# UNIT`, `# EOF`, any other `#` line) and
//!   blank lines are not samples. `# TYPE` lines are recorded in
//!   [`Exposition::types`].
//!
//! Not supported (reported as errors, never misread): hexadecimal floats, and
//! the native-histogram / protobuf formats.

mod names;
mod parse;
mod types;

pub use names::{is_legacy_label_name, is_legacy_metric_name, write_name};
pub use parse::parse;
pub use types::{Exposition, Format, LineError, MatchOp, Matcher, Sample, escape_label_value};

#[cfg(test)]
use parse::seconds_to_ms;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn one(text: &str) -> Sample {
        let exposition = parse(text);
        assert!(exposition.errors.is_empty(), "{:?}", exposition.errors);
        assert_eq!(exposition.samples.len(), 1, "{:?}", exposition.samples);
        exposition.samples.into_iter().next().unwrap()
    }

    fn error(text: &str) -> LineError {
        let exposition = parse(text);
        assert!(
            exposition.samples.is_empty(),
            "expected no sample from {text:?}, got {:?}",
            exposition.samples
        );
        assert_eq!(exposition.errors.len(), 1, "{:?}", exposition.errors);
        exposition.errors.into_iter().next().unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn plain_samples() {
        assert_eq!(
            one("foo 1"),
            Sample {
                name: "foo".into(),
                labels: vec![],
                value: 1.0,
                timestamp_ms: None
            }
        );
        let s = one("a:b_c:d{x=\"1\",y=\"2\"} 807283.0 1395066363000\n");
        assert_eq!(s.name, "a:b_c:d");
        assert_eq!(s.labels, labels(&[("x", "1"), ("y", "2")]));
        assert_eq!(s.value, 807283.0);
        assert_eq!(s.timestamp_ms, Some(1395066363000));
        assert_eq!(one(":leading_colon 3").name, ":leading_colon");
        assert_eq!(one("_x 3").name, "_x");
    }

    #[test]
    fn special_values() {
        assert_eq!(one("x +Inf").value, f64::INFINITY);
        assert_eq!(one("x Inf").value, f64::INFINITY);
        assert_eq!(one("x -Inf").value, f64::NEG_INFINITY);
        assert!(one("x NaN").value.is_nan());
        assert_eq!(one("x 1.7560473e+07").value, 1.7560473e7);
        assert_eq!(one("x 1.458255915e9").value, 1.458255915e9);
        assert_eq!(one("x -0.5").value, -0.5);
        assert_eq!(one("x 1027").value, 1027.0);
    }

    #[test]
    fn label_values_are_literal_and_unescaped() {
        let s = one(
            r#"m{content_type="text/plain; version=0.0.4",a="x,y}z{",b="C:\\DIR\\F.TXT",c="say \"hi\"\nbye",d="héllo ☃ # 1 2"} 5"#,
        );
        assert_eq!(
            s.labels,
            labels(&[
                ("content_type", "text/plain; version=0.0.4"),
                ("a", "x,y}z{"),
                ("b", r"C:\DIR\F.TXT"),
                ("c", "say \"hi\"\nbye"),
                ("d", "héllo ☃ # 1 2"),
            ])
        );
        assert_eq!(one(r#"m{a=""} 1"#).labels, labels(&[("a", "")]));
        assert_eq!(one(r#"m{a="\\"} 1"#).labels, labels(&[("a", "\\")]));
        assert_eq!(one(r#"m{a="\\n"} 1"#).labels, labels(&[("a", "\\n")]));
    }

    #[test]
    fn whitespace_and_trailing_comma_are_tolerated() {
        let s = one(" \tm { a = \"1\" ,\tb=\"2\", } \t 3 \t 42 \t\r");
        assert_eq!(s.name, "m");
        assert_eq!(s.labels, labels(&[("a", "1"), ("b", "2")]));
        assert_eq!(s.value, 3.0);
        assert_eq!(s.timestamp_ms, Some(42));
        assert_eq!(one("m{} 1").labels, vec![]);
        assert_eq!(one("m{ } 1").labels, vec![]);
        assert_eq!(one("m{a=\"1\"}2").value, 2.0);
    }

    #[test]
    fn comments_and_blank_lines_are_not_samples() {
        let e = parse(
            "# HELP m Some help with \"quotes\" and {braces}\n# TYPE m counter\n\n   \n\t# indented comment\n#\nm 1\n",
        );
        assert!(e.errors.is_empty());
        assert_eq!(e.samples.len(), 1);
        assert_eq!(e.types.get("m").map(String::as_str), Some("counter"));
        assert_eq!(e.format, Format::Text);
        assert!(parse("").samples.is_empty());
        assert!(parse("").errors.is_empty());
    }

    #[test]
    fn text_format_timestamps_are_integer_milliseconds() {
        assert_eq!(one("x 1 -3982045").timestamp_ms, Some(-3982045));
        assert_eq!(one("x 1 +5").timestamp_ms, Some(5));
        let e = error("x 1 1520879607.789");
        assert!(e.message.contains("integer number of milliseconds"), "{e}");
        assert!(error("x 1 2 3").message.contains("after the timestamp"));
        assert!(
            error("x 1 99999999999999999999")
                .message
                .contains("invalid timestamp")
        );
        let e = error(r#"x 1 # {trace_id="a"} 1"#);
        assert!(e.message.contains("only valid in OpenMetrics"), "{e}");
    }

    #[test]
    fn openmetrics_timestamps_are_seconds() {
        let e = parse("a 1 1520879607.789\nb 2 -1.5\nc 3 1\nd 4 1.5e3\ne 5 0.0009\n# EOF\n");
        assert!(e.errors.is_empty(), "{:?}", e.errors);
        assert_eq!(e.format, Format::OpenMetrics);
        let ts: Vec<_> = e.samples.iter().map(|s| s.timestamp_ms).collect();
        assert_eq!(
            ts,
            vec![
                Some(1520879607789),
                Some(-1500),
                Some(1000),
                Some(1500000),
                Some(0)
            ]
        );
        // A `# UNIT` line alone is enough, wherever it is.
        let e = parse("a 1 2.5\n# UNIT a seconds\n");
        assert_eq!(e.format, Format::OpenMetrics);
        assert_eq!(e.samples[0].timestamp_ms, Some(2500));
        let e = parse("a 1 NaN\nb 1 Inf\nc 1 1e400\nd 1 0x10\n# EOF");
        assert_eq!(e.samples.len(), 0);
        assert_eq!(e.errors.len(), 4, "{:?}", e.errors);
    }

    #[test]
    fn exact_seconds_conversion() {
        assert_eq!(seconds_to_ms("1520879607.789"), Some(1520879607789));
        assert_eq!(seconds_to_ms("1520879607.7899"), Some(1520879607789));
        assert_eq!(seconds_to_ms("-0.0019"), Some(-1));
        assert_eq!(seconds_to_ms("1.520879607789e9"), Some(1520879607789));
        assert_eq!(seconds_to_ms("152087960778.9e-2"), Some(1520879607789));
        assert_eq!(seconds_to_ms(".5"), Some(500));
        assert_eq!(seconds_to_ms("5."), Some(5000));
        assert_eq!(seconds_to_ms("0e999999999999"), Some(0));
        assert_eq!(seconds_to_ms("1e-999999999999"), Some(0));
        assert_eq!(seconds_to_ms("000000000000000000000000001"), Some(1000));
        assert_eq!(seconds_to_ms("9223372036854775.807"), Some(i64::MAX));
        assert_eq!(seconds_to_ms("-9223372036854775.808"), Some(i64::MIN));
        assert_eq!(seconds_to_ms("9223372036854775.808"), None);
        assert_eq!(seconds_to_ms("1e999999999999"), None);
        for bad in [
            "", "-", ".", "e3", "1e", "1e+", "1.2.3", "1 ", "Inf", "NaN", "0x1",
        ] {
            assert_eq!(seconds_to_ms(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn exemplars_are_ignored_not_read_as_timestamps() {
        let text = "# TYPE foo histogram\n\
                    foo_bucket{le=\"1.0\"} 0 # {trace_id=\"KOO5S4vxi0o\"} 0.67\n\
                    foo_bucket{le=\"+Inf\"} 1 # {trace_id=\"oHg5SJYRHA0\"} 9.8 1520879607.789\n\
                    foo_bucket{le=\"2.0\"} 1 1520879607.5 # {a=\"x y # }\",} 9.8 1520879607.789\n\
                    foo_bucket{le=\"3.0\"} 1 #{} 1\n\
                    # EOF\n";
        let e = parse(text);
        assert!(e.errors.is_empty(), "{:?}", e.errors);
        let got: Vec<_> = e
            .samples
            .iter()
            .map(|s| (s.label("le").unwrap(), s.value, s.timestamp_ms))
            .collect();
        assert_eq!(
            got,
            vec![
                ("1.0", 0.0, None),
                ("+Inf", 1.0, None),
                ("2.0", 1.0, Some(1520879607500)),
                ("3.0", 1.0, None),
            ]
        );
        for bad in [
            "a 1 # trace_id=\"x\" 1",
            "a 1 # {trace_id=\"x\"}",
            "a 1 # {trace_id=\"x\"} abc",
            "a 1 # {trace_id=\"x} 1",
            "a 1 # {trace_id=\"x\"} 1 2 3",
            "a 1 # {trace_id=\"x\"} 1 1.2.3",
            "a 1 # {a=\"x\",a=\"y\"} 1",
            "a 1 2 garbage",
        ] {
            let e = parse(&format!("{bad}\n# EOF\n"));
            assert_eq!((e.samples.len(), e.errors.len()), (0, 1), "{bad:?}: {e:?}");
            assert_eq!(e.errors[0].line, 1);
        }
    }

    #[test]
    fn samples_after_eof_are_errors() {
        let e = parse("a 1\n# EOF\nb 2\n\n");
        assert_eq!(e.samples.len(), 1);
        assert_eq!(e.errors.len(), 1);
        assert_eq!(e.errors[0].line, 3);
        assert!(
            e.errors[0].message.contains("after `# EOF`"),
            "{:?}",
            e.errors
        );
    }

    #[test]
    fn malformed_lines_are_reported_with_their_line_number() {
        let cases: &[(&str, &str)] = &[
            ("m{a=\"x} 1", "unterminated value of label \"a\""),
            ("m{a=\"x\\", "unterminated value"),
            ("m{a=\"\\t\"} 1", "invalid escape sequence"),
            ("m{a=\"x\"", "unterminated label set"),
            ("m{a=\"x\" b=\"y\"} 1", "expected ',' or '}'"),
            ("m{a} 1", "expected '=' after label name \"a\""),
            ("m{a=x} 1", "expected '\"'"),
            ("m{1a=\"x\"} 1", "expected a label name"),
            ("m{a:b=\"x\"} 1", "expected '='"),
            ("m{a=\"x\",a=\"y\"} 1", "duplicate label name \"a\""),
            ("m{__name__=\"x\"} 1", "reserved"),
            ("m", "missing value"),
            ("m{a=\"x\"}", "missing value"),
            ("m{a=\"x\"}   ", "missing value"),
            ("m abc", "invalid value \"abc\""),
            ("m 1,5", "invalid value"),
            ("m 0x10", "invalid value"),
            ("1m 1", "invalid metric name"),
            ("m-x 1", "invalid character '-' in metric name"),
            ("m.x 1", "invalid character '.'"),
            ("m{\"x.y\"} 1", "may only come first inside the braces"),
            ("{a=\"b\", \"x.y\"} 1", "may only come first"),
            ("{\"x.y\", \"z.w\"} 1", "may only come first"),
            (
                "{\"x.y\" \"z\"} 1",
                "expected ',' or '}' after the quoted metric name",
            ),
            ("{\"\"} 1", "empty quoted metric name"),
            ("m{\"\"=\"x\"} 1", "empty quoted label name"),
            ("{\"x.y} 1", "unterminated"),
            ("{\"x\\q\"} 1", "invalid escape sequence"),
            ("{\"x.y\", \"__name__\"=\"z\"} 1", "reserved"),
            (
                "{\"x.y\", \"a\"=\"1\", a=\"2\"} 1",
                "duplicate label name \"a\"",
            ),
            ("{job=\"x\"} 1", "missing metric name"),
            ("{} 1", "missing metric name"),
            ("\"x.y\" 1", "invalid metric name"),
            ("{\"x.y\"}", "missing value"),
            ("é 1", "invalid metric name"),
            ("\u{feff}m 1", "invalid metric name"),
        ];
        for (line, expected) in cases {
            let text = format!("# TYPE m gauge\nok 1\n{line}\nok 2\n");
            let e = parse(&text);
            assert_eq!(e.samples.len(), 2, "{line:?}: {:?}", e.samples);
            assert_eq!(e.errors.len(), 1, "{line:?}: {:?}", e.errors);
            assert_eq!(e.errors[0].line, 3, "{line:?}");
            assert!(
                e.errors[0].message.contains(expected),
                "{line:?}: {:?} does not contain {expected:?}",
                e.errors[0].message
            );
            assert!(e.errors[0].to_string().starts_with("line 3: column "));
        }
    }

    /// Issue 32: the Prometheus 3 text format quotes UTF-8 names (OpenTelemetry's dotted ones):
    /// the metric name first inside the braces, label names before their `=`.
    #[test]
    fn prometheus_3_quoted_names_read_exactly() {
        let text = "# HELP \"http.server.duration\" Duration.\n\
                    # TYPE \"http.server.duration\" histogram\n\
                    {\"http.server.duration\", \"service.name\"=\"x\"} 1\n\
                    { \"http.server.duration\" , le=\"+Inf\" , } 2 1700000000000\n\
                    {\"http.server.duration\"} 3\n\
                    http_requests_total{\"service.name\"=\"a b\",code=\"200\"} 4\n\
                    {\"a\\\"b\\\\c{}=\"} 5\n\
                    {\"legacy_name\"} 6\n\
                    {\"ünï.cødé\", \"ключ\"=\"значение\"} 7\n";
        let e = parse(text);
        assert_eq!(e.errors, vec![]);
        type Read<'a> = (&'a str, Vec<(&'a str, &'a str)>, f64, Option<i64>);
        let got: Vec<Read<'_>> = e
            .samples
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.labels
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect(),
                    s.value,
                    s.timestamp_ms,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "http.server.duration",
                    vec![("service.name", "x")],
                    1.0,
                    None
                ),
                (
                    "http.server.duration",
                    vec![("le", "+Inf")],
                    2.0,
                    Some(1_700_000_000_000)
                ),
                ("http.server.duration", vec![], 3.0, None),
                (
                    "http_requests_total",
                    vec![("service.name", "a b"), ("code", "200")],
                    4.0,
                    None
                ),
                ("a\"b\\c{}=", vec![], 5.0, None),
                ("legacy_name", vec![], 6.0, None),
                ("ünï.cødé", vec![("ключ", "значение")], 7.0, None),
            ]
        );
        assert_eq!(
            e.types.get("http.server.duration").map(String::as_str),
            Some("histogram")
        );
        // Written back quoted where a name is not a legacy one.
        let mut out = String::new();
        write_name(&mut out, "http.server.duration", is_legacy_metric_name);
        out.push(' ');
        write_name(&mut out, "a\"b", is_legacy_label_name);
        out.push(' ');
        write_name(&mut out, "le", is_legacy_label_name);
        assert_eq!(out, "\"http.server.duration\" \"a\\\"b\" le");
    }

    #[test]
    fn error_columns_count_characters() {
        let e = error("m{é=\"x\"} 1");
        assert_eq!(
            e.message,
            "column 3: expected a label name ([a-zA-Z_][a-zA-Z0-9_]*) or '}', found 'é'"
        );
        let e = error("m{a=\"é\\q\"} 1");
        assert!(
            e.message
                .starts_with("column 7: invalid escape sequence \"\\\\q\""),
            "{e}"
        );
    }

    #[test]
    fn errors_stay_in_line_order_with_deferred_timestamps() {
        let e = parse("a 1 x\nb{\n c 1 2\n# EOF\n");
        let lines: Vec<_> = e.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![1, 2]);
        assert_eq!(e.samples.len(), 1);
        assert_eq!(e.samples[0].name, "c");
        assert_eq!(e.samples[0].timestamp_ms, Some(2000));
    }

    #[test]
    fn many_labels_duplicate_check() {
        let mut line = String::from("m{");
        for i in 0..100 {
            line.push_str(&format!("l{i}=\"v\","));
        }
        let ok = format!("{line}}} 1");
        assert_eq!(one(&ok).labels.len(), 100);
        let dup = format!("{line}l42=\"w\"}} 1");
        assert!(error(&dup).message.contains("duplicate label name \"l42\""));
    }

    #[test]
    fn label_lookup_and_matchers() {
        let s = one(r#"q{vhost="/",queue="orders",state=""} 3"#);
        assert_eq!(s.label("queue"), Some("orders"));
        assert_eq!(s.label("state"), Some(""));
        assert_eq!(s.label("nope"), None);
        assert!(s.matches("q", &[]));
        assert!(!s.matches("q2", &[]));
        assert!(s.matches("q", &[Matcher::eq("queue", "orders")]));
        assert!(!s.matches("q", &[Matcher::eq("queue", "other")]));
        assert!(s.matches("q", &[Matcher::ne("queue", "other")]));
        assert!(!s.matches("q", &[Matcher::ne("queue", "orders")]));
        // A missing label is the empty string.
        assert!(s.matches("q", &[Matcher::eq("missing", "")]));
        assert!(!s.matches("q", &[Matcher::ne("missing", "")]));
        assert!(s.matches("q", &[Matcher::ne("missing", "x")]));
        assert!(!s.matches("q", &[Matcher::eq("missing", "x")]));
        assert!(s.matches(
            "q",
            &[
                Matcher::eq("vhost", "/"),
                Matcher::ne("queue", "x"),
                Matcher::eq("state", "")
            ]
        ));
        assert!(!s.matches("q", &[Matcher::eq("vhost", "/"), Matcher::eq("queue", "x")]));
        let e = parse("q{queue=\"a\"} 1\nq{queue=\"b\"} 2\nr{queue=\"a\"} 3\n");
        let m = [Matcher::eq("queue", "a")];
        let found: Vec<f64> = e.select("q", &m).map(|s| s.value).collect();
        assert_eq!(found, vec![1.0]);
        assert!(e.is_clean());
        assert_eq!(Matcher::eq("a", "x\"y").to_string(), r#"a="x\"y""#);
        assert_eq!(Matcher::ne("a", "").to_string(), r#"a!="""#);
    }

    #[test]
    fn escape_round_trips() {
        let raw = "a\\b\"c\nd=e,f{g}h ☃";
        let line = format!("m{{v=\"{}\"}} 1", escape_label_value(raw));
        assert_eq!(one(&line).label("v"), Some(raw));
    }

    // ---- property tests -------------------------------------------------

    fn metric_name_strategy() -> impl Strategy<Value = String> {
        "[a-zA-Z_:][a-zA-Z0-9_:]{0,20}"
    }

    fn label_name_strategy() -> impl Strategy<Value = String> {
        "[a-zA-Z_][a-zA-Z0-9_]{0,12}".prop_filter("reserved", |n| n != "__name__")
    }

    fn label_value_strategy() -> impl Strategy<Value = String> {
        let tricky = prop_oneof![
            Just('\\'),
            Just('"'),
            Just('\n'),
            Just('='),
            Just(','),
            Just('{'),
            Just('}'),
            Just(' '),
            Just('\t'),
            Just('#'),
            Just('n'),
            Just('é'),
            Just('☃'),
            Just('😀'),
            any::<char>(),
        ];
        prop_oneof![
            prop::collection::vec(tricky, 0..16).prop_map(|v| v.into_iter().collect::<String>()),
            any::<String>(),
        ]
    }

    fn labels_strategy() -> impl Strategy<Value = Vec<(String, String)>> {
        prop::collection::btree_map(label_name_strategy(), label_value_strategy(), 0..6)
            .prop_map(|m| m.into_iter().collect::<Vec<_>>())
            .prop_shuffle()
    }

    fn finite_strategy() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>().prop_filter("finite", |v| v.is_finite()),
            any::<i32>().prop_map(f64::from),
            Just(0.0),
            Just(-0.0),
        ]
    }

    fn sample_strategy() -> impl Strategy<Value = Sample> {
        (
            metric_name_strategy(),
            labels_strategy(),
            finite_strategy(),
            prop::option::of(any::<i64>()),
        )
            .prop_map(|(name, labels, value, timestamp_ms)| Sample {
                name,
                labels,
                value,
                timestamp_ms,
            })
    }

    /// How a document is laid out: padding around `{`, `,`, `=`, `}`; the
    /// separator between tokens; trailing commas; `{}` for no labels; the
    /// float notation; exemplars (OpenMetrics only).
    #[derive(Debug, Clone)]
    struct Style {
        pad: &'static str,
        sep: &'static str,
        trailing_comma: bool,
        empty_braces: bool,
        float: u8,
        exemplars: bool,
        crlf: bool,
    }

    fn style_strategy() -> impl Strategy<Value = Style> {
        (
            prop_oneof![Just(""), Just(" "), Just("\t"), Just("  ")],
            prop_oneof![Just(" "), Just("\t"), Just("   ")],
            any::<bool>(),
            any::<bool>(),
            0u8..3,
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(
                |(pad, sep, trailing_comma, empty_braces, float, exemplars, crlf)| Style {
                    pad,
                    sep,
                    trailing_comma,
                    empty_braces,
                    float,
                    exemplars,
                    crlf,
                },
            )
    }

    fn render_float(v: f64, style: &Style) -> String {
        match style.float {
            0 => format!("{v}"),
            1 => format!("{v:?}"),
            _ => format!("{v:e}"),
        }
    }

    fn render_seconds(ms: i64) -> String {
        let sign = if ms < 0 { "-" } else { "" };
        let abs = ms.unsigned_abs();
        format!("{sign}{}.{:03}", abs / 1000, abs % 1000)
    }

    fn render(samples: &[Sample], style: &Style, format: Format) -> String {
        let mut out = String::new();
        let eol = if style.crlf { "\r\n" } else { "\n" };
        out.push_str("# HELP whatever help text with {braces} and \"quotes\"");
        out.push_str(eol);
        for s in samples {
            out.push_str(&s.name);
            if !s.labels.is_empty() || style.empty_braces {
                out.push_str(style.pad);
                out.push('{');
                for (i, (k, v)) in s.labels.iter().enumerate() {
                    if i > 0 {
                        out.push_str(style.pad);
                        out.push(',');
                    }
                    out.push_str(style.pad);
                    out.push_str(k);
                    out.push_str(style.pad);
                    out.push('=');
                    out.push_str(style.pad);
                    out.push('"');
                    out.push_str(&escape_label_value(v));
                    out.push('"');
                }
                if style.trailing_comma && !s.labels.is_empty() {
                    out.push(',');
                }
                out.push_str(style.pad);
                out.push('}');
            }
            out.push_str(style.sep);
            out.push_str(&render_float(s.value, style));
            if let Some(ts) = s.timestamp_ms {
                out.push_str(style.sep);
                match format {
                    Format::Text => out.push_str(&ts.to_string()),
                    Format::OpenMetrics => out.push_str(&render_seconds(ts)),
                }
            }
            if format == Format::OpenMetrics && style.exemplars {
                out.push_str(" # {trace_id=\"a # 1 2\",span=\"}\"} 0.67 1520879607.789");
            }
            out.push_str(eol);
        }
        if format == Format::OpenMetrics {
            out.push_str("# EOF");
            out.push_str(eol);
        }
        out
    }

    /// Lines that must yield exactly one sample or one error.
    fn sample_lines(text: &str) -> Vec<usize> {
        text.split('\n')
            .enumerate()
            .filter(|(_, raw)| {
                let line = raw.strip_suffix('\r').unwrap_or(raw);
                let content = line.trim_start_matches([' ', '\t']);
                !content.is_empty() && !content.starts_with('#')
            })
            .map(|(i, _)| i + 1)
            .collect()
    }

    fn check_accounting(text: &str) -> Result<(), TestCaseError> {
        let e = parse(text);
        let candidates = sample_lines(text);
        prop_assert_eq!(e.samples.len() + e.errors.len(), candidates.len());
        let error_lines: Vec<usize> = e.errors.iter().map(|e| e.line).collect();
        prop_assert!(
            error_lines.windows(2).all(|w| w[0] < w[1]),
            "error lines not strictly increasing: {:?}",
            error_lines
        );
        for line in &error_lines {
            prop_assert!(
                candidates.binary_search(line).is_ok(),
                "error on line {}",
                line
            );
        }
        Ok(())
    }

    /// Inputs built from the characters that matter to the grammar.
    fn grammar_soup() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("{"),
            Just("}"),
            Just("\""),
            Just("\\"),
            Just("\\n"),
            Just("="),
            Just("!="),
            Just(","),
            Just(" "),
            Just("\t"),
            Just("\n"),
            Just("\r"),
            Just("#"),
            Just("# EOF\n"),
            Just("# UNIT x s\n"),
            Just("# {"),
            Just("m"),
            Just("le"),
            Just("_:"),
            Just("1"),
            Just("-"),
            Just("+"),
            Just("."),
            Just("e"),
            Just("9223372036854775807"),
            Just("Inf"),
            Just("NaN"),
            Just("é"),
            Just("\u{feff}"),
        ];
        prop::collection::vec(piece, 0..64).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn text_format_round_trips(
            samples in prop::collection::vec(sample_strategy(), 0..12),
            style in style_strategy(),
        ) {
            let text = render(&samples, &style, Format::Text);
            let e = parse(&text);
            prop_assert!(e.errors.is_empty(), "{:?}\n{}", e.errors, text);
            prop_assert_eq!(e.format, Format::Text);
            prop_assert_eq!(&e.samples, &samples, "{}", text);
        }

        #[test]
        fn openmetrics_round_trips(
            samples in prop::collection::vec(sample_strategy(), 0..12),
            style in style_strategy(),
        ) {
            let text = render(&samples, &style, Format::OpenMetrics);
            let e = parse(&text);
            prop_assert!(e.errors.is_empty(), "{:?}\n{}", e.errors, text);
            prop_assert_eq!(e.format, Format::OpenMetrics);
            prop_assert_eq!(&e.samples, &samples, "{}", text);
        }

        #[test]
        fn non_finite_values_round_trip(
            name in metric_name_strategy(),
            which in 0usize..6,
        ) {
            let (text, expected) = [
                ("+Inf", f64::INFINITY),
                ("Inf", f64::INFINITY),
                ("-Inf", f64::NEG_INFINITY),
                ("inf", f64::INFINITY),
                ("NaN", f64::NAN),
                ("nan", f64::NAN),
            ][which];
            let e = parse(&format!("{name} {text}\n"));
            prop_assert!(e.errors.is_empty());
            prop_assert_eq!(e.samples.len(), 1);
            let v = e.samples[0].value;
            prop_assert!(v == expected || (v.is_nan() && expected.is_nan()));
        }

        #[test]
        fn arbitrary_input_never_panics_and_every_line_is_accounted(text in any::<String>()) {
            check_accounting(&text)?;
        }

        #[test]
        fn grammar_soup_never_panics_and_every_line_is_accounted(text in grammar_soup()) {
            check_accounting(&text)?;
        }

        #[test]
        fn corrupted_documents_keep_every_line_accounted(
            samples in prop::collection::vec(sample_strategy(), 1..6),
            style in style_strategy(),
            cut in any::<prop::sample::Index>(),
            insert in prop_oneof![Just(""), Just("\""), Just("\\"), Just("{"), Just("}"), Just(","), Just("x"), Just(" "), Just("\n")],
        ) {
            // Delete one character of a valid document, or insert one,
            // anywhere: every sample line still yields one sample or one
            // error, and nothing panics.
            let text = render(&samples, &style, Format::Text);
            let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
            let at = boundaries[cut.index(boundaries.len())];
            let mut broken = String::with_capacity(text.len() + 1);
            broken.push_str(&text[..at]);
            if insert.is_empty() {
                let skip = text[at..].chars().next().map_or(0, char::len_utf8);
                broken.push_str(&text[at + skip..]);
            } else {
                broken.push_str(insert);
                broken.push_str(&text[at..]);
            }
            check_accounting(&broken)?;
        }
    }
}

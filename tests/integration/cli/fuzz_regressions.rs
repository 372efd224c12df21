//! Inputs that the fuzz targets in `fuzz/` (see `fuzz/README.md`) found breaking a parser, each
//! kept as a test named after the crash: `<target>_crash_<what went wrong>`, asserting the
//! property the target checks.
#![cfg(feature = "controller")]

use queue_migrate::dlq::envelope::{DeadLetter, Payload};

/// `envelope`: a JSON payload holding a float with 17 significant digits did not survive
/// `from_line` → `to_line` → `from_line`, although the module promises that such a payload
/// "round-trips as a value". serde_json's default float parser is not exact (it can be one unit in
/// the last place off), so the number was misread on the first read and misread again, differently,
/// on the second: a replay would republish a payload that is not the one the consumer gave up on.
/// The fix is serde_json's `float_roundtrip` feature (correctly rounded parsing).
#[test]
fn envelope_crash_json_payload_float_round_trip() {
    let line = br#"{"payload":{"price":1.0715660391465826e-75},"errorClass":"a","errorMessage":"m","consumerVersion":"v","attempts":1,"firstAttemptAt":"2026-01-01T00:00:00Z","deadLetteredAt":"2026-01-01T00:00:00Z"}"#;
    let dl = DeadLetter::from_line(line).expect("a valid envelope");

    // Read exactly: the number is the f64 nearest to what the line says.
    let Payload::Json(payload) = &dl.payload else {
        panic!("an object payload is kept as JSON: {:?}", dl.payload)
    };
    let exact: f64 = "1.0715660391465826e-75".parse().expect("a float");
    assert_eq!(payload["price"].as_f64(), Some(exact), "payload misread");

    // And written back, it reads back the same.
    let written = dl.to_line();
    let back = DeadLetter::from_line(written.as_bytes()).expect("to_line reads back");
    assert_eq!(back, dl, "round trip through {written}");
}

/// Environment for the plan seeds: every variable set to a URL, no secret files.
struct SeedResolve;

impl queue_migrate::plan::Resolve for SeedResolve {
    fn env(&self, _: &str) -> Option<String> {
        Some("http://127.0.0.1:9090".into())
    }
    fn read_file(&self, _: &std::path::Path) -> Result<String, String> {
        Err("no files here".into())
    }
}

/// `plan`: the seeds issue 31 added to `fuzz/corpus/plan/` (alias bombs, deep nesting, long keys,
/// a probe rate and a duration past the bounds) are refused, each with the message that names its
/// bound, rather than taking gigabytes, minutes, or a panic later in the daemon.
#[test]
fn plan_crash_issue_31_seeds_are_refused_at_their_bounds() {
    let seeds: &[(&str, &str, &str)] = &[
        (
            "alias-bomb",
            include_str!("../../../fuzz/corpus/plan/alias-bomb.yaml"),
            "aliases (*name) are expanded",
        ),
        (
            "alias-of-long-text",
            include_str!("../../../fuzz/corpus/plan/alias-of-long-text.yaml"),
            "",
        ),
        (
            "deep-flow",
            include_str!("../../../fuzz/corpus/plan/deep-flow.yaml"),
            "levels deep|block style",
        ),
        (
            "deep-flow-after-syntax-error",
            include_str!("../../../fuzz/corpus/plan/deep-flow-after-syntax-error.yaml"),
            "levels deep|block style",
        ),
        (
            "deep-block",
            include_str!("../../../fuzz/corpus/plan/deep-block.yaml"),
            "levels deep",
        ),
        (
            "long-keys",
            include_str!("../../../fuzz/corpus/plan/long-keys.yaml"),
            "",
        ),
        (
            "probe-rate-1e-20",
            include_str!("../../../fuzz/corpus/plan/probe-rate-1e-20.yaml"),
            "phases.synthetic.probes.rate",
        ),
        (
            "duration-past-ten-years",
            include_str!("../../../fuzz/corpus/plan/duration-past-ten-years.yaml"),
            "10 years",
        ),
    ];
    for (name, yaml, needle) in seeds {
        let errors = match queue_migrate::plan::compile(yaml, None, &SeedResolve) {
            Ok(_) => panic!("{name}: compiled"),
            Err(errors) => errors,
        };
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        // `a|b`: either bound may come first (depth, or how far the parser reads ahead).
        assert!(
            text.iter()
                .any(|t| needle.split('|').any(|n| t.contains(n))),
            "{name}: want {needle:?} in {text:#?}"
        );
    }
}

/// `envelope`: a line far longer than the others (the seed `over-long-line.jsonl`) reads as an
/// envelope, and a line reader with a smaller cap skips it whole, counted with its number.
#[test]
fn envelope_crash_over_long_line_is_skipped_under_a_cap() {
    use queue_migrate::dlq::lines::{Content, LineReader};
    let line = include_bytes!("../../../fuzz/corpus/envelope/over-long-line.jsonl");
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    assert!(DeadLetter::from_line(body).is_ok());
    let twice = [&line[..], &line[..]].concat();
    let mut reader = LineReader::new(std::io::BufReader::with_capacity(1000, &twice[..]), 4096);
    for number in 1..=2 {
        let l = reader.next_line().unwrap().unwrap();
        assert_eq!(l.number, number);
        assert_eq!(
            l.content,
            Content::TooLong {
                bytes: body.len() as u64
            }
        );
    }
    assert!(reader.next_line().unwrap().is_none());
}

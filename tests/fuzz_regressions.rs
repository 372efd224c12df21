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

//! `migrate dlq replay` end to end: what the canary and a resumed run leave in the output, and
//! what a failing output does to the outcome.

mod common;

use common::Bench;

/// Five envelopes of one group, first attempted the day before the bench's clock.
fn export(b: &Bench) -> &'static str {
    let envelope = |id: u32| {
        format!(
            r#"{{"payload":"{{\"order\":{id}}}","errorClass":"dependency_timeout","errorMessage":"timeout after 30012ms calling inventory-service","consumerVersion":"2.14.0","traceId":"t{id}","attempts":3,"firstAttemptAt":"2026-11-29T10:00:0{id}.000Z","deadLetteredAt":"2026-11-29T10:05:0{id}.000Z"}}"#
        )
    };
    let text: String = (1..=5).map(|i| envelope(i) + "\n").collect();
    std::fs::write(b.path("export.ndjson"), text).unwrap();
    "export.ndjson"
}

fn replay_args<'a>(file: &'a str, output: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "dlq",
        "replay",
        file,
        "--output",
        output,
        "--canary",
        "2",
        "--rate",
        "1000",
        "--by",
        "ana",
        "--queue",
        "orders.dlq",
    ];
    args.extend_from_slice(extra);
    args
}

/// The `x-replay-of` of each line of an NDJSON replay output, in order.
fn replayed(b: &Bench, output: &str) -> Vec<String> {
    std::fs::read_to_string(b.path(output))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["headers"]["x-replay-of"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn replay_continue_appends_to_the_canary_output() {
    let b = Bench::new();
    let file = export(&b);
    let r = b.ok(&replay_args(file, "out.ndjson", &[]), 3);
    assert!(r.stdout.contains("--continue"), "{}", r.stdout);
    assert_eq!(replayed(&b, "out.ndjson").len(), 2);
    b.ok(&replay_args(file, "out.ndjson", &["--continue"]), 0);
    // The canary's two lines are still there, followed by the other three: each entry once.
    let want: Vec<String> = (1..=5)
        .map(|i| format!("2026-11-29T10:05:0{i}.000Z"))
        .collect();
    assert_eq!(replayed(&b, "out.ndjson"), want);
}

#[test]
fn replay_flush_failure_after_the_canary_is_not_a_pause() {
    let b = Bench::new();
    let file = export(&b);
    // /dev/full takes the buffered lines and fails when they are flushed.
    let r = b.ok(&replay_args(file, "/dev/full", &[]), 1);
    let all = format!("{}{}", r.stdout, r.stderr);
    assert!(!all.contains("paused"), "{all}");
    assert!(!all.contains("with --continue"), "{all}");
    assert!(all.contains("could not be flushed"), "{all}");
    // Nothing of this run is known to have gone out: resuming starts from the first entry.
    assert!(all.contains("--skip 0"), "{all}");
}

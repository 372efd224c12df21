//! `migrate plan check` and `migrate slice` as a user runs them.

use std::io::Write;
use std::process::{Command, Stdio};

fn migrate(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_migrate"))
        .args(args)
        .env("QM_PROM_URL", "http://127.0.0.1:9090")
        .env("QM_SCRAPE_URL", "http://127.0.0.1:9464/metrics")
        .env("OLD_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")
        .env("NEW_BROKER_URL", "nats://127.0.0.1:4222")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn plan(name: &str) -> String {
    format!("{}/plans/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn shipped_plans_check_and_print_derived_values() {
    let (code, out, err) = migrate(&["plan", "check", &plan("orders.yaml")]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("drain quiet period: 20m"), "{out}");
    assert!(out.contains("dedup window"), "{out}");
    let (code, out, _) = migrate(&["plan", "check", &plan("local.yaml"), "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["derived"]["quiet"], "3m");
}

#[test]
fn a_bad_plan_reports_every_error_with_its_line_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    let yaml = include_str!("../../../plans/local.yaml")
        .replace("steps: [1, 4, 8]", "steps: [4, 1, 8]")
        .replace("max_backoff: 2m", "max_backoff: 2 parsecs")
        .replace(
            "source: prom, query: app_probe_ok",
            "source: nowhere, query: app_probe_ok",
        )
        .replace(
            "min_duration: 0s\n    exit:\n      - { name: new",
            "min_duraton: 0s\n    exit:\n      - { name: new",
        );
    std::fs::write(&path, yaml).unwrap();
    let (code, out, err) = migrate(&["plan", "check", path.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    for needle in ["steps", "max_backoff", "nowhere", "min_duraton"] {
        assert!(err.contains(needle), "missing {needle} in:\n{err}");
    }
    assert!(err.contains("4 error(s)"), "{err}");
    assert!(
        err.lines()
            .skip(1)
            .all(|l| l.trim_start().starts_with("line ")),
        "{err}"
    );
}

#[test]
fn plan_check_never_panics_on_junk() {
    let dir = tempfile::tempdir().unwrap();
    for (i, junk) in [
        "",
        "---",
        "[1, 2",
        "version: 1",
        "\u{0}\u{1}",
        "name: [",
        "a: *b",
    ]
    .iter()
    .enumerate()
    {
        let path = dir.path().join(format!("j{i}.yaml"));
        std::fs::write(&path, junk).unwrap();
        let (code, _, err) = migrate(&["plan", "check", path.to_str().unwrap()]);
        assert_eq!(code, 2, "{junk:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn slice_matches_every_vector_of_seed_000() {
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/vectors/slices.jsonl",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let mut by_slices: std::collections::BTreeMap<u64, Vec<(String, u64)>> = Default::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        by_slices
            .entry(v["slices"].as_u64().unwrap())
            .or_default()
            .push((
                v["key"].as_str().unwrap().to_string(),
                v["slice"].as_u64().unwrap(),
            ));
    }
    let mut checked = 0;
    for (slices, cases) in by_slices {
        let mut child = Command::new(env!("CARGO_BIN_EXE_migrate"))
            .args(["slice", "--slices", &slices.to_string(), "--stdin"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        {
            let mut stdin = child.stdin.take().unwrap();
            for (key, _) in &cases {
                writeln!(stdin, "{key}").unwrap();
            }
        }
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let got: Vec<u64> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        assert_eq!(got.len(), cases.len());
        for ((key, want), got) in cases.iter().zip(got) {
            assert_eq!(got, *want, "key {key:?} slices {slices}");
            checked += 1;
        }
    }
    assert_eq!(
        checked,
        text.lines().filter(|l| !l.trim().is_empty()).count()
    );
    // Keys on the command line too.
    let (code, out, _) = migrate(&["slice", "order-0", "order-1"]);
    assert_eq!(code, 0);
    assert_eq!(out, "8\n33\n");
    let (code, _, _) = migrate(&["slice", "--slices", "0", "x"]);
    assert_eq!(code, 2);
}

/// `migrate ARGS` with standard output on `stdout`: (exit code, stderr).
fn migrate_into(args: &[&str], stdout: impl Into<Stdio>) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_migrate"))
        .args(args)
        .env("QM_PROM_URL", "http://127.0.0.1:9090")
        .env("QM_SCRAPE_URL", "http://127.0.0.1:9464/metrics")
        .env("OLD_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")
        .env("NEW_BROKER_URL", "nats://127.0.0.1:4222")
        .stdout(stdout)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A pipe whose reader is already gone: the first write gets EPIPE, whatever the output's size.
fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer
}

#[test]
fn plan_check_into_a_closed_pipe_exits_quietly_without_a_panic() {
    let orders = plan("orders.yaml");
    for args in [
        &["plan", "check", &orders][..],
        &["plan", "check", &orders, "--json"],
        &["slice", "order-0", "order-1"],
    ] {
        let (code, err) = migrate_into(args, closed_pipe());
        assert!(!err.contains("panicked"), "migrate {args:?}:\n{err}");
        assert_eq!(code, 0, "migrate {args:?}:\n{err}");
        assert_eq!(
            err, "",
            "migrate {args:?}: the reader chose to stop; nothing to say"
        );
    }
}

/// A closed pipe does not turn an invalid plan into a success: `plan check --json | head` on a
/// broken plan still exits 2 (a CI step with `pipefail` must fail).
#[test]
fn an_invalid_plan_into_a_closed_pipe_still_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "version: 1\nname: Bad Name\n").unwrap();
    let bad = bad.to_str().unwrap();
    let (code, err) = migrate_into(&["plan", "check", bad, "--json"], closed_pipe());
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(code, 2, "{err}");
}

#[test]
fn plan_check_into_a_full_disk_says_cannot_write_and_exits_1() {
    let orders = plan("orders.yaml");
    for args in [
        &["plan", "check", &orders][..],
        &["plan", "check", &orders, "--json"],
        &["slice", "order-0", "order-1"],
    ] {
        let (code, err) = migrate_into(args, std::fs::File::create("/dev/full").unwrap());
        assert!(!err.contains("panicked"), "migrate {args:?}:\n{err}");
        assert_eq!(code, 1, "migrate {args:?}:\n{err}");
        assert!(
            err.starts_with("migrate: cannot write to standard output: No space left on device"),
            "migrate {args:?}:\n{err}"
        );
    }
}

#[test]
fn plan_check_prints_each_steps_minimum_time_and_the_routing_file() {
    let (code, out, err) = migrate(&["plan", "check", &plan("orders.yaml")]);
    assert_eq!(code, 0, "{out}{err}");
    let routing = format!(
        "routing document: written to {}",
        plan("orders.routing.json")
    );
    assert!(out.contains(&routing), "{out}");
    // Each step's line, its spaces folded: the phase's min_duration, observe per slices step,
    // retain for disconnect.
    let step = |state: &str| {
        out.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .find(|l| l.starts_with(&format!("{state} ")))
            .unwrap_or_else(|| panic!("no line for {state}:\n{out}"))
    };
    assert!(
        step("consume_dual").starts_with("consume_dual min 1d "),
        "{out}"
    );
    assert!(step("synthetic").starts_with("synthetic min 1h "), "{out}");
    assert!(step("slices[0]").starts_with("slices[0] min 1d "), "{out}");
    assert!(
        step("disconnect").starts_with("disconnect min 7d "),
        "{out}"
    );
    assert!(step("planned").starts_with("planned min - "), "{out}");

    let (code, out, _) = migrate(&["plan", "check", &plan("local.yaml"), "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let d = &v["derived"];
    assert_eq!(d["routing_file"], plan("local.routing.json"));
    assert_eq!(d["steps"][0]["min_time"], serde_json::Value::Null);
    assert_eq!(d["steps"][1]["state"], "consume_dual");
    assert_eq!(d["steps"][1]["min_time"], "0s");
    assert_eq!(d["steps"][3]["min_time"], "1m");
    let last = d["steps"].as_array().unwrap().len() - 2;
    assert_eq!(d["steps"][last]["state"], "disconnect");
    assert_eq!(d["steps"][last]["min_time"], "2m");
}

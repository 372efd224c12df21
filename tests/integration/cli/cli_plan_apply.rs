//! `migrate plan apply` as a user runs it: an edited plan replaces the stored one mid-migration
//! (journaled with the diff), changes that would break the migration are refused, a dry run
//! writes nothing.

use crate::common;

use common::Bench;

const PLAN: &str = include_str!("../../../plans/local.yaml");

/// A bench whose migration is at `slices[step]`.
fn at_slice_step(step: u64) -> Bench {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    while b.state() != ("slices".into(), Some(step)) {
        b.advance_green();
    }
    b
}

/// Edit the plan file as a user would.
fn edit(b: &Bench, from: &str, to: &str) {
    edits(b, &[(from, to)]);
}

/// Several edits of the shipped plan at once.
fn edits(b: &Bench, pairs: &[(&str, &str)]) {
    let mut text = PLAN.to_string();
    for (from, to) in pairs {
        assert!(text.contains(from), "{from:?} is in the plan");
        text = text.replace(from, to);
    }
    std::fs::write(&b.plan, text).unwrap();
}

const SIXTEEN_SLICES: [(&str, &str); 2] = [
    ("slices: 8", "slices: 16"),
    ("steps: [1, 4, 8]", "steps: [1, 4, 16]"),
];

fn apply<'a>(b: &'a Bench, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["plan", "apply", b.plan.to_str().unwrap()];
    args.extend_from_slice(extra);
    args
}

#[test]
fn a_gate_change_mid_migration_applies_and_is_journaled_with_the_reason() {
    let mut b = at_slice_step(0);
    b.minute += 2;
    b.indicators.set("app_error_ratio_new", 0.015);
    b.ok(&["advance", "local"], 3);
    // Editing the file alone changes nothing: the store keeps the plan init read.
    edit(
        &b,
        r#"{ name: error ratio low, source: prom, query: app_error_ratio_new, pass_if: "< 0.01" }"#,
        r#"{ name: error ratio under 2%, source: prom, query: app_error_ratio_new, pass_if: "< 0.02" }"#,
    );
    b.ok(&["advance", "local"], 3);
    let before = b.status();
    let generation = b.routing_file()["generation"].clone();

    let r = b.ok(&apply(&b, &["--reason", "2% is fine for orders"]), 0);
    assert!(
        r.stdout.contains("-      - { name: error ratio low"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("+      - { name: error ratio under 2%"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("sha256"), "{}", r.stdout);

    let after = b.status();
    assert_eq!(after["gates"][0]["name"], "error ratio under 2%", "{after}");
    assert_eq!(after["state"], "slices");
    assert_eq!(after["step"], 0);
    assert_eq!(
        after["version"].as_i64(),
        before["version"].as_i64().map(|v| v + 1)
    );
    assert_eq!(
        b.routing_file()["generation"],
        generation,
        "the routing is unchanged"
    );

    let history = b.ok(&["history", "local", "--json"], 0).json();
    let entries = history.as_array().unwrap();
    let last = entries.last().unwrap();
    assert_eq!(last["command"], "plan apply");
    assert_eq!(last["reason"], "2% is fine for orders");
    assert_eq!(last["from"], "slices[0]");
    assert_eq!(last["to"], "slices[0]");
    assert!(
        last["evidence"]["diff"]
            .as_str()
            .unwrap()
            .contains("+      - { name: error ratio under 2%"),
        "{last}"
    );
    assert_eq!(
        last["evidence"]["new_hash"].as_str().map(str::len),
        Some(64)
    );
    assert_ne!(last["evidence"]["old_hash"], last["evidence"]["new_hash"]);
    for pair in entries.windows(2) {
        assert_eq!(pair[0]["to"], pair[1]["from"], "{pair:?}");
    }

    // The new gate decides from the next command on: 1.5% now passes.
    b.ok(&["advance", "local"], 0);
    assert_eq!(b.state(), ("slices".into(), Some(1)));
    // The same text again: nothing to apply.
    let r = b.ok(&apply(&b, &["--reason", "again"]), 0);
    assert!(r.stdout.contains("nothing to apply"), "{}", r.stdout);
}

#[test]
fn a_different_slice_total_after_planned_is_refused_and_changes_nothing() {
    let mut b = Bench::new();
    b.indicators.all_green();
    b.init();
    b.advance_green(); // consume_dual
    edits(&b, &SIXTEEN_SLICES);
    let before = b.status();
    let r = b.ok(&apply(&b, &["--reason", "more slices"]), 2);
    assert!(
        r.stderr.contains("slices changes (8 -> 16)"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("per-key order"), "{}", r.stderr);
    assert!(r.stderr.contains("nothing changed"), "{}", r.stderr);
    assert_eq!(b.status(), before);
}

#[test]
fn a_change_of_the_current_steps_routing_is_refused() {
    let b = at_slice_step(1);
    edit(&b, "steps: [1, 4, 8]", "steps: [1, 2, 8]");
    let before = b.status();
    let r = b.ok(&apply(&b, &["--reason", "smaller second step"]), 2);
    assert!(
        r.stderr
            .contains("routing's migrated slices would change (4 -> 2)"),
        "{}",
        r.stderr
    );
    assert_eq!(b.status(), before);
    assert_eq!(b.routing_file()["slices_migrated"], 4);
    // A later step may change.
    edit(&b, "steps: [1, 4, 8]", "steps: [1, 4, 6, 8]");
    b.ok(&apply(&b, &["--reason", "one more step"]), 0);
    assert_eq!(b.state(), ("slices".into(), Some(1)));
}

#[test]
fn a_dry_run_shows_the_diff_and_verdict_and_writes_nothing() {
    let b = at_slice_step(0);
    edit(&b, r#"pass_if: "< 0.01""#, r#"pass_if: "< 0.02""#);
    let before = b.status();
    let journal = b.ok(&["history", "local", "--json"], 0).json();
    let r = b.ok(&apply(&b, &["--reason", "try", "--dry-run"]), 0);
    assert!(r.stdout.contains(r#"+      - { name: error ratio low, source: prom, query: app_error_ratio_new, pass_if: "< 0.02" }"#), "{}", r.stdout);
    assert!(
        r.stdout.contains("dry run: the change would be applied"),
        "{}",
        r.stdout
    );
    let json = b
        .ok(&apply(&b, &["--reason", "try", "--dry-run", "--json"]), 0)
        .json();
    assert_eq!(json["dry_run"], true);
    assert_eq!(json["version"], serde_json::Value::Null);
    assert_eq!(json["refused"], serde_json::json!([]));
    assert_eq!(b.status(), before);
    assert_eq!(b.ok(&["history", "local", "--json"], 0).json(), journal);
    // A dry run of a refused change says why, exit 2.
    edits(&b, &SIXTEEN_SLICES);
    let r = b.ok(&apply(&b, &["--reason", "try", "--dry-run"]), 2);
    assert!(r.stderr.contains("slices changes"), "{}", r.stderr);
    assert_eq!(b.status(), before);
}

#[test]
fn a_plan_of_no_registered_migration_names_init() {
    let b = Bench::new();
    let r = b.ok(&apply(&b, &["--reason", "x"]), 2);
    assert!(r.stderr.contains("migrate init"), "{}", r.stderr);
}

/// Regression: a gate's held-since mark carried over `plan apply`, so a gate whose definition
/// changed passed on time held under the old one. The changed gate starts over; an unchanged
/// gate keeps its mark.
#[test]
fn a_gates_held_since_does_not_carry_over_a_plan_apply_that_changes_it() {
    const HELD: &str = r#"{ name: error ratio low, source: prom, query: app_error_ratio_new, pass_if: "< 0.01", for: 5m }"#;
    let held = PLAN.replace(
        r#"{ name: error ratio low, source: prom, query: app_error_ratio_new, pass_if: "< 0.01" }"#,
        HELD,
    );
    assert_ne!(held, PLAN);
    let mut b = common::Bench::with_plan(&held);
    b.indicators.all_green();
    b.init();
    while b.state() != ("slices".into(), Some(0)) {
        b.advance_green();
    }
    // Held for 4 minutes of the 5 under the first definition.
    for _ in 0..4 {
        b.ok(&["advance", "local"], 3);
        b.minute += 1;
    }
    // A new threshold, the same `for`.
    std::fs::write(
        &b.plan,
        held.replace(r#""< 0.01", for: 5m"#, r#""< 0.02", for: 5m"#),
    )
    .unwrap();
    b.ok(&apply(&b, &["--reason", "2% is fine"]), 0);
    // Five minutes after the mark, but only one under the new definition: it holds.
    b.minute += 1;
    let r = b.ok(&["advance", "local"], 3);
    assert!(r.stdout.contains("error ratio low"), "{}", r.stdout);
    assert_eq!(b.state(), ("slices".into(), Some(0)));
    // It passes once held 5 minutes under the new definition.
    for _ in 0..4 {
        b.minute += 1;
        b.ok(&["advance", "local"], 3);
    }
    b.minute += 1;
    b.ok(&["advance", "local"], 0);
    assert_eq!(b.state(), ("slices".into(), Some(1)));
}

/// Regression: `plan apply FILE` run from another directory compiled FILE against a directory
/// relative to the working directory, while the store keeps (and `init` resolves against) the
/// absolute one: the relative paths of the new plan (`routing.file`, `file:` secrets) were not
/// those of the stored plan, and the change was refused as moving the routing. Relative paths
/// resolve against FILE's directory, whatever the working directory, and that is the base stored.
#[test]
fn a_plan_applied_from_another_directory_resolves_relative_files_next_to_it() {
    use queue_migrate::controller::plans::compile_stored;
    use queue_migrate::plan::SecretsMode;
    use queue_migrate::store::sqlite::SqliteStore;
    use queue_migrate::store::traits::*;

    let secret = PLAN.replace(
        r#"url: "nats://127.0.0.1:4222""#,
        r#"url: "file:secret.txt""#,
    );
    assert_ne!(secret, PLAN);
    let b = common::Bench::with_plan(&secret);
    std::fs::write(b.path("secret.txt"), "nats://127.0.0.1:4222\n").unwrap();
    b.indicators.all_green();
    b.init();
    let elsewhere = tempfile::tempdir().unwrap();
    let stored = |b: &common::Bench| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let url = format!("sqlite://{}", b.path("state.db").display());
            SqliteStore::open(&url)
                .await
                .unwrap()
                .get("local")
                .await
                .unwrap()
        })
    };
    let dir = b.dir.path().canonicalize().unwrap();
    let name = dir.file_name().unwrap().to_str().unwrap().to_string();
    // From a sibling directory with a relative FILE, then from anywhere with an absolute one.
    let sibling = dir.parent().unwrap().join(format!("{name}-elsewhere"));
    std::fs::create_dir_all(&sibling).unwrap();
    let relative = format!("../{name}/local.yaml");
    let absolute = dir.join("local.yaml").display().to_string();
    for (i, (cwd, file)) in [
        (sibling.as_path(), relative.as_str()),
        (elsewhere.path(), absolute.as_str()),
    ]
    .into_iter()
    .enumerate()
    {
        let bound = format!("< 0.0{}", i + 2);
        std::fs::write(&b.plan, secret.replace("< 0.01", &bound)).unwrap();
        let out = b
            .command(&["plan", "apply", file, "--reason", "looser", "--json"])
            .current_dir(cwd)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "plan apply {file} from {}:\n{stdout}\n{}",
            cwd.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let record = stored(&b);
        assert!(record.plan_yaml.contains(&bound));
        assert_eq!(
            std::path::Path::new(&record.plan_path).parent(),
            Some(dir.as_path()),
            "the stored base is FILE's directory"
        );
        // The daemon (strict secrets) reads the secret next to the plan, wherever it runs.
        let resolve = common::MapResolve::of(&b.indicators);
        let compiled = compile_stored(&record, &resolve, SecretsMode::Required)
            .unwrap_or_else(|d| panic!("{d:?}"));
        assert_eq!(
            compiled.plan.brokers.new.url.value().unwrap(),
            "nats://127.0.0.1:4222"
        );
    }
    let _ = std::fs::remove_dir_all(&sibling);
}

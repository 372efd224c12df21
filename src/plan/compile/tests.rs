//! Tests of the whole plan: the full example, every error kind with its path and line, errors
//! and warnings all at once, the shipped plans, and text that never panics.

use crate::plan::compile::test_support::{
    FULL, TestResolve, edit, errors, line_of, lines, ok, resolve,
};
use crate::plan::compile::{SecretsMode, compile, compile_with_secrets_mode};
use crate::plan::model::{
    BreachAction, Check, CmpOp, DEFAULT_FOR_MAX_GAP, DEFAULT_SLICES, Dedup, Gate, PhaseKind,
    Requirement, Source, Unresolved,
};
use proptest::prelude::*;
use std::path::Path;
use std::time::Duration;

#[test]
fn deferred_secrets_compile_unresolved_with_a_warning_and_required_ones_are_errors() {
    let yaml = edit("\"${NEW_BROKER_URL}\"", "\"file:/run/secrets/nats\"");
    let env = TestResolve::with_env(&[("PASS", "s3cr3t-pass")]);
    let dir = Some(Path::new("/etc/qm"));
    let strict = compile(&yaml, dir, &env);
    assert!(
        matches!(&strict, Err(e) if e.len() == 2),
        "required: every unresolved secret is an error: {strict:?}"
    );
    let c = match compile_with_secrets_mode(&yaml, dir, &env, SecretsMode::Deferred) {
        Ok(c) => c,
        Err(e) => panic!("deferred compiles:\n{}", lines(&e)),
    };
    let old = &c.plan.brokers.old.url;
    assert_eq!(
        old.value(),
        Err(&Unresolved::Env(vec!["OLD_BROKER_URL".into()]))
    );
    assert_eq!(old.redacted(), "${OLD_BROKER_URL}");
    assert!(matches!(
        c.plan.brokers.new.url.value(),
        Err(Unresolved::File { path, .. }) if path == Path::new("/run/secrets/nats")
    ));
    let warned: Vec<_> = c.warnings.iter().map(|w| w.path.as_str()).collect();
    for path in ["brokers.old.url", "brokers.new.url"] {
        assert!(warned.contains(&path), "{path} is warned: {warned:?}");
    }
    assert!(
        c.warnings
            .iter()
            .any(|w| w.message.contains("`OLD_BROKER_URL` is not set here")),
        "{}",
        lines(&c.warnings)
    );
    // A malformed reference is an error in either mode.
    let bad = edit("\"${NEW_BROKER_URL}\"", "\"${1NEW}\"");
    assert!(compile_with_secrets_mode(&bad, dir, &env, SecretsMode::Deferred).is_err());
}

#[test]
fn the_full_example_compiles() {
    let c = ok(FULL);
    assert_eq!(c.warnings, vec![], "{}", lines(&c.warnings));
    let p = &c.plan;
    assert_eq!(p.name, "orders");
    assert_eq!(p.slices, 128);
    assert!(p.auto_advance);
    assert_eq!(p.steps(), &[6, 32, 64, 128]);
    assert_eq!(p.brokers.old.queue.as_deref(), Some("orders"));
    assert_eq!(p.brokers.old.dead_letter.as_deref(), Some("orders.dlq"));
    assert_eq!(p.brokers.new.stream.as_deref(), Some("ORDERS"));
    assert_eq!(p.brokers.old.url.reference, "${OLD_BROKER_URL}");
    assert_eq!(
        p.brokers.old.url.value().unwrap(),
        "amqp://orders:s3cr3t-old@rabbit.internal:5672/%2f"
    );
    assert_eq!(
        p.phases.iter().map(|ph| ph.kind).collect::<Vec<_>>(),
        PhaseKind::ALL.to_vec()
    );
    assert!(matches!(
        p.sources.get("consumer"),
        Some(Source::Scrape { .. })
    ));
    assert!(matches!(
        p.sources.get("prom"),
        Some(Source::Prometheus { .. })
    ));

    let slices = p.phase(PhaseKind::Slices).cloned();
    let slices = slices.unwrap_or_else(|| panic!("no slices phase"));
    assert_eq!(slices.min_duration, Duration::from_secs(2 * 3600));
    assert_eq!(slices.on_breach, BreachAction::Rollback);
    assert_eq!(
        slices.require_peak,
        Some(Requirement {
            source: "prom".into(),
            query: "sum(rate(consumer_messages_total[5m]))".into(),
            at_least: Some(300.0),
        })
    );
    assert_eq!(
        slices.require_deploy.as_ref().map(|r| r.at_least),
        Some(None)
    );
    assert_eq!(
        slices.exit[0],
        Gate {
            name: "error rate".into(),
            source: "prom".into(),
            check: Check::Compare {
                new: "err_new".into(),
                old: "err_old".into(),
                ratio: 1.1,
                absolute: 0.0,
            },
            hold_for: None,
            for_max_gap: None,
            min_samples: 10,
        }
    );
    assert_eq!(
        slices.guard[0].check,
        Check::Threshold {
            query: "err_new".into(),
            op: CmpOp::Lt,
            value: 0.05
        }
    );
    assert_eq!(slices.guard[0].hold_for, Some(Duration::from_secs(300)));
    assert_eq!(slices.guard[0].for_max_gap, Some(DEFAULT_FOR_MAX_GAP));
    assert_eq!(slices.guard[0].min_samples, 1);

    let synthetic = p.phase(PhaseKind::Synthetic).map(|ph| ph.on_breach);
    assert_eq!(synthetic, Some(BreachAction::Pause));
    let disconnect = p.phase(PhaseKind::Disconnect).map(|ph| ph.min_duration);
    assert_eq!(disconnect, Some(Duration::from_secs(7 * 86_400)));
    assert_eq!(
        p.dedup.as_ref().map(Dedup::required_window),
        Some(Duration::from_secs(30 * 86_400 + 3_600 + 600))
    );
}

#[test]
fn defaults() {
    let c = ok(&edit("slices: 128\nauto_advance: true\n", "")
        .replace("    on_breach: rollback\n", "")
        .replace("    min_duration: 24h\n", "")
        .replace("        min_samples: 10\n", "")
        .replace("        tolerance: { ratio: 1.1 }\n", ""));
    let p = c.plan;
    assert_eq!(p.slices, DEFAULT_SLICES);
    assert!(p.auto_advance);
    let slices = p
        .phase(PhaseKind::Slices)
        .map(|s| (s.on_breach, s.exit[0].clone()));
    let Some((on_breach, gate)) = slices else {
        panic!("no slices phase")
    };
    assert_eq!(on_breach, BreachAction::Rollback);
    assert_eq!(gate.min_samples, 1);
    assert!(
        matches!(gate.check, Check::Compare { ratio, absolute, .. } if ratio == 1.0 && absolute == 0.0)
    );
    let cd = p.phase(PhaseKind::ConsumeDual).map(|ph| ph.min_duration);
    assert_eq!(cd, Some(Duration::ZERO));
}

struct Case {
    what: &'static str,
    from: &'static str,
    to: &'static str,
    path: &'static str,
    /// Text on the line the error must point at (`None`: no line).
    at: Option<&'static str>,
    message: &'static str,
}

const CASES: &[Case] = &[
    Case {
        what: "unknown field at top level",
        from: "auto_advance: true\n",
        to: "auto_advance: true\ncolour: blue\n",
        path: "colour",
        at: Some("colour: blue"),
        message: "unknown field `colour` in the plan; allowed: version, name, slices",
    },
    Case {
        what: "unknown field deep inside a block gate",
        from: "        for: 5m\n",
        to: "        for: 5m\n        pass-iff: \"< 1\"\n",
        path: "phases.slices.guard[0].pass-iff",
        at: Some("pass-iff"),
        message: "did you mean `pass_if`?",
    },
    Case {
        what: "unknown field inside a flow gate",
        from: "for: quiet }",
        to: "for: quiet, colour: red }",
        path: "phases.drain.exit[0].colour",
        at: Some("colour: red"),
        message: "unknown field `colour` in a gate; allowed: name, source, query, pass_if",
    },
    Case {
        what: "misplaced field gets a hint",
        from: "    observe: 2h\n",
        to: "    min_duration: 2h\n",
        path: "phases.slices.min_duration",
        at: Some("min_duration: 2h"),
        message: "`observe`",
    },
    Case {
        what: "bad duration",
        from: "observe: 2h",
        to: "observe: two hours",
        path: "phases.slices.observe",
        at: Some("observe: two hours"),
        message: "`two hours` is not a duration",
    },
    Case {
        what: "bare number duration",
        from: "min_duration: 1h",
        to: "min_duration: 3600",
        path: "phases.synthetic.min_duration",
        at: Some("min_duration: 3600"),
        message: "a bare number (3600) is not a duration: add a unit",
    },
    Case {
        what: "bare number duration in quotes",
        from: "max_backoff: 15m",
        to: "max_backoff: \"900\"",
        path: "retry.max_backoff",
        at: Some("max_backoff"),
        message: "add a unit",
    },
    Case {
        what: "steps not increasing",
        from: "[6, 32, 64, 128]",
        to: "[6, 64, 32, 128]",
        path: "phases.slices.steps[2]",
        at: Some("steps:"),
        message: "steps must be strictly increasing (32 after 64)",
    },
    Case {
        what: "steps not increasing, block list",
        from: "steps: [6, 32, 64, 128]",
        to: "steps:\n      - 6\n      - 64\n      - 64 # again\n      - 128",
        path: "phases.slices.steps[2]",
        at: Some("- 64 # again"),
        message: "(64 after 64)",
    },
    Case {
        what: "last step is not slices",
        from: "[6, 32, 64, 128]",
        to: "[6, 32, 64]",
        path: "phases.slices.steps[2]",
        at: Some("steps:"),
        message: "the last step must migrate every slice: 128, found 64",
    },
    Case {
        what: "step above slices",
        from: "[6, 32, 64, 128]",
        to: "[6, 32, 200]",
        path: "phases.slices.steps[2]",
        at: Some("steps:"),
        message: "step 200 is more than the plan's 128 slices",
    },
    Case {
        what: "step zero",
        from: "[6, 32, 64, 128]",
        to: "[0, 32, 64, 128]",
        path: "phases.slices.steps[0]",
        at: Some("steps:"),
        message: "expected a whole number from 1",
    },
    Case {
        what: "unknown source",
        from: "source: prom, query: 'producers_old'",
        to: "source: promethus, query: 'producers_old'",
        path: "phases.disconnect.exit[0].source",
        at: Some("promethus"),
        message: "unknown source `promethus`; declared sources: consumer, prom",
    },
    Case {
        what: "malformed pass_if",
        from: "pass_if: \">= 1\"",
        to: "pass_if: \"=> 1\"",
        path: "phases.consume_dual.exit[0].pass_if",
        at: Some("=> 1"),
        message: "malformed pass_if `=> 1`",
    },
    Case {
        what: "pass_if without a number",
        from: "pass_if: \"< 0.05\"",
        to: "pass_if: \"< five percent\"",
        path: "phases.slices.guard[0].pass_if",
        at: Some("five percent"),
        message: "`five percent` is not a number",
    },
    Case {
        what: "pass_if that is not a string",
        from: "pass_if: \">= 1\"",
        to: "pass_if: 1",
        path: "phases.consume_dual.exit[0].pass_if",
        at: Some("pass_if: 1"),
        message: "expected a comparison in quotes",
    },
    Case {
        what: "duplicate gate names across exit and guard",
        from: "name: error rate breach",
        to: "name: error rate # again",
        path: "phases.slices.guard[0].name",
        at: Some("# again"),
        message: "duplicate gate name `error rate` (first at phases.slices.exit[0], line 38)",
    },
    Case {
        what: "unresolved variable",
        from: "${NEW_BROKER_URL}",
        to: "${NEW_BROKR_URL}",
        path: "brokers.new.url",
        at: Some("NEW_BROKR_URL"),
        message: "environment variable `NEW_BROKR_URL` is not set",
    },
    Case {
        what: "unresolved variable embedded in a URL",
        from: "\"http://127.0.0.1:9090\"",
        to: "\"http://prom:${PROM_PASSWORD}@127.0.0.1:9090\"",
        path: "sources.prom.prometheus",
        at: Some("PROM_PASSWORD"),
        message: "environment variable `PROM_PASSWORD` is not set",
    },
    Case {
        what: "unreadable secret file",
        from: "\"${NEW_BROKER_URL}\"",
        to: "\"file:/run/secrets/nats\"",
        path: "brokers.new.url",
        at: Some("file:/run/secrets/nats"),
        message: "cannot read the secret file /run/secrets/nats: No such file",
    },
    Case {
        what: "source URL that is not http",
        from: "\"http://127.0.0.1:9464/metrics\"",
        to: "\"127.0.0.1:9464/metrics\"",
        path: "sources.consumer.scrape",
        at: Some("127.0.0.1:9464/metrics"),
        message: "must start with http:// or https://",
    },
    Case {
        what: "version 2",
        from: "version: 1",
        to: "version: 2",
        path: "version",
        at: Some("version: 2"),
        message: "unsupported plan version 2 (supported versions: 1)",
    },
    Case {
        what: "version missing",
        from: "version: 1\n",
        to: "",
        path: "",
        at: None,
        message: "missing required field `version`",
    },
    Case {
        what: "compare with ratio below 1",
        from: "tolerance: { ratio: 1.1 }",
        to: "tolerance: { ratio: 0.9 }",
        path: "phases.slices.exit[0].tolerance.ratio",
        at: Some("ratio: 0.9"),
        message: "ratio must be at least 1",
    },
    Case {
        what: "negative absolute tolerance",
        from: "tolerance: { ratio: 1.1 }",
        to: "tolerance: { ratio: 1.1, absolute: -1 }",
        path: "phases.slices.exit[0].tolerance.absolute",
        at: Some("absolute: -1"),
        message: "absolute must be at least 0",
    },
    Case {
        what: "tolerance without compare",
        from: "        for: 5m\n",
        to: "        for: 5m\n        tolerance: { ratio: 2 }\n",
        path: "phases.slices.guard[0].tolerance",
        at: Some("ratio: 2"),
        message: "`tolerance` only applies to `compare` gates",
    },
    Case {
        what: "both query and compare",
        from: "        tolerance: { ratio: 1.1 }\n",
        to: "        tolerance: { ratio: 1.1 }\n        query: 'err_new'\n",
        path: "phases.slices.exit[0]",
        at: Some("- name: error rate"),
        message: "either `query` + `pass_if` (a threshold) or `compare`",
    },
    Case {
        what: "neither query nor compare",
        from: "        compare: { new: 'err_new', old: 'err_old' }\n        tolerance: { ratio: 1.1 }\n",
        to: "",
        path: "phases.slices.exit[0]",
        at: Some("- name: error rate"),
        message: "a gate needs a condition",
    },
    Case {
        what: "query without pass_if",
        from: "        pass_if: \"< 0.05\"\n",
        to: "",
        path: "phases.slices.guard[0]",
        at: Some("- name: error rate breach"),
        message: "missing `pass_if`",
    },
    Case {
        what: "scrape query the evaluator cannot parse",
        from: "{broker=\"new\"}",
        to: "{broker=~\"n.*\"}",
        path: "phases.consume_dual.exit[0].query",
        at: Some("broker=~"),
        message: "not a query the scrape source `consumer` can answer",
    },
    Case {
        what: "scrape query of a requirement",
        from: "{job=\"consumer\"}",
        to: "{job=~\"consumer\"}",
        path: "phases.slices.require_deploy.query",
        at: Some("require_deploy"),
        message: "scrape source `consumer`",
    },
    Case {
        what: "dedup window too short",
        from: "window: 90d",
        to: "window: 7d",
        path: "dedup.window",
        at: Some("dedup:"),
        message: "window 7d is shorter than max_redelivery_delay 1h + max_consumer_delay 10m + reprocess_margin 30d = 30d 1h 10m: a message redelivered or reprocessed inside that span would be applied twice; raise window to at least 30d 1h 10m",
    },
    Case {
        what: "wrong type",
        from: "slices: 128",
        to: "slices: many",
        path: "slices",
        at: Some("slices: many"),
        message: "expected a whole number from 1 to 65536, found a string (`many`)",
    },
    Case {
        what: "wrong type for a section",
        from: "retry: { max_backoff: 15m, visibility_timeout: 5m }",
        to: "retry: 15m",
        path: "retry",
        at: Some("retry: 15m"),
        message: "expected the retry policy (a mapping with max_backoff, visibility_timeout), found a string",
    },
    Case {
        what: "gates not a list",
        from: "  disconnect: { retain: 7d, exit: [ { name: no producers, source: prom, query: 'producers_old', pass_if: \"== 0\" } ] }",
        to: "  disconnect: { retain: 7d, exit: { name: no producers } }",
        path: "phases.disconnect.exit",
        at: Some("disconnect:"),
        message: "expected a list of gates",
    },
    Case {
        what: "bad plan name",
        from: "name: orders\n",
        to: "name: Orders_EU\n",
        path: "name",
        at: Some("name: Orders_EU"),
        message: "a-z, 0-9 and `-`",
    },
    Case {
        what: "bad on_breach",
        from: "on_breach: pause",
        to: "on_breach: panic",
        path: "phases.synthetic.on_breach",
        at: Some("on_breach: panic"),
        message: "on_breach is one of rollback, pause, alert; got `panic`",
    },
    Case {
        what: "min_samples zero",
        from: "min_samples: 10",
        to: "min_samples: 0",
        path: "phases.slices.exit[0].min_samples",
        at: Some("min_samples: 0"),
        message: "expected a whole number from 1",
    },
    Case {
        what: "bad for",
        from: "for: 5m",
        to: "for: ever",
        path: "phases.slices.guard[0].for",
        at: Some("for: ever"),
        message: "`ever` is not a duration",
    },
    Case {
        what: "for_max_gap not a duration",
        from: "        for: 5m\n",
        to: "        for: 5m\n        for_max_gap: 2\n",
        path: "phases.slices.guard[0].for_max_gap",
        at: Some("for_max_gap: 2"),
        message: "a bare number (2) is not a duration",
    },
    Case {
        what: "for_max_gap zero",
        from: "        for: 5m\n",
        to: "        for: 5m\n        for_max_gap: 0s\n",
        path: "phases.slices.guard[0].for_max_gap",
        at: Some("for_max_gap: 0s"),
        message: "`for_max_gap` must be longer than 0s",
    },
    Case {
        what: "for_max_gap without for",
        from: "        min_samples: 10\n",
        to: "        min_samples: 10\n        for_max_gap: 10m\n",
        path: "phases.slices.exit[0].for_max_gap",
        at: Some("for_max_gap: 10m"),
        message: "this gate has no `for`",
    },
    Case {
        what: "unknown phase",
        from: "  drain:\n",
        to: "  sliced: {}\n  drain:\n",
        path: "phases.sliced",
        at: Some("sliced:"),
        message: "unknown field `sliced` in phases; allowed: consume_dual, synthetic, slices, drain, disconnect (did you mean `slices`?)",
    },
    Case {
        what: "missing required field of a gate",
        from: "      - name: probe latency\n",
        to: "      -\n",
        path: "phases.synthetic.exit[0]",
        at: Some("source: prom"),
        message: "missing required field `name`",
    },
    Case {
        what: "same name for both brokers",
        from: "name: nats,",
        to: "name: rabbitmq,",
        path: "brokers.new.name",
        at: Some("stream: ORDERS"),
        message: "both brokers are named `rabbitmq`",
    },
    Case {
        what: "a source that is both kinds",
        from: "prom: { prometheus: \"http://127.0.0.1:9090\" }",
        to: "prom: { prometheus: \"http://127.0.0.1:9090\", scrape: \"http://x/metrics\" }",
        path: "sources.prom",
        at: Some("prom: {"),
        message: "either `prometheus: URL` or `scrape: URL`, not both",
    },
    Case {
        what: "at_least not a number",
        from: "at_least: 300",
        to: "at_least: lots",
        path: "phases.slices.require_peak.at_least",
        at: Some("at_least: lots"),
        message: "expected a finite number",
    },
];

#[test]
fn each_error_kind_has_its_path_line_and_message() {
    for case in CASES {
        let yaml = edit(case.from, case.to);
        let errs = errors(&yaml);
        assert_eq!(
            errs.len(),
            1,
            "{}: expected exactly one error, got:\n{}",
            case.what,
            lines(&errs)
        );
        let e = &errs[0];
        assert_eq!(e.path, case.path, "{}: path ({e})", case.what);
        let want_line = case.at.and_then(|needle| line_of(&yaml, needle));
        assert!(
            case.at.is_none() || want_line.is_some(),
            "{}: needle not found",
            case.what
        );
        assert_eq!(e.line, want_line, "{}: line ({e})", case.what);
        assert!(
            e.message.contains(case.message),
            "{}: message\n  got:  {}\n  want: ...{}...",
            case.what,
            e.message,
            case.message
        );
        for secret in ["s3cr3t", "hunter2"] {
            assert!(!e.message.contains(secret), "{}: leaks a secret", case.what);
        }
    }
}

#[test]
fn every_error_at_once() {
    let yaml = FULL
        .replacen("version: 1", "version: 2", 1)
        .replacen("[6, 32, 64, 128]", "[6, 64, 32, 128]", 1)
        .replacen(
            "source: prom, query: 'producers_old'",
            "source: promethus, query: 'producers_old'",
            1,
        )
        .replacen("observe: 2h", "observe: 2 hours-ish", 1)
        .replacen(
            "auto_advance: true\n",
            "auto_advance: true\ncolour: blue\n",
            1,
        );
    let errs = errors(&yaml);
    let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "version",
            "colour",
            "phases.slices.steps[2]",
            "phases.slices.observe",
            "phases.disconnect.exit[0].source",
        ],
        "{}",
        lines(&errs)
    );
    // Ordered by line.
    let ls: Vec<usize> = errs.iter().filter_map(|e| e.line).collect();
    assert_eq!(ls.len(), 5);
    assert!(ls.windows(2).all(|w| w[0] <= w[1]), "{ls:?}");
}

#[test]
fn warnings_are_apart_from_errors() {
    // Everything warned about, nothing wrong.
    let yaml = FULL
        .replacen("dedup: { window: 90d, max_redelivery_delay: 1h, max_consumer_delay: 10m, reprocess_margin: 30d }\n", "", 1)
        .replacen(
            "  consume_dual:\n    min_duration: 24h\n    exit:\n      - name: new consumer connected\n        source: consumer\n        query: 'queue_consumer_connected{broker=\"new\"}'\n        pass_if: \">= 1\"\n",
            "",
            1,
        )
        .replacen(
            "    guard:\n      - name: error rate breach\n        source: prom\n        query: 'err_new'\n        pass_if: \"< 0.05\"\n        for: 5m\n",
            "",
            1,
        )
        .replacen(", for: quiet }", " }", 1)
        .replacen(
            "  disconnect: { retain: 7d, exit: [ { name: no producers, source: prom, query: 'producers_old', pass_if: \"== 0\" } ] }",
            "  disconnect: { retain: 7d }",
            1,
        );
    let c = ok(&yaml);
    let got: Vec<(&str, &str)> = c
        .warnings
        .iter()
        .map(|w| (w.path.as_str(), w.message.as_str()))
        .collect();
    let expect: &[(&str, &str)] = &[
        ("phases", "no `consume_dual` phase"),
        ("phases.slices", "no guard gates"),
        ("phases.drain", "no exit gate uses `for: quiet` (20m)"),
        (
            "phases.disconnect",
            "no exit gates: this phase advances on time alone (retain 7d)",
        ),
        ("dedup", "no `dedup` section"),
    ];
    assert_eq!(got.len(), expect.len(), "{}", lines(&c.warnings));
    for (path, msg) in expect {
        assert!(
            got.iter().any(|(p, m)| p == path && m.contains(msg)),
            "missing warning {path}: {msg}\n{}",
            lines(&c.warnings)
        );
    }
    // Warnings carry lines too.
    let drain = c.warnings.iter().find(|w| w.path == "phases.drain");
    assert_eq!(drain.and_then(|w| w.line), line_of(&yaml, "  drain:"));
    // An error elsewhere: only errors come back.
    let errs = errors(&yaml.replacen("version: 1", "version: 3", 1));
    assert_eq!(errs.len(), 1, "{}", lines(&errs));
}

#[test]
fn other_warnings() {
    let c = ok(&edit("kind: nats", "kind: pulsar")
        .replacen("\"http://127.0.0.1:9090\"", "\"http://admin:hunter2@127.0.0.1:9090\"", 1)
        .replacen("  drain:\n    quiet: auto\n    exit:\n      - { name: old queue empty, source: prom, query: 'sum(rabbitmq_queue_messages{queue=\"orders\"})', pass_if: \"== 0\", for: quiet }\n", "", 1));
    let paths: Vec<&str> = c.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(
        paths,
        vec!["brokers.new.kind", "sources.prom.prometheus", "phases"],
        "{}",
        lines(&c.warnings)
    );
    assert!(c.warnings[0].message.contains("`pulsar` has no adapter"));
    assert!(
        c.warnings[1]
            .message
            .contains("password is written in the plan")
    );
    assert!(c.warnings[2].message.contains("no `drain` phase"));
    assert!(c.warnings.iter().all(|w| !w.message.contains("hunter2")));
    // The inline password is masked wherever the plan is shown.
    let json = serde_json::to_string(&c.plan).unwrap_or_default();
    assert!(json.contains("http://***@127.0.0.1:9090"), "{json}");
    assert!(!json.contains("hunter2"));
}

#[test]
fn serialized_plan_reads_like_the_yaml() {
    let c = ok(FULL);
    let json = serde_json::to_value(&c.plan).unwrap_or_default();
    assert_eq!(json["quiet"], "20m");
    assert_eq!(json["retry"]["max_backoff"], "15m");
    assert_eq!(json["dedup"]["window"], "90d");
    assert_eq!(json["phases"][2]["kind"], "slices");
    assert_eq!(json["phases"][2]["guard"][0]["hold_for"], "5m");
    assert_eq!(json["phases"][2]["guard"][0]["for_max_gap"], "5m");
    assert!(json["phases"][2]["exit"][0].get("for_max_gap").is_none());
    assert_eq!(
        json["phases"][2]["guard"][0]["check"]["threshold"]["op"],
        "<"
    );
    assert_eq!(
        json["sources"]["consumer"]["scrape"]["url"],
        "http://127.0.0.1:9464/metrics"
    );
}

#[test]
fn yaml_syntax_error_has_its_line() {
    let yaml = "version: 1\nname: orders\nbrokers: { old: [1, 2 }\n";
    let errs = errors(yaml);
    assert_eq!(errs.len(), 1, "{}", lines(&errs));
    assert_eq!(errs[0].line, Some(3), "{}", errs[0]);
    assert!(errs[0].message.starts_with("not valid YAML"));

    let errs = errors(&format!("{FULL}name: again\n"));
    assert_eq!(errs.len(), 1, "{}", lines(&errs));
    assert!(errs[0].message.contains("duplicate"), "{}", errs[0]);
}

#[test]
fn not_a_plan_at_all() {
    for (yaml, want) in [
        ("", "the plan is empty"),
        ("# only a comment\n", "the plan is empty"),
        ("- 1\n- 2\n", "expected the plan (a mapping"),
        ("just words", "found a string (`just words`)"),
    ] {
        let errs = errors(yaml);
        assert_eq!(errs.len(), 1, "{yaml:?}: {}", lines(&errs));
        assert!(errs[0].message.contains(want), "{yaml:?}: {}", errs[0]);
    }
    // The minimum that is missing is all reported.
    let errs = errors("version: 1\n");
    let msgs: Vec<&str> = errs.iter().map(|e| e.message.as_str()).collect();
    for field in ["name", "brokers", "retry", "sources", "phases"] {
        let want = format!("missing required field `{field}`");
        assert!(msgs.iter().any(|m| m.starts_with(&want)), "{msgs:?}");
    }
}

#[test]
fn merge_keys_and_null_phases() {
    let yaml = FULL
        .replacen(
            "      - { name: probe errors, source: prom, query: 'probe_errors', pass_if: \"== 0\" }",
            "      - &zero { name: probe errors, source: prom, query: 'probe_errors', pass_if: \"== 0\" }",
            1,
        )
        .replacen(
            "  disconnect: { retain: 7d, exit: [ { name: no producers, source: prom, query: 'producers_old', pass_if: \"== 0\" } ] }",
            "  disconnect:\n    exit:\n      - { <<: *zero, name: no producers }",
            1,
        );
    let c = ok(&yaml);
    let d = c
        .plan
        .phase(PhaseKind::Disconnect)
        .map(|p| p.exit[0].clone());
    assert_eq!(
        d.map(|g| (g.name, g.source)),
        Some(("no producers".into(), "prom".into()))
    );

    let c = ok(&edit(
        "  disconnect: { retain: 7d, exit: [ { name: no producers, source: prom, query: 'producers_old', pass_if: \"== 0\" } ] }",
        "  disconnect:",
    ));
    let d = c
        .plan
        .phase(PhaseKind::Disconnect)
        .map(|p| (p.min_duration, p.exit.len()));
    assert_eq!(d, Some((Duration::ZERO, 0)));
}

#[test]
fn shipped_plans_compile() {
    let dir = Path::new("/srv/plans");
    for (file, yaml) in [
        ("orders.yaml", include_str!("../../../plans/orders.yaml")),
        ("local.yaml", include_str!("../../../plans/local.yaml")),
        (
            "orders-rabbitmq-to-kafka.yaml",
            include_str!("../../../plans/orders-rabbitmq-to-kafka.yaml"),
        ),
        (
            "events-kafka-to-nats.yaml",
            include_str!("../../../plans/events-kafka-to-nats.yaml"),
        ),
        (
            "orders-rabbitmq-to-kafka-sasl.yaml",
            include_str!("../../../plans/orders-rabbitmq-to-kafka-sasl.yaml"),
        ),
    ] {
        let c = compile(yaml, Some(dir), &resolve())
            .unwrap_or_else(|e| panic!("{file}:\n{}", lines(&e)));
        assert_eq!(c.warnings, vec![], "{file}:\n{}", lines(&c.warnings));
        assert_eq!(c.plan.phases.len(), 5, "{file}");
    }

    let orders = compile(
        include_str!("../../../plans/orders.yaml"),
        Some(dir),
        &resolve(),
    )
    .unwrap_or_else(|e| panic!("{}", lines(&e)));
    assert_eq!(orders.plan.name, "orders");
    assert_eq!(orders.plan.quiet, Duration::from_secs(20 * 60));
    assert_eq!(orders.plan.steps(), &[6, 32, 64, 128]);

    let local = compile(
        include_str!("../../../plans/local.yaml"),
        Some(dir),
        &resolve(),
    )
    .unwrap_or_else(|e| panic!("{}", lines(&e)));
    let p = local.plan;
    assert_eq!(p.name, "local");
    assert_eq!(p.slices, 8);
    assert_eq!(p.steps(), &[1, 4, 8]);
    assert_eq!(p.quiet, Duration::from_secs(3 * 60));
    assert_eq!(p.routing.file, Some(dir.join("local.routing.json")));
    let Some(Source::Prometheus { url, .. }) = p.sources.get("prom") else {
        panic!("prom")
    };
    assert_eq!(url.value().unwrap(), "http://127.0.0.1:19090");
    let Some(Source::Scrape { url }) = p.sources.get("app") else {
        panic!("app")
    };
    assert_eq!(url.value().unwrap(), "http://127.0.0.1:19464/metrics");
    let drain = p.phase(PhaseKind::Drain).map(|d| d.exit[0].clone());
    assert_eq!(
        drain.map(|g| (g.source, g.check, g.hold_for)),
        Some((
            "app".to_string(),
            Check::Threshold {
                query: "app_old_depth".into(),
                op: CmpOp::Eq,
                value: 0.0
            },
            Some(Duration::from_secs(180))
        ))
    );
    let slices = p
        .phase(PhaseKind::Slices)
        .map(|s| (s.guard.len(), s.on_breach));
    assert_eq!(slices, Some((1, BreachAction::Rollback)));
}

/// Line-level edits of the valid plan.
fn mutate(base: &str, edits: &[(usize, u8, String)]) -> String {
    let mut lines: Vec<String> = base.lines().map(str::to_string).collect();
    for (at, op, text) in edits {
        if lines.is_empty() {
            lines.push(text.clone());
            continue;
        }
        let i = at % lines.len();
        match op % 6 {
            0 => {
                lines.remove(i);
            }
            1 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            2 => lines.insert(i, text.clone()),
            3 => {
                // Replace what follows the first `:` (a value).
                let l = &lines[i];
                if let Some(c) = l.find(':') {
                    lines[i] = format!("{}: {text}", &l[..c]);
                }
            }
            4 => {
                // Cut the line short.
                let l = &lines[i];
                let cut = l
                    .char_indices()
                    .nth(at % (l.len() + 1))
                    .map_or(l.len(), |(c, _)| c);
                lines[i] = l[..cut].to_string();
            }
            _ => lines[i] = format!("  {}", lines[i]),
        }
    }
    lines.join("\n")
}

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("~".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        Just("- x".to_string()),
        Just("quiet".to_string()),
        Just("\"${UNSET}\"".to_string()),
        Just("\"${\"".to_string()),
        Just("\"file:\"".to_string()),
        Just("18446744073709551615".to_string()),
        Just("99999999999999s".to_string()),
        Just("-1".to_string()),
        Just("1e999".to_string()),
        Just(".nan".to_string()),
        Just("&a [*a]".to_string()),
        Just("*nowhere".to_string()),
        Just("!tag x".to_string()),
        Just("<<: {}".to_string()),
        Just("? [a]\n: b".to_string()),
        "[ -~]{0,20}",
        "\\PC{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,300}") {
        let _ = compile(&s, Some(Path::new("/x")), &resolve());
    }

    #[test]
    fn yaml_like_text_never_panics(s in "[a-z_:{}\\[\\],\\- \n\"'#&*!|>~0-9.$]{0,300}") {
        let _ = compile(&s, None, &resolve());
    }

    #[test]
    fn mutated_plans_never_panic(
        edits in proptest::collection::vec((0usize..200, 0u8..6, fragment()), 1..6)
    ) {
        let yaml = mutate(FULL, &edits);
        match compile(&yaml, Some(Path::new("/x")), &resolve()) {
            Ok(c) => {
                // A plan that compiles keeps its invariants.
                let steps = c.plan.steps();
                prop_assert!(!steps.is_empty());
                prop_assert!(steps.windows(2).all(|w| w[0] < w[1]));
                prop_assert_eq!(steps.last().copied(), Some(c.plan.slices));
            }
            Err(errs) => {
                prop_assert!(!errs.is_empty());
                for e in &errs {
                    prop_assert!(!e.message.contains("s3cr3t"));
                }
            }
        }
    }
}

#[test]
fn a_stale_guard_on_a_source_whose_url_is_unset_reported_a_second_error_that_only_followed_from_the_first()
 {
    // The demo plan without QM_DEMO_METRICS_URL: the source's unset variable is the one error.
    let yaml = include_str!("../../../plans/demo.yaml");
    let e = match compile(
        yaml,
        Some(Path::new("/srv/plans")),
        &TestResolve::with_env(&[]),
    ) {
        Ok(_) => panic!("an unset source URL is an error"),
        Err(e) => e,
    };
    assert_eq!(e.len(), 1, "{}", lines(&e));
    assert!(e[0].path.starts_with("sources.world"), "{}", lines(&e));
    // A name nobody declared is still refused, and so is a source of another kind.
    let unknown = yaml.replace(
        "stale_producers: { source: world",
        "stale_producers: { source: nowhere",
    );
    let e = errors(&unknown);
    assert!(
        e.iter().any(|d| d.path == "stale_producers.source"
            && d.message.contains("unknown source `nowhere`")),
        "{}",
        lines(&e)
    );
}

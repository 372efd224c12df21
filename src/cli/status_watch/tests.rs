use super::*;
use crate::cli::status::{Shown, lines};
use crate::controller::views::StatusView;
use crate::gate::{NoDataCause, Verdict};
use crate::plan::{CmpOp, GateKind, Threshold};
use crate::standing::Standing;

/// What the README's plans/orders.yaml reads in its slices phase with Prometheus down.
const PROM_DOWN: &str = "source prom (${PROM_URL}): http://127.0.0.1:9090/api/v1/query: cannot \
                         connect (is the source up?)";

/// A gate of the slices phase, evaluated 12 s ago.
fn gate(name: &str, kind: GateKind, verdict: Verdict, reason: &str) -> GateView {
    GateView {
        phase: "slices".into(),
        name: name.into(),
        kind,
        source: "prom".into(),
        verdict,
        value: None,
        reason: reason.into(),
        evaluated_at: Some("2026-11-30T00:00:00Z".into()),
        evaluated_at_ms: Some(0),
        age_ms: Some(12_000),
        soak: None,
        cause: (verdict == Verdict::NoData).then_some(NoDataCause::SourceDown),
        largest_partition: None,
    }
}

/// The slices phase's 5 exit gates and 3 guards, all without data: Prometheus is down.
fn orders_gates() -> Vec<GateView> {
    let exits = [
        "error rate new vs old",
        "latency p99 new vs old",
        "no duplicate effects",
        "old DLQ inflow not rising",
        "new consumer connected",
    ];
    let guards = [
        "error rate new (breach)",
        "duplicate effects (breach)",
        "new consumer still connected",
    ];
    let exits = exits.map(|n| gate(n, GateKind::Exit, Verdict::NoData, PROM_DOWN));
    let guards = guards.map(|n| gate(n, GateKind::Guard, Verdict::NoData, PROM_DOWN));
    exits.into_iter().chain(guards).collect()
}

fn shown(gates: Vec<GateView>) -> Shown {
    let routing: crate::routing::RoutingDocument = serde_json::from_value(serde_json::json!({
        "migration": "orders", "generation": 7, "state": "slices", "step": 0,
        "slices_total": 16, "slices_migrated": 1, "consume": ["old", "new"], "paused": false,
        "brokers": { "old": "rabbitmq", "new": "nats" },
        "updated_at": "2026-11-30T00:00:00Z"
    }))
    .unwrap_or_else(|e| panic!("routing document: {e}"));
    // As the README's by-hand flow leaves it: no daemon, its last readings blind.
    let readings = Standing::Blind {
        source: "prom".into(),
        reason: PROM_DOWN.into(),
        gates: gates.iter().map(|g| g.name.clone()).collect(),
        cause: NoDataCause::SourceDown,
    };
    let standing = Standing::NotDriven {
        holder: None,
        idle_ms: 60_000,
        evaluated: true,
        readings: Box::new(readings),
    };
    let thresholds = vec![
        Some(Threshold {
            op: CmpOp::Lt,
            value: 0.01,
        });
        gates.len()
    ];
    Shown {
        view: StatusView {
            migration: "orders".into(),
            state: "slices".into(),
            step: Some(0),
            paused: false,
            version: 4,
            entered_at: "2026-11-30T00:00:00Z".into(),
            routing,
            routing_published: true,
            publish_error: None,
            plan_error: None,
            standing: standing.view(),
            pause: None,
            gates,
        },
        thresholds,
        pause: None,
    }
}

const REFRESH: &str = "-- 2026-11-30T00:01:00Z; every 2s; Ctrl-C to stop";

/// The watch screen of `s` on a `width`×`height` terminal.
fn watch_screen(s: &Shown, width: usize, height: usize) -> Vec<String> {
    screen(&lines(s, width, true), &refresh(width), width, height)
}

/// The refresh line, wrapped as the watch wraps it.
fn refresh(width: usize) -> Vec<String> {
    fit::wrap(REFRESH, width, "", "   ")
}

/// Was a bug (issue 56): `status --watch` with the README's plans/orders.yaml and Prometheus
/// down repeated the same 3-line error under each of the 8 gates (35 lines), so the guards and
/// the refresh line fell off an 80×24 screen. Now the 8 gates share one summary naming the
/// source and every gate it leaves without data, and all of it fits.
#[test]
fn watch_with_prometheus_down_lost_the_guards_and_the_refresh_line_off_80x24() {
    let s = shown(orders_gates());
    // The bug's picture: one row and its error per gate does not fit.
    assert!(
        lines(&s, 80, false).len() > 23,
        "{:#?}",
        lines(&s, 80, false)
    );
    let got = watch_screen(&s, 80, 24);
    let text = got.join("\n");
    eprintln!("{text}");
    assert!(got.len() <= 23, "{text}");
    for l in &got {
        assert!(l.chars().count() <= 80, "{l:?}\n{text}");
    }
    assert_eq!(got.last().map(String::as_str), Some(REFRESH), "{text}");
    assert!(!text.contains("hidden"), "nothing hidden: {text}");
    // One summary, naming the source, how it failed and the gates, guards included.
    let summary: Vec<&String> = got
        .iter()
        .skip_while(|l| !l.starts_with("  source prom unreachable (12s ago): no data for 8 gates"))
        .take_while(|l| !l.starts_with("--"))
        .collect();
    assert!(!summary.is_empty(), "{text}");
    let summary = summary
        .iter()
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ");
    for g in [
        "exit error rate new vs old,",
        "new consumer connected; guard error rate new (breach),",
        "new consumer still connected",
    ] {
        assert!(summary.contains(g), "{g}: {summary}");
    }
    // The error is said by the standing and by the summary: not once per gate.
    let said = text.replace('\n', " ").matches("cannot connect").count();
    assert!(said <= 2, "said {said} times: {text}");
}

/// Gates of the same source that failed differently, or that read another source, keep their
/// own rows: only an identical source error is shared.
#[test]
fn only_gates_sharing_one_source_error_share_a_summary() {
    let mut gates = orders_gates();
    gates[0] = gate("depth", GateKind::Exit, Verdict::Fail, "0.5 is not < 0.01");
    gates[1].source = "rabbit".into();
    let groups = shared_errors(&gates);
    assert_eq!(
        groups,
        vec![Shared {
            first: 2,
            gates: (2..8).collect()
        }]
    );
    let text = lines(&shown(gates), 80, true).join("\n");
    assert!(text.contains("0.5 is not < 0.01"), "{text}");
    assert!(text.contains("no data for 6 gates"), "{text}");
}

/// A screen smaller than the block: it is cut, a line counts what is hidden, and the refresh
/// line stays last; on a screen of one line only the refresh line is left.
#[test]
fn a_screen_too_small_counts_the_hidden_lines_and_keeps_the_refresh_line() {
    let body: Vec<String> = (0..10).map(|i| format!("line {i}")).collect();
    let one = [REFRESH.to_string()];
    assert_eq!(
        screen(&body, &one, 80, 6),
        vec![
            "line 0".to_string(),
            "line 1".into(),
            "line 2".into(),
            "… 7 lines hidden (a taller terminal, or `migrate status`, shows them)".into(),
            REFRESH.into(),
        ]
    );
    assert_eq!(screen(&body, &one, 80, 2), vec![REFRESH.to_string()]);
    assert_eq!(screen(&body, &one, 80, 12).len(), 11);
    // At 20 columns and 24 rows, the README's case: nothing wider, the refresh line last.
    let got = watch_screen(&shown(orders_gates()), 20, 24);
    assert!(got.len() <= 23);
    assert!(got.iter().all(|l| l.chars().count() <= 20), "{got:#?}");
    assert!(got.ends_with(&refresh(20)), "{got:#?}");
    assert!(got.iter().any(|l| l.contains("hidden")), "{got:#?}");
}

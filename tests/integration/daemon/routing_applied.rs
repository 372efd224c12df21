//! Issue 58 item 1: producers say which generation they applied. Two Rust routers follow a real
//! `migrate run` over HTTP; one stops following while the migration is in `synthetic`, so that
//! it stays on that generation when `slices[0]` is published. The `routing_applied` exit gate
//! then fails and names it, with its generation, in `status` (text and `--json`), the API and
//! `/metrics` knows both; once it follows again, the gate passes and the migration moves on.

use std::time::Duration;

use crate::common::{self, Bench, DaemonChild};
use queue_migrate::router::{APPLIED_METRIC, FollowerHandle, HttpFollow, Router};

/// plans/local.yaml in seconds, its slices phase also gated on every producer following.
fn plan() -> String {
    let exit = "      - { name: error ratio low, source: prom, query: app_error_ratio_new, pass_if: \"< 0.01\" }\n";
    let plan = common::fast_local_plan();
    assert_eq!(plan.matches(exit).count(), 1, "plans/local.yaml changed");
    plan.replace(
        exit,
        &format!("{exit}      - {{ name: producers follow, routing_applied: {{ window: 1m }} }}\n"),
    )
}

fn router(producer: &str) -> Router {
    Router::builder("local")
        .slices(8)
        .brokers("old", "new")
        .producer(producer)
        .build()
}

fn follow(router: &Router, url: &str) -> FollowerHandle {
    let options = HttpFollow {
        wait: Duration::from_secs(2),
        ..HttpFollow::default()
    };
    router
        .follow_http_tuned(url, "local", None, options)
        .unwrap()
}

fn get_json(url: &str) -> serde_json::Value {
    let (status, body) = common::http_get(url).expect("the daemon answers");
    assert_eq!(status, 200, "{url}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// `migrate status local [--json]` on the real clock: (stdout, code).
fn status(bench: &Bench, json: bool) -> String {
    let mut args = vec!["status", "local"];
    if json {
        args.push("--json");
    }
    let out = bench
        .command(&args)
        .env_remove("MIGRATE_NOW")
        .env("COLUMNS", "400")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The stored evaluation of the `producers follow` gate, from `status --json`.
fn producers_gate(bench: &Bench) -> Option<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&status(bench, true)).ok()?;
    v["gates"]
        .as_array()?
        .iter()
        .find(|g| g["name"] == "producers follow")
        .cloned()
}

#[test]
fn a_producer_pinned_to_an_old_generation_holds_the_step_and_is_named_until_it_catches_up() {
    let bench = Bench::with_plan(&plan());
    bench.indicators.all_green();
    // Park in synthetic while both routers start following.
    bench.indicators.set("app_probe_ok", 0.0);
    bench.init();
    let daemon = DaemonChild::spawn(bench.daemon_command("d1", &[]), Duration::from_secs(20))
        .expect("the daemon starts");
    let url = format!("http://{}", daemon.addr);
    let _daemon = Killed(daemon.child);
    let api = format!("{url}/v1/migrations/local");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let _in_runtime = rt.enter();
    let (a, b) = (router("producer-a"), router("producer-b"));
    let _follow_a = follow(&a, &url);
    let follow_b = follow(&b, &url);

    // Both follow synthetic's generation, and the daemon knows it of both.
    common::poll_until("synthetic is served", Duration::from_secs(30), || {
        get_json(&format!("{api}/routing"))["state"] == "synthetic"
    });
    let synthetic = get_json(&format!("{api}/routing"))["generation"]
        .as_u64()
        .unwrap();
    common::poll_until(
        "the daemon knows both at synthetic's generation",
        Duration::from_secs(30),
        || {
            let p = &get_json(&api)["producers"];
            p["seen"].as_array().is_some_and(|s| {
                s.len() == 2 && s.iter().all(|f| f["applied"].as_u64() == Some(synthetic))
            })
        },
    );
    assert_eq!(b.generation(), synthetic);
    let metrics = b.metrics_text();
    assert!(
        metrics.contains(&format!(
            "{APPLIED_METRIC}{{migration=\"local\",producer=\"producer-b\"}} {synthetic}"
        )),
        "{metrics}"
    );

    // B stops following (a replica pinned to an old generation); slices[0] is published.
    drop(follow_b);
    bench.indicators.set("app_probe_ok", 1.0);
    common::poll_until(
        "the gate fails naming producer-b",
        Duration::from_secs(30),
        || {
            producers_gate(&bench).is_some_and(|g| {
                g["verdict"] == "fail"
                    && g["reason"]
                        .as_str()
                        .is_some_and(|r| r.contains(&format!("producer-b at {synthetic}")))
            })
        },
    );
    let doc = get_json(&format!("{api}/routing"));
    assert_eq!(doc["state"], "slices", "{doc}");
    assert_eq!(doc["slices_migrated"], 1, "held at slices[0]: {doc}");
    let step = doc["generation"].as_u64().unwrap();
    common::poll_until("A follows slices[0]", Duration::from_secs(10), || {
        a.generation() == step
    });
    // The text of `status` names the laggard and its generation; A is not named.
    let text = status(&bench, false);
    assert!(
        text.contains(&format!("producer-b at {synthetic}")),
        "{text}"
    );
    // The API lists the laggard by id, with its generation; /metrics counts both.
    common::poll_until(
        "the API lists only B as lagging",
        Duration::from_secs(10),
        || {
            let p = get_json(&api)["producers"].clone();
            p["generation"].as_u64() == Some(step)
                && p["lagging"].as_array().is_some_and(|l| {
                    l.len() == 1 && l[0]["producer"] == "producer-b" && l[0]["applied"] == synthetic
                })
        },
    );
    let (_, metrics) = common::http_get(&format!("{url}/metrics")).unwrap();
    assert!(
        metrics.contains("queue_migrate_routing_followers{migration=\"local\"} 2"),
        "{metrics}"
    );
    // Held: more rounds pass, the migration stays at slices[0].
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(get_json(&format!("{api}/routing"))["slices_migrated"], 1);

    // B follows again: it applies the step's generation, the gate passes, the migration moves.
    let _follow_b = follow(&b, &url);
    common::poll_until(
        "the migration moves past slices[0]",
        Duration::from_secs(30),
        || get_json(&format!("{api}/routing"))["slices_migrated"].as_u64() > Some(1),
    );
    assert!(b.generation() >= step);
}

/// The daemon, killed and reaped when the test ends (passed or not).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

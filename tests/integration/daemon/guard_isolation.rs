//! Issue 54: guards always run. One migration's silent source does not delay another's breach
//! action; a leader whose round hangs on the store gives its lease up and stops on request.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::common;
use common::T0;
use common::daemon_world::DaemonWorld;
use common::hooked::Hooked;
use queue_migrate::controller::{Actor, AdvanceOptions};
use queue_migrate::indicators::fetch::Fetcher;

fn plan() -> String {
    include_str!("../../../plans/local.yaml").to_string()
}

/// A source that accepts connections and never answers (nor closes them).
fn silent_source() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    url
}

/// plans/local.yaml as migration `quiet`, whose slices phase has 4 gates (3 exit gates, its
/// guard) on a Prometheus at `silent`.
fn quiet_plan(silent: &str) -> String {
    let dead = |name: &str, query: &str, pass: &str| {
        format!("      - {{ name: {name}, source: dead, query: {query}, pass_if: \"{pass}\" }}")
    };
    plan()
        .replacen("name: local", "name: quiet", 1)
        .replacen("local.routing.json", "quiet.routing.json", 1)
        .replacen(
            "sources:\n",
            &format!("sources:\n  dead: {{ prometheus: \"{silent}\" }}\n"),
            1,
        )
        .replacen(
            "      - { name: error ratio low, source: prom, query: app_error_ratio_new, pass_if: \"< 0.01\" }",
            &[
                dead("dead a", "dead_a", "< 1"),
                dead("dead b", "dead_b", "< 1"),
                dead("dead c", "dead_c", "< 1"),
            ]
            .join("\n"),
            1,
        )
        .replacen(
            "      - { name: error ratio breach, source: prom, query: app_error_ratio_new, pass_if: \"< 0.05\" }",
            &dead("dead guard", "dead_d", "< 1"),
            1,
        )
}

/// A person takes `name` to slices[0] (its gates before slices read healthy sources).
async fn to_slices_0(w: &DaemonWorld, name: &str) {
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let actor = Actor {
        name: "alice".into(),
        reason: None,
    };
    for i in 1..=3 {
        w.controller(&fetcher)
            .advance(
                name,
                &AdvanceOptions::default(),
                &actor,
                T0 * 1000 + i * 1_000,
            )
            .await
            .unwrap();
    }
    let r = queue_migrate::store::traits::JournalStore::get(&w.store, name)
        .await
        .unwrap();
    assert_eq!((r.state.name(), r.state.step()), ("slices", Some(0)));
}

/// Regression (issue 54): one migration whose Prometheus accepts connections and never
/// answers (4 gates on it) made every round take five source timeouts (a batch, then each
/// query alone, one after the other), and an unrelated migration's guard breach waited for
/// the round: acted on 39-49 s late with `--interval 1s`. Now each migration's tick runs
/// apart: the breach is acted on within one interval plus its own source's timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_source_of_one_migration_does_not_delay_anothers_breach() {
    let w = DaemonWorld::new(&plan()).await;
    let silent = silent_source();
    let path = w.dir.path().join("quiet.yaml");
    std::fs::write(&path, quiet_plan(&silent)).unwrap();
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let actor = Actor {
        name: "test".into(),
        reason: None,
    };
    w.controller(&fetcher)
        .init(&path, &actor, T0 * 1000)
        .await
        .unwrap();
    to_slices_0(&w, "local").await;
    to_slices_0(&w, "quiet").await;
    let interval = Duration::from_millis(200);
    let source_timeout = Duration::from_secs(2);
    let d = w
        .start(|c| {
            c.interval = interval;
            c.source_timeout = source_timeout;
        })
        .await;
    d.clock.store(T0 * 1000 + 10_000, Ordering::SeqCst);
    d.leading().await;
    // Well into the daemon's rounds: on the old code, into a round that waits on the silent
    // source for five timeouts (10 s).
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(w.state().await, ("slices".into(), Some(0), false));
    let breached = Instant::now();
    w.indicators.set("app_error_ratio_new", 0.2);
    loop {
        if w.state().await == ("synthetic".into(), None, true) {
            break;
        }
        assert!(
            breached.elapsed() < interval + source_timeout + Duration::from_millis(1_300),
            "the breach was not acted on within one interval plus the source timeout (and 1.3 s of slack): {:?} so far",
            breached.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The other migration holds, its gates saying why.
    let quiet = queue_migrate::store::traits::JournalStore::get(&w.store, "quiet")
        .await
        .unwrap();
    assert_eq!((quiet.state.name(), quiet.paused), ("slices", false));
    d.stop_quietly().await;
}

/// Regression (issue 54): a round whose store call never returns (a statement in flight on a
/// connection gone silent) kept the leader leading: the lease was renewed on another
/// connection, `/readyz` said 200, and SIGTERM did nothing (shutdown was only checked between
/// rounds). Now no round completing within the lease TTL gives the lease up, `/readyz` says
/// so, and the daemon stops within a few seconds when asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_round_hangs_on_the_store_gives_its_lease_up_and_stops() {
    let w = DaemonWorld::new(&plan()).await;
    let hooked = Hooked::new(w.store.clone());
    let stuck = hooked.stuck.clone();
    let d = w.start_over(hooked, |_| {}).await;
    d.leading().await;
    let http = reqwest::Client::new();
    let ready = || async {
        http.get(d.url("/readyz"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(ready().await, 200);
    let ttl = Duration::from_secs(3);
    stuck.store(true, Ordering::SeqCst);
    let hung = Instant::now();
    while ready().await == 200 {
        assert!(
            hung.elapsed() < ttl * 3,
            "still ready {:?} after the rounds stopped completing (lease TTL {ttl:?})",
            hung.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let body: serde_json::Value = http
        .get(d.url("/readyz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["leader"], false, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or("")
            .contains("gave its lease up"),
        "{body}"
    );
    let metrics = http
        .get(d.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("queue_migrate_lease_given_up_total 1"),
        "{metrics}"
    );
    let stopping = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), d.stop())
        .await
        .expect("the daemon did not stop within 5 s of being asked");
    assert!(stopping.elapsed() < Duration::from_secs(5));
}

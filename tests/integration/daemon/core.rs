//! `migrate run` as a library (listener and shutdown passed in, clock injected): the loop
//! advances on gates alone, a guard breach rolls back one step and pauses, the routing long-poll,
//! the API's auth, webhooks, and the binary's SIGTERM handling.

use crate::common;
mod roles;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::daemon_world::{DaemonWorld, TOKEN, local_by_hand, single_token};
use common::{T0, daemon_config, local_plan_named};
use queue_migrate::controller::histories::Histories;
use queue_migrate::controller::round::RoundBatch;
use queue_migrate::controller::{Actor, AdvanceOptions, Controller, GateReport, Loaded};
use queue_migrate::daemon::tick::{Action, Read, tick_in_round};
use queue_migrate::daemon::{self, Config, DaemonError, Shared};
use queue_migrate::indicators::fetch::Fetcher;
use queue_migrate::machine::{Command, Snapshot, State};
use queue_migrate::plan::{Check, Resolve};
use queue_migrate::store::traits::*;
use queue_migrate::store::{Commit, Fleet, any::AnyStore};
use serde_json::json;

pub(super) fn plan() -> String {
    include_str!("../../../plans/local.yaml").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_alone_takes_a_migration_from_planned_to_complete() {
    let w = DaemonWorld::new(&plan()).await;
    let d = w.start(|c| c.confirm_complete = vec!["local".into()]).await;
    // Minimum times and `for: quiet` pass only as the injected clock moves.
    d.climb_until(&w, |s| s.0 == "complete").await;
    assert_eq!(w.state().await.0, "complete");
    let journal = w.store.journal("local").await.unwrap();
    let visited: Vec<String> = journal.iter().map(|e| e.to.state.to_string()).collect();
    for s in [
        "planned",
        "consume_dual",
        "synthetic",
        "slices[0]",
        "slices[1]",
        "slices[2]",
        "drain",
        "disconnect",
        "complete",
    ] {
        assert!(
            visited.contains(&s.to_string()),
            "{s} missing from {visited:?}"
        );
    }
    for pair in journal.windows(2) {
        assert_eq!(pair[0].to, pair[1].from, "the journal is a chain");
    }
    assert!(journal.iter().skip(1).all(|e| e.actor == "daemon-test"));
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_confirmation_the_daemon_stops_before_complete() {
    let w = DaemonWorld::new(&plan()).await;
    let d = w.start(|_| {}).await;
    d.climb_until(&w, |s| s.0 == "disconnect").await;
    d.advance_clock(10);
    d.settle().await;
    assert_eq!(w.state().await.0, "disconnect");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_breach_rolls_back_exactly_one_step_within_a_tick_and_pauses() {
    let w = DaemonWorld::new(&plan()).await;
    let d = w.start(|_| {}).await;
    // Climb to slices[1] and stay there: the clock stops, so `observe: 1m` holds it.
    d.climb_until(&w, |s| s.1 == Some(1)).await;
    assert_eq!(w.state().await, ("slices".into(), Some(1), false));
    let before = w.store.journal("local").await.unwrap().len();
    // How many times the guard was evaluated in this step, as of the last committed round.
    let step = w.store.get("local").await.unwrap().entered_at_ms;
    let guard = [("error ratio breach", "guard")];
    let evaluated = w
        .store
        .latest_evaluations("local", step, &guard)
        .await
        .unwrap()
        .first()
        .map_or(0, |r| r.samples);
    w.indicators.set("app_error_ratio_new", 0.2);
    w.wait_for("the breach rollback", |s| s.1 == Some(0)).await;
    assert_eq!(w.state().await, ("slices".into(), Some(0), true));
    // Give it many more ticks with the guard still failing: no cascade while paused.
    d.advance_clock(5);
    d.settle().await;
    d.settle().await;
    assert_eq!(w.state().await, ("slices".into(), Some(0), true));
    let journal = w.store.journal("local").await.unwrap();
    assert_eq!(journal.len(), before + 1, "exactly one transition");
    let last = journal.last().unwrap();
    assert_eq!(last.command, "rollback");
    assert!(
        last.reason
            .as_deref()
            .unwrap()
            .contains("error ratio breach")
    );
    let breach = last.evidence["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "error ratio breach")
        .unwrap();
    assert_eq!(breach["verdict"], "fail");
    assert_eq!(breach["value"], 0.2);
    // Acted within one tick, counted in the guard's own evaluations (not in ticks seen by this
    // test's polling, which a loaded machine delays): the round in progress may have read the
    // old value and one more may have started before it was set; the next one acts.
    let acted_at = breach["samples"].as_u64().unwrap();
    assert!(
        acted_at <= u64::from(evaluated) + 3,
        "acted at the guard's evaluation {acted_at}, {evaluated} before the breach"
    );
    // A person fixes things and resumes; the daemon climbs again.
    w.indicators.set("app_error_ratio_new", 0.001);
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let c = w.controller(&fetcher);
    c.command(
        "local",
        &queue_migrate::machine::Command::Resume,
        &Actor {
            name: "oncall".into(),
            reason: Some("fixed".into()),
        },
        serde_json::json!({}),
        d.clock.load(Ordering::SeqCst),
    )
    .await
    .unwrap();
    d.advance_clock(2);
    w.wait_for("climbing again", |s| s.1 == Some(1)).await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_long_poll_answers_within_a_second_of_a_change_or_304() {
    let w = DaemonWorld::new(&local_by_hand()).await;
    let d = w
        .start_guarded(single_token(), |c| {
            // As many places as readers: when one more long-poll is refused, all are parked.
            c.http.max_long_polls = READERS;
        })
        .await;
    let http = reqwest::Client::new();
    let first = http
        .get(d.url("/v1/migrations/local/routing"))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let etag = first.headers()["etag"].to_str().unwrap().to_string();
    let doc: serde_json::Value = first.json().await.unwrap();
    assert_eq!(etag, format!("\"{}\"", doc["generation"]));

    // Unchanged: 304 at the timeout.
    let started = std::time::Instant::now();
    let r = http
        .get(d.url("/v1/migrations/local/routing?wait=300ms"))
        .header("If-None-Match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 304);
    assert!(started.elapsed() >= Duration::from_millis(250));

    // Many readers wait; a change made through the API wakes them all.
    let waiters = d.parked_readers(&etag, READERS, "20s").await;
    let changed_at = std::time::Instant::now();
    let r = http
        .post(d.url("/v1/migrations/local/pause"))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({ "reason": "window closes" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    for h in waiters {
        let (status, at, _) = h.await.unwrap();
        assert_eq!(status, 200);
        assert!(at.duration_since(changed_at) < Duration::from_secs(1));
    }

    // A change made by another process (the CLI writes the store directly) reaches readers too.
    let cur: serde_json::Value = http
        .get(d.url("/v1/migrations/local/routing"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tag = format!("\"{}\"", cur["generation"]);
    let waiters = d.parked_readers(&tag, READERS, "20s").await;
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let c = w.controller(&fetcher);
    let changed_at = std::time::Instant::now();
    c.command(
        "local",
        &queue_migrate::machine::Command::Resume,
        &Actor {
            name: "cli".into(),
            reason: None,
        },
        serde_json::json!({}),
        T0 * 1000,
    )
    .await
    .unwrap();
    for h in waiters {
        let (status, _, body) = h.await.unwrap();
        assert!(changed_at.elapsed() < Duration::from_secs(1));
        assert_eq!(status, 200);
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(doc["paused"], false);
    }
    d.stop().await;
}

/// How many readers the long-poll test parks: its daemon's cap on parked long-polls.
const READERS: usize = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutations_need_the_token_reads_do_not() {
    let w = DaemonWorld::new(&local_by_hand()).await;
    let d = w.start_guarded(single_token(), |_| {}).await;
    let http = reqwest::Client::new();
    let pause = d.url("/v1/migrations/local/pause");
    assert_eq!(http.post(&pause).send().await.unwrap().status(), 401);
    assert_eq!(
        http.post(&pause)
            .bearer_auth("nope")
            .send()
            .await
            .unwrap()
            .status(),
        403
    );
    // Reads are open.
    let s: serde_json::Value = http
        .get(d.url("/v1/migrations/local"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(s["state"], "planned");
    assert_eq!(s["paused"], false);
    // Issue 44: where it stands, in one object every view prints.
    assert_eq!(s["standing"]["kind"], "needs_person", "{s}");
    assert_eq!(s["standing"]["person"]["for"], "advance", "{s}");
    assert_eq!(
        s["standing"]["sentence"],
        "needs a person: ready, auto_advance is off"
    );
    // Wait for the lease, then the right token works, and the journal says who.
    for _ in 0..100 {
        let h: serde_json::Value = http
            .get(d.url("/healthz"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if h["leader"] == true {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = http.post(&pause).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let again = http.post(&pause).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(again.status(), 409, "already paused");
    let list: serde_json::Value = http
        .get(d.url("/v1/migrations"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let standing = &list[0]["standing"];
    assert_eq!(standing["kind"], "needs_person", "{list}");
    assert_eq!(standing["person"]["for"], "paused", "{list}");
    assert_eq!(standing["person"]["by"], "api:daemon-test", "{list}");
    // "from": a state the migration is not in changes nothing (412); one the plan lacks is 400.
    let abort = d.url("/v1/migrations/local/abort");
    for (from, status) in [("synthetic", 412), ("slices[99]", 400)] {
        let r = http
            .post(&abort)
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({ "reason": "retried", "from": from }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "from {from}");
        assert!(r.text().await.unwrap().contains(from));
    }
    let history: serde_json::Value = http
        .get(d.url("/v1/migrations/local/history"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        history.as_array().unwrap().last().unwrap()["actor"],
        "api:daemon-test"
    );
    // Unknown things.
    assert_eq!(
        http.get(d.url("/v1/migrations/nope"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        http.post(d.url("/v1/migrations/local/explode"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    // The controller's own metrics. The standing gauge is set by a round the leader runs, and
    // the lease, the pause and the reads above can all land before the first such round (they did
    // on a loaded CI machine): wait for one round after the pause, up to 10 s.
    let mut metrics = String::new();
    for _ in 0..500 {
        metrics = http
            .get(d.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if metrics
            .contains("queue_migrate_standing{migration=\"local\",standing=\"needs_person\"} 1")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let parsed = queue_migrate::indicators::exposition::parse(&metrics);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    assert!(
        metrics.contains("queue_migrate_state{migration=\"local\",state=\"planned\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("queue_migrate_paused{migration=\"local\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("queue_migrate_standing{migration=\"local\",standing=\"needs_person\"} 1")
            && metrics
                .contains("queue_migrate_standing{migration=\"local\",standing=\"moving\"} 0"),
        "{metrics}"
    );
    let value = |name: &str| {
        parsed
            .samples
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.value)
            .unwrap_or_else(|| panic!("no {name} in {metrics}"))
    };
    assert!(value("queue_migrate_ticks_total") >= 1.0);
    let (last, max, sum) = (
        value("queue_migrate_tick_seconds"),
        value("queue_migrate_tick_seconds_max"),
        value("queue_migrate_tick_seconds_total"),
    );
    assert!(0.0 < last && last <= max && max <= sum, "{metrics}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_mutations_on_a_public_address_without_a_token() {
    let w = DaemonWorld::new(&plan()).await;
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let config = Config {
        interval: Duration::from_millis(50),
        source_timeout: Duration::from_secs(2),
        queries_per_request: queue_migrate::indicators::fetch::QUERIES_PER_REQUEST,
        max_series: queue_migrate::indicators::fetch::MAX_SERIES,
        lease_ttl: Duration::from_secs(3),
        watch_interval: Duration::from_millis(50),
        holder: "x".into(),
        instance: String::new(),
        access: Default::default(),
        read_only_api: false,
        allowed_hosts: Vec::new(),
        confirm_complete: vec![],
        clock: daemon::DaemonClock::simulated(Arc::new(|| T0 * 1000)),
        http: daemon::http::Limits::default(),
        retain: None,
        max_clock_skew: std::time::Duration::from_secs(2),
    };
    let resolve: Arc<dyn Resolve + Send + Sync> = w.resolve.clone();
    let err = daemon::run(
        w.store.clone(),
        listener,
        config,
        resolve,
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, DaemonError::NoToken(_)), "{err}");
    assert!(err.to_string().contains("MIGRATE_API_TOKEN"));
}

/// A webhook receiver on loopback that records every event it gets (checking the plan's token),
/// and the plan of `plan()` with that webhook added to its `notify`.
pub(super) async fn webhook_receiver(plan: &str) -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let got: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let g2 = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, axum::Json(v): axum::Json<serde_json::Value>| {
                let g = g2.clone();
                async move {
                    assert_eq!(headers["authorization"], "Bearer hook-token");
                    g.lock().unwrap().push(v);
                    "ok"
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let yaml = plan.replace(
        "routing: { file: local.routing.json }",
        &format!(
            "routing: {{ file: local.routing.json }}\nnotify: {{ webhooks: [ {{ url: \"{hook}\", token: hook-token }} ] }}"
        ),
    );
    (yaml, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_hear_transitions_breaches_and_ready() {
    let (yaml, got) = webhook_receiver(&plan()).await;
    let w = DaemonWorld::new(&yaml).await;
    let d = w.start(|_| {}).await;
    d.climb_until(&w, |s| s.1 == Some(1)).await;
    w.indicators.set("app_error_ratio_new", 0.2);
    w.wait_for("the breach", |s| s.2).await;
    // Fixed: every gate passes again, but the migration is paused: "ready", for a person.
    w.indicators.set("app_error_ratio_new", 0.001);
    d.advance_clock(2);
    d.settle().await;
    // Webhooks are sent apart from the ticks: wait (bounded) until the three kinds arrived.
    let kinds_heard = || -> Vec<String> {
        got.lock()
            .unwrap()
            .iter()
            .map(|e| e["event"].as_str().unwrap().to_string())
            .collect()
    };
    common::poll_until_async(
        "a transition, a breach and a ready_to_advance webhook",
        Duration::from_secs(10),
        || {
            let kinds = kinds_heard();
            ["transition", "breach", "ready_to_advance"]
                .iter()
                .all(|k| kinds.iter().any(|heard| heard == k))
        },
    )
    .await;
    let events = got.lock().unwrap().clone();
    let kinds = kinds_heard();
    assert!(kinds.iter().any(|k| k == "transition"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "breach"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "ready_to_advance"), "{kinds:?}");
    let breach = events.iter().find(|e| e["event"] == "breach").unwrap();
    assert!(
        breach["text"]
            .as_str()
            .unwrap()
            .contains("error ratio breach"),
        "{breach}"
    );
    assert_eq!(breach["migration"], "local");
    d.stop().await;
}

/// Issue 44: a `standing` webhook is posted when where a migration stands changes kind, and
/// never for the first standing a daemon sees (a start or a restart is not news). Each pause
/// below is made while no daemon runs, so a `needs_person` event could only be a first sight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standing_webhook_is_posted_on_a_change_not_on_the_first_standing_a_daemon_sees() {
    let (yaml, got) = webhook_receiver(&plan()).await;
    let w = DaemonWorld::new(&yaml).await;
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let actor = Actor {
        name: "alice".into(),
        reason: Some("standing test".into()),
    };
    let standings = || -> Vec<serde_json::Value> {
        got.lock()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == "standing")
            .cloned()
            .collect()
    };
    let wait_standings = |n: usize| async move {
        let what = format!("{n} standing events");
        common::poll_until_async(&what, Duration::from_secs(10), || standings().len() >= n).await;
    };
    for run in 0..2 {
        let before = standings().len();
        let now = T0 * 1000 + run * 60_000;
        w.controller(&fetcher)
            .command("local", &Command::Pause, &actor, json!({}), now)
            .await
            .unwrap();
        let d = w.start(|_| {}).await;
        d.clock.store(now, Ordering::SeqCst);
        // Rounds over the paused migration: the first standing this daemon sees, no event.
        d.settle().await;
        d.settle().await;
        // A person resumes: the standing changes from `needs_person`, an event says so.
        w.controller(&fetcher)
            .command("local", &Command::Resume, &actor, json!({}), now)
            .await
            .unwrap();
        wait_standings(before + 1).await;
        d.stop().await;
    }
    let events = standings();
    assert!(
        events
            .iter()
            .all(|e| e["details"]["standing"]["kind"] != "needs_person"),
        "a first sight was announced: {events:#?}"
    );
    let from_pause: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["details"]["was"] == "needs_person")
        .collect();
    assert_eq!(from_pause.len(), 2, "one per resume: {events:#?}");
    for e in &events {
        let kind = e["details"]["standing"]["kind"].as_str().unwrap();
        assert_ne!(e["details"]["was"].as_str(), Some(kind), "a change: {e}");
        assert_eq!(e["migration"], "local");
        let sentence = e["details"]["standing"]["sentence"].as_str().unwrap();
        assert!(e["text"].as_str().unwrap().ends_with(sentence), "{e}");
    }
}

/// Regression: an `on_breach: alert` guard was announced once per daemon, not once per episode
/// (the episode's end removed names it had never stored), so a guard that failed again after
/// passing was never announced again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alert_only_breach_is_announced_again_after_the_guard_passed() {
    let (yaml, got) =
        webhook_receiver(&plan().replace("on_breach: rollback", "on_breach: alert")).await;
    let w = DaemonWorld::new(&yaml).await;
    let d = w.start(|_| {}).await;
    d.climb_until(&w, |s| s.1 == Some(1)).await;
    let breaches = || {
        got.lock()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == "breach")
            .count()
    };
    let wait_breaches = |n: usize| async move {
        let what = format!("{n} breach events");
        common::poll_until_async(&what, Duration::from_secs(10), || breaches() >= n).await;
    };
    // Failing for many ticks, its reading changing: one announcement for the episode.
    w.indicators.set("app_error_ratio_new", 0.2);
    wait_breaches(1).await;
    w.indicators.set("app_error_ratio_new", 0.3);
    d.settle().await;
    // Webhooks are sent apart from the ticks: a second announcement, made by one of the rounds
    // that read 0.3, would arrive while the daemon runs four more (checked after each pair).
    for _ in 0..2 {
        d.settle().await;
        assert_eq!(breaches(), 1, "one episode, one announcement");
    }
    // It passes (the clock stands still, so `observe` keeps the step), then fails again.
    w.indicators.set("app_error_ratio_new", 0.001);
    d.settle().await;
    w.indicators.set("app_error_ratio_new", 0.2);
    wait_breaches(2).await;
    assert_eq!(
        w.state().await,
        ("slices".into(), Some(1), false),
        "alert only"
    );
    d.stop().await;
}

/// A person takes `w`'s migration to slices[0] (consume_dual and synthetic have no minimum
/// time), then its guard fails: the instant the step began.
pub(super) async fn at_slices_0_with_a_failing_guard(w: &DaemonWorld) -> i64 {
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let actor = Actor {
        name: "alice".into(),
        reason: None,
    };
    let mut entered = T0 * 1000;
    for _ in 0..3 {
        entered += 1_000;
        w.controller(&fetcher)
            .advance("local", &AdvanceOptions::default(), &actor, entered)
            .await
            .unwrap();
    }
    assert_eq!(w.state().await, ("slices".into(), Some(0), false));
    w.indicators.set("app_error_ratio_new", 0.2);
    entered
}

/// Regression: a round reads its instant once, and a command may enter a new step while the
/// round runs; the tick then evaluated the new step at an instant before it began (readings of
/// the step before) and acted on a guard's breach with a journal time earlier than the step's
/// start. (An advance was already held: the minimum time is not met at a negative age.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_at_an_instant_before_the_step_began_decides_nothing() {
    let w = DaemonWorld::new(&plan()).await;
    let entered = at_slices_0_with_a_failing_guard(&w).await;
    let shared = w.leader_at(entered);
    let before = tick_in_round(
        &shared,
        &shared.fetcher,
        None,
        Read::Store("local"),
        entered - 5_000,
    )
    .await
    .unwrap();
    assert_eq!(before, Action::Waiting);
    assert_eq!(w.state().await, ("slices".into(), Some(0), false));
    // From the step's start on, the breach acts: one step back, paused.
    let after = tick_in_round(
        &shared,
        &shared.fetcher,
        None,
        Read::Store("local"),
        entered,
    )
    .await
    .unwrap();
    assert!(matches!(after, Action::Breach { .. }), "{after:?}");
    assert_eq!(w.state().await, ("synthetic".into(), None, true));
    let journal = w.store.journal("local").await.unwrap();
    for pair in journal.windows(2) {
        assert!(
            pair[0].at_ms <= pair[1].at_ms,
            "the journal goes back in time"
        );
    }
}

/// A daemon whose clock is behind the one that entered the step (a person's laptop ahead of
/// it) still acts on the step's guards: waiting for its clock to catch up would leave them
/// unwatched for as long as the skew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_whose_clock_is_behind_the_step_still_acts_on_its_guards() {
    let w = DaemonWorld::new(&plan()).await;
    let entered = at_slices_0_with_a_failing_guard(&w).await;
    // The daemon's own clock is ten minutes behind the step's start.
    let behind = entered - 600_000;
    let shared = w.leader_at(behind);
    let action = tick_in_round(&shared, &shared.fetcher, None, Read::Store("local"), behind)
        .await
        .unwrap();
    assert!(matches!(action, Action::Breach { .. }), "{action:?}");
    assert_eq!(w.state().await, ("synthetic".into(), None, true));
}

/// A world whose migration `local` is in `consume_dual`, advanced at the instant returned, its
/// exit gates followed by `increase(app_done_total[2m])` and the gate lines in `more`.
async fn consume_dual_with_counter_gates(more: &str) -> (DaemonWorld, i64) {
    let first = "query: app_new_consumer_connected, pass_if: \">= 1\" }";
    let gates = format!(
        "{first}\n      - {{ name: done lately, source: app, query: \"increase(app_done_total[2m])\", pass_if: \">= 0\" }}{more}"
    );
    let w = DaemonWorld::new(&plan().replace(first, &gates)).await;
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let actor = Actor {
        name: "test".into(),
        reason: None,
    };
    let t0 = T0 * 1000 + 60_000;
    w.controller(&fetcher)
        .advance("local", &AdvanceOptions::default(), &actor, t0)
        .await
        .unwrap();
    assert_eq!(w.state().await.0, "consume_dual");
    (w, t0)
}

/// The daemon keeps each migration's scrape history in memory between rounds and reads from the
/// store only what was stored since. Its reports must be the ones a whole read of the store
/// gives, round after round, also when another process (a `migrate advance` from the CLI)
/// records rounds in between: those rounds serve a counter reset that only they saw, which
/// changes `increase` and `rate` if the kept history misses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_scrape_histories_evaluate_as_a_whole_read_of_the_store() {
    let (w, t0) = consume_dual_with_counter_gates(
        "\n      - { name: done rate, source: app, query: \"rate(app_done_total[1m])\", pass_if: \">= 0\" }",
    )
    .await;
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let histories = Histories::default();
    let whole = w.controller(&fetcher);
    let kept = w.controller(&fetcher).with_histories(&histories);
    let loaded = whole.load("local").await.unwrap();
    let mut compared = 0;
    for round in 1..=40_i64 {
        let now = t0 + round * 15_000;
        let by_the_cli = round % 7 == 3;
        w.indicators.set(
            "app_done_total",
            if by_the_cli {
                0.0
            } else {
                (round * 100) as f64
            },
        );
        if by_the_cli {
            whole.evaluate(&loaded, now, false).await.unwrap();
            continue;
        }
        let expected = whole.evaluate(&loaded, now, true).await.unwrap();
        let got = kept.evaluate(&loaded, now, false).await.unwrap();
        assert_eq!(got.len(), 3);
        for (g, e) in got.iter().zip(&expected) {
            assert_eq!(g.name, e.name);
            assert_eq!(g.eval, e.eval, "round {round}, gate {}", g.name);
        }
        compared += 1;
    }
    assert_eq!(compared, 34);
    // What memory holds is what the store holds.
    let taken = histories
        .take("local", "app")
        .expect("kept after the last round");
    let (points, times) = w.store.load_points("local", "app").await.unwrap();
    assert_eq!(
        taken.history.scrape_times().collect::<Vec<_>>(),
        times,
        "scrape times"
    );
    assert_eq!(taken.history.points().count(), points.len());
}

/// Regression: every round deleted the scrape that aged out of each source's history, one
/// statement per source per round (a tenth of the store's time in a round of 1,000 sources). The
/// store now drops the scrapes of a step of `PRUNE_STEP_MS` at once, in the round where the
/// history kept in memory drops them: it holds what memory holds at every round, and keeps the
/// retention (twice 10 minutes here) plus at most a step. (That no delete is asked in the other
/// rounds leaves the store's rows as they are, so it is not seen here: the next test pins it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_drops_aged_scrapes_a_step_at_a_time_and_holds_what_memory_holds() {
    use queue_migrate::controller::histories::PRUNE_STEP_MS;
    let (w, t0) = consume_dual_with_counter_gates("").await;
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let histories = Histories::default();
    let kept = w.controller(&fetcher).with_histories(&histories);
    let loaded = kept.load("local").await.unwrap();
    let retention = 20 * 60_000;
    let every = 5_000;
    let rounds = (retention + 5 * 60_000) / every;
    let mut oldest = Vec::new();
    for round in 1..=rounds {
        let now = t0 + round * every;
        w.indicators.set("app_done_total", (round * 100) as f64);
        kept.evaluate(&loaded, now, false).await.unwrap();
        let (_, times) = w.store.load_points("local", "app").await.unwrap();
        let taken = histories.take("local", "app").expect("kept");
        assert_eq!(
            taken.history.scrape_times().collect::<Vec<_>>(),
            times,
            "round {round}: memory holds what the store holds"
        );
        histories.put("local", "app", taken);
        let first = times[0];
        if now - retention > t0 {
            assert!(
                first >= now - retention - PRUNE_STEP_MS && first <= now - retention + every,
                "round {round}: the oldest scrape {} s before now",
                (now - first) / 1_000
            );
        }
        oldest.push(first);
    }
    // The last 5 minutes pruned one step at a time, not one scrape a round.
    let last = &oldest[oldest.len() - 60..];
    let moves = last.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(
        (9..=11).contains(&moves),
        "the store's oldest scrape moved in {moves} of the last 60 rounds"
    );
}

/// A daemon's round asks the store to delete aged scrapes only in the rounds where the history
/// kept in memory dropped some (one round per 30-s step), and says nothing in the others: on
/// SQLite a delete per source per round took 0.08 s of the store's ~0.56 s per round of 1,000
/// sources (BENCHMARKS.md, twelfth pass). Each round goes through a `RoundBatch` as the
/// daemon's do, and what the batch would hand the store is read before its commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_asks_the_store_to_delete_only_when_the_kept_history_dropped_scrapes() {
    use queue_migrate::controller::histories::PRUNE_STEP_MS;
    use queue_migrate::controller::round::RoundBatch;
    let (w, t0) = consume_dual_with_counter_gates("").await;
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let histories = Histories::default();
    let loaded = w.controller(&fetcher).load("local").await.unwrap();
    let retention = 20 * 60_000;
    let every = 5_000;
    let rounds = (retention + 5 * 60_000) / every;
    let mut deletes = Vec::new();
    let mut oldest_before = None;
    for round in 1..=rounds {
        let now = t0 + round * every;
        w.indicators.set("app_done_total", (round * 100) as f64);
        let batch = RoundBatch::default();
        let c = w
            .controller(&fetcher)
            .with_histories(&histories)
            .with_round(Some(&batch));
        c.evaluate(&loaded, now, false).await.unwrap();
        let pending = batch.rounds();
        let sources: Vec<_> = pending.iter().flat_map(|r| &r.sources).collect();
        assert_eq!(sources.len(), 1, "round {round}: one scrape source");
        let keep_from = sources[0].keep_from_ms;
        batch.commit(&w.store, Some(&histories)).await.unwrap();
        let taken = histories.take("local", "app").expect("kept");
        let oldest = taken.history.scrape_times().next().expect("a scrape");
        histories.put("local", "app", taken);
        let dropped = oldest_before.is_some_and(|before| oldest != before);
        assert_eq!(
            keep_from.is_some(),
            dropped,
            "round {round}: a delete asked ({keep_from:?}) exactly when memory dropped scrapes"
        );
        if let Some(from) = keep_from {
            assert!(
                from <= oldest && oldest - from < PRUNE_STEP_MS,
                "round {round}: the store keeps from {from}, memory from {oldest}"
            );
            deletes.push(round);
        }
        oldest_before = Some(oldest);
    }
    // 300 rounds, the last 60 past the retention: a delete every 30 s there, none before.
    assert!(
        deletes.iter().all(|r| *r > retention / every),
        "deletes asked before anything aged: {deletes:?}"
    );
    let late = deletes.iter().filter(|r| **r > rounds - 60).count();
    assert!(
        (9..=11).contains(&late),
        "{late} deletes asked in the last 60 rounds (one per 30-s step expected): {deletes:?}"
    );
}

/// Regression: a kept history was read whole again every 100 rounds, all of a daemon's at once
/// (16-28 s for 1,000 sources 17 minutes old), only to find a scrape another process stored late,
/// with an instant older than the history's newest. Now the kept history is checked against the
/// store's scrape instants every 50 to 100 rounds, and read whole only when they differ: such a
/// scrape is still found, and then evaluates as a whole read of the store does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_stored_late_with_an_older_instant_is_found_when_the_kept_history_is_checked() {
    let (w, t0) = consume_dual_with_counter_gates("").await;
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let histories = Histories::default();
    let whole = w.controller(&fetcher);
    let kept = w.controller(&fetcher).with_histories(&histories);
    let loaded = whole.load("local").await.unwrap();
    let check_after = queue_migrate::controller::histories::rounds_before_check("local", "app");
    let last = i64::from(check_after) + 3;
    let mut differed = Vec::new();
    for round in 1..=last {
        // One second apart: the late scrape stays inside the query's two minutes.
        let now = t0 + round * 1_000;
        w.indicators.set("app_done_total", (round * 100) as f64);
        let expected = whole.evaluate(&loaded, now, true).await.unwrap();
        let got = kept.evaluate(&loaded, now, false).await.unwrap();
        if got.iter().zip(&expected).any(|(g, e)| g.eval != e.eval) {
            differed.push(round);
        }
        if round == 5 {
            // Another process stores a scrape taken between rounds 4 and 5, with a spike.
            let (points, _) = w.store.load_points("local", "app").await.unwrap();
            let mut late = points
                .into_iter()
                .find(|p| p.metric == "app_done_total")
                .expect("a stored sample of the counter");
            late.at_ms = now - 500;
            late.value = 1e6;
            w.store
                .save_points("local", "app", &[late.clone()], &[late.at_ms], i64::MIN)
                .await
                .unwrap();
        }
    }
    assert!(
        differed.first() == Some(&6) && differed.last() < Some(&last),
        "the kept history misses the late scrape from round 6 until it is checked, then holds it: \
         differed in rounds {differed:?}"
    );
    let taken = histories.take("local", "app").expect("kept");
    let (points, times) = w.store.load_points("local", "app").await.unwrap();
    assert_eq!(taken.history.scrape_times().collect::<Vec<_>>(), times);
    assert_eq!(taken.history.points().count(), points.len());
}

/// Regression: a daemon's first round read every stored sample of each scrape history whole
/// (16-28 s for 1,000 sources 17 minutes old), though its queries reach back 5 minutes at most;
/// the store keeps twice the retention, at least 20 minutes. A history read whole now holds the
/// samples its queries can reach and every instant, and evaluates as a history kept in memory
/// since the first round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_read_whole_holds_what_its_queries_reach_and_evaluates_as_a_kept_one() {
    let (w, t0) = consume_dual_with_counter_gates("").await;
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let histories = Histories::default();
    let running = w.controller(&fetcher).with_histories(&histories);
    let loaded = running.load("local").await.unwrap();
    // 15 minutes of rounds 15 s apart; the counter grows faster and faster, so a window cut
    // short gives another increase.
    let count = |round: i64| (round * round * 10) as f64;
    for round in 1..=60_i64 {
        w.indicators.set("app_done_total", count(round));
        running
            .evaluate(&loaded, t0 + round * 15_000, false)
            .await
            .unwrap();
    }
    let now = t0 + 61 * 15_000;
    w.indicators.set("app_done_total", count(61));
    // A dry run reads the store whole, as a daemon's first round does.
    let kept = evaluate_as_a_whole_read(&w, &fetcher, &running, &loaded, now).await;
    assert!(
        kept.iter()
            .any(|k| k.name == "done lately" && k.eval.value.is_some()),
        "{kept:?}"
    );

    // A restarted daemon: its first round reads the store whole.
    let restarted_histories = Histories::default();
    let restarted = w.controller(&fetcher).with_histories(&restarted_histories);
    let now = now + 15_000;
    w.indicators.set("app_done_total", count(62));
    let first = restarted.evaluate(&loaded, now, false).await.unwrap();
    // The same round of the daemon that kept its history since round 1 (the scrape of `now`
    // stored again, the same): the same readings.
    let kept = running.evaluate(&loaded, now, false).await.unwrap();
    assert_eq!(first.len(), 2);
    for (f, k) in first.iter().zip(&kept) {
        assert_eq!(
            (f.eval.verdict, f.eval.value),
            (k.eval.verdict, k.eval.value),
            "gate {}",
            f.name
        );
    }
    let taken = restarted_histories.take("local", "app").expect("kept");
    let (points, times) = w.store.load_points("local", "app").await.unwrap();
    assert_eq!(taken.history.scrape_times().collect::<Vec<_>>(), times);
    let reach = now - 5 * 60_000;
    let held: Vec<i64> = taken.history.points().map(|p| p.at_ms).collect();
    assert!(held.iter().all(|at| *at >= reach), "{held:?}");
    assert_eq!(
        held.len(),
        points.iter().filter(|p| p.at_ms >= reach).count(),
        "every sample the queries reach"
    );
    assert!(
        held.len() < points.len() / 2,
        "{} of {}",
        held.len(),
        points.len()
    );
    restarted_histories.put("local", "app", taken);

    // Queries that reach further back (as a next phase's may) read it whole again.
    let mut wider = loaded.clone();
    let lately = wider
        .plan
        .phases
        .iter_mut()
        .flat_map(|p| p.exit.iter_mut())
        .find(|g| g.name == "done lately")
        .expect("the gate");
    let Check::Threshold { query, .. } = &mut lately.check else {
        panic!("a threshold gate");
    };
    *query = "increase(app_done_total[15m])".into();
    let now = now + 15_000;
    w.indicators.set("app_done_total", count(63));
    evaluate_as_a_whole_read(&w, &fetcher, &restarted, &wider, now).await;
}

/// `controller`'s round at `now` (recorded), after checking that a dry run, which reads the
/// store whole, gives the same evaluations of the two gates.
async fn evaluate_as_a_whole_read(
    w: &DaemonWorld,
    fetcher: &Fetcher,
    controller: &Controller<'_, AnyStore>,
    loaded: &Loaded,
    now: i64,
) -> Vec<GateReport> {
    let whole = w
        .controller(fetcher)
        .evaluate(loaded, now, true)
        .await
        .unwrap();
    let got = controller.evaluate(loaded, now, false).await.unwrap();
    assert_eq!(got.len(), 2);
    for (g, e) in got.iter().zip(&whole) {
        assert_eq!(g.eval, e.eval, "gate {}", g.name);
    }
    got
}

/// A kept history whose check finds in the store the instants it holds is kept, not read whole:
/// the check costs one row where a whole read of a source 17 minutes old took 16-21 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_history_that_passes_its_check_is_kept_not_read_whole() {
    let (w, t0) = consume_dual_with_counter_gates("").await;
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let histories = Histories::default();
    let whole = w.controller(&fetcher);
    let kept = w.controller(&fetcher).with_histories(&histories);
    let loaded = whole.load("local").await.unwrap();
    // Read whole in round 1, then due in the round after its rounds.
    let due = i64::from(queue_migrate::controller::histories::rounds_before_check(
        "local", "app",
    )) + 2;
    for round in 1..=due {
        let now = t0 + round * 1_000;
        w.indicators.set("app_done_total", (round * 100) as f64);
        whole.evaluate(&loaded, now, true).await.unwrap();
        kept.evaluate(&loaded, now, false).await.unwrap();
    }
    let taken = histories.take("local", "app").expect("kept");
    assert_eq!(taken.rounds, 1, "checked and kept (0: read whole)");
}

/// A transition committed by a command that died before publishing it: the record's routing is
/// left behind its generation.
async fn commit_unpublished(
    w: &DaemonWorld,
    name: &str,
    command: &str,
    paused: bool,
    at_ms: i64,
) -> queue_migrate::store::MigrationRecord {
    let before = w.store.get(name).await.unwrap();
    let moved = w
        .store
        .commit(
            name,
            &Commit {
                expected_version: before.version,
                command: command.into(),
                to: Snapshot {
                    state: before.state,
                    paused,
                },
                at_ms,
                actor: "crashed".into(),
                reason: None,
                forced: false,
                evidence: json!({}),
                memory: Vec::new(),
            },
        )
        .await
        .unwrap();
    assert!(moved.published_generation < moved.generation);
    moved
}

/// Regression: publishing checked no generation, so a slow re-publication (an etcd put of an
/// older generation that lands after a newer transition's own put) left etcd behind the store
/// for good, while the store said published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_republication_does_not_leave_an_older_generation_in_etcd() {
    slow_republication(false).await;
}

/// The same, when the slow put lands but its writer is answered an error (a gateway timeout
/// after etcd applied it): the writer still checks the store afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_republication_answered_an_error_does_not_leave_an_older_generation_in_etcd() {
    slow_republication(true).await;
}

async fn slow_republication(answer_error: bool) {
    use base64::Engine;
    // A fake etcd gateway of the transactions the mirror is written with (`/v3/kv/txn`: a
    // compare on the stored generation, then two puts): the generation of every document that
    // lands, in order; the transaction after `delay_next` is set takes 1.5 s to land, and its
    // compare is judged when it lands, as etcd does.
    let landed: Arc<Mutex<Vec<i64>>> = Arc::default();
    let stored: Arc<Mutex<Option<String>>> = Arc::default();
    let delay_next = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let delayed_arrived = Arc::new(tokio::sync::Notify::new());
    let app = {
        let (landed, stored, delay_next, arrived) = (
            landed.clone(),
            stored.clone(),
            delay_next.clone(),
            delayed_arrived.clone(),
        );
        axum::Router::new().route(
            "/v3/kv/txn",
            axum::routing::post(move |axum::Json(v): axum::Json<serde_json::Value>| {
                let (landed, stored, delay_next, arrived) = (
                    landed.clone(),
                    stored.clone(),
                    delay_next.clone(),
                    arrived.clone(),
                );
                async move {
                    let b64 = base64::engine::general_purpose::STANDARD;
                    let text = |v: &serde_json::Value| {
                        String::from_utf8(b64.decode(v.as_str().unwrap()).unwrap()).unwrap()
                    };
                    let late = delay_next.swap(false, Ordering::SeqCst);
                    if late {
                        arrived.notify_one();
                        tokio::time::sleep(Duration::from_millis(1500)).await;
                    }
                    let compare = &v["compare"][0];
                    let generation = text(&v["success"][1]["request_put"]["value"]);
                    let succeeded = {
                        let mut stored = stored.lock().unwrap();
                        let holds = match compare["target"].as_str() {
                            Some("VERSION") => stored.is_none(),
                            _ => stored
                                .as_deref()
                                .is_some_and(|s| s < text(&compare["value"]).as_str()),
                        };
                        if holds {
                            let doc: serde_json::Value = serde_json::from_str(&text(
                                &v["success"][0]["request_put"]["value"],
                            ))
                            .unwrap();
                            landed
                                .lock()
                                .unwrap()
                                .push(doc["generation"].as_i64().unwrap());
                            *stored = Some(generation);
                        }
                        holds
                    };
                    if late && answer_error {
                        (
                            axum::http::StatusCode::GATEWAY_TIMEOUT,
                            "applied, answered late".to_string(),
                        )
                    } else {
                        (
                            axum::http::StatusCode::OK,
                            serde_json::json!({ "succeeded": succeeded }).to_string(),
                        )
                    }
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let etcd = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let w = DaemonWorld::new(&plan().replace(
        "routing: { file: local.routing.json }",
        &format!("routing: {{ file: local.routing.json, etcd: {{ endpoint: \"{etcd}\", key: qm/local }} }}"),
    ))
    .await;
    let now = T0 * 1000 + 60_000;
    // A command committed and died before publishing: whoever loads it next re-publishes.
    let behind = commit_unpublished(&w, "local", "pause", true, now).await;
    delay_next.store(true, Ordering::SeqCst);
    let slow = {
        let (store, resolve) = (w.store.clone(), w.resolve.clone());
        tokio::spawn(async move {
            let fetcher = Fetcher::new(Duration::from_secs(5)).unwrap();
            common::controller(&store, &fetcher, &resolve)
                .load("local")
                .await
                .unwrap();
        })
    };
    // While that put is on its way, a person resumes: a newer generation, published at once.
    delayed_arrived.notified().await;
    let fetcher = Fetcher::new(Duration::from_secs(5)).unwrap();
    w.controller(&fetcher)
        .command(
            "local",
            &Command::Resume,
            &Actor {
                name: "alice".into(),
                reason: Some("back".into()),
            },
            json!({}),
            now + 1_000,
        )
        .await
        .unwrap();
    slow.await.unwrap();
    let stored = w.store.get("local").await.unwrap();
    assert!(stored.generation > behind.generation);
    assert_eq!(stored.published_generation, stored.generation);
    let landed = landed.lock().unwrap().clone();
    assert_eq!(
        landed.last().copied(),
        Some(stored.generation),
        "etcd was left at an older generation; puts landed: {landed:?}"
    );
}

/// A daemon that starts loads every migration from one read of the fleet (not one statement per
/// migration: 0.15-0.22 s from its start to listening with 1,000 of them, against 0.24-0.34 s)
/// and publishes each as a load one by one does: every routing in the hub at its generation.
/// As the leader (the demo's daemon, or a watcher once the lease is held), one that a command
/// left behind (it died between its commit and its publication) is re-published from the store;
/// a standby (a `migrate run` before its lease) publishes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starting_daemon_publishes_every_migration_from_one_read_of_the_fleet() {
    let w = DaemonWorld::new(&plan()).await;
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let c = w.controller(&fetcher);
    let actor = Actor {
        name: "test".into(),
        reason: None,
    };
    for name in ["other", "third"] {
        let path = local_plan_named(w.dir.path(), name);
        c.init(&path, &actor, T0 * 1000).await.unwrap();
    }
    // "other" moved by a command that died before publishing.
    commit_unpublished(&w, "other", "pause", true, T0 * 1000 + 1_000).await;

    let daemon = || {
        Shared::new(
            w.store.clone(),
            daemon_config(Arc::new(AtomicI64::new(T0 * 1000 + 2_000))),
            w.resolve.clone(),
        )
        .unwrap()
    };
    let standby = daemon();
    standby.watch_once().await;
    assert_in_hub(&w, &standby).await;
    let other = w.store.get("other").await.unwrap();
    assert!(
        other.published_generation < other.generation,
        "a standby publishes nothing"
    );

    let shared = daemon();
    shared.leader.store(true, Ordering::SeqCst);
    shared.watch_once().await;
    assert_in_hub(&w, &shared).await;
    for name in ["local", "other", "third"] {
        let record = w.store.get(name).await.unwrap();
        assert_eq!(
            record.published_generation, record.generation,
            "{name}'s routing published"
        );
        let routing = w.routing_file(name);
        assert_eq!(
            routing["generation"], record.generation,
            "{name}: {routing}"
        );
    }
}

/// Every migration of `w` in `shared`'s hub at the generation the store holds.
async fn assert_in_hub(w: &DaemonWorld, shared: &Shared<AnyStore>) {
    for record in w.store.list().await.unwrap() {
        assert_eq!(
            shared.hub.generation(&record.name),
            Some(u64::try_from(record.generation).unwrap()),
            "{} in the hub at its generation",
            record.name
        );
    }
}

/// The watcher reads every record at once only when a good part of the fleet moved: a start
/// (all of it), a bulk move; one or a few migrations moved by commands are read alone.
#[test]
fn the_watcher_reads_the_whole_fleet_only_when_a_quarter_of_it_moved() {
    use queue_migrate::daemon::read_whole_fleet;
    assert!(read_whole_fleet(1_000, 1_000), "a start");
    assert!(read_whole_fleet(250, 1_000));
    assert!(!read_whole_fleet(249, 1_000));
    assert!(!read_whole_fleet(2, 1_000), "two commands at once");
    assert!(read_whole_fleet(2, 8));
    assert!(!read_whole_fleet(1, 1), "one migration: read alone");
    assert!(!read_whole_fleet(0, 0));
}

/// A round reads the whole fleet once, at its start, and ticks each migration from that read. A
/// migration a person moves after the read must not be acted on from it: the transition the old
/// read calls for is a conflict, and a routing the read saw left behind is re-published from the
/// store as it is now, never from the read (which would put an older generation back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_does_not_act_on_its_read_of_a_migration_a_command_changed_since() {
    let w = DaemonWorld::new(&plan()).await;
    let now = T0 * 1000 + 60_000;
    let shared = w.leader_at(now);
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let person = w.controller(&fetcher);
    let actor = Actor {
        name: "alice".into(),
        reason: Some("looking".into()),
    };
    let read_of = |fleet: &mut Fleet| {
        let record = fleet.records.remove(0);
        let memory = fleet.memory.remove(&record.name).unwrap_or_default();
        Read::Fleet(record, memory)
    };

    // Planned, every gate green, auto_advance: the read calls for an advance. A person pauses
    // the migration after the read.
    let mut fleet = w.store.fleet().await.unwrap();
    person
        .command("local", &Command::Pause, &actor, json!({}), now)
        .await
        .unwrap();
    let action = tick_in_round(&shared, &shared.fetcher, None, read_of(&mut fleet), now)
        .await
        .unwrap();
    assert_eq!(action, Action::Conflict);
    assert_eq!(w.state().await, ("planned".to_string(), None, true));

    let commands: Vec<String> = w
        .store
        .journal("local")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.command)
        .collect();
    assert_eq!(commands, ["init", "pause"]);

    // A command committed its transition and died before publishing it; the round reads that.
    // Then a person acts: the routing is re-published and a newer generation published.
    let resumed = commit_unpublished(&w, "local", "resume", false, now).await;
    let mut fleet = w.store.fleet().await.unwrap();
    person
        .command("local", &Command::Pause, &actor, json!({}), now)
        .await
        .unwrap();
    let newest = w.store.get("local").await.unwrap();
    assert_eq!(newest.generation, resumed.generation + 1);
    tick_in_round(&shared, &shared.fetcher, None, read_of(&mut fleet), now)
        .await
        .unwrap();
    let routing = w.routing_file("local");
    assert_eq!(routing["generation"], newest.generation, "{routing}");
    assert_eq!(w.state().await, ("planned".to_string(), None, true));

    // Once the watcher has seen a migration move, its tick reads it again instead of deciding
    // (or announcing) anything from the round's read: the read says paused, a person resumed it.
    let mut fleet = w.store.fleet().await.unwrap();
    person
        .command("local", &Command::Resume, &actor, json!({}), now)
        .await
        .unwrap();
    shared.watch_once().await;
    let action = tick_in_round(&shared, &shared.fetcher, None, read_of(&mut fleet), now)
        .await
        .unwrap();
    assert_eq!(
        action,
        Action::Advanced {
            to: State::ConsumeDual
        },
        "decided on the migration as it is now"
    );
}

/// The local plan with `for: hold_for` on its exit gate, in `slices[0]` since a minute past
/// `T0` (entered by a command; every gate green), and a leading daemon over it: the world, the
/// daemon's state, and the plan's text.
async fn leading_in_first_slice(hold_for: &str) -> (DaemonWorld, Arc<Shared<AnyStore>>, String) {
    const GATE: &str = r#"pass_if: "< 0.01" }"#;
    let held = plan().replacen(
        GATE,
        &format!(r#"pass_if: "< 0.01", for: {hold_for} }}"#),
        1,
    );
    assert_ne!(held, plan());
    let w = DaemonWorld::new(&held).await;
    let entered = T0 * 1000 + 60_000;
    common::enter_first_slice(&w.store, "local", entered).await;
    let shared = w.leader_at(entered);
    (w, shared, held)
}

/// The memory of the first slice's exit gate (`error ratio low`) of the step entered at
/// `entered`.
async fn first_slice_gate_memory(
    w: &DaemonWorld,
    entered: i64,
) -> queue_migrate::store::GateRecord {
    let gate = [("error ratio low", "exit")];
    let rows = w
        .store
        .latest_evaluations("local", entered, &gate)
        .await
        .unwrap();
    rows[0].clone()
}

/// Regression: a round that read a migration (its plan, its gates' memory) before `migrate plan
/// apply` and committed after it wrote back the held-since mark gathered under the old
/// definition of a gate the apply had changed (and whose mark it had forgotten): the next round
/// saw the stricter gate "held for 5m" and advanced at once. The round's memory is not written
/// once the plan it evaluated under is replaced; the changed gate's `for:` starts again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_that_read_the_old_plan_does_not_carry_a_changed_gates_mark_over_plan_apply() {
    // In the first slice step, entered by a command; every gate green.
    let (w, shared, held) = leading_in_first_slice("5m").await;
    let minute = 60_000;
    let entered = T0 * 1000 + minute;
    // Held for 3 of its 5 minutes under the first definition.
    for m in 1..=4 {
        let action = daemon::tick::tick(&shared, "local", entered + m * minute)
            .await
            .unwrap();
        assert_eq!(action, Action::Waiting, "minute {m}");
    }
    let mark = |memory: &[queue_migrate::store::GateRecord]| {
        memory
            .iter()
            .find(|g| g.gate == "error ratio low")
            .and_then(|g| g.held_since_ms)
    };
    // A round reads the fleet, then waits on its sources (a slow Prometheus) ...
    let mut fleet = w.store.fleet().await.unwrap();
    let record = fleet.records.remove(0);
    let memory = fleet.memory.remove(&record.name).unwrap_or_default();
    assert_eq!(mark(&memory), Some(entered + minute));
    // ... while a person makes the gate stricter.
    let applied_at = entered + 4 * minute + 30_000;
    std::fs::write(
        w.dir.path().join("local.yaml"),
        held.replacen(r#""< 0.01", for: 5m"#, r#""< 0.005", for: 5m"#, 1),
    )
    .unwrap();
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let outcome = w
        .controller(&fetcher)
        .plan_apply(
            &w.dir.path().join("local.yaml"),
            &Actor {
                name: "alice".into(),
                reason: Some("0.5% at most".into()),
            },
            applied_at,
            false,
        )
        .await
        .unwrap();
    assert!(outcome.version.is_some(), "{outcome:?}");
    // The round goes on from its read: under the old definition the gate has held 5 minutes;
    // its advance conflicts (the plan apply moved the version), and its round commits.
    let batch = RoundBatch::default();
    let action = tick_in_round(
        &shared,
        &shared.fetcher,
        Some(&batch),
        Read::Fleet(record, memory),
        entered + 6 * minute,
    )
    .await
    .unwrap();
    assert_eq!(action, Action::Conflict);
    assert_eq!(batch.commit(&w.store, None).await.unwrap(), 1);
    let now = w.store.fleet().await.unwrap();
    assert_eq!(
        mark(
            now.memory
                .get("local")
                .map(Vec::as_slice)
                .unwrap_or_default()
        ),
        None,
        "the mark gathered under the old definition is not written back"
    );

    // The next round, under the new plan: the stricter gate has held a moment, not 5 minutes.
    let action = daemon::tick::tick(&shared, "local", entered + 6 * minute + 15_000)
        .await
        .unwrap();
    assert_eq!(action, Action::Waiting);
    assert_eq!(w.state().await, ("slices".to_string(), Some(0), false));
    // It passes once held 5 minutes under the new definition.
    let action = daemon::tick::tick(&shared, "local", entered + 11 * minute + 15_000)
        .await
        .unwrap();
    assert_eq!(
        action,
        Action::Advanced {
            to: State::Slices(1)
        }
    );
}

/// Regression: a daemon's round and a person's `migrate advance` read the same gate memory; the
/// person's advance saw the `for: 5m` gate fail and wrote it, then the round, deciding on its
/// older read (the gate held since a minute into the step), advanced, and its commit wrote the
/// old mark back over the failure. A transition commits only while the memory it was decided on
/// is unchanged, and a stale mark never overwrites a failure written meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_does_not_advance_on_a_mark_a_concurrent_advance_saw_fail() {
    let (w, shared, _) = leading_in_first_slice("5m").await;
    let minute = 60_000;
    let entered = T0 * 1000 + minute;
    for m in 1..=4 {
        let action = daemon::tick::tick(&shared, "local", entered + m * minute)
            .await
            .unwrap();
        assert_eq!(action, Action::Waiting, "minute {m}");
    }
    let gate = "error ratio low";
    // A round reads the fleet: the gate held since a minute into the step.
    let mut fleet = w.store.fleet().await.unwrap();
    let record = fleet.records.remove(0);
    let memory = fleet.memory.remove(&record.name).unwrap_or_default();
    let read = memory.iter().find(|g| g.gate == gate).unwrap().clone();
    assert_eq!(read.held_since_ms, Some(entered + minute));
    // A person's advance, from the same read, sees the gate fail and writes it.
    let failure = queue_migrate::store::GateRecord {
        held_since_ms: None,
        verdict: "fail".into(),
        value: Some(0.5),
        at_ms: entered + 5 * minute,
        ..read.clone()
    };
    w.store
        .record_rounds(&[queue_migrate::store::RoundRecord {
            name: "local".into(),
            plan_hash: Some(record.plan_hash.clone()),
            records: vec![failure],
            sources: vec![],
        }])
        .await
        .unwrap();
    // The round decides on its read (held 5 minutes): its advance is not applied.
    let batch = RoundBatch::default();
    let action = tick_in_round(
        &shared,
        &shared.fetcher,
        Some(&batch),
        Read::Fleet(record, memory),
        entered + 6 * minute,
    )
    .await
    .unwrap();
    assert_eq!(action, Action::Conflict);
    assert_eq!(w.state().await, ("slices".to_string(), Some(0), false));
    assert_eq!(batch.commit(&w.store, None).await.unwrap(), 1);
    let now = w.store.fleet().await.unwrap();
    let mark = now.memory["local"]
        .iter()
        .find(|g| g.gate == gate)
        .and_then(|g| g.held_since_ms);
    assert_eq!(
        mark, None,
        "the failure is not overwritten by the round's mark"
    );
    // The next round starts the streak again: 5 minutes more before it passes.
    let action = daemon::tick::tick(&shared, "local", entered + 6 * minute + 15_000)
        .await
        .unwrap();
    assert_eq!(action, Action::Waiting);
    assert_eq!(w.state().await, ("slices".to_string(), Some(0), false));
}

/// A `for:` gate counts only what it saw: a daemon that evaluated it holding, then was down for
/// 20 minutes (no round), does not find it "held for 20m" when it comes back. The streak
/// restarts at the first round after the gap (over the 5 minutes allowed between two
/// evaluations by default), the reason says so, and the gate passes once it has held its
/// `for` again under rounds close enough together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_for_gate_does_not_pass_over_a_long_gap_between_rounds() {
    let (w, shared, _) = leading_in_first_slice("10m").await;
    let minute = 60_000;
    let entered = T0 * 1000 + minute;
    let tick = |m: i64| daemon::tick::tick(&shared, "local", entered + m * minute);
    let memory = || first_slice_gate_memory(&w, entered);
    // Rounds a minute apart for 3 minutes: held since the first.
    for m in 1..=3 {
        assert_eq!(tick(m).await.unwrap(), Action::Waiting, "minute {m}");
    }
    assert_eq!(memory().await.held_since_ms, Some(entered + minute));
    // The daemon is down for 20 minutes. Without the bound on the gap, this round would see
    // the gate held for 22 of its 10 minutes and advance.
    assert_eq!(tick(23).await.unwrap(), Action::Waiting);
    assert_eq!(w.state().await, ("slices".to_string(), Some(0), false));
    let after = memory().await;
    assert_eq!(after.held_since_ms, Some(entered + 23 * minute));
    assert!(
        after.reason.contains(
            "held for 0s of 10m (restarted: no evaluation for 20m, over the 5m allowed between two)"
        ),
        "{}",
        after.reason
    );
    // Rounds every 5 minutes (at the bound) keep the new streak: it passes 10 minutes on.
    assert_eq!(tick(28).await.unwrap(), Action::Waiting);
    assert_eq!(
        tick(33).await.unwrap(),
        Action::Advanced {
            to: State::Slices(1)
        }
    );
}

/// Issue 42: a daemon whose host clock ran 2 minutes ahead of the database's passed `observe:
/// 1m` and `for: 1m` within seconds of taking over a step entered, and a gate held since, on the
/// database's clock. Its gates read the database's clock as it follows it
/// ([`daemon::DaemonClock`]: sampled at every lease attempt), whatever the host's clock says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_whose_clock_runs_ahead_of_the_database_does_not_pass_observe_and_for_early() {
    const GATE: &str = r#"pass_if: "< 0.01" }"#;
    let held = plan().replacen(GATE, r#"pass_if: "< 0.01", for: 1m }"#, 1);
    assert_ne!(held, plan());
    let w = DaemonWorld::on_database_clock(&held).await;
    // SQLite's clock is this machine's: the step is entered on the database's time (the
    // store's, read in the commit: what the gates' memory of the step is keyed by).
    common::enter_first_slice(&w.store, "local", queue_migrate::time::now_ms()).await;
    let entered = w.store.get("local").await.unwrap().entered_at_ms;
    // A daemon on a host whose wall clock reads `ahead_ms` more than the database's.
    let on_host = |ahead_ms: i64| {
        move |c: &mut Config| {
            c.clock = daemon::DaemonClock::on_host(
                Arc::new(move || queue_migrate::time::now_ms() + ahead_ms),
                None,
            );
        }
    };
    let memory = || first_slice_gate_memory(&w, entered);
    // A daemon on the database's time leads first: the gate passes, held from its first round.
    let first = w.start(on_host(0)).await;
    first.leading().await;
    first.settle().await;
    let since = memory().await.held_since_ms.expect("the gate passes");
    first.stop().await;
    // The next leader's host is 2 minutes ahead: a minute of `observe` and of `for:` have not
    // passed on the database's clock, whatever this host says.
    let ahead = w.start(on_host(120_000)).await;
    ahead.leading().await;
    ahead.settle().await;
    ahead.settle().await;
    let m = memory().await;
    assert_eq!(
        w.state().await,
        ("slices".into(), Some(0), false),
        "advanced early: {m:?}"
    );
    assert!(
        m.at_ms >= since && m.at_ms - entered < 60_000,
        "the round's instant is not the database's: {} ms after the step began",
        m.at_ms - entered
    );
    assert_eq!(m.held_since_ms, Some(since), "{m:?}");
    ahead.stop().await;
}

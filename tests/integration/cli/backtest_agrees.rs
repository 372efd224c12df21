//! `migrate plan backtest` and the live controller agree: the daemon's ticks run a migration
//! over a scripted scrape source, keeping its scrapes in the store; the backtest then reads that
//! recorded history from the same store and must make the same transitions at the same instants
//! (advances, and the guard breach's rollback that ends both).

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use common::{Indicators, MapResolve, T0, daemon_config};
use queue_migrate::backtest::{self, Instants, readings};
use queue_migrate::controller::Actor;
use queue_migrate::daemon::{self, Shared};
use queue_migrate::indicators::fetch::Fetcher;
use queue_migrate::machine::State;
use queue_migrate::store::any::AnyStore;
use queue_migrate::store::sqlite::SqliteStore;
use queue_migrate::store::traits::*;

const PLAN: &str = r#"
version: 1
name: agree
slices: 8
auto_advance: true
brokers:
  old: { name: old, kind: amqp, url: "amqp://127.0.0.1:5672/%2f", queue: local, dead_letter: local.dlq }
  new: { name: new, kind: nats, url: "nats://127.0.0.1:4222", stream: LOCAL }
retry:
  max_backoff: 2m
  visibility_timeout: 1m
dedup:
  window: 1d
  max_redelivery_delay: 2m
  max_consumer_delay: 1m
  reprocess_margin: 12h
sources:
  app: { scrape: "${QM_SCRAPE_URL}" }
routing: { file: agree.routing.json }
phases:
  consume_dual:
    min_duration: 2m
    exit:
      - { name: new consumer connected, source: app, query: app_new_consumer_connected, pass_if: ">= 1" }
  slices:
    steps: [2, 8]
    observe: 5m
    exit:
      - { name: errors quiet, source: app, query: app_error_ratio_new, pass_if: "< 0.01", for: 3m }
      - { name: work done, source: app, query: "increase(app_done_total[2h])", pass_if: ">= 10", min_samples: 3 }
    require_peak: { source: app, query: app_rate, at_least: 50 }
    guard:
      - { name: errors breach, source: app, query: app_error_ratio_new, pass_if: "< 0.05" }
    on_breach: rollback
  drain:
    quiet: auto
    exit:
      - { name: old queue empty, source: app, query: app_old_depth, pass_if: "== 0", for: quiet }
"#;

/// What the source serves at minute `m` of the run.
fn serve(indicators: &Indicators, m: i64) {
    indicators.set("app_new_consumer_connected", if m < 4 { 0.0 } else { 1.0 });
    let errors = match m {
        12..=14 => 0.02,
        35 => 0.08,
        _ => 0.001,
    };
    indicators.set("app_error_ratio_new", errors);
    indicators.set("app_done_total", m as f64);
    let peak = matches!(m, 20 | 50..=52);
    indicators.set("app_rate", if peak { 60.0 } else { 10.0 });
    indicators.set("app_old_depth", 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backtest_makes_the_live_controllers_transitions_at_the_same_instants() {
    let dir = tempfile::tempdir().unwrap();
    let indicators = Indicators::start();
    let resolve = Arc::new(MapResolve::of(&indicators));
    // A simulated clock: the journal keeps its instants (not the database's clock).
    let store: AnyStore = SqliteStore::open(dir.path().join("state.db").to_str().unwrap())
        .await
        .unwrap()
        .with_writer_clock();
    let path = dir.path().join("agree.yaml");
    std::fs::write(&path, PLAN).unwrap();
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let t0 = T0 * 1000;
    common::controller(&store, &fetcher, &resolve)
        .init(
            &path,
            &Actor {
                name: "test".into(),
                reason: None,
            },
            t0 - 1_000,
        )
        .await
        .unwrap();
    let clock = Arc::new(AtomicI64::new(t0));
    let mut config = daemon_config(clock.clone());
    config.confirm_complete = vec!["agree".into()];
    let shared = Shared::new(store.clone(), config, resolve.clone()).unwrap();
    // The rehearsal replays the gates: the brokers' durability (the daemon's preflight before
    // synthetic, issue 58) is no reading of theirs, and this plan's brokers are not there.
    shared.set_preflight_reader(None);
    shared.leader.store(true, Ordering::SeqCst);
    let minutes = 60;
    for m in 0..=minutes {
        let now = t0 + m * 60_000;
        clock.store(now, Ordering::SeqCst);
        serve(&indicators, m);
        daemon::tick::tick(&shared, "agree", now).await.unwrap();
    }
    let live: Vec<(i64, String, State, State, bool)> = store
        .journal("agree")
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.command != "init")
        .map(|e| (e.at_ms, e.command, e.from.state, e.to.state, e.to.paused))
        .collect();

    let plan = queue_migrate::plan::compile(PLAN, Some(dir.path()), resolve.as_ref())
        .unwrap()
        .plan;
    let instants = Instants::new(t0, t0 + minutes * 60_000, 60_000).unwrap();
    let read = readings::read(&plan, Some(&store), &fetcher, instants).await;
    assert!(read.unavailable.is_empty(), "{:?}", read.unavailable);
    let start = backtest::start_state(&plan, None).unwrap();
    let rehearsal = backtest::rehearse(&plan, &read, start);
    let rehearsed: Vec<(i64, String, State, State, bool)> = rehearsal
        .moves
        .iter()
        .map(|m| (m.at_ms, m.command.to_string(), m.from, m.to, m.paused))
        .collect();
    assert_eq!(rehearsed, live);

    // And the run was the one scripted: up the ladder, then the breach at minute 35.
    let minute = |m: i64| t0 + m * 60_000;
    let states: Vec<(String, State, State)> = live
        .iter()
        .map(|(_, c, from, to, _)| (c.clone(), *from, *to))
        .collect();
    assert_eq!(
        states,
        vec![
            ("advance".into(), State::Planned, State::ConsumeDual),
            ("advance".into(), State::ConsumeDual, State::Slices(0)),
            ("advance".into(), State::Slices(0), State::Slices(1)),
            ("rollback".into(), State::Slices(1), State::Slices(0)),
        ]
    );
    assert_eq!(live[0].0, minute(0));
    assert_eq!(live[3].0, minute(35));
    assert!(live[3].4, "paused after the breach");
    let breach = rehearsal.breaches.last().expect("a breach");
    assert!(breach.ended);
    assert!(
        backtest::report::verdict(&rehearsal).contains("rolled back to slices[0] and paused"),
        "{}",
        backtest::report::verdict(&rehearsal)
    );
}

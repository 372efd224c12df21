//! A command that commits and publishes while a starting daemon reads its fleet (between the
//! watcher's one read of every record and its loads of them): the daemon never publishes the
//! older read over the command's routing, and its next watch brings its hub to the command's
//! generation. A store that runs the command inside `list`, after its read, makes the race
//! happen every time.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use common::hooked::{Hooked, Race};
use common::{Indicators, MapResolve, T0, controller, daemon_config, local_plan_named};
use queue_migrate::controller::Actor;
use queue_migrate::daemon::Shared;
use queue_migrate::indicators::fetch::Fetcher;
use queue_migrate::machine::Command;
use queue_migrate::store::any::AnyStore;
use queue_migrate::store::sqlite::SqliteStore;
use queue_migrate::store::traits::*;
use serde_json::json;

fn routing_generation(dir: &std::path::Path, name: &str) -> i64 {
    let path = dir.join(format!("{name}.routing.json"));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["generation"].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_between_the_fleet_read_and_the_loads_is_neither_undone_nor_missed() {
    let dir = tempfile::tempdir().unwrap();
    let indicators = Indicators::start();
    indicators.all_green();
    let resolve = Arc::new(MapResolve::of(&indicators));
    let store: AnyStore = SqliteStore::open(dir.path().join("state.db").to_str().unwrap())
        .await
        .unwrap();
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let actor = Actor {
        name: "alice".into(),
        reason: Some("the race".into()),
    };
    let person = controller(&store, &fetcher, &resolve);
    for name in ["local", "other", "third"] {
        let path = local_plan_named(dir.path(), name);
        person.init(&path, &actor, T0 * 1000).await.unwrap();
    }
    let before = store.get("local").await.unwrap();
    assert_eq!(before.published_generation, before.generation);

    // The command: `migrate pause local` as the CLI runs it, committed and published.
    let race: Race = {
        let (store, resolve) = (store.clone(), resolve.clone());
        let actor = actor.clone();
        Box::pin(async move {
            let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
            controller(&store, &fetcher, &resolve)
                .command(
                    "local",
                    &Command::Pause,
                    &actor,
                    json!({}),
                    T0 * 1000 + 5_000,
                )
                .await
                .unwrap();
        })
    };
    let racing = Hooked::new(store.clone());
    *racing.after_list.lock().unwrap() = Some(race);
    let shared = Shared::new(
        racing.clone(),
        daemon_config(Arc::new(AtomicI64::new(T0 * 1000 + 10_000))),
        resolve.clone(),
    )
    .unwrap();
    shared.leader.store(true, Ordering::SeqCst);
    shared.watch_once().await;
    assert!(
        racing.after_list.lock().unwrap().is_none(),
        "the start read the fleet with list"
    );

    let after = store.get("local").await.unwrap();
    assert_eq!(
        after.generation,
        before.generation + 1,
        "the command committed"
    );
    assert_eq!(
        after.published_generation, after.generation,
        "the command's publication stands"
    );
    assert_eq!(
        routing_generation(dir.path(), "local"),
        after.generation,
        "the routing file is the command's, not the start's older read"
    );

    // The next watch sees the command's generation and loads it.
    shared.watch_once().await;
    for name in ["local", "other", "third"] {
        let record = store.get(name).await.unwrap();
        assert_eq!(
            shared.hub.generation(name),
            Some(u64::try_from(record.generation).unwrap()),
            "{name} in the hub at its generation after the next watch"
        );
        assert_eq!(routing_generation(dir.path(), name), record.generation);
    }
}

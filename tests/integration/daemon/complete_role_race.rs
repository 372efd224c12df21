//! Issue 54: an operator entered `complete` (an admin's step) by racing the role check: 12
//! concurrent forced advances from `drain` gave `disconnect -> complete api:bob` in 1 of 5
//! rounds. The API checked the role on a state read before the advance loaded the one it
//! committed from. The check is now made on the state the commit moves from.
//!
//! A store whose next `get` lets another writer move the migration after the check's read makes
//! the race happen every time; the concurrent requests show it as an operator would.

use crate::common;

use std::sync::Arc;

use common::T0;
use common::daemon_world::{DaemonWorld, local_by_hand};
use common::hooked::{Hooked, Race};
use queue_migrate::daemon::auth::{Access, TokenSource, Tokens};
use queue_migrate::machine::{Snapshot, State};
use queue_migrate::store::Commit;
use queue_migrate::store::any::AnyStore;
use queue_migrate::store::traits::*;

/// bob's token: an operator.
const BOB: &str = "operator-token-of-bob";

fn bob_operates() -> Access {
    Access {
        tokens: TokenSource::Fixed(Arc::new(
            Tokens::parse(&format!("bob operator {BOB}\n")).unwrap(),
        )),
        ..Access::default()
    }
}

/// `local` moved to `to` by another actor (a forced advance committed as "alice").
async fn move_to(store: &AnyStore, to: State) {
    let record = store.get("local").await.unwrap();
    store
        .commit(
            "local",
            &Commit {
                expected_version: record.version,
                command: "advance".into(),
                to: Snapshot {
                    state: to,
                    paused: false,
                },
                at_ms: T0 * 1000,
                actor: "alice".into(),
                reason: Some("the other runbook".into()),
                forced: true,
                evidence: serde_json::json!({}),
                memory: Vec::new(),
            },
        )
        .await
        .unwrap();
}

/// A forced advance of `local` by bob, confirmed with its name; the status.
async fn bob_advances(http: &reqwest::Client, url: &str) -> u16 {
    http.post(url)
        .bearer_auth(BOB)
        .json(&serde_json::json!({
            "force": true,
            "reason": "runbook step 7",
            "confirm": "local",
        }))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_racing_the_role_check_never_enters_complete() {
    let w = DaemonWorld::new(&local_by_hand()).await;
    move_to(&w.store, State::Drain).await;
    let hooked = Hooked::new(w.store.clone());
    let d = w
        .start_over(hooked.clone(), |c| {
            c.access = bob_operates();
            // No round or watch reads the migration meanwhile: the hook is the request's.
            c.interval = std::time::Duration::from_secs(3600);
            c.watch_interval = std::time::Duration::from_secs(3600);
        })
        .await;
    d.leading().await;
    let http = reqwest::Client::new();
    let url = d.url("/v1/migrations/local/advance");

    // The role check reads `drain` (next: disconnect); another writer moves it to disconnect
    // before the advance loads it.
    let race: Race = {
        let store = w.store.clone();
        Box::pin(async move { move_to(&store, State::Disconnect).await })
    };
    *hooked.after_get.lock().unwrap() = Some(race);
    let status = bob_advances(&http, &url).await;
    assert!(
        hooked.after_get.lock().unwrap().is_none(),
        "the race never ran"
    );
    assert_eq!(status, 403, "an operator's advance from disconnect");
    assert_eq!(w.state().await.0, "disconnect");

    // As an operator would: twelve forced advances at once from drain, five rounds.
    for round in 0..5 {
        move_to(&w.store, State::Drain).await;
        let all: Vec<_> = (0..12)
            .map(|_| {
                let (http, url) = (http.clone(), url.clone());
                tokio::spawn(async move { bob_advances(&http, &url).await })
            })
            .collect();
        for h in all {
            h.await.unwrap();
        }
        let state = w.state().await.0;
        assert_eq!(state, "disconnect", "round {round}");
    }
    let journal = w.store.journal("local").await.unwrap();
    assert!(
        journal.iter().all(|e| e.to.state != State::Complete),
        "{journal:#?}"
    );
    d.stop().await;
}

//! Named operators and roles over the API: a token file of `name role token` lines read again
//! when it changes, a viewer refused, the journal naming the person, and an authenticating
//! proxy's identity header believed only from the trusted addresses.

use std::sync::Arc;

use queue_migrate::daemon::auth::{Access, TokenFile, TokenSource};

use crate::common::daemon_world::{DaemonWorld, Running, local_by_hand};

const ALICE: &str = "alice-token-0123456789";
const CAROL: &str = "carol-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";

async fn post(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    header: Option<(&str, &str)>,
) -> (u16, serde_json::Value) {
    let mut r = http
        .post(url)
        .header("content-type", "application/json")
        .body("{\"reason\": \"roles test\"}");
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    if let Some((k, v)) = header {
        r = r.header(k, v);
    }
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or_default())
}

async fn last_actor(http: &reqwest::Client, d: &Running) -> String {
    let h: serde_json::Value = http
        .get(d.url("/v1/migrations/local/history"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    h.as_array().unwrap().last().unwrap()["actor"]
        .as_str()
        .unwrap()
        .to_string()
}

fn file_access(path: &std::path::Path) -> Access {
    Access {
        tokens: TokenSource::File(Arc::new(TokenFile::open(path).unwrap())),
        ..Access::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_file_names_who_acts_and_what_their_role_allows() {
    let w = DaemonWorld::new(&local_by_hand()).await;
    let path = w.dir.path().join("tokens");
    std::fs::write(
        &path,
        format!("alice operator {ALICE}\ncarol viewer {CAROL}\n"),
    )
    .unwrap();
    let access = file_access(&path);
    let d = w.start_guarded(access, |_| {}).await;
    let http = reqwest::Client::new();
    let pause = d.url("/v1/migrations/local/pause");
    let resume = d.url("/v1/migrations/local/resume");

    // A viewer reads, and is refused every action.
    let (status, body) = post(&http, &pause, Some(CAROL), None).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("carol (viewer) may read"),
        "{body}"
    );
    let who: serde_json::Value = http
        .get(d.url("/v1/whoami"))
        .bearer_auth(CAROL)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(who["name"], "carol");
    assert_eq!(who["may_act"], false);

    // An operator acts, and the journal names them.
    let (status, body) = post(&http, &pause, Some(ALICE), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(last_actor(&http, &d).await, "api:alice");
    // A refusal of the command carries the console's words.
    let (status, body) = post(&http, &pause, Some(ALICE), None).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["console"], "Already paused.", "{body}");

    // bob added to the file: he acts without a restart.
    assert_eq!(post(&http, &resume, Some(BOB), None).await.0, 403);
    std::fs::write(
        &path,
        format!("alice operator {ALICE}\ncarol viewer {CAROL}\nbob operator {BOB}\n"),
    )
    .unwrap();
    let (status, body) = post(&http, &resume, Some(BOB), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(last_actor(&http, &d).await, "api:bob");

    // A malformed file refuses everyone, naming the line, until it is fixed.
    std::fs::write(
        &path,
        format!("alice operator {ALICE}\ncarol watcher {CAROL}\nbob operator {BOB}\n"),
    )
    .unwrap();
    let (status, body) = post(&http, &pause, Some(ALICE), None).await;
    assert_eq!(status, 503, "{body}");
    let why = body["error"].as_str().unwrap();
    assert!(
        why.contains("line 2") && why.contains("the second word (the role)"),
        "{body}"
    );
    assert!(
        !why.contains("watcher"),
        "no field of the file quoted: {body}"
    );
    assert!(
        !why.contains(ALICE) && !why.contains(CAROL),
        "no token in it: {body}"
    );
    std::fs::write(&path, format!("alice operator {ALICE}\n")).unwrap();
    assert_eq!(post(&http, &pause, Some(ALICE), None).await.0, 200);
    assert_eq!(
        post(&http, &resume, Some(BOB), None).await.0,
        403,
        "bob removed"
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_identity_header_is_ignored_from_an_untrusted_peer() {
    let w = DaemonWorld::new(&local_by_hand()).await;
    let path = w.dir.path().join("tokens");
    std::fs::write(&path, format!("alice operator {ALICE}\ndan operator -\n")).unwrap();
    let http = reqwest::Client::new();
    let user = Some(("X-Forwarded-User", "dan"));

    // The proxy is elsewhere: the header proves nothing, and dan's `-` is no token.
    let mut access = file_access(&path);
    access.identity_header = Some("x-forwarded-user".parse().unwrap());
    access.trusted_proxies = vec!["10.0.0.0/8".parse().unwrap()];
    let d = w.start_guarded(access, |_| {}).await;
    let pause = d.url("/v1/migrations/local/pause");
    let (status, body) = post(&http, &pause, None, user).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(post(&http, &pause, Some("-"), user).await.0, 403);
    d.stop().await;

    // The proxy is this machine: dan acts as himself; a name without a line is a viewer.
    let mut access = file_access(&path);
    access.identity_header = Some("x-forwarded-user".parse().unwrap());
    access.trusted_proxies = vec!["127.0.0.1".parse::<std::net::IpAddr>().unwrap().into()];
    let d = w.start_guarded(access, |_| {}).await;
    let pause = d.url("/v1/migrations/local/pause");
    let (status, body) = post(&http, &pause, None, user).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(last_actor(&http, &d).await, "api:dan");
    let (status, body) = post(
        &http,
        &pause,
        None,
        Some(("X-Forwarded-User", "eve@example.com")),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    d.stop().await;
}

//! Issue 42, time from the database: a command run on a host whose clock is off (`migrate
//! advance`, `rollback`, `resume`... from a laptop) stamped the step it enters with its own clock,
//! while the journal's `at` of the same transition was the database's. The step's start is what
//! `observe` and `min_duration` count from, so a host behind passed them early for everyone. The
//! store now stamps the step's start (and the last update) with the instant of the journal entry,
//! the database's clock read in the same transaction, on SQLite and on PostgreSQL. The command
//! line's own "now" (what its gates measure `observe` and `min_duration` at) is the database's
//! clock too, read once per command, so a host ahead does not pass them early either.

use crate::common;

use std::time::Duration;

use common::{Indicators, MapResolve, Postgres, controller, local_plan_named};
use queue_migrate::cli::{Cli, run_on_host_clock};
use queue_migrate::controller::{Actor, AdvanceOptions};
use queue_migrate::indicators::fetch::Fetcher;
use queue_migrate::machine::State;
use queue_migrate::store::any::AnyStore;
use queue_migrate::store::traits::*;
use queue_migrate::time::now_ms;

/// How far off the skewed host's clock is, either way.
const SKEW_MS: i64 = 10 * 60_000;

/// In `slices[0]` (entered on the database's clock), a person forces `advance` from a host
/// `SKEW_MS` ahead, then from one `SKEW_MS` behind; after each, a command on the right time
/// finds `observe: 1m` unmet.
async fn scenario(store: AnyStore, dir: &std::path::Path) {
    let indicators = Indicators::start();
    indicators.all_green();
    let resolve = MapResolve::of(&indicators);
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let c = controller(&store, &fetcher, &resolve);
    let alice = Actor {
        name: "alice".into(),
        reason: Some("the dashboards look fine".into()),
    };
    let path = local_plan_named(dir, "local");
    c.init(&path, &alice, now_ms()).await.unwrap();
    common::enter_first_slice(&store, "local", now_ms()).await;
    let force = AdvanceOptions {
        force: true,
        ..AdvanceOptions::default()
    };
    for (step, skew) in [(1, SKEW_MS), (2, -SKEW_MS)] {
        let forced = c
            .advance("local", &force, &alice, now_ms() + skew)
            .await
            .unwrap();
        assert!(forced.applied.is_some(), "{forced:?}");
        let record = store.get("local").await.unwrap();
        assert_eq!(record.state, State::Slices(step));
        let journal = store.journal("local").await.unwrap();
        let at = journal.last().unwrap().at_ms;
        assert!(
            (at - now_ms()).abs() < 5_000,
            "the journal's `at` is not the database's time: {at}"
        );
        assert!(
            (record.entered_at_ms - at).abs() <= 1_000,
            "a host {skew} ms off stamped the step's start {} ms from the journal's `at`",
            record.entered_at_ms - at
        );
        assert!(
            (record.updated_at_ms - at).abs() <= 1_000,
            "a host {skew} ms off stamped the last update {} ms from the journal's `at`",
            record.updated_at_ms - at
        );
        // Right after, on the right time: a minute of `observe` has not passed.
        let next = c
            .advance("local", &AdvanceOptions::default(), &alice, now_ms())
            .await
            .unwrap();
        assert!(
            next.applied.is_none(),
            "`observe: 1m` passed {} ms after the step began: {next:?}",
            now_ms() - at
        );
        assert!(
            next.blockers.iter().any(|b| b.contains("minimum time")),
            "{:?}",
            next.blockers
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_transition_on_a_skewed_host_stamps_entered_at_with_database_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = queue_migrate::store::sqlite::SqliteStore::open(
        dir.path().join("state.db").to_str().unwrap(),
    )
    .await
    .unwrap();
    scenario(store, dir.path()).await;
}

#[test]
#[ignore = "needs QM_TEST_POSTGRES_URL (scripts/services.sh start postgres)"]
fn cli_transition_on_a_skewed_host_stamps_entered_at_with_database_time_on_postgres() {
    on_fresh_postgres("skewed_writer", |store, _, dir| async move {
        scenario(store, dir.path()).await;
    });
}

/// `body` on a fresh PostgreSQL database (its store, its URL, a scratch directory), dropped after.
fn on_fresh_postgres<F, Fut>(test: &str, body: F)
where
    F: FnOnce(AnyStore, String, tempfile::TempDir) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let db = Postgres::fresh(test);
    let dir = tempfile::tempdir().unwrap();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = queue_migrate::store::postgres::PgStore::open(&db.url)
                .await
                .unwrap();
            body(store, db.url.clone(), dir).await;
        });
    db.drop_database();
}

/// The wall clock of a host `SKEW_MS` ahead of the database.
fn host_ahead() -> i64 {
    now_ms() + SKEW_MS
}

/// `migrate --state STATE ARGS` in this process, on a host `SKEW_MS` ahead; its exit code.
async fn migrate_ahead(state: &str, args: &[&str]) -> std::process::ExitCode {
    let global = ["migrate", "--state", state, "--actor", "alice"];
    let cli = Cli::try_parse_tuned(global.iter().chain(args)).unwrap();
    run_on_host_clock(cli, host_ahead).await.unwrap()
}

/// In `slices[0]`, a person on a host `SKEW_MS` ahead forces `advance` into `slices[1]`
/// (`observe: 1m`), then runs `advance` unforced with every indicator green: by the host's clock
/// the step began ten minutes ago, by the database's a moment ago, and `observe` refuses.
async fn advance_ahead(store: AnyStore, state: &str, dir: &std::path::Path) {
    let indicators = Indicators::start();
    indicators.all_green();
    // The plan names its sources literally: the command line resolves `${VAR}` from the
    // process's environment, which a test shares with the others.
    let path = local_plan_named(dir, "local");
    let yaml = std::fs::read_to_string(&path)
        .unwrap()
        .replace("${QM_PROM_URL}", &indicators.prom_url())
        .replace("${QM_SCRAPE_URL}", &indicators.scrape_url());
    std::fs::write(&path, yaml).unwrap();
    let plan = path.to_str().unwrap();
    assert_eq!(
        migrate_ahead(state, &["init", plan]).await,
        std::process::ExitCode::SUCCESS
    );
    common::enter_first_slice(&store, "local", now_ms()).await;
    let forced = [
        "advance",
        "local",
        "--force",
        "--reason",
        "the dashboards look fine",
    ];
    assert_eq!(
        migrate_ahead(state, &forced).await,
        std::process::ExitCode::SUCCESS
    );
    assert_eq!(store.get("local").await.unwrap().state, State::Slices(1));
    let gated = migrate_ahead(state, &["advance", "local"]).await;
    let record = store.get("local").await.unwrap();
    assert_eq!(
        record.state,
        State::Slices(1),
        "`observe: 1m` passed {} ms after the step began, for a host {SKEW_MS} ms ahead",
        now_ms() - record.entered_at_ms
    );
    assert_eq!(gated, std::process::ExitCode::from(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advance_on_a_host_ahead_does_not_pass_observe_early() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.db");
    let state = state.to_str().unwrap();
    let store = queue_migrate::store::sqlite::SqliteStore::open(state)
        .await
        .unwrap();
    advance_ahead(store, state, dir.path()).await;
}

#[test]
#[ignore = "needs QM_TEST_POSTGRES_URL (scripts/services.sh start postgres)"]
fn advance_on_a_host_ahead_does_not_pass_observe_early_on_postgres() {
    on_fresh_postgres("skewed_cli", |store, url, dir| async move {
        advance_ahead(store, &url, dir.path()).await;
    });
}

//! Issue 31, section 1: no secret in any output, store row or log. Every path where a URL with a
//! password or a `?token=` query (or a literal secret of the plan) used to be copied whole:
//! gate reasons of a source that is down (`advance`, `status --json`, `history --json`, the store,
//! the daemon's API, webhook text, INFO logs), an etcd endpoint that refuses (`publish_error`
//! and its WARN every tick), a webhook that fails (the "giving up" line), a NATS token URL that
//! cannot connect, and the diff `plan apply` prints and journals.
//!
//! No server is needed: "down" is a refused port on 127.0.0.1.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Bench, DaemonChild, Run, http_get, poll_until, refused_port};

/// Fail with `place` when any 6-byte piece of any of `secrets` appears in `text` (no byte of a
/// secret may be shown: a piece is as bad as the whole).
fn assert_no_secret(place: &str, text: &str, secrets: &[&str]) {
    for secret in secrets {
        let bytes = secret.as_bytes();
        for piece in bytes.windows(6.min(bytes.len())) {
            let piece = std::str::from_utf8(piece).unwrap();
            assert!(
                !text.contains(piece),
                "{place} shows {piece:?} of the secret {secret:?}:\n{text}"
            );
        }
    }
}

fn assert_run_clean(what: &str, r: &Run, secrets: &[&str]) {
    assert_no_secret(&format!("{what} (stdout)"), &r.stdout, secrets);
    assert_no_secret(&format!("{what} (stderr)"), &r.stderr, secrets);
}

/// Every row of every table of the SQLite store at `path`, one line per row (each value through
/// SQLite's `quote`), except the plan text itself (`migrations.plan_yaml`: a literal written in
/// the plan is the plan, and `plan check` warns about it).
fn store_rows(path: &std::path::Path) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use sqlx::Row;
        let url = format!("sqlite://{}?mode=ro", path.display());
        let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
        let tables: Vec<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
                .fetch_all(&pool)
                .await
                .unwrap();
        let mut out = String::new();
        for table in tables {
            let columns: Vec<String> = sqlx::query_scalar("SELECT name FROM pragma_table_info(?)")
                .bind(&table)
                .fetch_all(&pool)
                .await
                .unwrap();
            let shown: Vec<String> = columns
                .iter()
                .filter(|c| !(table == "migrations" && *c == "plan_yaml"))
                .map(|c| format!("quote(\"{c}\")"))
                .collect();
            if shown.is_empty() {
                continue;
            }
            let sql = format!("SELECT {} FROM \"{table}\"", shown.join(" || '|' || "));
            // Table and column names from the store's own catalogue.
            for row in sqlx::query(sqlx::AssertSqlSafe(sql))
                .fetch_all(&pool)
                .await
                .unwrap()
            {
                let line: Option<String> = row.try_get(0).unwrap();
                out.push_str(&format!("{table}: {}\n", line.unwrap_or_default()));
            }
        }
        pool.close().await;
        out
    })
}

/// A webhook receiver on loopback (std only): records each body, answers 200.
fn webhook_receiver() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let bodies: Arc<Mutex<Vec<String>>> = Arc::default();
    let got = bodies.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            // The head, then as many bytes as Content-Length says.
            let body = loop {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break None,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if body.len() >= length {
                        break Some(body.to_string());
                    }
                }
            };
            if let Some(body) = body {
                got.lock().unwrap().push(body);
            }
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    (url, bodies)
}

const PROM_USER: &str = "pr0mUsr";
const PROM_PASSWORD: &str = "Pr0mPassw0rd";
const PROM_TOKEN: &str = "Pr0mT0kenQ";
const SCRAPE_USER: &str = "scr4peUsr";
const SCRAPE_PASSWORD: &str = "Scr4pePassw0rd";
const SCRAPE_TOKEN: &str = "Scr4peT0kenQ";
const ETCD_USER: &str = "etcdUsr";
const ETCD_PASSWORD: &str = "EtcdPassw0rd";
const HOOK_USER: &str = "h00kUsr";
const HOOK_PASSWORD: &str = "H00kPassw0rd";
const HOOK_TOKEN: &str = "H00kT0kenQ";
/// A chat webhook's path is its secret (issue 43, item 2).
const HOOK_PATH: &str = "H00kPathS3cret";

const SECRETS: &[&str] = &[
    PROM_USER,
    PROM_PASSWORD,
    PROM_TOKEN,
    SCRAPE_USER,
    SCRAPE_PASSWORD,
    SCRAPE_TOKEN,
    ETCD_USER,
    ETCD_PASSWORD,
    HOOK_USER,
    HOOK_PASSWORD,
    HOOK_TOKEN,
    HOOK_PATH,
];

/// plans/local.yaml with both sources down behind credentials (the Prometheus one through
/// `${QM_PROM_URL}`, the scrape one written inline), both read by `consume_dual`'s exit gates,
/// the routing also published to an etcd that refuses (inline password), and two webhooks: one
/// that records, one that refuses (inline password and token). Holds are announced after 1 s.
fn leaky_plan(hook: &str) -> String {
    let down = refused_port();
    include_str!("../../../plans/local.yaml")
        .replace(
            "app: { scrape: \"${QM_SCRAPE_URL}\" }",
            &format!(
                "app: {{ scrape: \"http://{SCRAPE_USER}:{SCRAPE_PASSWORD}@127.0.0.1:{down}/metrics?token={SCRAPE_TOKEN}\" }}"
            ),
        )
        .replace(
            "      - { name: new consumer connected, source: app, query: app_new_consumer_connected, pass_if: \">= 1\" }",
            "      - { name: new consumer connected, source: app, query: app_new_consumer_connected, pass_if: \">= 1\" }\n      - { name: probe ok early, source: prom, query: app_probe_ok, pass_if: \"== 1\" }",
        )
        .replace(
            "routing: { file: local.routing.json }",
            &format!(
                "routing: {{ file: local.routing.json, etcd: {{ endpoint: \"http://{ETCD_USER}:{ETCD_PASSWORD}@127.0.0.1:{down}\", key: /qm/local }} }}\n\
                 notify:\n  hold_after: 1s\n  webhooks:\n    - {{ url: \"{hook}\" }}\n    - {{ url: \"http://{HOOK_USER}:{HOOK_PASSWORD}@127.0.0.1:{down}/hook/{HOOK_PATH}?token={HOOK_TOKEN}\" }}"
            ),
        )
}

fn prom_url_down() -> String {
    format!(
        "http://{PROM_USER}:{PROM_PASSWORD}@127.0.0.1:{}/?token={PROM_TOKEN}",
        refused_port()
    )
}

/// Regression (issue 31): a source URL with a password and a `?token=` query was copied whole
/// into gate reasons, and from there into `advance`, `status --json`, `history --json`, the
/// store, the API, webhook text and the logs; an etcd endpoint's password into `publish_error`
/// (and a WARN every tick); a webhook's into the "giving up" line.
#[test]
fn credentials_of_sources_etcd_and_webhooks_appear_nowhere() {
    let (hook, bodies) = webhook_receiver();
    let b = Bench::with_plan(&leaky_plan(&hook));
    let prom = prom_url_down();
    let env = [("QM_PROM_URL", prom.as_str())];
    let mut runs = Vec::new();
    let plan = b.plan.to_str().unwrap().to_string();
    // `init` publishes the routing: etcd refuses (exit 1, the migration is created).
    runs.push(("init", b.run_env(&["init", &plan], &env)));
    // planned -> consume_dual commits; etcd still refuses.
    runs.push(("advance", b.run_env(&["advance", "local"], &env)));
    assert_eq!(b.state().0, "consume_dual", "{}", runs[1].1.stderr);
    // Both exit gates hold on a source that is down.
    let held = b.run_env(&["advance", "local", "--json"], &env);
    assert_eq!(held.code, 3, "{}\n{}", held.stdout, held.stderr);
    let reasons: Vec<String> = held.json()["gates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["reason"].as_str().unwrap().to_string())
        .collect();
    // Still useful: which source, which endpoint, what went wrong; the plan's reference where
    // the URL came from one.
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("source app: http://***@127.0.0.1:")
                && r.contains("/metrics?***: cannot connect")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(
            |r| r.contains("source prom (${QM_PROM_URL}): http://***@127.0.0.1:")
                && r.contains("/api/v1/query?***: cannot connect")
        ),
        "{reasons:?}"
    );
    runs.push(("advance --json", held));
    runs.push(("advance (text)", b.run_env(&["advance", "local"], &env)));
    runs.push((
        "advance --dry-run",
        b.run_env(&["advance", "local", "--dry-run"], &env),
    ));
    let status = b.run_env(&["status", "local", "--json"], &env);
    let publish_error = status.json()["publish_error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        publish_error.contains("etcd http://***@127.0.0.1:"),
        "{publish_error}"
    );
    runs.push(("status --json", status));
    runs.push(("status", b.run_env(&["status", "local"], &env)));
    runs.push(("status (all)", b.run_env(&["status"], &env)));
    runs.push((
        "history --json",
        b.run_env(&["history", "local", "--json"], &env),
    ));
    runs.push(("history", b.run_env(&["history", "local"], &env)));
    runs.push(("plan check", b.run_env(&["plan", "check", &plan], &env)));
    for (what, r) in &runs {
        assert_run_clean(what, r, SECRETS);
    }

    // The daemon: its API, its logs (INFO: holds; WARN: routing still behind, giving up on a
    // webhook), the webhook bodies.
    let mut cmd = b.daemon_command("secrets", &[]);
    cmd.env("QM_PROM_URL", &prom);
    let d = DaemonChild::spawn(cmd, Duration::from_secs(20)).expect("the daemon started");
    let log = d.log.clone();
    let logged = |needle: &str| log.lock().unwrap().iter().any(|l| l.contains(needle));
    // Five attempts 1 + 2 + 4 + 8 s apart, then the "giving up" line.
    poll_until(
        "the webhook that refuses to be given up",
        Duration::from_secs(60),
        || logged("giving up"),
    );
    poll_until("a hold announced", Duration::from_secs(10), || {
        bodies
            .lock()
            .unwrap()
            .iter()
            .any(|b| b.contains("\"hold\""))
    });
    assert!(logged("routing still behind"), "{:?}", log.lock().unwrap());
    let mut answers = String::new();
    for path in [
        "/v1/migrations",
        "/v1/migrations/local",
        "/v1/migrations/local/history",
        "/v1/migrations/local/routing",
        "/metrics",
        "/healthz",
    ] {
        let (code, body) = http_get(&format!("http://{}{path}", d.addr)).unwrap();
        assert_eq!(code, 200, "{path}: {body}");
        answers.push_str(&format!("{path}: {body}\n"));
    }
    assert!(answers.contains("source app: http://***@"), "{answers}");
    d.kill9();
    assert_no_secret("the API's answers", &answers, SECRETS);
    let bodies = bodies.lock().unwrap().join("\n");
    assert!(bodies.contains("source prom (${QM_PROM_URL})"), "{bodies}");
    assert_no_secret("the webhook bodies", &bodies, SECRETS);
    let log = log.lock().unwrap().join("\n");
    assert!(log.contains("http://***@127.0.0.1:"), "{log}");
    assert_no_secret("the daemon's log", &log, SECRETS);

    // What the store keeps (the journal is append-only: a secret there could never go).
    let rows = store_rows(&b.path("state.db"));
    assert!(rows.contains("gate_evaluations: "), "{rows}");
    assert_no_secret("the store's rows", &rows, SECRETS);
    for (what, args) in [
        (
            "status --json (after the daemon)",
            &["status", "local", "--json"][..],
        ),
        (
            "history --json (after the daemon)",
            &["history", "local", "--json"][..],
        ),
    ] {
        assert_run_clean(what, &b.run_env(args, &env), SECRETS);
    }
}

/// A server on loopback that answers every request 401 with an error page echoing the request
/// line (its query string: the token) and `echo`.
fn echoing_server(echo: &'static str) -> u16 {
    common::answering_server(move |head| {
        let line = head.lines().next().unwrap_or_default();
        (
            "401 Unauthorized",
            "text/html",
            format!("denied: {line} ({echo})"),
        )
    })
}

/// Regression (issue 31): an error page that echoes the request (a proxy's 401 quoting the
/// query string, the token alone) went into the gate's reason as the start of its body.
#[test]
fn an_error_page_echoing_the_token_shows_neither_token_nor_password() {
    const TOKEN: &str = "Ech0T0kenQ";
    const PASSWORD: &str = "Ech0Passw0rd";
    let port = echoing_server("token Ech0T0kenQ of ech0usr:Ech0Passw0rd refused");
    let b = Bench::new();
    b.indicators.all_green();
    b.init();
    b.ok(&["advance", "local"], 0);
    b.ok(&["advance", "local"], 0);
    assert_eq!(b.state().0, "synthetic");
    let prom = format!("http://ech0usr:{PASSWORD}@127.0.0.1:{port}/?token={TOKEN}");
    let env = [("QM_PROM_URL", prom.as_str())];
    let held = b.run_env(&["advance", "local", "--json"], &env);
    assert_eq!(held.code, 3, "{}\n{}", held.stdout, held.stderr);
    let reason = held.json()["gates"][0]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.contains("HTTP 401"), "{reason}");
    // Asked with the token as a query parameter (the API path before it), shown masked.
    assert!(reason.contains("denied: GET /api/v1/query?***"), "{reason}");
    assert_run_clean("advance --json", &held, &[TOKEN, PASSWORD]);
    assert_run_clean(
        "status --json",
        &b.run_env(&["status", "local", "--json"], &env),
        &[TOKEN, PASSWORD],
    );
    assert_no_secret(
        "the store's rows",
        &store_rows(&b.path("state.db")),
        &[TOKEN, PASSWORD],
    );
}

/// Regression (issue 31): a /metrics line that cannot be read is quoted in the reason; a line
/// that echoes the scrape URL's token showed it.
#[test]
fn an_unreadable_metrics_line_echoing_the_token_is_masked() {
    const TOKEN: &str = "Scr4peEch0Tok";
    let b = Bench::new();
    b.indicators.all_green();
    b.init();
    b.ok(&["advance", "local"], 0);
    assert_eq!(b.state().0, "consume_dual");
    // Not a number: the parser quotes the value.
    b.indicators.world.lock().unwrap().extra_metrics = format!("app_leak {TOKEN}\n");
    let scrape = format!("{}?token={TOKEN}", b.indicators.scrape_url());
    let env = [("QM_SCRAPE_URL", scrape.as_str())];
    let held = b.run_env(&["advance", "local", "--json"], &env);
    assert_eq!(held.code, 3, "{}\n{}", held.stdout, held.stderr);
    let reason = held.json()["gates"][0]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.contains("unreadable metrics"), "{reason}");
    assert!(reason.contains("invalid value \"***\""), "{reason}");
    assert_run_clean("advance --json", &held, &[TOKEN]);
    assert_no_secret(
        "the store's rows",
        &store_rows(&b.path("state.db")),
        &[TOKEN],
    );
}

const OLD_PASSWORD: &str = "0ldBr0kerPw";
const NEW_PASSWORD: &str = "N3wBr0kerPw";
const OLD_HOOK_TOKEN: &str = "0ldH00kT0k3n";
const NEW_HOOK_TOKEN: &str = "N3wH00kT0k3n";

fn plan_with(password: &str, token: &str) -> String {
    include_str!("../../../plans/local.yaml")
        .replace(
            "url: \"amqp://127.0.0.1:5672/%2f\"",
            &format!("url: \"amqp://guest:{password}@127.0.0.1:5672/%2f\""),
        )
        .replace(
            "routing: { file: local.routing.json }",
            &format!(
                "routing: {{ file: local.routing.json }}\nnotify:\n  webhooks:\n    - {{ url: \"http://127.0.0.1:9/hook\", token: {token} }}"
            ),
        )
}

/// Regression (issue 31): `plan apply` printed and journaled the diff as is, so a plan that
/// changed an inline password (a broker URL's, a webhook token) wrote both the old and the new
/// one into the append-only journal.
#[test]
fn plan_apply_masks_inline_passwords_in_the_diff_it_prints_and_journals() {
    let b = Bench::with_plan(&plan_with(OLD_PASSWORD, OLD_HOOK_TOKEN));
    b.indicators.all_green();
    b.init();
    let new = b.path("new.yaml");
    std::fs::write(&new, plan_with(NEW_PASSWORD, NEW_HOOK_TOKEN)).unwrap();
    let new = new.to_str().unwrap();
    let secrets = [OLD_PASSWORD, NEW_PASSWORD, OLD_HOOK_TOKEN, NEW_HOOK_TOKEN];
    let dry = b.ok(
        &[
            "plan",
            "apply",
            new,
            "--reason",
            "rotate",
            "--dry-run",
            "--json",
        ],
        0,
    );
    assert_run_clean("plan apply --dry-run --json", &dry, &secrets);
    let applied = b.ok(&["plan", "apply", new, "--reason", "rotate"], 0);
    assert_run_clean("plan apply", &applied, &secrets);
    // The diff still says what changed.
    assert!(
        applied
            .stdout
            .contains("-  old: { name: old, kind: amqp, url: \"amqp://***@127.0.0.1:5672/%2f\""),
        "{}",
        applied.stdout
    );
    assert!(
        applied
            .stdout
            .contains("+    - { url: \"http://127.0.0.1:9/hook\", token: *** }"),
        "{}",
        applied.stdout
    );
    let history = b.ok(&["history", "local", "--json"], 0);
    assert!(history.stdout.contains("plan apply"), "{}", history.stdout);
    assert_run_clean("history --json", &history, &secrets);
    assert_run_clean("history", &b.ok(&["history", "local"], 0), &secrets);
    assert_run_clean(
        "status --json",
        &b.ok(&["status", "local", "--json"], 0),
        &secrets,
    );
    let rows = store_rows(&b.path("state.db"));
    assert!(rows.contains("journal: "), "{rows}");
    assert_no_secret("the store's rows", &rows, &secrets);
}

/// Regression (issue 31): a NATS token URL (`nats://TOKEN@host`) has no password, so the old
/// redaction (which masked passwords only) showed the token in every connect error.
#[cfg(feature = "brokers")]
#[tokio::test]
async fn a_nats_token_url_that_cannot_connect_is_not_shown() {
    use queue_migrate::adapters::from_plan;
    use queue_migrate::brokers::{Adapter, Kind};
    use queue_migrate::plan::{Broker, Secret};
    use queue_migrate::routing::Side;
    const TOKEN: &str = "N4tsT0kenS3cret";
    let url = format!("nats://{TOKEN}@127.0.0.1:{}", refused_port());
    let Err(e) = Adapter::connect(Kind::Nats, &url).await else {
        panic!("connected to a refused port");
    };
    let shown = format!("{e} {e:?}");
    assert!(shown.contains("nats://***@127.0.0.1:"), "{shown}");
    assert_no_secret("the adapter's connect error", &shown, &[TOKEN]);
    let broker = Broker {
        name: "nats".into(),
        kind: "nats".into(),
        url: Secret::new("${NEW_BROKER_URL}", url.clone()),
        queue: None,
        stream: Some("S".into()),
        dead_letter: None,
    };
    let Err(e) = from_plan::connect(&broker, Side::New).await else {
        panic!("connected to a refused port");
    };
    let shown = format!("{e} {e:?}");
    assert_no_secret("the plan broker's connect error", &shown, &[TOKEN]);
    let literal = Broker {
        url: Secret::literal(url.clone()),
        ..broker
    };
    let Err(e) = from_plan::connect(&literal, Side::New).await else {
        panic!("connected to a refused port");
    };
    let shown = format!("{e} {e:?}");
    assert!(shown.contains("nats://***@127.0.0.1:"), "{shown}");
    assert_no_secret("the inline broker's connect error", &shown, &[TOKEN]);
}

// --- issue 43 --------------------------------------------------------------------------------

/// A server on loopback that answers every request 401 with a page that echoes back the
/// credentials it was sent: the `Authorization` header whole, and the `user:password` it
/// decodes from it (as a proxy's or an exporter's error page does).
fn credential_echoing_server() -> u16 {
    use base64::Engine as _;
    common::answering_server(|head| {
        let basic = head
            .lines()
            .find_map(|l| {
                l.strip_prefix("authorization: Basic ")
                    .or_else(|| l.strip_prefix("Authorization: Basic "))
            })
            .unwrap_or_default()
            .trim()
            .to_string();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(&basic)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        (
            "401 Unauthorized",
            "text/plain",
            format!("user/password {decoded} not accepted (header Basic {basic})"),
        )
    })
}

/// `advance local --force` past a source that is broken, in `env`: exit 0.
fn forced_past_a_broken_source(b: &Bench, env: &[(&str, &str)]) -> Run {
    let forced = b.run_env(
        &[
            "advance",
            "local",
            "--force",
            "--reason",
            "source is broken",
        ],
        env,
    );
    assert_eq!(forced.code, 0, "{}\n{}", forced.stdout, forced.stderr);
    forced
}

/// Regression (issue 43, item 1): masking covered the raw password of a source's URL, not its
/// percent-decoded form (`%40` is `@` once sent) nor the `Authorization: Basic` value built
/// from it; a source that echoed them had them shown by `advance`, `--dry-run`, `status`, the
/// store and, after a forced advance, the append-only journal.
#[test]
fn a_source_echoing_the_decoded_password_and_basic_header_shows_neither() {
    use base64::Engine as _;
    const DECODED: &str = "Pr0mP4ss@word";
    const RAW: &str = "Pr0mP4ss%40word";
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("promuser:{DECODED}"));
    let secrets = [DECODED, RAW, basic.as_str()];
    let port = credential_echoing_server();
    let b = Bench::new();
    b.indicators.all_green();
    b.init();
    b.ok(&["advance", "local"], 0);
    b.ok(&["advance", "local"], 0);
    assert_eq!(b.state().0, "synthetic");
    let prom = format!("http://promuser:{RAW}@127.0.0.1:{port}/");
    let env = [("QM_PROM_URL", prom.as_str())];
    let held = b.run_env(&["advance", "local", "--json"], &env);
    assert_eq!(held.code, 3, "{}\n{}", held.stdout, held.stderr);
    let reason = held.json()["gates"][0]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    // The echo reached the reason (the test is not vacuous), masked.
    assert!(reason.contains("HTTP 401"), "{reason}");
    assert!(reason.contains("header Basic ***"), "{reason}");
    assert_run_clean("advance --json", &held, &secrets);
    for (what, args) in [
        ("advance --dry-run", &["advance", "local", "--dry-run"][..]),
        ("status --json", &["status", "local", "--json"][..]),
        ("status", &["status", "local"][..]),
    ] {
        assert_run_clean(what, &b.run_env(args, &env), &secrets);
    }
    let forced = forced_past_a_broken_source(&b, &env);
    assert_run_clean("advance --force", &forced, &secrets);
    let history = b.run_env(&["history", "local", "--json"], &env);
    assert!(
        history.stdout.contains("header Basic ***"),
        "{}",
        history.stdout
    );
    assert_run_clean("history --json", &history, &secrets);
    assert_no_secret(
        "the store's rows",
        &store_rows(&b.path("state.db")),
        &secrets,
    );
}

const QUOTED_PASSWORD: &str = "Quot'edPassw0rd";
const DOUBLE_QUOTED_PASSWORD: &str = "Dbl\"QuotedPw9";
const SLACK_PATH: &str = "services/T000/B000/SlackPathS3cret";

/// Regression (issue 43, items 2 and 7): `plan apply`'s diff masked credentials by scanning
/// its text, so a password in YAML quoting (`'Quot''ed'`, `"Dbl\"Quoted"`) and a chat
/// webhook's secret path (even when the new plan moved it to `${HOOK_URL}`) were printed and
/// journaled in clear; `plan check` said nothing of the inline webhook path.
#[test]
fn plan_apply_masks_quoted_passwords_and_webhook_paths_by_the_parsed_plan() {
    let old_plan = include_str!("../../../plans/local.yaml")
        .replace(
            "url: \"amqp://127.0.0.1:5672/%2f\"",
            "url: 'amqp://rabbit:Quot''edPassw0rd@127.0.0.1:5672/%2f'",
        )
        .replace(
            "routing: { file: local.routing.json }",
            &format!(
                "routing: {{ file: local.routing.json }}\nnotify:\n  webhooks:\n    - {{ url: \"http://127.0.0.1:9/{SLACK_PATH}\" }}"
            ),
        );
    let new_plan = include_str!("../../../plans/local.yaml")
        .replace(
            "url: \"amqp://127.0.0.1:5672/%2f\"",
            "url: \"amqp://rabbit:Dbl\\\"QuotedPw9@127.0.0.1:5672/%2f\"",
        )
        .replace(
            "routing: { file: local.routing.json }",
            "routing: { file: local.routing.json }\nnotify:\n  webhooks:\n    - { url: \"${HOOK_URL}\" }",
        );
    let b = Bench::with_plan(&old_plan);
    b.indicators.all_green();
    let hook = format!("http://127.0.0.1:9/{SLACK_PATH}");
    let env = [("HOOK_URL", hook.as_str())];
    let plan = b.plan.to_str().unwrap().to_string();
    let check = b.run_env(&["plan", "check", &plan], &env);
    assert_eq!(check.code, 0, "{}\n{}", check.stdout, check.stderr);
    let warned = format!("{}{}", check.stdout, check.stderr);
    assert!(warned.contains("path looks like a secret"), "{warned}");
    b.init();
    let new = b.path("new.yaml");
    std::fs::write(&new, new_plan).unwrap();
    let new = new.to_str().unwrap();
    let secrets = [
        "Quot''edPassw0rd",
        QUOTED_PASSWORD,
        "edPassw0rd",
        DOUBLE_QUOTED_PASSWORD,
        "QuotedPw9",
        "SlackPathS3cret",
    ];
    let dry = b.run_env(
        &[
            "plan",
            "apply",
            new,
            "--reason",
            "rotate",
            "--dry-run",
            "--json",
        ],
        &env,
    );
    assert_eq!(dry.code, 0, "{}\n{}", dry.stdout, dry.stderr);
    assert_run_clean("plan apply --dry-run --json", &dry, &secrets);
    let applied = b.run_env(&["plan", "apply", new, "--reason", "rotate"], &env);
    assert_eq!(applied.code, 0, "{}\n{}", applied.stdout, applied.stderr);
    assert_run_clean("plan apply", &applied, &secrets);
    // The diff still says what changed, where.
    assert!(
        applied
            .stdout
            .contains("url: 'amqp://rabbit:***@127.0.0.1:5672/%2f'")
            || applied
                .stdout
                .contains("url: 'amqp://***@127.0.0.1:5672/%2f'"),
        "{}",
        applied.stdout
    );
    assert!(
        applied.stdout.contains("http://127.0.0.1:9/***"),
        "{}",
        applied.stdout
    );
    assert_run_clean(
        "history --json",
        &b.ok(&["history", "local", "--json"], 0),
        &secrets,
    );
    assert_run_clean("history", &b.ok(&["history", "local"], 0), &secrets);
    assert_no_secret(
        "the store's rows",
        &store_rows(&b.path("state.db")),
        &secrets,
    );
}

/// The synthetic phase's gate of plans/local.yaml renamed with ESC sequences (set the
/// terminal's title, erase the line) and a credential, and the migration in `synthetic`, its
/// source the server of `port` (ESC sequences and a password in its error page).
fn hostile_names_bench(port: u16) -> (Bench, String) {
    let plan = include_str!("../../../plans/local.yaml").replacen(
        "name: probe ok,",
        r#"name: "\e]0;owned\a\e[2Kprobe ok via http://gateusr:G4tePassw0rd@gate.example/","#,
        1,
    );
    assert_ne!(plan, include_str!("../../../plans/local.yaml"));
    let b = Bench::with_plan(&plan);
    b.indicators.all_green();
    b.init();
    b.ok(&["advance", "local"], 0);
    b.ok(&["advance", "local"], 0);
    assert_eq!(b.state().0, "synthetic");
    (b, format!("http://ech0usr:Ech0Passw0rd@127.0.0.1:{port}/"))
}

/// What [`hostile_names_bench`] must never show: its passwords and any control character.
const HOSTILE_SECRETS: &[&str] = &["G4tePassw0rd", "Ech0Passw0rd"];
const HOSTILE_ECHO: &str = "\x1b]0;pwned\x07\x1b[2K resume approved ech0usr:Ech0Passw0rd";

fn assert_printable(place: &str, text: &str) {
    assert!(
        !text
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "{place} shows a control character: {text:?}"
    );
}

/// Regression (issue 43, the one text rule at every print): `advance`'s text output printed a
/// gate's name and the blockers as they came: a plan's gate name holding ESC sequences and a
/// URL with its password reached the terminal raw. A source answering ESC sequences and a
/// credential shows neither either.
#[test]
fn advance_text_shows_no_control_character_and_no_credential() {
    let (b, prom) = hostile_names_bench(echoing_server(HOSTILE_ECHO));
    let env = [("QM_PROM_URL", prom.as_str())];
    let held = b.run_env(&["advance", "local"], &env);
    assert_eq!(held.code, 3, "{}\n{}", held.stdout, held.stderr);
    // Not vacuous: the gate's row and the blocker are printed, with the source's answer.
    assert!(
        held.stdout.contains("probe ok via") && held.stdout.contains("not advancing:"),
        "{}",
        held.stdout
    );
    assert!(held.stdout.contains("HTTP 401"), "{}", held.stdout);
    let forced = forced_past_a_broken_source(&b, &env);
    assert!(forced.stdout.contains("FORCED past:"), "{}", forced.stdout);
    for (what, r) in [("advance", &held), ("advance --force", &forced)] {
        assert_run_clean(what, r, HOSTILE_SECRETS);
        assert_printable(&format!("{what} (stdout)"), &r.stdout);
        assert_printable(&format!("{what} (stderr)"), &r.stderr);
    }
}

/// Regression (issue 43, the one text rule at every print): the console's page escaped HTML
/// but showed a gate's name, a reason, an actor and evidence as they came: ESC sequences and a
/// URL's password from a plan or a store reached the page.
#[test]
fn the_console_page_shows_no_control_character_and_no_credential() {
    let (b, prom) = hostile_names_bench(echoing_server(HOSTILE_ECHO));
    let env = [("QM_PROM_URL", prom.as_str())];
    // A forced advance journals the failing gate, its name and reason, as evidence.
    b.ok(&["advance", "local", "--force", "--reason", "forced"], 0);
    let mut cmd = b.daemon_command("console-text", &[]);
    cmd.envs(env);
    let d = DaemonChild::spawn(cmd, Duration::from_secs(20)).expect("the daemon started");
    poll_until("a round", Duration::from_secs(20), || d.ticks() >= 2);
    let (code, page) = http_get(&format!("http://{}/migrations/local", d.addr)).unwrap();
    assert_eq!(code, 200, "{page}");
    // Not vacuous: the gate is on the page, in the journal's evidence.
    assert!(page.contains("probe ok via"), "{page}");
    assert_no_secret("the console page", &page, HOSTILE_SECRETS);
    assert_printable("the console page", &page);
    d.kill9();
}

/// Regression: `refused_port` bound a port and closed it, and another test's server could be
/// given it while a daemon here still polled it (`the_body_of_an_answer_reached_through_a_redirect_is_not_quoted`
/// counted 15 requests instead of 2). The port refuses, and no server can take it.
#[test]
fn a_refused_port_refuses_and_no_server_of_another_test_can_take_it() {
    let port = refused_port();
    let err = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
    assert!(
        TcpListener::bind(("127.0.0.1", port)).is_err(),
        "a server could listen on the refused port {port}"
    );
}

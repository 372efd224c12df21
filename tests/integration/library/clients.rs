//! The producer clients that are not in Rust (clients/node, clients/python, clients/java): each
//! one's own tests (the slice vectors, the stamp examples of docs/routing.md, the document rules,
//! the file follower, another migration's document refused), and all four — the Rust `Router`,
//! Node.js, Python and Java — following one real `migrate run` over HTTP: every change of routing
//! reaches each of them, and they route one shared set of keys to the same slice and the same
//! broker, under the same generation.
//!
//! Node.js, Python, Java 17 and Maven are on the CI image; a machine without one says `skipped`
//! for it. The Java client is built once per test binary (`mvn package`, which runs its JUnit
//! tests) into cargo's target directory, offline when the local Maven repository already holds
//! what the build needs, else fetching it from Maven Central.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::Indicators;
use queue_migrate::router::Router;
use queue_migrate::routing::Side;
use queue_migrate::slice::slice_of;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether `program` runs here; says `skipped` when it does not.
fn have(program: &str) -> bool {
    let ok = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: {program} is not installed");
    }
    ok
}

fn run_own_tests(program: &str, script: &str) {
    if !have(program) {
        return;
    }
    let out = Command::new(program)
        .arg(root().join(script))
        .arg(root().join("tests/fixtures/vectors/slices.jsonl"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{program} {script}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_node_client_passes_its_tests_against_the_vectors_and_the_docs() {
    run_own_tests("node", "clients/node/test.js");
}

#[test]
fn the_python_client_passes_its_tests_against_the_vectors_and_the_docs() {
    run_own_tests("python3", "clients/python/test_queue_migrate.py");
}

/// `mvn package` of clients/java into cargo's target directory, once per test binary: the JUnit
/// tests run, and the jar is what the follow test runs. Offline first (`-o`: no network when the
/// local repository is filled); online only when offline mode lacks an artifact (a first run).
/// `None` (and `skipped`) without `java` or `mvn`; `Some(Err(output))` when the build fails.
fn java_client() -> Option<&'static Result<PathBuf, String>> {
    static BUILT: OnceLock<Option<Result<PathBuf, String>>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !(have("java") && have("mvn")) {
                return None;
            }
            let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("clients-java");
            let mvn = |offline: bool| {
                let mut c = Command::new("mvn");
                c.current_dir(root().join("clients/java"))
                    .args(["-B", "-q", "--no-transfer-progress"])
                    .arg(format!("-Dqm.build.dir={}", out_dir.display()))
                    .arg(format!("-Dqm.root={}", root().display()));
                if offline {
                    c.arg("-o");
                }
                let out = c.arg("package").output().map_err(|e| e.to_string())?;
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                if out.status.success() {
                    Ok(())
                } else {
                    Err(text)
                }
            };
            let started = Instant::now();
            let built = match mvn(true) {
                Err(text) if text.contains("offline mode") => mvn(false),
                other => other,
            };
            eprintln!("clients/java built in {:?}", started.elapsed());
            Some(built.map(|()| out_dir.join("queue-migrate-client-0.1.0.jar")))
        })
        .as_ref()
}

#[test]
fn the_java_client_passes_its_tests_against_the_vectors_and_the_docs() {
    if let Some(built) = java_client() {
        let jar = built
            .as_ref()
            .unwrap_or_else(|out| panic!("mvn package: {out}"));
        assert!(jar.exists(), "{}", jar.display());
    }
}

/// plans/local.yaml in seconds of real time (as tests/integration/daemon/daemon_real.rs runs it).
fn fast_plan() -> String {
    include_str!("../../../plans/local.yaml")
        .replace("observe: 1m", "observe: 0s")
        .replace("retain: 2m", "retain: 0s")
        .replace("max_backoff: 2m", "max_backoff: 1s")
        .replace("visibility_timeout: 1m", "visibility_timeout: 1s")
        .replace("max_redelivery_delay: 2m", "max_redelivery_delay: 1s")
}

/// A client following the daemon: one JSON line in, one JSON line out (route-keys scripts).
struct Client {
    name: &'static str,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Client {
    /// `program script args..`.
    fn script(name: &'static str, program: &str, script: &str, args: &[&str]) -> Client {
        let mut command = Command::new(program);
        command.arg(root().join(script));
        Client::spawn(name, command, args)
    }

    fn spawn(name: &'static str, mut command: Command, args: &[&str]) -> Client {
        let mut child = command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Client {
            name,
            child,
            stdin,
            stdout,
        }
    }

    /// The routes of `keys` once the client has a document of at least `generation`.
    fn routes(&mut self, keys: &[String], generation: u64) -> (u64, Vec<(String, u32, String)>) {
        let ask = serde_json::json!({ "keys": keys, "generation": generation });
        writeln!(self.stdin, "{ask}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let v: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("{} printed {line:?}: {e}", self.name));
        let routes = v["routes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r[0].as_str().unwrap().to_string(),
                    u32::try_from(r[1].as_u64().unwrap()).unwrap(),
                    r[2].as_str().unwrap().to_string(),
                )
            })
            .collect();
        (v["generation"].as_u64().unwrap(), routes)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Daemon {
    child: Child,
    addr: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn migrate(dir: &Path, indicators: &Indicators) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_migrate"));
    c.current_dir(dir)
        .env("MIGRATE_STATE", dir.join("state.db"))
        .env("QM_PROM_URL", indicators.prom_url())
        .env("QM_SCRAPE_URL", indicators.scrape_url())
        .env_remove("MIGRATE_NOW")
        .env_remove("MIGRATE_API_TOKEN");
    c
}

fn spawn_daemon(dir: &Path, indicators: &Indicators) -> Daemon {
    let mut child = migrate(dir, indicators)
        .args(["run", "--listen", "127.0.0.1:0", "--interval", "200ms"])
        .env("MIGRATE_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if !sent && let Some(rest) = line.split(" on http://").nth(1) {
                let addr = rest.split_whitespace().next().unwrap_or_default();
                let _ = tx.send(addr.to_string());
                sent = true;
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the daemon printed its address");
    Daemon { child, addr }
}

/// The routing document the daemon serves now.
fn served(url: &str) -> serde_json::Value {
    let (status, body) = common::http_get(&format!("{url}/v1/migrations/local/routing"))
        .expect("the daemon answers");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Wait until the served document satisfies `done` and stays the same for a second; return it.
fn settle(url: &str, what: &str, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let start = Instant::now();
    let mut last: Option<serde_json::Value> = None;
    let mut since = Instant::now();
    loop {
        let doc = served(url);
        if last.as_ref() != Some(&doc) {
            since = Instant::now();
            last = Some(doc.clone());
        }
        if done(&doc) && since.elapsed() >= Duration::from_secs(1) {
            return doc;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}; serving {doc}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The same keys through the Rust `Router` (following the daemon in this process) and each
/// client: the same generation, slice, side and broker name, and the side the document says.
fn all_route_alike(
    rust: &Router,
    clients: &mut [Client],
    keys: &[String],
    doc: &serde_json::Value,
) -> usize {
    let generation = doc["generation"].as_u64().unwrap();
    let total = u32::try_from(doc["slices_total"].as_u64().unwrap()).unwrap();
    let migrated = u32::try_from(doc["slices_migrated"].as_u64().unwrap()).unwrap();
    common::poll_until("the Rust router follows", Duration::from_secs(10), || {
        rust.generation() >= generation
    });
    assert_eq!(rust.generation(), generation);
    let want: Vec<(String, u32, String)> = keys
        .iter()
        .map(|k| {
            let route = rust.route(k);
            assert_eq!(route.slice, slice_of(k, total), "{k:?}");
            let side = if route.slice < migrated {
                Side::New
            } else {
                Side::Old
            };
            assert_eq!(route.target, side, "{k:?}");
            let stamp = rust.stamp(&route, "rust-producer", 0).unwrap();
            (route.target.as_str().to_string(), route.slice, stamp.broker)
        })
        .collect();
    for c in clients.iter_mut() {
        let (got_generation, got) = c.routes(keys, generation);
        assert_eq!(got_generation, generation, "{} follows the daemon", c.name);
        assert_eq!(got.len(), want.len());
        for ((k, w), g) in keys.iter().zip(&want).zip(&got) {
            assert_eq!(g, w, "{}: key {k:?}", c.name);
        }
    }
    want.iter().filter(|(side, ..)| side == "new").count()
}

#[test]
fn rust_node_python_and_java_follow_one_daemon_and_route_every_key_alike() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("local.yaml"), fast_plan()).unwrap();
    let indicators = Indicators::start();
    indicators.all_green();
    // Park in synthetic (no slice migrated) while everyone starts following.
    indicators.set("app_probe_ok", 0.0);
    let init = migrate(dir.path(), &indicators)
        .args(["init", "local.yaml"])
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let daemon = spawn_daemon(dir.path(), &indicators);
    let url = format!("http://{}", daemon.addr);

    // The shared keys: every key of the slice vectors (non-ASCII, empty, long) and some orders.
    let vectors =
        std::fs::read_to_string(root().join("tests/fixtures/vectors/slices.jsonl")).unwrap();
    let mut keys: Vec<String> = vectors
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["key"].as_str().unwrap().to_string()
        })
        .chain((0..200).map(|i| format!("order-{i}")))
        .collect();
    keys.sort();
    keys.dedup();

    let rt = tokio::runtime::Runtime::new().unwrap();
    let _in_runtime = rt.enter();
    let rust = Router::builder("local")
        .slices(8)
        .brokers("old", "new")
        .producer("rust-producer")
        .build();
    let _follower = rust.follow_http(&url, "local", None).unwrap();
    let (names, slices) = (["old", "new"], "8");
    let follow_args = [url.as_str(), "local", slices, names[0], names[1]];
    let mut clients = Vec::new();
    if have("node") {
        clients.push(Client::script(
            "node",
            "node",
            "clients/node/route-keys.js",
            &follow_args,
        ));
    }
    if have("python3") {
        clients.push(Client::script(
            "python",
            "python3",
            "clients/python/route_keys.py",
            &follow_args,
        ));
    }
    if let Some(built) = java_client() {
        let jar = built
            .as_ref()
            .unwrap_or_else(|out| panic!("mvn package: {out}"));
        let mut java = Command::new("java");
        java.arg("-cp")
            .arg(jar)
            .arg("io.queuemigrate.client.RouteKeys");
        clients.push(Client::spawn("java", java, &follow_args));
    }

    // 1. Synthetic: nothing migrated, every key to old.
    let doc = settle(&url, "synthetic", |d| d["state"] == "synthetic");
    assert_eq!(all_route_alike(&rust, &mut clients, &keys, &doc), 0);

    // 2. The first slice step (1 of 8), held there by an exit gate that does not pass yet.
    indicators.set("app_error_ratio_new", 0.02);
    indicators.set("app_probe_ok", 1.0);
    let doc = settle(&url, "slices[0]", |d| {
        d["state"] == "slices" && d["slices_migrated"] == 1
    });
    let moved = all_route_alike(&rust, &mut clients, &keys, &doc);
    assert!(moved > 0 && moved < keys.len(), "{moved} of {}", keys.len());

    // 3. Every slice moved: the daemon stops before `complete` (no confirmation given).
    indicators.set("app_error_ratio_new", 0.001);
    let doc = settle(&url, "disconnect", |d| d["state"] == "disconnect");
    assert_eq!(doc["slices_migrated"], 8);
    assert_eq!(
        all_route_alike(&rust, &mut clients, &keys, &doc),
        keys.len()
    );
    // Issue 58: each told the daemon, on its long-poll, its producer id and that it applied
    // this generation.
    let generation = doc["generation"].as_u64().unwrap();
    let mut producers = vec!["rust-producer".to_string()];
    producers.extend(clients.iter().map(|c| format!("{}-producer", c.name)));
    common::poll_until(
        "the daemon knows every client at the last generation",
        Duration::from_secs(20),
        || {
            let (_, body) = common::http_get(&format!("{url}/v1/migrations/local")).unwrap();
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            let seen = v["producers"]["seen"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            producers.iter().all(|p| {
                seen.iter()
                    .any(|f| f["producer"] == p.as_str() && f["applied"] == generation)
            })
        },
    );
    drop(clients);
    drop(daemon);
}

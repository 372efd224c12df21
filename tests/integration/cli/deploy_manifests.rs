//! The deployment files and the operator docs, checked against the code so that they cannot rot:
//!
//! - `deploy/kubernetes/queue-migrate.yaml` (every document): a Deployment of 2 replicas running
//!   `migrate run --listen ...` with the API token from a Secret, probes on `/readyz?standby=true`
//!   (readiness) and `/healthz` (liveness), a Service
//!   and a PodDisruptionBudget that select its pods, a ConfigMap whose plans pass `plan check`;
//! - `deploy/systemd/queue-migrate.service` (read with a tiny INI reader): `ExecStart` runs
//!   `migrate run`, `Restart=`, `KillSignal=SIGTERM`, a stop timeout longer than a long-poll;
//! - `docs/operations.md` and `docs/api.md`: every `migrate ...` command line they quote names a
//!   subcommand of the built binary (`migrate <subcommand> --help` exits 0) and only flags that
//!   subcommand has; operations.md shows both files verbatim; api.md names every route of
//!   `src/daemon/server.rs` and every metric of `src/daemon/metrics.rs`.

#![cfg(feature = "cli")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use queue_migrate::daemon::server::MAX_WAIT;
use serde::Deserialize;
use serde_yaml::Value;

const K8S: &str = "deploy/kubernetes/queue-migrate.yaml";
const UNIT: &str = "deploy/systemd/queue-migrate.service";
const DOCS: [&str; 2] = ["docs/operations.md", "docs/api.md"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("cannot read {rel}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Kubernetes

fn documents() -> Vec<Value> {
    let text = read(K8S);
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{K8S}: not YAML: {e}")))
        .filter(|v| !v.is_null())
        .collect();
    assert!(!docs.is_empty(), "{K8S} holds no document");
    docs
}

fn kind(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

fn one_of_kind<'a>(docs: &'a [Value], k: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| kind(d) == k).collect();
    assert_eq!(
        found.len(),
        1,
        "{K8S}: expected exactly one {k}, found {}",
        found.len()
    );
    found[0]
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| s.iter().map(|x| scalar(x).unwrap_or_default()).collect())
        .unwrap_or_default()
}

/// A scalar as text (YAML may read `8480` or `true` as non-strings).
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Does `selector` (a `matchLabels` map or a Service's selector map) select `labels`?
fn selects(selector: &Value, labels: &Value) -> bool {
    let Some(sel) = selector.as_mapping() else {
        return false;
    };
    !sel.is_empty()
        && sel
            .iter()
            .all(|(k, v)| labels.get(k).is_some_and(|l| l == v))
}

fn the_container(deployment: &Value) -> &Value {
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .expect("the Deployment has containers");
    containers
        .iter()
        .find(|c| {
            let mut argv = strings(&c["command"]);
            argv.extend(strings(&c["args"]));
            argv.iter()
                .any(|a| a == "migrate" || a.ends_with("/migrate"))
        })
        .expect("a container of the Deployment runs the `migrate` binary")
}

/// The container's argv (command then args), from the `migrate` executable on.
fn migrate_argv(container: &Value) -> Vec<String> {
    let mut argv = strings(&container["command"]);
    argv.extend(strings(&container["args"]));
    let at = argv
        .iter()
        .position(|a| a == "migrate" || a.ends_with("/migrate"))
        .expect("argv names migrate");
    argv.split_off(at)
}

fn container_port(container: &Value, port: &Value) -> Option<i64> {
    if let Some(n) = port.as_i64() {
        return Some(n);
    }
    let name = port.as_str()?;
    container["ports"]
        .as_sequence()?
        .iter()
        .find(|p| p["name"].as_str() == Some(name))
        .and_then(|p| p["containerPort"].as_i64())
}

#[test]
fn kubernetes_deployment_runs_two_daemons_with_a_token_from_a_secret() {
    let docs = documents();
    let deployment = one_of_kind(&docs, "Deployment");
    assert_eq!(deployment["apiVersion"].as_str(), Some("apps/v1"));
    assert_eq!(
        deployment["spec"]["replicas"].as_i64(),
        Some(2),
        "two daemons: one active, one standby"
    );
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    assert!(
        selects(&deployment["spec"]["selector"]["matchLabels"], pod_labels),
        "the Deployment's selector selects its own pods"
    );

    let c = the_container(deployment);
    let argv = migrate_argv(c);
    assert_eq!(
        argv.get(1).map(String::as_str),
        Some("run"),
        "argv: {argv:?}"
    );
    let listen = argv
        .iter()
        .position(|a| a == "--listen")
        .and_then(|i| argv.get(i + 1).cloned())
        .or_else(|| {
            argv.iter()
                .find_map(|a| a.strip_prefix("--listen=").map(str::to_string))
        })
        .unwrap_or_else(|| panic!("migrate run without --listen: {argv:?}"));
    let listen: std::net::SocketAddr = listen.parse().expect("--listen is an address");
    assert!(
        !listen.ip().is_loopback(),
        "a pod must listen beyond loopback for probes and the Service"
    );

    let env = c["env"].as_sequence().expect("the container has env");
    let var = |name: &str| env.iter().find(|e| e["name"].as_str() == Some(name));
    for name in ["MIGRATE_API_TOKEN", "MIGRATE_STATE"] {
        let e = var(name).unwrap_or_else(|| panic!("env {name} is missing"));
        assert!(
            e.get("value").is_none(),
            "{name} must not be written in the manifest"
        );
        let r = &e["valueFrom"]["secretKeyRef"];
        assert!(
            r["name"].as_str().is_some_and(|s| !s.is_empty())
                && r["key"].as_str().is_some_and(|s| !s.is_empty()),
            "{name} comes from a secretKeyRef with a name and a key"
        );
    }
    // No secret values in the file: a Secret document, if any, carries no data.
    for s in docs.iter().filter(|d| kind(d) == "Secret") {
        for field in ["data", "stringData"] {
            assert!(
                s.get(field)
                    .is_none_or(|d| d.as_mapping().is_none_or(|m| m.is_empty())),
                "a Secret in {K8S} holds values in `{field}`"
            );
        }
    }

    // Liveness: the process serves. Readiness: its store answers, on a standby too (both
    // replicas serve reads; a leader-only readiness would stall a rolling update with
    // maxUnavailable 0 and the PodDisruptionBudget).
    for (probe, path) in [
        ("readinessProbe", "/readyz?standby=true"),
        ("livenessProbe", "/healthz"),
    ] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"].as_str(), Some(path), "{probe} path");
        assert_eq!(
            container_port(c, &get["port"]),
            Some(i64::from(listen.port())),
            "{probe} probes the port migrate listens on"
        );
    }

    let pod = &deployment["spec"]["template"]["spec"];
    let csc = &c["securityContext"];
    assert_eq!(csc["readOnlyRootFilesystem"].as_bool(), Some(true));
    assert_eq!(csc["allowPrivilegeEscalation"].as_bool(), Some(false));
    assert!(
        csc["runAsNonRoot"].as_bool() == Some(true)
            || pod["securityContext"]["runAsNonRoot"].as_bool() == Some(true),
        "runs as non-root"
    );
    assert!(
        c["resources"]["requests"].is_mapping() && c["resources"]["limits"].is_mapping(),
        "resources: requests and limits"
    );
    // SIGTERM waits for open long-polls (at most MAX_WAIT) before the daemon exits.
    let grace = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("terminationGracePeriodSeconds is set");
    assert!(
        Duration::from_secs(grace) > MAX_WAIT,
        "terminationGracePeriodSeconds {grace} must exceed the longest long-poll ({MAX_WAIT:?})"
    );
}

#[test]
fn kubernetes_service_and_pdb_select_the_daemons() {
    let docs = documents();
    let deployment = one_of_kind(&docs, "Deployment");
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    let c = the_container(deployment);

    let service = one_of_kind(&docs, "Service");
    assert!(
        selects(&service["spec"]["selector"], pod_labels),
        "the Service selects the daemons' pods"
    );
    let ports = service["spec"]["ports"]
        .as_sequence()
        .expect("Service ports");
    assert!(
        ports.iter().any(|p| {
            let target = if p.get("targetPort").is_some() {
                &p["targetPort"]
            } else {
                &p["port"]
            };
            container_port(c, target) == Some(8480)
        }),
        "the Service reaches the API port 8480"
    );

    let pdb = one_of_kind(&docs, "PodDisruptionBudget");
    assert_eq!(pdb["apiVersion"].as_str(), Some("policy/v1"));
    assert!(
        selects(&pdb["spec"]["selector"]["matchLabels"], pod_labels),
        "the PDB selects the daemons' pods"
    );
    assert!(
        pdb["spec"]["minAvailable"].as_i64() == Some(1)
            || pdb["spec"]["maxUnavailable"].as_i64() == Some(1),
        "the PDB keeps one of the two daemons"
    );
}

#[test]
fn kubernetes_configmap_plans_pass_plan_check() {
    let docs = documents();
    let cm = one_of_kind(&docs, "ConfigMap");
    let data = cm["data"].as_mapping().expect("the ConfigMap has data");
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for (k, v) in data {
        let (Some(name), Some(text)) = (k.as_str(), v.as_str()) else {
            continue;
        };
        if !(name.ends_with(".yaml") || name.ends_with(".yml")) {
            continue;
        }
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        // Every ${VAR} the plan references, set to a placeholder of the right shape.
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_migrate"));
        cmd.args(["plan", "check"])
            .arg(&path)
            .env_remove("MIGRATE_STATE");
        for var in env_refs(text) {
            cmd.env(&var, placeholder_url(&var));
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "the plan {name} in the ConfigMap of {K8S} does not pass `migrate plan check`:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        checked += 1;
    }
    assert!(checked > 0, "the ConfigMap of {K8S} holds no plan");
}

/// The value of label `label` in every `metric{...}` selector of `query`.
fn label_values(query: &str, metric: &str, label: &str) -> Vec<String> {
    let open = format!("{metric}{{");
    let needle = format!("{label}=\"");
    query
        .match_indices(&open)
        .filter_map(|(at, _)| {
            let rest = &query[at + open.len()..];
            let selector = &rest[..rest.find('}')?];
            let value = &selector[selector.find(&needle)? + needle.len()..];
            Some(value[..value.find('"')?].to_string())
        })
        .collect()
}

/// Regression: plans/orders.yaml, its fuzz corpus copy and the ConfigMap's plan counted the
/// producers left on the old broker with `producer_messages_total{broker="old"}`, a series no
/// producer exports: the library's producers count `queue_migrate_published_total` with the
/// broker's name (`Router::for_brokers`), so the disconnect gate read nothing. Every shipped
/// plan that counts publishes reads that counter, by a broker name of the plan.
#[test]
fn shipped_plans_count_producers_by_the_labels_the_library_exports() {
    let docs = documents();
    let cm = one_of_kind(&docs, "ConfigMap");
    let mut plans: Vec<(String, String)> = cm["data"]
        .as_mapping()
        .expect("the ConfigMap has data")
        .iter()
        .filter_map(|(k, v)| Some((format!("{K8S}: {}", k.as_str()?), v.as_str()?.to_string())))
        .collect();
    for rel in ["plans/orders.yaml", "fuzz/corpus/plan/orders.yaml"] {
        plans.push((rel.to_string(), read(rel)));
    }
    for (name, text) in plans {
        let plan: Value = serde_yaml::from_str(&text).unwrap();
        let brokers: Vec<String> = ["old", "new"]
            .iter()
            .filter_map(|side| scalar(&plan["brokers"][*side]["name"]))
            .collect();
        let queries: Vec<String> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("query:"))
            .map(str::to_string)
            .collect();
        assert!(
            !queries
                .iter()
                .any(|q| q.contains("producer_messages_total")),
            "{name} reads producer_messages_total, which no producer exports"
        );
        let labels: Vec<String> = queries
            .iter()
            .flat_map(|q| label_values(q, "queue_migrate_published_total", "broker"))
            .collect();
        assert!(
            !labels.is_empty(),
            "{name} never counts publishes by broker"
        );
        for label in labels {
            assert!(
                brokers.contains(&label),
                "{name}: broker=\"{label}\" is none of the plan's brokers {brokers:?}"
            );
        }
    }
}

fn env_refs(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        rest = &rest[i + 2..];
        if let Some(j) = rest.find('}') {
            out.insert(rest[..j].to_string());
            rest = &rest[j..];
        }
    }
    out
}

fn placeholder_url(var: &str) -> String {
    let v = var.to_ascii_lowercase();
    if v.contains("old") {
        "amqp://127.0.0.1:5672/%2f".into()
    } else if v.contains("new") {
        "nats://127.0.0.1:4222".into()
    } else {
        "http://127.0.0.1:9/".into()
    }
}

// ---------------------------------------------------------------------------------------------
// systemd

/// A tiny INI reader for unit files: `[Section]`, `Key=Value` (repeatable), `#`/`;` comments,
/// `\` continuation lines.
fn ini(text: &str) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut section = String::new();
    let mut pending = String::new();
    for raw in text.lines() {
        let line = raw.trim();
        if pending.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with(';'))
        {
            continue;
        }
        if let Some(cont) = line.strip_suffix('\\') {
            pending.push_str(cont);
            pending.push(' ');
            continue;
        }
        let full = std::mem::take(&mut pending) + line;
        if let Some(name) = full.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            out.entry(section.clone()).or_default();
        } else if let Some((k, v)) = full.split_once('=') {
            out.entry(section.clone())
                .or_default()
                .entry(k.trim().to_string())
                .or_default()
                .push(v.trim().to_string());
        } else {
            panic!("{UNIT}: not `Key=Value`: {full:?}");
        }
    }
    out
}

fn systemd_seconds(v: &str) -> Duration {
    let v = v.trim();
    match v.strip_suffix("min") {
        Some(m) => Duration::from_secs(m.trim().parse::<u64>().unwrap() * 60),
        None => {
            let s = v.strip_suffix('s').unwrap_or(v);
            Duration::from_secs(
                s.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("seconds: {v:?}")),
            )
        }
    }
}

#[test]
fn systemd_unit_runs_the_daemon_and_stops_it_gracefully() {
    let unit = ini(&read(UNIT));
    let service = unit.get("Service").expect("[Service]");
    let one = |k: &str| -> &str {
        let v = service
            .get(k)
            .unwrap_or_else(|| panic!("[Service] has no {k}="));
        v.last().unwrap().as_str()
    };

    let exec: Vec<&str> = one("ExecStart").split_whitespace().collect();
    let bin = exec[0].trim_start_matches(['-', '@', '+', '!', ':']);
    assert!(
        bin == "migrate" || bin.ends_with("/migrate"),
        "ExecStart runs migrate: {exec:?}"
    );
    assert_eq!(
        exec.get(1).copied(),
        Some("run"),
        "ExecStart runs `migrate run`: {exec:?}"
    );
    assert!(
        exec.iter()
            .any(|a| *a == "--listen" || a.starts_with("--listen=")),
        "ExecStart says where to listen: {exec:?}"
    );

    let restart = one("Restart");
    assert!(
        ["on-failure", "always", "on-abnormal", "on-abort"].contains(&restart),
        "Restart={restart}"
    );
    assert_eq!(one("KillSignal"), "SIGTERM");
    let stop = systemd_seconds(one("TimeoutStopSec"));
    assert!(
        stop > MAX_WAIT,
        "TimeoutStopSec {stop:?} must exceed the longest long-poll ({MAX_WAIT:?}) plus a tick"
    );

    assert!(
        service.contains_key("User") || one_or(service, "DynamicUser") == "yes",
        "a dedicated user or DynamicUser=yes"
    );
    assert!(
        service.contains_key("EnvironmentFile"),
        "EnvironmentFile= for MIGRATE_STATE and the token"
    );
    assert_eq!(one("NoNewPrivileges"), "yes");
    assert_eq!(one("ProtectSystem"), "strict");
    assert!(
        unit.get("Install")
            .and_then(|i| i.get("WantedBy"))
            .is_some(),
        "[Install] WantedBy="
    );
}

fn one_or<'a>(section: &'a BTreeMap<String, Vec<String>>, k: &str) -> &'a str {
    section
        .get(k)
        .and_then(|v| v.last())
        .map_or("", String::as_str)
}

// ---------------------------------------------------------------------------------------------
// Docs

/// The code in a Markdown text: fenced blocks line by line, and inline `code` spans.
fn code_snippets(md: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in md.lines().enumerate() {
        let n = i + 1;
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            out.push((n, line.to_string()));
        } else {
            out.extend(
                line.split('`')
                    .enumerate()
                    .filter(|(k, _)| k % 2 == 1)
                    .map(|(_, s)| (n, s.to_string())),
            );
        }
    }
    out
}

/// Split a command line like a shell would, roughly: whitespace, quotes; stop at a comment or an
/// operator.
fn shell_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    for ch in s.chars() {
        match quote {
            Some(q) if ch == q => quote = None,
            Some(_) => cur.push(ch),
            None if ch == '"' || ch == '\'' => {
                quote = Some(ch);
                in_word = true;
            }
            None if ch.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None => {
                cur.push(ch);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    let end = words
        .iter()
        .position(|w| {
            w.starts_with('#')
                || ["|", "||", "&&", ";", ">", ">>", "2>", "2>&1", "<", "\\"].contains(&w.as_str())
        })
        .unwrap_or(words.len());
    words.truncate(end);
    words
}

fn is_word(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Global options of `migrate` that take a value (they may come before the subcommand).
const GLOBAL_WITH_VALUE: [&str; 4] = ["--state", "--actor", "--source-timeout", "--now"];

#[derive(Debug)]
struct Quoted {
    doc: &'static str,
    line: usize,
    text: String,
    /// The subcommand's first word and what follows it.
    rest: Vec<String>,
    /// Options before the subcommand.
    globals: Vec<String>,
}

/// Every `migrate <subcommand> ...` quoted in the code of a doc.
fn quoted_commands(doc: &'static str, md: &str) -> Vec<Quoted> {
    let mut out = Vec::new();
    for (line, code) in code_snippets(md) {
        let bytes = code.as_bytes();
        let mut from = 0;
        while let Some(i) = code[from..].find("migrate") {
            let at = from + i;
            from = at + "migrate".len();
            let before_ok = at == 0
                || matches!(
                    bytes[at - 1],
                    b' ' | b'\t' | b'/' | b'(' | b'"' | b'\'' | b'=' | b'$' | b'`'
                );
            let after_ok = bytes.get(from).is_some_and(u8::is_ascii_whitespace);
            if !before_ok || !after_ok {
                continue;
            }
            let tail = &code[from..];
            let tail = tail.split('`').next().unwrap_or_default();
            let words = shell_words(tail);
            let mut globals = Vec::new();
            let mut k = 0;
            while k < words.len() && words[k].starts_with("--") {
                let w = &words[k];
                globals.push(w.clone());
                k += if GLOBAL_WITH_VALUE.contains(&w.as_str()) {
                    2
                } else {
                    1
                };
            }
            // `migrate CLI`, `migrate /usr/...`: prose or paths, not a command line.
            if k >= words.len() || !is_word(&words[k]) {
                continue;
            }
            out.push(Quoted {
                doc,
                line,
                text: format!("migrate{tail}").trim().to_string(),
                rest: words[k..].to_vec(),
                globals,
            });
        }
    }
    out
}

fn help(path: &[String]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_migrate"))
        .args(path)
        .arg("--help")
        .env_remove("MIGRATE_STATE")
        .output()
        .expect("run migrate --help");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

fn has_flag(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(i, _)| {
        !help[i + flag.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

#[test]
fn every_migrate_command_quoted_in_the_docs_exists() {
    let mut helps: BTreeMap<Vec<String>, (bool, String)> = BTreeMap::new();
    let mut help_of = |path: Vec<String>| -> (bool, String) {
        helps
            .entry(path.clone())
            .or_insert_with(|| help(&path))
            .clone()
    };
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for doc in DOCS {
        let quoted = quoted_commands(doc, &read(doc));
        assert!(
            quoted.len() >= 5,
            "{doc}: found only {} `migrate ...` command lines; is the extractor broken?",
            quoted.len()
        );
        for q in quoted {
            // The subcommand path: `plan check` is two words deep.
            let mut path = vec![q.rest[0].clone()];
            let (ok, mut text) = help_of(path.clone());
            if !ok {
                problems.push(format!(
                    "{}:{}: `{}`: `migrate {} --help` fails: no such subcommand",
                    q.doc, q.line, q.text, path[0]
                ));
                continue;
            }
            if text.contains("<COMMAND>") {
                match q.rest.get(1).filter(|w| is_word(w)) {
                    Some(sub) => {
                        path.push(sub.clone());
                        let (ok, t) = help_of(path.clone());
                        if !ok {
                            problems.push(format!(
                                "{}:{}: `{}`: `migrate {} --help` fails: no such subcommand",
                                q.doc,
                                q.line,
                                q.text,
                                path.join(" ")
                            ));
                            continue;
                        }
                        text = t;
                    }
                    None => {
                        problems.push(format!(
                            "{}:{}: `{}`: `migrate {}` needs a subcommand",
                            q.doc, q.line, q.text, path[0]
                        ));
                        continue;
                    }
                }
            }
            let flags = q
                .globals
                .iter()
                .chain(q.rest.iter())
                .filter(|w| w.starts_with("--") && w.len() > 2)
                .map(|w| w.split('=').next().unwrap_or_default().to_string());
            for flag in flags {
                if !has_flag(&text, &flag) {
                    problems.push(format!(
                        "{}:{}: `{}`: `migrate {}` has no option {flag}",
                        q.doc,
                        q.line,
                        q.text,
                        path.join(" ")
                    ));
                }
            }
            seen.insert(path.join(" "));
        }
    }
    assert!(
        problems.is_empty(),
        "docs quote commands the binary does not have:\n{}",
        problems.join("\n")
    );
    for must in ["run", "status", "history", "advance", "rollback", "pause"] {
        assert!(seen.contains(must), "the docs never quote `migrate {must}`");
    }
}

#[test]
fn operations_md_shows_the_deploy_files_verbatim() {
    let ops = read("docs/operations.md");
    for file in [UNIT, K8S] {
        let body = read(file);
        assert!(
            ops.contains(&format!("```ini\n{body}```"))
                || ops.contains(&format!("```yaml\n{body}```")),
            "docs/operations.md does not show the current {file} verbatim (in a fenced block): \
             copy it again between the BEGIN/END markers"
        );
    }
}

#[test]
fn api_md_names_every_route_and_every_metric() {
    let api = read("docs/api.md");
    // The API's routes and the console's (merged into the same router).
    let server = read("src/daemon/server.rs") + &read("src/daemon/console/mod.rs");
    let mut routes = 0;
    let actions: Vec<&str> = server
        .lines()
        .filter_map(|l| l.trim().strip_prefix('"'))
        .filter_map(|l| l.split_once("\" =>").map(|(a, _)| a))
        .collect();
    assert!(
        actions.contains(&"advance"),
        "cannot find the actions in server.rs"
    );
    for line in server.lines() {
        let Some(rest) = line.trim().strip_prefix(".route(\"") else {
            continue;
        };
        let path = rest.split('"').next().unwrap();
        routes += 1;
        if let Some(prefix) = path.strip_suffix("{action}") {
            for a in &actions {
                let p = format!("{prefix}{a}");
                assert!(api.contains(&p), "docs/api.md does not mention {p}");
            }
        } else {
            assert!(
                api.contains(path),
                "docs/api.md does not mention the route {path}"
            );
        }
    }
    assert!(routes >= 6, "cannot find the routes in server.rs");

    let metrics = read("src/daemon/metrics.rs");
    let mut names = BTreeSet::new();
    let mut rest = metrics.as_str();
    while let Some(i) = rest.find("queue_migrate_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(tail.len());
        // A name ending in `_` is a prefix the code matches on (a test's filter), not a metric.
        if !tail[..end].ends_with('_') {
            names.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    assert!(names.len() >= 10, "cannot find the metrics in metrics.rs");
    for n in names {
        assert!(
            api.contains(&format!("`{n}`")),
            "docs/api.md does not document the metric {n}"
        );
    }
}

#[test]
fn the_extractor_reads_command_lines_as_meant() {
    let md = "Run `migrate status orders --json`.\n```sh\n$ migrate --state x.db plan check p.yaml # note\nExecStart=/usr/local/bin/migrate run --listen 0.0.0.0:8480\ninstall target/release/migrate /usr/local/bin/migrate\nkubectl exec deploy/queue-migrate -- migrate pause orders --reason \"a --b\"\n```\nqueue_migrate_up and `queue-migrate run` are not commands.\n";
    let q = quoted_commands("t", md);
    let got: Vec<(Vec<String>, Vec<String>)> = q
        .iter()
        .map(|q| (q.globals.clone(), q.rest.clone()))
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        vec![
            (vec![], s(&["status", "orders", "--json"])),
            (s(&["--state"]), s(&["plan", "check", "p.yaml"])),
            (vec![], s(&["run", "--listen", "0.0.0.0:8480"])),
            (vec![], s(&["pause", "orders", "--reason", "a --b"])),
        ]
    );
    assert!(Path::new(env!("CARGO_BIN_EXE_migrate")).exists());
}

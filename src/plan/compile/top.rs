//! The plan's top level: `version`, `name`, `slices`, `auto_advance`, and the `brokers`, `retry`,
//! `dedup`, `routing` and `notify` sections, with the drain quiet period they imply; the whole
//! [`Plan`] is assembled here.

use std::time::Duration;

use serde_yaml::Value;

use super::cx::{Cx, MAX_SLICES, Obj, describe, present, quote};
use super::gates::GateCtx;
use crate::plan::duration_serde::format as human;
use crate::plan::lines::key_path;
use crate::plan::model::{
    Broker, Brokers, DEFAULT_SLICES, Dedup, DedupMode, EtcdPublish, Notify, Plan, Preflight, Retry,
    RoutingPublish, Webhook,
};

/// The only plan format version this build reads.
pub const SUPPORTED_VERSIONS: &[u64] = &[1];

/// Broker kinds that have an adapter; another kind is a warning (a typo such as `ampq` shows up
/// at `plan check` rather than at connect time).
pub const KNOWN_BROKER_KINDS: &[&str] = &[
    "amqp",
    "rabbitmq",
    "nats",
    "jetstream",
    "redis",
    "redis-streams",
    "kafka",
];

// The fields each mapping allows (what an "unknown field" error offers instead).
const TOP_FIELDS: &[&str] = &[
    "version",
    "name",
    "slices",
    "auto_advance",
    "brokers",
    "retry",
    "dedup",
    "sources",
    "routing",
    "notify",
    "phases",
    "bridge",
    "preflight",
    "stale_producers",
    "judge_budget",
];
const BROKERS_FIELDS: &[&str] = &["old", "new"];
const BROKER_FIELDS: &[&str] = &["name", "kind", "url", "queue", "stream", "dead_letter"];
const RETRY_FIELDS: &[&str] = &["max_backoff", "visibility_timeout"];
const DEDUP_FIELDS: &[&str] = &[
    "mode",
    "window",
    "max_redelivery_delay",
    "max_consumer_delay",
    "reprocess_margin",
];
const ROUTING_FIELDS: &[&str] = &["file", "etcd"];
const ETCD_FIELDS: &[&str] = &["endpoint", "key"];
const NOTIFY_FIELDS: &[&str] = &["webhooks", "hold_after"];
const WEBHOOK_FIELDS: &[&str] = &["url", "token"];

impl Cx<'_> {
    pub(super) fn plan(&mut self, root: &Value) -> Option<Plan> {
        if matches!(root, Value::Null) {
            self.error(
                "",
                "the plan is empty: expected a mapping with version, name, brokers, retry, \
                 sources and phases",
            );
            return None;
        }
        let top = Obj::new(self, root, "", "the plan", TOP_FIELDS)?;

        if let Some((v, p)) = top.req(self, "version", "write `version: 1`") {
            self.version(v, &p);
        }
        let name = top
            .req(self, "name", "the migration's name, [a-z0-9-]+")
            .and_then(|(v, p)| self.plan_name(v, &p));
        let slices = match top.get("slices") {
            Some((v, p)) => self
                .uint(v, &p, 1, u64::from(MAX_SLICES))
                .and_then(|n| u32::try_from(n).ok()),
            None => Some(DEFAULT_SLICES),
        };
        let slices_written = top.get("slices").is_some();
        let auto_advance = match top.get("auto_advance") {
            Some((v, p)) => self.boolean(v, &p),
            None => Some(true),
        };
        let brokers = top
            .req(self, "brokers", "`old` and `new`")
            .and_then(|(v, p)| self.brokers(v, &p));
        let retry = top
            .req(self, "retry", "`max_backoff` and `visibility_timeout`")
            .and_then(|(v, p)| self.retry(v, &p));
        let dedup = match top.get("dedup") {
            Some((v, p)) => self.dedup(v, &p).map(Some),
            None => {
                self.warn(
                    "dedup",
                    "no `dedup` section: the dedup window (window >= max_redelivery_delay + \
                     max_consumer_delay + reprocess_margin) is not checked; during coexistence \
                     the same message can arrive by both brokers and only the consumer's dedup \
                     stops it from being applied twice",
                );
                Some(None)
            }
        };
        let sources_field = top.req(self, "sources", "a mapping of named indicator sources");
        let sources = sources_field.and_then(|(v, p)| self.sources(v, &p));
        let routing = match top.get("routing") {
            Some((v, p)) => self.routing(v, &p),
            None => Some(RoutingPublish::default()),
        };
        let notify = match top.get("notify") {
            Some((v, p)) => self.notify(v, &p),
            None => Some(Notify::default()),
        };
        let stale_producers = match top.get("stale_producers") {
            Some((v, p)) => self.stale_producers(v, &p, sources.as_ref()).map(Some),
            None => Some(None),
        };
        let (quiet, quiet_auto) = self.quiet(root, retry.as_ref());
        let mut phases = top
            .req(self, "phases", "the phases, with at least `slices`")
            .and_then(|(v, p)| {
                let gates = GateCtx {
                    sources: sources.as_ref(),
                    quiet,
                };
                self.phases(v, &p, &gates, slices.map(|s| (s, slices_written)))
            });

        if let Some(phases) = &phases
            && let Some(quiet) = quiet
        {
            self.phase_warnings(phases, quiet);
        }
        if let (Some(phases), Some(Some(stale))) = (phases.as_mut(), stale_producers.as_ref()) {
            super::stale::add_guards(phases, stale);
        }
        let judge_budget = match top.get("judge_budget") {
            Some((v, p)) => self.judge_budget(v, &p),
            None => Some(crate::judge::budget::Budget::default()),
        };
        if let (Some(phases), Some(budget)) = (phases.as_mut(), judge_budget.as_ref()) {
            super::budget::apply(phases, budget);
        }
        let bridge = match top.get("bridge") {
            Some((v, p)) => self.bridge(v, &p, brokers.as_ref()).map(Some),
            None => Some(None),
        };

        let preflight = match top.get("preflight") {
            Some((v, p)) => self.preflight(v, &p, brokers.as_ref()),
            None => Some(Preflight::default()),
        };

        Some(Plan {
            name: name?,
            slices: slices?,
            brokers: brokers?,
            retry: retry?,
            dedup: dedup?,
            sources: sources?.valid,
            routing: routing?,
            notify: notify?,
            phases: phases?,
            quiet: quiet?,
            quiet_auto,
            auto_advance: auto_advance?,
            bridge: bridge?,
            preflight: preflight?,
            stale_producers: stale_producers?,
            judge_budget: judge_budget?,
        })
    }

    fn version(&mut self, v: &Value, path: &str) {
        let supported = SUPPORTED_VERSIONS
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        match v {
            Value::Number(n) if n.as_u64().is_some_and(|n| SUPPORTED_VERSIONS.contains(&n)) => {}
            Value::Number(n) => self.error(
                path,
                format!("unsupported plan version {n} (supported versions: {supported})"),
            ),
            other => self.error(
                path,
                format!(
                    "expected a version number (supported versions: {supported}), found {}",
                    describe(other)
                ),
            ),
        }
    }

    fn plan_name(&mut self, v: &Value, path: &str) -> Option<String> {
        let name = self.string(v, path)?;
        let ok = (1..=63).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok {
            self.error(
                path,
                format!(
                    "the name must be 1 to 63 characters among a-z, 0-9 and `-` (it names the \
                     migration in the store, the CLI and URLs); got {}",
                    quote(&name)
                ),
            );
            return None;
        }
        Some(name)
    }

    fn brokers(&mut self, v: &Value, path: &str) -> Option<Brokers> {
        let o = Obj::new(self, v, path, "the brokers", BROKERS_FIELDS)?;
        let old = o
            .req(self, "old", "the broker migrated from")
            .and_then(|(v, p)| self.broker(v, &p));
        let new = o
            .req(self, "new", "the broker migrated to")
            .and_then(|(v, p)| self.broker(v, &p));
        let (old, new) = (old?, new?);
        if old.name == new.name {
            self.error(
                &key_path(&key_path(path, "new"), "name"),
                format!(
                    "both brokers are named {}: route stamps and the routing document tell the \
                     two sides apart by name, give them different names",
                    quote(&new.name)
                ),
            );
            return None;
        }
        Some(Brokers { old, new })
    }

    fn broker(&mut self, v: &Value, path: &str) -> Option<Broker> {
        let o = Obj::new(self, v, path, "a broker", BROKER_FIELDS)?;
        let name = o
            .req(self, "name", "a display name such as `rabbitmq`")
            .and_then(|(v, p)| self.nonempty_string(v, &p));
        let kind = o
            .req(self, "kind", "amqp, nats or redis")
            .and_then(|(v, p)| self.nonempty_string(v, &p));
        if let Some(kind) = &kind
            && !KNOWN_BROKER_KINDS.contains(&kind.as_str())
        {
            self.warn(
                &key_path(path, "kind"),
                format!(
                    "broker kind {} has no adapter in this migrate (known: {})",
                    quote(kind),
                    KNOWN_BROKER_KINDS.join(", ")
                ),
            );
        }
        let url = o
            .req(self, "url", "a connection URL, `${VAR}` or `file:/path`")
            .and_then(|(v, p)| self.secret(v, &p));
        if kind.as_deref() == Some("kafka")
            && let Some(url) = &url
        {
            self.kafka_url(url, &key_path(path, "url"));
        }
        let opt_string = |cx: &mut Self, key: &str| -> Option<Option<String>> {
            match o.get(key) {
                Some((v, p)) => cx.nonempty_string(v, &p).map(Some),
                None => Some(None),
            }
        };
        let queue = opt_string(self, "queue");
        let stream = opt_string(self, "stream");
        let dead_letter = opt_string(self, "dead_letter");
        Some(Broker {
            name: name?,
            kind: kind?,
            url: url?,
            queue: queue?,
            stream: stream?,
            dead_letter: dead_letter?,
        })
    }

    fn retry(&mut self, v: &Value, path: &str) -> Option<Retry> {
        let o = Obj::new(self, v, path, "the retry policy", RETRY_FIELDS)?;
        let max_backoff = o
            .req(self, "max_backoff", "the longest wait before a redelivery")
            .and_then(|(v, p)| self.duration(v, &p));
        let visibility_timeout = o
            .req(
                self,
                "visibility_timeout",
                "how long an unacked message stays invisible",
            )
            .and_then(|(v, p)| self.duration(v, &p));
        Some(Retry {
            max_backoff: max_backoff?,
            visibility_timeout: visibility_timeout?,
        })
    }

    fn dedup(&mut self, v: &Value, path: &str) -> Option<Dedup> {
        let o = Obj::new(self, v, path, "the dedup policy", DEDUP_FIELDS)?;
        let field = |cx: &mut Self, key: &str| {
            o.req(cx, key, "a duration")
                .and_then(|(v, p)| cx.duration(v, &p))
        };
        let window = field(self, "window");
        let redelivery = field(self, "max_redelivery_delay");
        let consumer = field(self, "max_consumer_delay");
        let margin = field(self, "reprocess_margin");
        let mode = match o.get("mode") {
            None => Some(DedupMode::Durable),
            Some((v, p)) => match self.string(v, &p).as_deref() {
                Some("durable") => Some(DedupMode::Durable),
                Some("redis") => Some(DedupMode::Redis),
                Some("window") => Some(DedupMode::Window),
                Some(other) => {
                    self.error(
                        &p,
                        format!(
                            "unknown dedup mode {}: durable (keys in SQL), redis, or window \
                             (in-memory, recent duplicates only)",
                            quote(other)
                        ),
                    );
                    None
                }
                None => None,
            },
        };
        let dedup = Dedup {
            mode: mode?,
            window: window?,
            max_redelivery_delay: redelivery?,
            max_consumer_delay: consumer?,
            reprocess_margin: margin?,
        };
        let required = dedup
            .max_redelivery_delay
            .checked_add(dedup.max_consumer_delay)
            .and_then(|d| d.checked_add(dedup.reprocess_margin));
        let window_path = key_path(path, "window");
        if dedup.mode == DedupMode::Window {
            // The in-memory window only catches recent duplicates, by design: a reprocess older
            // than the window is not detected. Say so; it is the operator's informed choice.
            if let Some(w) =
                crate::dedup::window::window_warning(dedup.window, dedup.reprocess_margin)
            {
                self.warn(&window_path, w);
            }
            return Some(dedup);
        }
        match required {
            None => {
                self.error(
                    &window_path,
                    "max_redelivery_delay + max_consumer_delay + reprocess_margin is too large \
                     to add up",
                );
                None
            }
            Some(required) if dedup.window < required => {
                self.error(
                    &window_path,
                    format!(
                        "window {} is shorter than max_redelivery_delay {} + max_consumer_delay \
                         {} + reprocess_margin {} = {}: a message redelivered or reprocessed \
                         inside that span would be applied twice; raise window to at least {}",
                        human(dedup.window),
                        human(dedup.max_redelivery_delay),
                        human(dedup.max_consumer_delay),
                        human(dedup.reprocess_margin),
                        human(required),
                        human(required),
                    ),
                );
                None
            }
            Some(_) => Some(dedup),
        }
    }

    fn routing(&mut self, v: &Value, path: &str) -> Option<RoutingPublish> {
        let o = Obj::new(self, v, path, "routing", ROUTING_FIELDS)?;
        let file = o
            .get("file")
            .map(|(v, p)| self.nonempty_string(v, &p).map(|f| self.relative(&f)));
        let etcd = o.get("etcd").map(|(v, p)| self.etcd(v, &p));
        Some(RoutingPublish {
            file: present(file)?,
            etcd: present(etcd)?,
        })
    }

    fn etcd(&mut self, v: &Value, path: &str) -> Option<EtcdPublish> {
        let o = Obj::new(self, v, path, "routing.etcd", ETCD_FIELDS)?;
        let endpoint = o
            .req(
                self,
                "endpoint",
                "the etcd v3 gateway URL, e.g. http://127.0.0.1:2379",
            )
            .and_then(|(v, p)| {
                let s = self.secret(v, &p)?;
                self.http_url(s, &p, "etcd")
            });
        let key = o
            .req(
                self,
                "key",
                "the etcd key producers read, e.g. /queue-migrate/orders/routing",
            )
            .and_then(|(v, p)| self.nonempty_string(v, &p));
        Some(EtcdPublish {
            endpoint: endpoint?,
            key: key?,
        })
    }

    fn notify(&mut self, v: &Value, path: &str) -> Option<Notify> {
        let o = Obj::new(self, v, path, "notify", NOTIFY_FIELDS)?;
        let hold_after = o.get("hold_after").map(|(v, p)| self.duration(v, &p));
        let webhooks = match o.get("webhooks") {
            None => Some(Vec::new()),
            Some((Value::Sequence(items), p)) => {
                let hooks: Vec<Option<Webhook>> = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.webhook(item, &format!("{p}[{i}]")))
                    .collect();
                hooks.into_iter().collect()
            }
            Some((other, p)) => {
                self.error(
                    &p,
                    format!("expected a list of webhooks, found {}", describe(other)),
                );
                None
            }
        };
        Some(Notify {
            webhooks: webhooks?,
            hold_after: present(hold_after)?,
        })
    }

    fn webhook(&mut self, v: &Value, path: &str) -> Option<Webhook> {
        let o = Obj::new(self, v, path, "a webhook", WEBHOOK_FIELDS)?;
        let url = o
            .req(self, "url", "where to POST the JSON events")
            .and_then(|(v, p)| {
                let s = self.secret(v, &p)?;
                if s.value().is_ok_and(|value| {
                    *value == s.reference && crate::outgoing::webhook_path_looks_secret(value)
                }) {
                    self.warn(
                        &p,
                        "the webhook's URL is written in the plan and its path looks like a \
                         secret (a chat webhook's path is its credential): use `${VAR}` or \
                         `file:/path` (it is masked in output)",
                    );
                }
                self.http_url(s, &p, "webhook")
            });
        let token = o.get("token").map(|(v, p)| self.secret(v, &p));
        Some(Webhook {
            url: url?,
            token: present(token)?,
        })
    }

    /// The drain quiet period (`phases.drain.quiet`, `auto` by default) and whether it was
    /// computed. Read before the phases because `for: quiet` may appear in any phase.
    fn quiet(&mut self, root: &Value, retry: Option<&Retry>) -> (Option<Duration>, bool) {
        let path = "phases.drain.quiet";
        let written = root
            .get("phases")
            .and_then(|p| p.get("drain"))
            .and_then(|d| d.get("quiet"))
            .filter(|q| !matches!(q, Value::Null));
        match written {
            Some(Value::String(s)) if s.trim() == "auto" => {}
            Some(v) => return (self.duration(v, path), false),
            None => {}
        }
        let Some(retry) = retry else {
            return (None, true);
        };
        match retry.max_backoff.checked_add(retry.visibility_timeout) {
            Some(q) => (Some(q), true),
            None => {
                self.error(
                    "retry",
                    "max_backoff + visibility_timeout is too large to add up",
                );
                (None, true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::plan::compile::compile;
    use crate::plan::compile::test_support::{FULL, edit, errors, lines, ok, resolve};
    use crate::plan::model::{DedupMode, PhaseKind};
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    #[test]
    fn derived_quiet_is_max_backoff_plus_visibility_timeout() {
        let c = ok(FULL);
        assert_eq!(c.plan.quiet, Duration::from_secs(20 * 60));
        assert!(c.plan.quiet_auto);
        let drain = c.plan.phase(PhaseKind::Drain).map(|d| d.exit[0].hold_for);
        assert_eq!(drain, Some(Some(Duration::from_secs(20 * 60))));

        // Written: used as is, also by `for: quiet` outside drain.
        let c = ok(&edit("quiet: auto", "quiet: 45m").replace("for: 5m", "for: quiet"));
        assert_eq!(c.plan.quiet, Duration::from_secs(45 * 60));
        assert!(!c.plan.quiet_auto);
        let guard = c.plan.phase(PhaseKind::Slices).map(|s| s.guard[0].hold_for);
        assert_eq!(guard, Some(Some(Duration::from_secs(45 * 60))));

        // Missing `quiet` is auto.
        let c = ok(&edit("    quiet: auto\n", ""));
        assert_eq!(c.plan.quiet, Duration::from_secs(20 * 60));
        assert!(c.plan.quiet_auto);
    }

    #[test]
    fn routing_file_is_relative_to_the_plan() {
        let file = |dir: Option<&Path>, yaml: &str| {
            compile(yaml, dir, &resolve())
                .map(|c| c.plan.routing.file)
                .unwrap_or_else(|e| panic!("{}", lines(&e)))
        };
        assert_eq!(
            file(Some(Path::new("/etc/qm")), FULL),
            Some(PathBuf::from("/etc/qm/orders.routing.json"))
        );
        assert_eq!(file(None, FULL), Some(PathBuf::from("orders.routing.json")));
        let abs = FULL.replacen("\"orders.routing.json\"", "/var/lib/qm/orders.json", 1);
        assert_eq!(
            file(Some(Path::new("/etc/qm")), &abs),
            Some(PathBuf::from("/var/lib/qm/orders.json"))
        );
        let none = FULL.replacen("routing: { file: \"orders.routing.json\" }\n", "", 1);
        assert_eq!(file(Some(Path::new("/etc/qm")), &none), None);
    }

    #[test]
    fn etcd_routing_and_notify_webhooks() {
        let yaml = FULL.replace(
            r#"routing: { file: "orders.routing.json" }"#,
            r#"routing:
  file: "orders.routing.json"
  etcd: { endpoint: "http://127.0.0.1:2379", key: /queue-migrate/orders/routing }
notify:
  hold_after: 30m
  webhooks:
    - { url: "https://hooks.example/T1", token: "${PASS}" }
    - { url: "http://127.0.0.1:9999/hook" }"#,
        );
        let c = ok(&yaml);
        let etcd = c.plan.routing.etcd.as_ref().expect("etcd");
        assert_eq!(etcd.key, "/queue-migrate/orders/routing");
        assert_eq!(etcd.endpoint.value().unwrap(), "http://127.0.0.1:2379");
        assert_eq!(c.plan.notify.webhooks.len(), 2);
        assert_eq!(c.plan.notify.hold_after, Some(Duration::from_secs(1800)));
        let token = c.plan.notify.webhooks[0].token.as_ref().expect("token");
        assert_eq!(token.value().unwrap(), "s3cr3t-pass");
        assert!(!format!("{:?}", c.plan).contains("s3cr3t-pass"));

        let bad = FULL.replace(
            r#"routing: { file: "orders.routing.json" }"#,
            r#"routing: { etcd: { endpoint: "127.0.0.1:2379" } }
notify: { webhooks: [ { url: "ftp://x", secret: y } ], hold_after: soon }"#,
        );
        let errs = lines(&errors(&bad));
        for needle in [
            "routing.etcd.endpoint",
            "routing.etcd: missing required field `key`",
            "notify.webhooks[0].url",
            "notify.webhooks[0].secret",
            "notify.hold_after",
        ] {
            assert!(errs.contains(needle), "missing {needle} in:\n{errs}");
        }
    }

    #[test]
    fn window_mode_warns_instead_of_failing_when_the_margin_exceeds_it() {
        let yaml = FULL.replace(
            "dedup: { window: 90d,",
            "dedup: { mode: window, window: 10m,",
        );
        let c = ok(&yaml);
        assert_eq!(
            c.plan.dedup.as_ref().map(|d| d.mode),
            Some(DedupMode::Window)
        );
        let w = lines(&c.warnings);
        assert!(
            w.contains("dedup.window") && w.contains("reprocess_margin"),
            "{w}"
        );
        // The durable mode keeps the hard error.
        let errs = lines(&errors(
            &FULL.replace("dedup: { window: 90d,", "dedup: { window: 10m,"),
        ));
        assert!(errs.contains("shorter than"), "{errs}");
        let bad = lines(&errors(&FULL.replace(
            "dedup: { window: 90d,",
            "dedup: { mode: cache, window: 90d,",
        )));
        assert!(bad.contains("unknown dedup mode"), "{bad}");
    }
}

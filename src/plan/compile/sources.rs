//! The `sources` section: named indicator sources (Prometheus, a scraped /metrics endpoint, a
//! dead-letter export), and what gates need to know of them.

use std::collections::BTreeMap;

use serde_yaml::Value;

use super::cx::{Cx, Obj, describe, quote};
use crate::plan::lines::key_path;
use crate::plan::model::Source;

// The fields each mapping allows (what an "unknown field" error offers instead).
const SOURCE_FIELDS: &[&str] = &[
    "prometheus",
    "ui",
    "scrape",
    "dead_letters",
    "kafka_lag",
    "group",
    "topics",
];
/// What a gate may ask a `dead_letters` source.
pub(super) const DEAD_LETTER_QUERIES: &[&str] = &["open_groups", "entries"];

/// What a source is, as far as gates need to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SourceKind {
    Prometheus,
    Scrape,
    DeadLetters,
    KafkaLag,
}

/// The sources section: the valid ones, and every declared name with its kind when known (so
/// that a gate on a source whose URL failed is not reported as "unknown source" as well).
#[derive(Default)]
pub(super) struct Sources {
    pub(super) valid: BTreeMap<String, Source>,
    pub(super) declared: BTreeMap<String, Option<SourceKind>>,
}

impl Cx<'_> {
    pub(super) fn sources(&mut self, v: &Value, path: &str) -> Option<Sources> {
        let Value::Mapping(map) = v else {
            self.error(
                path,
                format!(
                    "expected a mapping of named sources (e.g. `prom: {{ prometheus: \
                     \"http://127.0.0.1:9090\" }}`), found {}",
                    describe(v)
                ),
            );
            return None;
        };
        let mut out = Sources::default();
        for (k, v) in map {
            let Some(name) = self.key_name(k, path) else {
                continue;
            };
            let p = key_path(path, &name);
            let valid_name = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !valid_name {
                self.error(
                    &p,
                    format!(
                        "a source name is letters, digits, `-` and `_`; got {}",
                        quote(&name)
                    ),
                );
            }
            // Every declared name is kept, for the gates, even when its entry is invalid (its
            // error is recorded, so no plan is produced).
            let (kind, source) = self.source(v, &p);
            out.declared.insert(name.clone(), kind);
            if let Some(s) = source {
                out.valid.insert(name, s);
            }
        }
        Some(out)
    }

    fn source(&mut self, v: &Value, path: &str) -> (Option<SourceKind>, Option<Source>) {
        let Some(o) = Obj::new(self, v, path, "a source", SOURCE_FIELDS) else {
            return (None, None);
        };
        if o.get("ui").is_some() && o.get("prometheus").is_none() {
            self.error(
                &key_path(path, "ui"),
                "`ui` is the web UI of a `prometheus` source; this source has none",
            );
            return (None, None);
        }
        if let Some((v, p)) = o.get("kafka_lag") {
            return self.kafka_lag(&o, v, &p, path);
        }
        for key in ["group", "topics"] {
            if let Some((_, p)) = o.get(key) {
                self.error(&p, format!("`{key}` belongs to a `kafka_lag` source"));
                return (None, None);
            }
        }
        if let Some((v, p)) = o.get("dead_letters") {
            if o.get("prometheus").is_some() || o.get("scrape").is_some() {
                self.error(
                    path,
                    "a source is one of `prometheus`, `scrape` or `dead_letters`",
                );
                return (None, None);
            }
            let export = self.nonempty_string(v, &p).map(|f| self.relative(&f));
            return (
                Some(SourceKind::DeadLetters),
                export.map(|export| Source::DeadLetters { export }),
            );
        }
        match (o.get("prometheus"), o.get("scrape")) {
            (Some((v, p)), None) => {
                let url = self
                    .secret(v, &p)
                    .and_then(|s| self.http_url(s, &p, "prometheus"));
                let ui = match o.get("ui") {
                    Some((v, p)) => match self.nonempty_string(v, &p).map(|u| ui_url(&u)) {
                        Some(Ok(u)) => Some(Some(u)),
                        Some(Err(why)) => {
                            self.error(&p, why);
                            None
                        }
                        None => None,
                    },
                    None => Some(None),
                };
                (
                    Some(SourceKind::Prometheus),
                    url.zip(ui).map(|(url, ui)| Source::Prometheus { url, ui }),
                )
            }
            (None, Some((v, p))) => {
                let url = self
                    .secret(v, &p)
                    .and_then(|s| self.http_url(s, &p, "scrape"));
                (
                    Some(SourceKind::Scrape),
                    url.map(|url| Source::Scrape { url }),
                )
            }
            (Some(_), Some(_)) => {
                self.error(
                    path,
                    "a source is either `prometheus: URL` or `scrape: URL`, not both",
                );
                (None, None)
            }
            (None, None) => {
                self.error(
                    path,
                    "a source needs `prometheus: URL` (a Prometheus server) or `scrape: URL` (a \
                     /metrics endpoint)",
                );
                (None, None)
            }
        }
    }
}

impl Cx<'_> {
    /// `kafka_lag: URL`, `group: NAME`, `topics: [T, ...]`.
    fn kafka_lag(
        &mut self,
        o: &Obj<'_>,
        v: &Value,
        p: &str,
        path: &str,
    ) -> (Option<SourceKind>, Option<Source>) {
        if ["prometheus", "scrape", "dead_letters", "ui"]
            .iter()
            .any(|k| o.get(k).is_some())
        {
            self.error(
                path,
                "a `kafka_lag` source has `group` and `topics`, no other kind's fields",
            );
            return (None, None);
        }
        let url = self.secret(v, p);
        if let Some(url) = &url {
            self.kafka_url(url, p);
        }
        let group = o
            .req(self, "group", "the consumer group whose lag is read")
            .and_then(|(v, p)| self.nonempty_string(v, &p));
        let topics = o
            .req(
                self,
                "topics",
                "the topics whose lag is read, e.g. `[orders]`",
            )
            .and_then(|(v, p)| self.topic_list(v, &p));
        (
            Some(SourceKind::KafkaLag),
            url.zip(group)
                .zip(topics)
                .map(|((url, group), topics)| Source::KafkaLag { url, group, topics }),
        )
    }

    fn topic_list(&mut self, v: &Value, path: &str) -> Option<Vec<String>> {
        let Value::Sequence(items) = v else {
            self.error(
                path,
                format!(
                    "expected a list of topics such as `[orders]`, found {}",
                    describe(v)
                ),
            );
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            out.push(self.nonempty_string(item, &format!("{path}[{i}]"))?);
        }
        if out.is_empty() {
            self.error(path, "name at least one topic");
            return None;
        }
        Some(out)
    }
}

/// A Prometheus UI base URL as pages link to it: `http(s)://host[:port][/path]`, without
/// credentials, query or fragment (it is shown to everyone who reads the console), with no
/// trailing `/`.
fn ui_url(text: &str) -> Result<String, String> {
    let example = "(e.g. `https://prometheus.example.com`)";
    let lower = text.to_ascii_lowercase();
    let Some(rest) = ["http://", "https://"]
        .iter()
        .find_map(|s| lower.starts_with(s).then(|| &text[s.len()..]))
    else {
        return Err(format!(
            "a Prometheus UI URL starts with http:// or https:// {example}: {} does not",
            quote(text)
        ));
    };
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() || authority.contains('@') {
        return Err(format!(
            "a Prometheus UI URL names a host and no credentials (the console shows it to every reader) {example}: {} does not",
            quote(text)
        ));
    }
    if text.contains(['?', '#']) || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "a Prometheus UI URL is a base, without a query, a fragment or spaces {example}: {} is not",
            quote(text)
        ));
    }
    Ok(text.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use crate::plan::compile::test_support::{FULL, errors, lines, ok};
    use crate::plan::model::Source;
    use std::path::PathBuf;

    #[test]
    fn a_prometheus_source_may_name_its_web_ui() {
        let yaml = FULL.replace(
            "prom: { prometheus: \"http://127.0.0.1:9090\" }",
            "prom: { prometheus: \"http://127.0.0.1:9090\", ui: \"https://prom.example.com/\" }",
        );
        assert_ne!(yaml, FULL);
        let c = ok(&yaml);
        assert!(matches!(
            c.plan.sources.get("prom"),
            Some(Source::Prometheus { ui: Some(u), .. }) if u == "https://prom.example.com"
        ));
        for (bad, says) in [
            ("ftp://prom", "starts with http"),
            ("https://user:pw@prom", "no credentials"),
            ("https://prom/?x=1", "without a query"),
        ] {
            let errs = lines(&errors(&yaml.replace("https://prom.example.com/", bad)));
            assert!(
                errs.contains("sources.prom.ui") && errs.contains(says),
                "{bad}: {errs}"
            );
        }
        let scrape = FULL.replace(
            "consumer: { scrape: \"http://127.0.0.1:9464/metrics\" }",
            "consumer: { scrape: \"http://127.0.0.1:9464/metrics\", ui: \"https://x\" }",
        );
        assert_ne!(scrape, FULL);
        let errs = lines(&errors(&scrape));
        assert!(errs.contains("sources.consumer.ui"), "{errs}");
    }

    #[test]
    fn a_dead_letter_export_is_a_source_for_the_drain_gate() {
        let yaml = FULL
            .replace(
                "  consumer: { scrape: \"http://127.0.0.1:9464/metrics\" }",
                "  consumer: { scrape: \"http://127.0.0.1:9464/metrics\" }\n  old_dlq: { dead_letters: orders.dlq.ndjson }",
            )
            .replace(
                "      - { name: old queue empty,",
                "      - { name: old dead letters handled, source: old_dlq, query: open_groups, pass_if: \"== 0\" }\n      - { name: old queue empty,",
            );
        let c = ok(&yaml);
        assert_eq!(
            c.plan.sources.get("old_dlq"),
            Some(&Source::DeadLetters {
                export: PathBuf::from("/etc/qm/orders.dlq.ndjson")
            })
        );
        let bad = yaml.replace("query: open_groups", "query: sum(open)");
        let errs = lines(&errors(&bad));
        assert!(errs.contains("answers open_groups or entries"), "{errs}");
        // Regression: a compare gate on it compiled silently, then held for ever (one number,
        // not a pair); and so did a gate named as a requirement, whose memory it shared.
        let compare = yaml.replace(
            "query: open_groups, pass_if: \"== 0\"",
            "compare: { new: entries, old: entries }",
        );
        assert_ne!(compare, yaml);
        let warned = lines(&ok(&compare).warnings);
        assert!(warned.contains("answers one number"), "{warned}");
        let reserved = yaml.replace("name: old dead letters handled", "name: require_peak");
        assert_ne!(reserved, yaml);
        let warned = lines(&ok(&reserved).warnings);
        assert!(warned.contains("share a \"held since\" mark"), "{warned}");
    }

    #[test]
    fn a_kafka_lag_source_names_its_group_and_topics() {
        let yaml = FULL
            .replace(
                "  consumer: { scrape: \"http://127.0.0.1:9464/metrics\" }",
                "  consumer: { scrape: \"http://127.0.0.1:9464/metrics\" }\n  old_lag: { kafka_lag: \"kafka://127.0.0.1:9092\", group: workers, topics: [orders] }",
            )
            .replace(
                "      - { name: old queue empty,",
                "      - { name: old topic drained, source: old_lag, query: 'kafka_consumergroup_lag{topic=\"orders\"}', pass_if: \"== 0\", for: quiet }\n      - { name: old queue empty,",
            );
        let c = ok(&yaml);
        let Some(Source::KafkaLag { url, group, topics }) = c.plan.sources.get("old_lag") else {
            panic!("old_lag: {:?}", c.plan.sources.get("old_lag"));
        };
        assert_eq!(url.value().unwrap(), "kafka://127.0.0.1:9092");
        assert_eq!(
            (group.as_str(), topics.as_slice()),
            ("workers", &["orders".to_string()][..])
        );
        let errs = lines(&errors(&yaml.replace(
            "query: 'kafka_consumergroup_lag{topic=",
            "query: 'kafka_consumergroup_lag{{topic=",
        )));
        assert!(errs.contains("not a query"), "{errs}");
        let errs = lines(&errors(&yaml.replace(", group: workers", "")));
        assert!(errs.contains("group"), "{errs}");
        let errs = lines(&errors(&yaml.replace("topics: [orders]", "topics: []")));
        assert!(errs.contains("at least one topic"), "{errs}");
        let errs = lines(&errors(&yaml.replace(
            "  consumer: { scrape: \"http://127.0.0.1:9464/metrics\" }",
            "  consumer: { scrape: \"http://127.0.0.1:9464/metrics\", group: x }",
        )));
        assert!(errs.contains("belongs to a `kafka_lag` source"), "{errs}");
    }

    /// Regression (issue 57): `plan check` accepted `?security.protocol=SASL_SSL` (no mechanism)
    /// and an unknown client property in a Kafka URL; both failed only at connect. Now each is
    /// an error with its path and line, and the secret in the URL is not shown.
    #[cfg(feature = "kafka")]
    #[test]
    fn a_kafka_urls_malformed_security_setting_is_refused_with_its_line() {
        let yaml = FULL.replace(
            "  consumer: { scrape: \"http://127.0.0.1:9464/metrics\" }",
            "  consumer: { scrape: \"http://127.0.0.1:9464/metrics\" }\n  old_lag: { kafka_lag: \"kafka://svc:hunter22@127.0.0.1:9093?security.protocol=SASL_SSL\", group: workers, topics: [orders] }",
        );
        let errs = errors(&yaml);
        let e = errs
            .iter()
            .find(|d| d.path == "sources.old_lag.kafka_lag")
            .unwrap_or_else(|| panic!("{}", lines(&errs)));
        assert!(e.message.contains("needs sasl.mechanism"), "{e}");
        assert_eq!(
            e.line,
            crate::plan::compile::test_support::line_of(&yaml, "old_lag:")
        );
        assert!(!lines(&errs).contains("hunter22"), "{}", lines(&errs));

        let unknown = yaml.replace(
            "?security.protocol=SASL_SSL",
            "?security.protocol=SASL_SSL&sasl.mechanism=SCRAM-SHA-512&enable.auto.commit=true",
        );
        let errs = lines(&errors(&unknown));
        assert!(
            errs.contains("unknown parameter \"enable.auto.commit\""),
            "{errs}"
        );
        let fine = yaml.replace(
            "?security.protocol=SASL_SSL",
            "?security.protocol=SASL_SSL&sasl.mechanism=SCRAM-SHA-512",
        );
        let yaml = fine.replace(
            "      - { name: old queue empty,",
            "      - { name: old topic drained, source: old_lag, query: 'kafka_consumergroup_lag{topic=\"orders\"}', pass_if: \"== 0\", for: quiet }\n      - { name: old queue empty,",
        );
        ok(&yaml);
    }
}

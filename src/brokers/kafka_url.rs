//! The Kafka adapter's URL: where the cluster is, how `declare` makes topics, how the clients
//! authenticate (TLS, mTLS, SASL), where keys are placed, and the few client properties a plan
//! may set. Every Kafka use (the adapter, the bridge, `kafka_lag`, dead-letter triage and
//! replay) reads its settings from here, so one URL reaches the cluster the same way everywhere.
//!
//! # Syntax
//! `kafka://[USER:PASSWORD@]host:port[,host:port...][?NAME=VALUE&...]` (or the bare list).
//! The userinfo is the SASL username and password (percent-decoded). The parameters:
//!
//! | name | values |
//! | --- | --- |
//! | `partitions`, `replication` | a positive number: what `declare` asks for a new topic |
//! | `security.protocol` | `PLAINTEXT` (default), `SSL`, `SASL_PLAINTEXT`, `SASL_SSL` |
//! | `sasl.mechanism` | `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER` |
//! | `sasl.username`, `sasl.password` | instead of the userinfo |
//! | `ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location` | PEM files |
//! | `ssl.key.password` | the client key's passphrase |
//! | `ssl.endpoint.identification.algorithm` | `https` (default: the host name is checked), `none` |
//! | `enable.sasl.oauthbearer.unsecure.jwt` | `true`/`false`: OAUTHBEARER with an unsigned token |
//! | `sasl.oauthbearer.config` | the unsigned token's claims, e.g. `principal=svc` |
//! | `partitioner` | `murmur2` (default: Java's placement of keys), `crc32` (librdkafka's) |
//! | `partition.assignment.strategy` | `range`, `roundrobin` (comma list; eager protocols only) |
//! | `group.instance.id` | static membership: one id per member |
//! | `isolation.level` | `read_committed` (default), `read_uncommitted` |
//! | `compression.type` | `none`, `gzip`, `snappy`, `lz4` |
//! | `client.rack` | the rack id for fetch-from-follower |
//! | `max.poll.interval.ms` | a positive number |
//!
//! Anything else is refused with the list of names. The URL is a secret as a whole: shown only
//! through the one redaction rule (its userinfo and query masked).

use std::collections::BTreeMap;
use std::fmt;

/// Where keys are placed: which hash of the record key picks the partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Partitioner {
    /// murmur2 of the key, as Java, Spring and Kafka Streams producers place keys
    /// (librdkafka's `murmur2_random`: the same partition as Java for every non-null key).
    #[default]
    Murmur2,
    /// CRC32 of the key (librdkafka's `consistent_random`, its own default).
    Crc32,
}

impl Partitioner {
    /// librdkafka's name for it.
    pub fn librdkafka(self) -> &'static str {
        match self {
            Partitioner::Murmur2 => "murmur2_random",
            Partitioner::Crc32 => "consistent_random",
        }
    }
}

/// Where a Kafka cluster is and how every client of it connects, from the adapter's URL.
#[derive(Clone, PartialEq, Eq)]
pub struct KafkaUrl {
    /// `host:port,host:port`.
    pub bootstrap: String,
    /// Partitions of a topic `declare` creates.
    pub partitions: i32,
    /// Replicas of a topic `declare` creates; `None`: the broker's default.
    pub replication: Option<i32>,
    /// How the producer places keys.
    pub partitioner: Partitioner,
    /// librdkafka properties every client of this URL gets: security and the allowlisted ones.
    pub client: BTreeMap<String, String>,
}

/// Properties whose value is a secret: never in `Debug`.
const SECRET_PROPERTIES: [&str; 2] = ["sasl.password", "ssl.key.password"];

impl fmt::Debug for KafkaUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let client: BTreeMap<&str, &str> = self
            .client
            .iter()
            .map(|(k, v)| {
                let shown = if SECRET_PROPERTIES.contains(&k.as_str()) {
                    crate::redact::MASK
                } else {
                    v.as_str()
                };
                (k.as_str(), shown)
            })
            .collect();
        f.debug_struct("KafkaUrl")
            .field("bootstrap", &self.bootstrap)
            .field("partitions", &self.partitions)
            .field("replication", &self.replication)
            .field("partitioner", &self.partitioner)
            .field("client", &client)
            .finish()
    }
}

/// What a parameter's value may be.
enum Rule {
    OneOf(&'static [&'static str]),
    ListOf(&'static [&'static str]),
    Positive,
    NonEmpty,
}

/// The parameters passed to librdkafka as they are (after their check).
const CLIENT: &[(&str, Rule)] = &[
    (
        "security.protocol",
        Rule::OneOf(&["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]),
    ),
    (
        "sasl.mechanism",
        Rule::OneOf(&["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]),
    ),
    ("sasl.username", Rule::NonEmpty),
    ("sasl.password", Rule::NonEmpty),
    ("ssl.ca.location", Rule::NonEmpty),
    ("ssl.certificate.location", Rule::NonEmpty),
    ("ssl.key.location", Rule::NonEmpty),
    ("ssl.key.password", Rule::NonEmpty),
    (
        "ssl.endpoint.identification.algorithm",
        Rule::OneOf(&["https", "none"]),
    ),
    (
        "enable.sasl.oauthbearer.unsecure.jwt",
        Rule::OneOf(&["true", "false"]),
    ),
    ("sasl.oauthbearer.config", Rule::NonEmpty),
    (
        "partition.assignment.strategy",
        // Eager only: the consumer's rebalance handling revokes and assigns whole sets.
        Rule::ListOf(&["range", "roundrobin"]),
    ),
    ("group.instance.id", Rule::NonEmpty),
    (
        "isolation.level",
        Rule::OneOf(&["read_committed", "read_uncommitted"]),
    ),
    (
        "compression.type",
        Rule::OneOf(&["none", "gzip", "snappy", "lz4"]),
    ),
    ("client.rack", Rule::NonEmpty),
];

/// Every parameter name the URL accepts, for the error that refuses another.
fn names() -> String {
    let mut all = vec![
        "partitions",
        "replication",
        "partitioner",
        "max.poll.interval.ms",
    ];
    all.extend(CLIENT.iter().map(|(n, _)| *n));
    all.join(", ")
}

fn check(name: &str, value: &str, rule: &Rule) -> Result<String, String> {
    let ok = match rule {
        Rule::OneOf(allowed) => allowed
            .iter()
            .find(|a| a.eq_ignore_ascii_case(value))
            .map(|a| a.to_string()),
        Rule::ListOf(allowed) => {
            let items: Vec<&str> = value.split(',').map(str::trim).collect();
            items
                .iter()
                .all(|i| allowed.contains(i))
                .then(|| items.join(","))
        }
        Rule::Positive => value
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .map(|n| n.to_string()),
        Rule::NonEmpty => (!value.trim().is_empty()).then(|| value.to_string()),
    };
    ok.ok_or_else(|| match rule {
        Rule::OneOf(allowed) => format!("{name}: expected one of {}", allowed.join(", ")),
        Rule::ListOf(allowed) => format!("{name}: expected a comma list of {}", allowed.join(", ")),
        Rule::Positive => format!("{name}: expected a positive number"),
        // The value may be a secret: never quoted.
        Rule::NonEmpty => format!("{name}: expected a value"),
    })
}

/// `%XX` escapes decoded (a userinfo's or a value's reserved characters).
fn decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("a malformed %-escape")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "a %-escape that is not UTF-8".to_string())
}

impl KafkaUrl {
    /// Reads a Kafka URL (see the module documentation).
    ///
    /// # Errors
    /// A sentence (without the URL, without a secret value) when the list of brokers is empty,
    /// a parameter is unknown or its value malformed, or the security settings do not fit
    /// together (credentials without a SASL protocol, SASL without a mechanism, a client
    /// certificate without its key).
    pub fn parse(url: &str) -> Result<KafkaUrl, String> {
        let scheme = url
            .get(..8)
            .is_some_and(|s| s.eq_ignore_ascii_case("kafka://"));
        let rest = if scheme { &url[8..] } else { url };
        if rest.contains("://") {
            return Err("expected a kafka:// URL".to_string());
        }
        let (authority, query) = rest.split_once('?').unwrap_or((rest, ""));
        let authority = authority.trim_end_matches('/');
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        if hosts.is_empty() || hosts.contains('/') {
            return Err(
                "expected kafka://[user:password@]host:port[,host:port...][?name=value&...]"
                    .to_string(),
            );
        }
        let mut out = KafkaUrl {
            bootstrap: hosts.to_string(),
            partitions: 3,
            replication: None,
            partitioner: Partitioner::default(),
            client: BTreeMap::new(),
        };
        if let Some(userinfo) = userinfo {
            let (user, password) = userinfo
                .split_once(':')
                .ok_or("the userinfo needs user:password (the SASL credentials)")?;
            let user = decode(user).map_err(|e| format!("the user name: {e}"))?;
            let password = decode(password).map_err(|e| format!("the password: {e}"))?;
            if user.is_empty() || password.is_empty() {
                return Err("the userinfo needs a user and a password".to_string());
            }
            out.client.insert("sasl.username".into(), user);
            out.client.insert("sasl.password".into(), password);
        }
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode(value).map_err(|e| format!("{name}: {e}"))?;
            out.set(name, &value)?;
        }
        let secret = SECRET_PROPERTIES
            .iter()
            .any(|k| out.client.contains_key(*k));
        if secret && !scheme {
            // Only a URL with its scheme is masked where it is shown (the one redaction rule).
            return Err("a password needs the kafka:// form of the URL".to_string());
        }
        out.check_security()?;
        Ok(out)
    }

    fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        match name {
            "partitions" | "replication" => {
                let n = check(name, value, &Rule::Positive)?;
                let n: i32 = n.parse().map_err(|_| format!("{name}: too large"))?;
                if name == "partitions" {
                    self.partitions = n;
                } else {
                    self.replication = Some(n);
                }
            }
            "partitioner" => {
                self.partitioner =
                    match check(name, value, &Rule::OneOf(&["murmur2", "crc32"]))?.as_str() {
                        "crc32" => Partitioner::Crc32,
                        _ => Partitioner::Murmur2,
                    };
            }
            "max.poll.interval.ms" => {
                let v = check(name, value, &Rule::Positive)?;
                self.client.insert(name.into(), v);
            }
            _ => {
                let name = if name == "sasl.mechanisms" {
                    "sasl.mechanism"
                } else {
                    name
                };
                let Some((_, rule)) = CLIENT.iter().find(|(n, _)| *n == name) else {
                    return Err(format!("unknown parameter {name:?} (one of: {})", names()));
                };
                let v = check(name, value, rule)?;
                self.client.insert(name.into(), v);
            }
        }
        Ok(())
    }

    fn check_security(&self) -> Result<(), String> {
        let get = |k: &str| self.client.get(k).map(String::as_str);
        let protocol = get("security.protocol").unwrap_or("PLAINTEXT");
        let sasl = protocol.starts_with("SASL_");
        let has_credentials = get("sasl.username").is_some() || get("sasl.password").is_some();
        if has_credentials && !sasl {
            return Err(
                "SASL credentials need security.protocol=SASL_SSL (or SASL_PLAINTEXT)".to_string(),
            );
        }
        if sasl {
            let mechanism = get("sasl.mechanism").ok_or(
                "security.protocol=SASL_* needs sasl.mechanism (PLAIN, SCRAM-SHA-256, \
                 SCRAM-SHA-512, OAUTHBEARER)",
            )?;
            let password_mechanism = mechanism != "OAUTHBEARER";
            if password_mechanism
                && (get("sasl.username").is_none() || get("sasl.password").is_none())
            {
                return Err(format!(
                    "sasl.mechanism={mechanism} needs a user and a password (user:password@ \
                     or sasl.username and sasl.password)"
                ));
            }
            if !password_mechanism && get("enable.sasl.oauthbearer.unsecure.jwt") != Some("true") {
                return Err("sasl.mechanism=OAUTHBEARER: only unsigned tokens \
                     (enable.sasl.oauthbearer.unsecure.jwt=true) in this build; OIDC client \
                     credentials need librdkafka with curl"
                    .to_string());
            }
        }
        if get("ssl.certificate.location").is_some() != get("ssl.key.location").is_some() {
            return Err(
                "a client certificate needs both ssl.certificate.location and ssl.key.location"
                    .to_string(),
            );
        }
        let tls_setting = self.client.keys().any(|k| k.starts_with("ssl."));
        if tls_setting && !protocol.ends_with("SSL") {
            return Err("ssl.* settings need security.protocol=SSL or SASL_SSL".to_string());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_the_brokers_and_how_topics_are_made() {
        let u = KafkaUrl::parse("kafka://a:9092,b:9092?partitions=6&replication=3").unwrap();
        assert_eq!(u.bootstrap, "a:9092,b:9092");
        assert_eq!((u.partitions, u.replication), (6, Some(3)));
        assert_eq!(
            u.partitioner,
            Partitioner::Murmur2,
            "Java's placement unless told"
        );
        let u = KafkaUrl::parse("127.0.0.1:9092").unwrap();
        assert_eq!(
            (u.bootstrap.as_str(), u.partitions, u.replication),
            ("127.0.0.1:9092", 3, None)
        );
        assert!(KafkaUrl::parse("kafka://").is_err());
        assert!(KafkaUrl::parse("nats://u:p@a:4222").is_err());
        assert!(KafkaUrl::parse("kafka://a:9092?partitions=0").is_err());
        assert!(KafkaUrl::parse("kafka://a:9092?acks=1").is_err());
        let u = KafkaUrl::parse("kafka://a:9092?partitioner=crc32").unwrap();
        assert_eq!(u.partitioner.librdkafka(), "consistent_random");
    }

    /// Regression (issue 57): `?security.protocol=SASL_SSL` was refused only at connect, with
    /// "expected a positive number", and `kafka://user:pw@...` with "no credentials".
    #[test]
    fn sasl_ssl_with_credentials_in_the_userinfo_is_read() {
        let u = KafkaUrl::parse(
            "kafka://svc:p%40ss@k1:9093?security.protocol=SASL_SSL&sasl.mechanism=SCRAM-SHA-512\
             &ssl.ca.location=/etc/ca.pem",
        )
        .unwrap();
        assert_eq!(u.bootstrap, "k1:9093");
        assert_eq!(u.client["sasl.username"], "svc");
        assert_eq!(u.client["sasl.password"], "p@ss");
        assert_eq!(u.client["security.protocol"], "SASL_SSL");
        assert_eq!(u.client["sasl.mechanism"], "SCRAM-SHA-512");
        let shown = format!("{u:?}");
        assert!(!shown.contains("p@ss"), "{shown}");
    }

    #[test]
    fn a_malformed_or_incomplete_security_setting_is_refused() {
        for (url, says) in [
            ("kafka://a:9092?security.protocol=TLS", "expected one of"),
            ("kafka://u:p@a:9092", "need security.protocol=SASL_SSL"),
            (
                "kafka://a:9092?security.protocol=SASL_SSL",
                "needs sasl.mechanism",
            ),
            (
                "kafka://a:9092?security.protocol=SASL_SSL&sasl.mechanism=PLAIN",
                "needs a user and a password",
            ),
            (
                "kafka://a:9092?security.protocol=SASL_SSL&sasl.mechanism=GSSAPI",
                "expected one of",
            ),
            (
                "kafka://a:9092?security.protocol=SSL&ssl.certificate.location=/c.pem",
                "both ssl.certificate.location and ssl.key.location",
            ),
            (
                "kafka://a:9092?ssl.ca.location=/ca.pem",
                "need security.protocol=SSL",
            ),
            (
                "kafka://a:9092?security.protocol=SASL_SSL&sasl.mechanism=OAUTHBEARER",
                "only unsigned tokens",
            ),
            ("kafka://a:9092?isolation.level=dirty", "expected one of"),
            ("kafka://a:9092?compression.type=zstd", "expected one of"),
            (
                "kafka://a:9092?partitioner=fnv",
                "expected one of murmur2, crc32",
            ),
            ("kafka://a:9092?sasl.password=%zz", "malformed %-escape"),
            (
                "kafka://a:9092?enable.auto.commit=true",
                "unknown parameter",
            ),
            (
                "u:p@a:9092?security.protocol=SASL_SSL&sasl.mechanism=PLAIN",
                "needs the kafka:// form",
            ),
            (
                "kafka://a:9092?partition.assignment.strategy=cooperative-sticky",
                "comma list of range, roundrobin",
            ),
        ] {
            let e = KafkaUrl::parse(url).expect_err(url);
            assert!(e.contains(says), "{url}: {e}");
        }
        let e = KafkaUrl::parse(
            "kafka://a:9092?security.protocol=SASL_SSL&sasl.mechanism=PLAIN&sasl.username=u\
             &sasl.password=",
        )
        .unwrap_err();
        assert!(e.contains("sasl.password: expected a value"), "{e}");
    }

    #[test]
    fn the_allowlisted_client_properties_reach_every_client() {
        let u = KafkaUrl::parse(
            "kafka://a:9092?partition.assignment.strategy=roundrobin,range\
             &group.instance.id=bridge-1&isolation.level=read_committed&compression.type=lz4\
             &client.rack=r1&max.poll.interval.ms=600000",
        )
        .unwrap();
        assert_eq!(u.client.len(), 6, "{u:?}");
        assert_eq!(u.client["compression.type"], "lz4");
    }
}

//! A bench for the `migrate dlq` tests on each store backend: SQLite (the bench's file, always)
//! or PostgreSQL (a database of its own on the server of `QM_TEST_POSTGRES_URL`), and
//! [`on_both!`](crate::on_both) to write a scenario once for both.

use super::{Bench, Postgres, Run};

/// A bench whose state store is SQLite (the bench's file) or a fresh PostgreSQL database.
pub struct DlqBench {
    pub b: Bench,
    /// The state URL every command gets (`MIGRATE_STATE`).
    pub state: String,
    pg: Option<Postgres>,
}

impl DlqBench {
    pub fn sqlite() -> DlqBench {
        let b = Bench::new();
        let state = b.path("state.db").display().to_string();
        DlqBench { b, state, pg: None }
    }

    pub fn postgres(tag: &str) -> DlqBench {
        let pg = Postgres::fresh(tag);
        DlqBench {
            b: Bench::new(),
            state: pg.url.clone(),
            pg: Some(pg),
        }
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.b.run_env(args, &[("MIGRATE_STATE", &self.state)])
    }

    pub fn ok(&self, args: &[&str], code: i32) -> Run {
        let r = self.run(args);
        assert_eq!(
            r.code,
            code,
            "[{}] migrate {args:?} exited {} (want {code})\nstdout:\n{}\nstderr:\n{}",
            self.kind(),
            r.code,
            r.stdout,
            r.stderr
        );
        r
    }

    /// The bench with the plan `yaml` (what `migrate init` reads from `self.b.plan`).
    pub fn with_plan(self, yaml: &str) -> DlqBench {
        std::fs::write(&self.b.plan, yaml).unwrap();
        self
    }

    /// `migrate init` of the bench's plan.
    pub fn init(&self) {
        self.ok(&["init", self.b.plan.to_str().unwrap()], 0);
    }

    /// A file in the bench's directory.
    pub fn path(&self, name: &str) -> std::path::PathBuf {
        self.b.path(name)
    }

    /// The `migrate ARGS` command of [`DlqBench::run`], not started.
    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let mut c = self.b.command(args);
        c.env("MIGRATE_STATE", &self.state);
        c
    }

    pub fn kind(&self) -> &'static str {
        if self.pg.is_some() {
            "postgres"
        } else {
            "sqlite"
        }
    }

    /// Run SQL on the store behind the command's back (the trigger of a store that fails).
    pub fn raw(&self, sql: &str) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            use sqlx::Executor;
            let sql = sqlx::AssertSqlSafe(sql.to_string());
            if self.pg.is_some() {
                let pool = sqlx::PgPool::connect(&self.state).await.unwrap();
                pool.execute(sql).await.unwrap();
                pool.close().await;
            } else {
                let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", self.state))
                    .await
                    .unwrap();
                pool.execute(sql).await.unwrap();
                pool.close().await;
            }
        });
    }

    /// Make the store refuse `op` (INSERT or UPDATE) on the replay ledger; `refuse(op, false)`
    /// lifts it.
    pub fn refuse(&self, op: &str, on: bool) {
        let name = format!("refuse_{}", op.to_lowercase());
        let sql = match (self.pg.is_some(), on) {
            (true, true) => format!(
                "CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 RAISE EXCEPTION 'refused by the test'; END $$; \
                 CREATE TRIGGER {name} BEFORE {op} ON dlq_replays \
                 FOR EACH ROW EXECUTE FUNCTION {name}()"
            ),
            (true, false) => format!("DROP TRIGGER {name} ON dlq_replays"),
            (false, true) => format!(
                "CREATE TRIGGER {name} BEFORE {op} ON dlq_replays \
                 BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            ),
            (false, false) => format!("DROP TRIGGER {name}"),
        };
        self.raw(&sql);
    }

    pub fn write(&self, name: &str, lines: &[String]) {
        std::fs::write(self.b.path(name), lines.join("\n") + "\n").unwrap();
    }
}

/// The old broker's line of plans/local.yaml, for a test to put its own broker in.
pub const OLD_BROKER_LINE: &str = "old: { name: old, kind: amqp, url: \"amqp://127.0.0.1:5672/%2f\", queue: local, dead_letter: local.dlq }";
/// The new broker's line of plans/local.yaml.
pub const NEW_BROKER_LINE: &str =
    "new: { name: new, kind: nats, url: \"nats://127.0.0.1:4222\", stream: LOCAL }";

impl DlqBench {
    /// plans/local.yaml with RabbitMQ `old_queue` (broker `rabbitmq`) as the old side, `new_line`
    /// as the new one (broker `nats`) and the bridge's key in the JSON field `orderId`,
    /// initialised and moved to `slices[1]`: 4 of its 8 slices on the new side.
    pub fn half_migrated(self, amqp: &str, old_queue: &str, new_line: &str) -> DlqBench {
        let plan = include_str!("../../plans/local.yaml")
            .replace(
                OLD_BROKER_LINE,
                &format!(
                    "old: {{ name: rabbitmq, kind: rabbitmq, url: \"{amqp}\", queue: {old_queue} }}"
                ),
            )
            .replace(NEW_BROKER_LINE, new_line)
            + &format!("\nbridge: {{ ingress: {old_queue}.ingress, key: {{ json: orderId }} }}\n");
        assert!(
            plan.contains(old_queue) && plan.contains(new_line),
            "the plan's broker lines changed"
        );
        let bench = self.with_plan(&preflight_waived(&plan));
        bench.init();
        bench.ok(&["advance", "local"], 0);
        for _ in 0..3 {
            bench.ok(
                &["advance", "local", "--force", "--reason", "replay test"],
                0,
            );
        }
        let routing = bench.ok(&["routing", "local"], 0).json();
        assert_eq!(
            (
                routing["state"].as_str(),
                routing["slices_migrated"].as_u64()
            ),
            (Some("slices"), Some(4)),
            "{routing}"
        );
        bench
    }
}

/// `scenario` on a bench whose store is `store` (built here, outside the runtime the scenario
/// runs on).
pub fn on_store<F: std::future::Future<Output = ()>>(
    store: impl FnOnce() -> DlqBench,
    scenario: impl FnOnce(DlqBench) -> F,
) {
    let d = store();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(scenario(d));
}

/// Take (and ack, as consumer group `group`) what arrives on the RabbitMQ queue `queue` until
/// `want` messages came or 10 s passed, then 300 ms more (to see any extra one).
#[cfg(feature = "brokers")]
pub async fn drain_rabbitmq(
    adapter: &queue_migrate::brokers::Adapter,
    queue: &str,
    group: &str,
    want: usize,
) -> Vec<queue_migrate::brokers::Message> {
    use std::time::{Duration, Instant};
    let mut sub = adapter
        .subscribe(
            queue,
            &queue_migrate::brokers::SubscribeOptions::group(group),
        )
        .await
        .unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let wait = if seen.len() >= want {
            Duration::from_millis(300)
        } else {
            deadline.saturating_duration_since(Instant::now())
        };
        match tokio::time::timeout(wait, sub.next()).await {
            Ok(Ok(Some(d))) => {
                seen.push(d.message.clone());
                d.ack().await.unwrap();
            }
            Ok(Ok(None)) | Err(_) => return seen,
            Ok(Err(e)) => panic!("{e}"),
        }
    }
}

impl Drop for DlqBench {
    fn drop(&mut self) {
        if let Some(pg) = self.pg.take()
            && !std::thread::panicking()
        {
            // On a thread of its own: a bench may be dropped inside an async test's runtime.
            let _ = std::thread::spawn(move || pg.drop_database()).join();
        }
    }
}

/// `$name::sqlite` always, `$name::postgres` when asked (`--include-ignored`, with the URL).
#[macro_export]
macro_rules! on_both {
    ($name:ident, $tag:literal) => {
        mod $name {
            #[test]
            fn sqlite() {
                super::$name($crate::common::dlq_bench::DlqBench::sqlite());
            }

            #[test]
            #[ignore = "needs QM_TEST_POSTGRES_URL"]
            fn postgres() {
                super::$name($crate::common::dlq_bench::DlqBench::postgres($tag));
            }
        }
    };
}

#[cfg(feature = "controller")]
/// `plan` (plans/local.yaml with a test's own broker lines) with its `preflight:` section made for
/// the brokers it names now: every check of each side's kind waived. A waiver names a check of
/// one kind, so the local plan's (RabbitMQ, NATS) do not compile beside another broker; the tests
/// that put one in test what the broker carries, not its durability (tests/integration/brokers/
/// preflight_real.rs does).
#[cfg(feature = "controller")]
pub fn preflight_waived(plan: &str) -> String {
    use queue_migrate::preflight::{Check, Kind};
    let kind_of = |side: &str| {
        let opening = format!("{side}: {{");
        plan.lines()
            .map(str::trim_start)
            .find(|l| l.starts_with(&opening) && l.contains("kind: "))
            .and_then(|l| l.split("kind: ").nth(1))
            .and_then(|rest| rest.split([',', ' ', '}']).next())
            .and_then(Kind::of_plan_kind)
            .unwrap_or_else(|| panic!("no broker kind on the {side} side of the plan"))
    };
    let mut out = String::new();
    let mut in_preflight = false;
    for line in plan.lines() {
        if line.starts_with("preflight:") {
            in_preflight = true;
            continue;
        }
        if in_preflight && (line.is_empty() || line.starts_with([' ', '#'])) {
            continue;
        }
        in_preflight = false;
        out.push_str(line);
        out.push('\n');
    }
    out.push_str("\npreflight:\n");
    for side in ["old", "new"] {
        out.push_str(&format!("  {side}:\n    waive:\n"));
        for check in Check::of_kind(kind_of(side)) {
            out.push_str(&format!(
                "      - {{ check: {check}, reason: \"a test's own broker\" }}\n"
            ));
        }
    }
    out
}

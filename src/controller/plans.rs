//! Compiled plans kept between ticks, so that a daemon does not recompile every stored plan's
//! YAML at every tick.
//!
//! An entry is used only while everything its compilation read is unchanged: the stored plan
//! text, the plan's path (relative files are read from its directory), and every environment
//! variable and `file:` secret the compiler asked the resolver for (each is asked again and
//! compared; a secret file that changed recompiles, as it would have without the cache). A `file:`
//! secret whose stamp ([`Resolve::file_stamp`]: size, times, inode, read without opening it) is
//! unchanged is not read again: a daemon whose descriptors a flood of connections used up keeps
//! its plans, and so its guards. A plan that does not compile is never kept: its errors come back
//! at every tick.

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::machine::Ladder;
use crate::plan::{self, Diagnostic, FileStamp, Plan, Resolve, SecretsMode};
use crate::store::MigrationRecord;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        // The data are only ever replaced whole: a panic elsewhere leaves them usable.
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// What one compilation read through its resolver.
#[derive(Debug, Default)]
struct Inputs {
    env: Vec<(String, Option<String>)>,
    /// Each file read, its stamp just before, and what reading it gave.
    files: Vec<(PathBuf, Option<FileStamp>, Result<String, String>)>,
}

impl Inputs {
    fn unchanged(&self, resolve: &dyn Resolve) -> bool {
        self.env.iter().all(|(name, v)| resolve.env(name) == *v)
            && self.files.iter().all(|(path, stamp, content)| {
                let same_stamp = stamp
                    .as_ref()
                    .is_some_and(|s| resolve.file_stamp(path).as_ref() == Some(s));
                same_stamp || resolve.read_file(path) == *content
            })
    }
}

/// A resolver that notes what it was asked and answered.
struct Recording<'a> {
    inner: &'a dyn Resolve,
    seen: Mutex<Inputs>,
}

impl Resolve for Recording<'_> {
    fn env(&self, name: &str) -> Option<String> {
        let v = self.inner.env(name);
        lock(&self.seen).env.push((name.to_string(), v.clone()));
        v
    }

    fn read_file(&self, path: &Path) -> Result<String, String> {
        // Before reading: a change made during the read shows at the next comparison.
        let stamp = self.inner.file_stamp(path);
        let content = self.inner.read_file(path);
        lock(&self.seen)
            .files
            .push((path.to_path_buf(), stamp, content.clone()));
        content
    }

    fn file_stamp(&self, path: &Path) -> Option<FileStamp> {
        self.inner.file_stamp(path)
    }
}

/// Where a plan file is, as a migration stores it (`plan_path`) and as its relative paths
/// (`routing.file`, `file:` secrets, exports) resolve: `path` made absolute against the working
/// directory, with its `.` and `..` folded, so that the same file named from any directory
/// (`plans/x.yaml`, `../ops/plans/x.yaml`, `/srv/ops/plans/x.yaml`) is the same location and
/// its relative paths the same paths.
///
/// A `..` after a symbolic link is kept: the system resolves it from the link's target, not
/// from the directory holding the link, so folding it by text would name another directory
/// than the one the file is read from.
pub fn plan_location(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for part in absolute.components() {
        match part {
            Component::CurDir => {}
            // `..` at the root is the root (kept only on a path left relative).
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) if !is_symlink(&out) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(part),
            },
            _ => out.push(part),
        }
    }
    out
}

/// Whether `path` names a symbolic link (one that cannot be read is taken as none).
fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// The stored plan of `record` compiled afresh: its text, with relative paths read from the
/// directory of the file it was stored from.
///
/// # Errors
/// The plan does not compile.
pub fn compile_stored(
    record: &MigrationRecord,
    resolve: &dyn Resolve,
    secrets: SecretsMode,
) -> Result<plan::Compiled, Vec<Diagnostic>> {
    // Folded as a location stored now is (one stored with `..` by an older version resolves
    // its relative paths as the same file applied again does).
    let location = plan_location(Path::new(&record.plan_path));
    let dir = location.parent().map(Path::to_path_buf);
    plan::compile_with_secrets_mode(&record.plan_yaml, dir.as_deref(), resolve, secrets)
}

#[derive(Debug)]
struct Entry {
    plan_yaml: String,
    plan_path: String,
    secrets: SecretsMode,
    inputs: Inputs,
    plan: Plan,
    ladder: Ladder,
}

/// Compiled plans by migration name.
#[derive(Debug, Default)]
pub struct PlanCache {
    entries: Mutex<HashMap<String, Arc<Entry>>>,
}

impl PlanCache {
    /// The routing document of `record` under its stored plan (a plan applied since it was last
    /// asked is compiled and used from then on), as [`crate::controller::publish::document`].
    ///
    /// # Errors
    /// The stored plan does not compile.
    pub fn document(
        &self,
        record: &MigrationRecord,
        resolve: &dyn Resolve,
        secrets: SecretsMode,
    ) -> Result<crate::routing::RoutingDocument, Vec<Diagnostic>> {
        let (plan, _) = self.compile(record, resolve, secrets)?;
        Ok(crate::controller::publish::document(&plan, record))
    }

    /// The stored plan of `record` compiled under `resolve` with `secrets`: the kept one while
    /// nothing it read changed, else compiled again (and kept if it compiles).
    ///
    /// # Errors
    /// The plan does not compile.
    pub fn compile(
        &self,
        record: &MigrationRecord,
        resolve: &dyn Resolve,
        secrets: SecretsMode,
    ) -> Result<(Plan, Ladder), Vec<Diagnostic>> {
        let kept = lock(&self.entries).get(&record.name).cloned();
        if let Some(e) = kept
            && e.plan_yaml == record.plan_yaml
            && e.plan_path == record.plan_path
            && e.secrets == secrets
            && e.inputs.unchanged(resolve)
        {
            return Ok((e.plan.clone(), e.ladder.clone()));
        }
        let recording = Recording {
            inner: resolve,
            seen: Mutex::default(),
        };
        let compiled = compile_stored(record, &recording, secrets);
        let inputs = std::mem::take(&mut *lock(&recording.seen));
        match compiled {
            Ok(c) => {
                let ladder = Ladder::of(&c.plan);
                let entry = Entry {
                    plan_yaml: record.plan_yaml.clone(),
                    plan_path: record.plan_path.clone(),
                    secrets,
                    inputs,
                    plan: c.plan,
                    ladder,
                };
                let out = (entry.plan.clone(), entry.ladder.clone());
                lock(&self.entries).insert(record.name.clone(), Arc::new(entry));
                Ok(out)
            }
            Err(diags) => {
                lock(&self.entries).remove(&record.name);
                Err(diags)
            }
        }
    }

    /// Forget the plans of migrations not in `names` (gone from the store).
    pub fn retain(&self, names: &[String]) {
        let names: HashSet<&str> = names.iter().map(String::as_str).collect();
        lock(&self.entries).retain(|name, _| names.contains(name.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: `..` was folded by text, so `current/../plans/x.yaml` with `current` a
    /// link to `rel/42` was stored (and its relative paths resolved) beside `current` while the
    /// file read was `rel/plans/x.yaml`.
    #[cfg(unix)]
    #[test]
    fn a_plan_location_keeps_a_dot_dot_after_a_symbolic_link() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("rel/42")).unwrap();
        std::fs::create_dir_all(root.join("rel/plans")).unwrap();
        std::fs::write(root.join("rel/plans/x.yaml"), "from rel").unwrap();
        std::os::unix::fs::symlink(root.join("rel/42"), root.join("current")).unwrap();
        let named = root.join("current/../plans/x.yaml");
        let location = plan_location(&named);
        assert_eq!(
            std::fs::read_to_string(&location).ok().as_deref(),
            Some("from rel"),
            "{} must name the file the system reads",
            location.display()
        );
        assert_eq!(
            location
                .parent()
                .map(std::fs::canonicalize)
                .transpose()
                .unwrap(),
            Some(std::fs::canonicalize(root.join("rel/plans")).unwrap()),
            "relative paths resolve next to the file read"
        );
        // A `..` after an ordinary directory is still folded.
        let plain = plan_location(&root.join("rel/42/../plans/x.yaml"));
        assert_eq!(
            plain,
            std::path::absolute(root.join("rel/plans/x.yaml")).unwrap()
        );
    }

    #[test]
    fn a_plan_location_is_absolute_with_dots_folded() {
        let at = |p: &str| plan_location(Path::new(p));
        assert_eq!(
            at("/srv/ops/../ops/./plans/x.yaml"),
            Path::new("/srv/ops/plans/x.yaml")
        );
        assert_eq!(at("/../x.yaml"), Path::new("/x.yaml"));
        let cwd = std::env::current_dir().unwrap();
        let name = cwd.file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(at(&format!("../{name}/x.yaml")), cwd.join("x.yaml"));
        assert_eq!(at("x.yaml"), cwd.join("x.yaml"));
    }
    use crate::machine::State;

    /// A resolver whose answers the test changes, counting what it is asked.
    #[derive(Default)]
    struct Env {
        vars: Mutex<HashMap<String, String>>,
        asked: Mutex<usize>,
    }

    impl Resolve for Env {
        fn env(&self, name: &str) -> Option<String> {
            *lock(&self.asked) += 1;
            lock(&self.vars).get(name).cloned()
        }
        fn read_file(&self, path: &Path) -> Result<String, String> {
            Err(format!("no file {}", path.display()))
        }
    }

    fn record(yaml: &str) -> MigrationRecord {
        MigrationRecord {
            name: "m".into(),
            plan_yaml: yaml.into(),
            plan_path: "/nowhere/plan.yaml".into(),
            plan_hash: String::new(),
            state: State::Planned,
            paused: false,
            version: 1,
            generation: 1,
            published_generation: 1,
            publish_error: None,
            entered_at_ms: 0,
            updated_at_ms: 0,
            created_at_ms: 0,
        }
    }

    const PLAN: &str = include_str!("../../plans/local.yaml");

    fn env() -> Env {
        let env = Env::default();
        for (k, v) in [
            ("QM_PROM_URL", "http://127.0.0.1:1"),
            ("QM_SCRAPE_URL", "http://127.0.0.1:2/metrics"),
        ] {
            lock(&env.vars).insert(k.into(), v.into());
        }
        env
    }

    fn scrape_url(plan: &Plan) -> Option<String> {
        match plan.sources.get("app") {
            Some(plan::Source::Scrape { url }) => url.value().ok().map(str::to_string),
            _ => None,
        }
    }

    /// Regression: a running bridge built every routing document from the plan it read at
    /// start, so after `migrate plan apply` changed a later step it routed that step's keys
    /// by the old plan while producers followed the new one.
    #[test]
    fn documents_follow_a_plan_applied_since() {
        let plans = PlanCache::default();
        let mut rec = record(PLAN);
        rec.state = State::Slices(1);
        let doc = plans.document(&rec, &env(), SecretsMode::Required).unwrap();
        assert_eq!(doc.slices_migrated, 4);
        rec.plan_yaml = PLAN.replace("steps: [1, 4, 8]", "steps: [1, 2, 4, 8]");
        assert_ne!(rec.plan_yaml, PLAN);
        let doc = plans.document(&rec, &env(), SecretsMode::Required).unwrap();
        assert_eq!(doc.slices_migrated, 2);
    }

    #[test]
    fn a_plan_kept_with_deferred_secrets_is_not_given_to_a_strict_caller() {
        let env = Env::default();
        let cache = PlanCache::default();
        let deferred = cache.compile(&record(PLAN), &env, SecretsMode::Deferred);
        let Ok((plan, _)) = deferred else {
            panic!("deferred: the plan compiles without its variables: {deferred:?}");
        };
        assert_eq!(scrape_url(&plan), None, "the scrape URL is unresolved");
        assert!(
            cache
                .compile(&record(PLAN), &env, SecretsMode::Required)
                .is_err(),
            "a daemon still gets the errors"
        );
    }

    #[test]
    fn a_kept_plan_is_the_one_a_fresh_compilation_gives() {
        let env = env();
        let cache = PlanCache::default();
        let first = cache.compile(&record(PLAN), &env, SecretsMode::Required);
        let Ok((plan, ladder)) = first else {
            panic!("the plan compiles: {first:?}");
        };
        let asked = *lock(&env.asked);
        let again = cache.compile(&record(PLAN), &env, SecretsMode::Required);
        assert!(matches!(&again, Ok((p, l)) if *p == plan && *l == ladder));
        assert_eq!(
            *lock(&env.asked),
            2 * asked,
            "the variables are asked again"
        );
        let fresh = plan::compile(PLAN, Some(Path::new("/nowhere")), &env);
        assert!(matches!(&fresh, Ok(c) if c.plan == plan));
    }

    /// Regression: every tick read every `file:` secret again to check the kept plan, so a
    /// daemon out of file descriptors ("Too many open files", a flood of idle connections) failed
    /// its ticks and stopped checking its guards.
    #[test]
    fn a_file_secret_with_an_unchanged_stamp_is_not_read_again() {
        let tmp = tempfile::tempdir().unwrap();
        let secret = tmp.path().join("scrape-url");
        std::fs::write(&secret, "http://127.0.0.1:2/metrics").unwrap();
        let yaml = PLAN.replace(
            "\"${QM_SCRAPE_URL}\"",
            &format!("\"file:{}\"", secret.display()),
        );
        assert_ne!(yaml, PLAN);
        /// The system's files, until `out_of_files` is set: then every read fails as a process
        /// without a free descriptor does (stat still answers).
        struct Files {
            env: Env,
            out_of_files: std::sync::atomic::AtomicBool,
            reads: Mutex<usize>,
        }
        impl Resolve for Files {
            fn env(&self, name: &str) -> Option<String> {
                self.env.env(name)
            }
            fn read_file(&self, path: &Path) -> Result<String, String> {
                *lock(&self.reads) += 1;
                if self.out_of_files.load(std::sync::atomic::Ordering::SeqCst) {
                    return Err("Too many open files (os error 24)".into());
                }
                plan::SystemResolve.read_file(path)
            }
            fn file_stamp(&self, path: &Path) -> Option<FileStamp> {
                FileStamp::of(path)
            }
        }
        let files = Files {
            env: env(),
            out_of_files: false.into(),
            reads: Mutex::new(0),
        };
        let cache = PlanCache::default();
        let url = |c: &PlanCache| {
            c.compile(&record(&yaml), &files, SecretsMode::Required)
                .map(|(p, _)| scrape_url(&p))
        };
        assert_eq!(url(&cache), Ok(Some("http://127.0.0.1:2/metrics".into())));
        assert_eq!(*lock(&files.reads), 1);
        files
            .out_of_files
            .store(true, std::sync::atomic::Ordering::SeqCst);
        for _ in 0..3 {
            assert_eq!(
                url(&cache),
                Ok(Some("http://127.0.0.1:2/metrics".into())),
                "the kept plan, without reading the secret"
            );
        }
        assert_eq!(*lock(&files.reads), 1, "read once");
        // A changed secret is read again (and compiled again).
        files
            .out_of_files
            .store(false, std::sync::atomic::Ordering::SeqCst);
        std::fs::write(&secret, "http://127.0.0.1:3/metrics/rotated").unwrap();
        assert_eq!(
            url(&cache),
            Ok(Some("http://127.0.0.1:3/metrics/rotated".into()))
        );
    }

    #[test]
    fn a_changed_plan_or_variable_compiles_again_and_errors_are_not_kept() {
        let env = env();
        let cache = PlanCache::default();
        let url = |c: &PlanCache, yaml: &str| {
            c.compile(&record(yaml), &env, SecretsMode::Required)
                .ok()
                .and_then(|(p, _)| scrape_url(&p))
        };
        assert_eq!(
            url(&cache, PLAN).as_deref(),
            Some("http://127.0.0.1:2/metrics")
        );
        lock(&env.vars).insert("QM_SCRAPE_URL".into(), "http://127.0.0.1:3/metrics".into());
        assert_eq!(
            url(&cache, PLAN).as_deref(),
            Some("http://127.0.0.1:3/metrics"),
            "a changed variable recompiles"
        );
        lock(&env.vars).remove("QM_SCRAPE_URL");
        assert!(
            cache
                .compile(&record(PLAN), &env, SecretsMode::Required)
                .is_err(),
            "an unset variable is an error"
        );
        assert!(
            lock(&cache.entries).is_empty(),
            "a plan in error is not kept"
        );
        lock(&env.vars).insert("QM_SCRAPE_URL".into(), "http://127.0.0.1:2/metrics".into());
        let other = PLAN.replace("${QM_SCRAPE_URL}", "http://127.0.0.1:4/metrics");
        assert_eq!(
            url(&cache, PLAN).as_deref(),
            Some("http://127.0.0.1:2/metrics")
        );
        assert_eq!(
            url(&cache, &other).as_deref(),
            Some("http://127.0.0.1:4/metrics"),
            "a changed plan text recompiles"
        );
        cache.retain(&["m".to_string()]);
        assert_eq!(lock(&cache.entries).len(), 1);
        cache.retain(&[]);
        assert!(lock(&cache.entries).is_empty());
    }
}

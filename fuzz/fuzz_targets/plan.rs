//! The YAML plan parser and compiler: `queue_migrate::plan::compile`.
//!
//! Besides "never panics", checks what `compile` documents: an `Err` is never empty and is
//! ordered by line (diagnostics without a line last), and secret values (what the resolver hands
//! out for `${VAR}` and `file:` references) never appear in a diagnostic, in the `Debug` of the
//! result or in the plan's JSON.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use queue_migrate::plan::{Compiled, Diagnostic, Resolve, compile};

/// What every secret the resolver hands out contains. `⚿` (U+26BF) appears in no message the
/// compiler writes, so when the input has none, seeing the marker in the output means a leak.
const MARKER: &str = "\u{26bf}SECRET\u{26bf}";

/// Environment and files from fixed rules, never the process's.
struct FuzzResolve;

impl Resolve for FuzzResolve {
    fn env(&self, name: &str) -> Option<String> {
        let value = match name {
            // The variables the repository's own plans use.
            "OLD_BROKER_URL" => format!("amqp://orders:{MARKER}@rabbit.internal:5672/orders"),
            "NEW_BROKER_URL" => format!("nats://{MARKER}@nats.internal:4222"),
            "QM_PROM_URL" => format!("http://prom:{MARKER}@127.0.0.1:9090"),
            "QM_SCRAPE_URL" | "QM_DEMO_METRICS_URL" => {
                format!("http://127.0.0.1:9464/metrics?token={MARKER}")
            }
            "EMPTY" => String::new(),
            "BLANK" => "  \t".to_owned(),
            // Any other name: set when its length is even, so both branches are reachable.
            other if other.len() % 2 == 0 => format!("https://{MARKER}.example/{}", other.len()),
            _ => return None,
        };
        Some(value)
    }

    fn read_file(&self, path: &Path) -> Result<String, String> {
        let shown = path.to_string_lossy();
        if shown.contains("missing") {
            Err("No such file or directory (os error 2)".to_owned())
        } else if shown.ends_with("empty") {
            Ok(" \n".to_owned())
        } else {
            Ok(format!("  https://user:{MARKER}@files.internal/x\n"))
        }
    }
}

fn check_no_secret(what: &str, text: &str) {
    assert!(
        !text.contains(MARKER),
        "a secret value shows in the {what}: {text}"
    );
}

fn check_diagnostics(what: &str, list: &[Diagnostic], secrets_checked: bool) {
    let lines: Vec<usize> = list.iter().map(|d| d.line.unwrap_or(usize::MAX)).collect();
    assert!(
        lines.windows(2).all(|w| w[0] <= w[1]),
        "{what} not ordered by line: {list:?}"
    );
    for d in list {
        let shown = d.to_string();
        if secrets_checked {
            check_no_secret(what, &shown);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(yaml) = std::str::from_utf8(data) else {
        return;
    };
    let secrets_checked = !yaml.contains('\u{26bf}');
    match compile(yaml, Some(Path::new("/etc/qm")), &FuzzResolve) {
        Ok(compiled) => {
            let Compiled { plan, warnings } = &compiled;
            check_diagnostics("warnings", warnings, secrets_checked);
            let debug = format!("{compiled:?}");
            let json = serde_json::to_string(plan).expect("a compiled plan serializes");
            if secrets_checked {
                check_no_secret("Debug of the plan", &debug);
                check_no_secret("JSON of the plan", &json);
            }
        }
        Err(errors) => {
            assert!(!errors.is_empty(), "compile failed with no error");
            check_diagnostics("errors", &errors, secrets_checked);
        }
    }
});

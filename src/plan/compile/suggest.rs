//! What an "unknown field" error offers instead: the field's place elsewhere in the format, or
//! the allowed name closest to a typo.

/// A hint for a field that exists elsewhere in the format.
pub(super) fn misplaced_hint(key: &str, what: &str) -> Option<String> {
    let s = match key {
        "min_duration" if what.contains("slices") => {
            "the slices phase sets its minimum time per step with `observe`"
        }
        "min_duration" if what.contains("disconnect") => {
            "the disconnect phase sets its minimum time with `retain`"
        }
        "observe" => "`observe` belongs to the slices phase",
        "retain" => "`retain` belongs to the disconnect phase",
        "quiet" => "`quiet` belongs to the drain phase",
        "steps" | "require_peak" | "require_deploy" => "only the slices phase has this",
        "probes" => "`probes` belongs to the synthetic phase",
        "publish" if what.contains("routing") => {
            "routing takes `file` (the daemon's HTTP endpoint always serves the document)"
        }
        _ => return None,
    };
    Some(s.to_string())
}

/// The allowed name closest to `key` (within 2 edits), for "did you mean".
pub(super) fn closest<'a>(key: &str, allowed: &[&'a str]) -> Option<&'a str> {
    let key = key.to_ascii_lowercase().replace('-', "_");
    allowed
        .iter()
        .map(|a| (edit_distance(&key, a), *a))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, a)| a)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().abs_diff(b.len()) > 2 || a.len() > 64 {
        return usize::MAX;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

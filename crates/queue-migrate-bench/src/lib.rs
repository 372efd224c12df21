//! The benchmarks of queue-migrate live under `benches/` (BENCHMARKS.md says what each measures
//! and which script under `bench/` runs it); this library holds what more than one of them needs.

/// CPU seconds (user + system) a process used so far, from `/proc/<pid>/stat` (`pid` may be
/// `self`); 0 when it cannot be read. Ticks of 10 ms.
pub fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command (which may hold spaces and parentheses): state is field 0, utime 11,
    // stime 12.
    let after = stat.rsplit_once(')').map_or("", |(_, s)| s);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (tick(11) + tick(12)) / 100.0
}

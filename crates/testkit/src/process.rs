//! Facts about processes from `/proc`: whether one still runs (tests that kill commands),
//! and the CPU time one has used (benchmarks that charge a run's CPU to each process).

/// Whether process `pid` exists and is not a zombie. A killed child that nobody has reaped
/// yet is a zombie: it no longer runs, but its `/proc` entry stays until its parent (tokio's
/// orphan reaper, for `kill_on_drop` children) waits for it — which can take until the next
/// `SIGCHLD`, so tests must not wait for the entry to vanish.
pub fn process_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// CPU time (user + system, all threads) process `pid` has used so far — this process when
/// `pid` is `None`; `None` when its `/proc` entry cannot be read (it is gone).
pub fn cpu_seconds(pid: Option<u32>) -> Option<f64> {
    let path = pid.map_or_else(
        || "/proc/self/stat".to_string(),
        |p| format!("/proc/{p}/stat"),
    );
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its last `)`.
    // `utime` and `stime` are fields 14 and 15, i.e. the 12th and 13th after it.
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / clock_ticks())
}

/// `sysconf(_SC_CLK_TCK)`, asked of `getconf` once (100 on the Linux systems this runs on).
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|t: &f64| *t > 0.0)
            .unwrap_or(100.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_runs_and_an_unused_pid_does_not() {
        assert!(process_running(std::process::id()));
        // PIDs are at most 2^22 on Linux.
        assert!(!process_running(u32::MAX));
    }

    #[test]
    fn cpu_time_grows_with_work_and_a_missing_process_has_none() {
        let before = cpu_seconds(None).expect("this process's CPU time");
        // Spin until 50 ms of CPU are counted (5 clock ticks), or fail after ~10^10 steps.
        let mut x = 0u64;
        let mut rounds = 0;
        let after = loop {
            for _ in 0..1_000_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            let now = cpu_seconds(Some(std::process::id())).expect("by pid too");
            if now - before >= 0.05 {
                break now;
            }
            rounds += 1;
            assert!(rounds < 10_000, "CPU time stuck at {now} (from {before})");
        };
        assert!(after > before);
        assert_eq!(cpu_seconds(Some(u32::MAX)), None);
    }
}

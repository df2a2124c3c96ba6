//! Whether a process still runs, for tests that kill commands.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_runs_and_an_unused_pid_does_not() {
        assert!(process_running(std::process::id()));
        // PIDs are at most 2^22 on Linux.
        assert!(!process_running(u32::MAX));
    }
}

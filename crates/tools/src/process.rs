//! Child processes of tools (`bash`, watch polls): starting the shell, killing a command's
//! whole process group, and the grace period their output pumps give leftovers that hold
//! the pipes open.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::time::Instant;

/// Starts `bash -c script` in `cwd` with exactly `env`, no input and both outputs piped,
/// as the leader of a process group of its own (see [`GroupKill`]), killed if its handle is
/// dropped.
pub(crate) fn spawn_bash(
    script: &str,
    cwd: &Path,
    env: Vec<(OsString, OsString)>,
) -> std::io::Result<tokio::process::Child> {
    tokio::process::Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(cwd)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0)
        .spawn()
}

/// How long the pipes may stay open after the shell exited before what it left behind is
/// killed.
pub(crate) const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// Completes at `deadline`, never without one: the drain-grace arm of an output pump.
pub(crate) async fn grace_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Kills a process group when dropped (a command that timed out, was cancelled or was
/// abandoned), unless disarmed.
pub(crate) struct GroupKill {
    pgid: Option<rustix::process::Pid>,
}

impl GroupKill {
    pub(crate) fn new(pid: Option<u32>) -> Self {
        let pgid = pid
            .and_then(|p| i32::try_from(p).ok())
            .filter(|p| *p > 1)
            .and_then(rustix::process::Pid::from_raw);
        Self { pgid }
    }

    pub(crate) fn kill(&self) {
        if let Some(pgid) = self.pgid {
            // ESRCH (the group is already gone) is the normal case after a clean exit.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }

    pub(crate) fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}

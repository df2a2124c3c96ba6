//! Child processes of tools (`bash`, watch polls, and the helper programs of `git`, `man` and
//! `math`): starting the shell or a program, killing a command's
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

/// A short-lived helper program a tool runs to completion (`git`, `man`, the `math`
/// interpreter): what to start and the limits it runs under.
#[derive(Debug, Clone)]
pub(crate) struct Captured<'a> {
    pub program: &'a str,
    pub args: Vec<OsString>,
    pub cwd: &'a Path,
    /// The child's whole environment (nothing of the node's is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// Written to the child's standard input, which is then closed (`None`: no input).
    pub stdin: Option<String>,
    /// Wall-clock limit; the process group is killed when it passes.
    pub timeout: Duration,
    /// Bytes kept of each output stream; the rest is read and dropped.
    pub output_cap: usize,
}

/// How a [`Captured`] run ended.
#[derive(Debug)]
pub(crate) struct CapturedOutput {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// Some output was dropped at the cap.
    pub cut: bool,
}

/// Why a [`Captured`] run has no output.
#[derive(Debug)]
pub(crate) enum CapturedError {
    /// The program is not installed (not on `PATH`).
    NotInstalled,
    /// It could not be started for another reason.
    Spawn(std::io::Error),
    /// It ran past its timeout and was killed.
    TimedOut,
}

/// Runs `spec` to completion in a process group of its own (killed on timeout or when the
/// future is dropped), feeding its input and keeping at most `output_cap` bytes of each
/// output.
pub(crate) async fn run_captured(spec: Captured<'_>) -> Result<CapturedOutput, CapturedError> {
    use tokio::io::AsyncWriteExt;

    let mut child = tokio::process::Command::new(spec.program)
        .args(&spec.args)
        .current_dir(spec.cwd)
        .env_clear()
        .envs(spec.env)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0)
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => CapturedError::NotInstalled,
            _ => CapturedError::Spawn(e),
        })?;
    let group = GroupKill::new(child.id());
    let input = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let text = spec.stdin;
    let feed = async move {
        if let (Some(mut pipe), Some(text)) = (input, text) {
            // A child that exits without reading its input closes the pipe: not an error.
            let _ = pipe.write_all(text.as_bytes()).await;
            let _ = pipe.shutdown().await;
        }
    };
    let cap = spec.output_cap;
    let run = async {
        let (_, (out, out_cut), (err, err_cut), status) = tokio::join!(
            feed,
            read_capped(stdout, cap),
            read_capped(stderr, cap),
            child.wait()
        );
        (out, out_cut || err_cut, err, status)
    };
    match tokio::time::timeout(spec.timeout, run).await {
        Err(_) => {
            group.kill();
            Err(CapturedError::TimedOut)
        }
        Ok((_, _, _, Err(e))) => Err(CapturedError::Spawn(e)),
        Ok((out, cut, err, Ok(status))) => {
            // Whatever the program left behind in its group goes with it.
            group.kill();
            Ok(CapturedOutput {
                status,
                stdout: String::from_utf8_lossy(&out).into_owned(),
                stderr: String::from_utf8_lossy(&err).into_owned(),
                cut,
            })
        }
    }
}

/// Reads `pipe` to its end, keeping the first `cap` bytes; `true` when more came.
async fn read_capped<R: tokio::io::AsyncRead + Unpin>(
    pipe: Option<R>,
    cap: usize,
) -> (Vec<u8>, bool) {
    use tokio::io::AsyncReadExt;
    let mut kept = Vec::new();
    let mut cut = false;
    let Some(mut pipe) = pipe else {
        return (kept, cut);
    };
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                cut |= n > room;
            }
        }
    }
    (kept, cut)
}

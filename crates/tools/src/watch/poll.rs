//! Running one poll of a watch: the command under `bash -c` in the workstream's directory,
//! in its own process group, with the [`ChildEnv`] allow-list as its environment, a timeout, and the
//! output (standard output, then standard error) capped at [`MAX_OUTPUT_CHARS`] characters.
//! Dropping the future, or hitting the timeout, kills the whole process group.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;

use crate::child_env::ChildEnv;
use crate::process::{DRAIN_GRACE, GroupKill, grace_until, spawn_bash};

/// Longest output kept of one poll, in characters (the rest is cut, with a marker).
pub const MAX_OUTPUT_CHARS: usize = 65_536;
/// Bytes read of each stream: enough for [`MAX_OUTPUT_CHARS`] characters of any UTF-8.
const STREAM_CAP_BYTES: usize = 4 * MAX_OUTPUT_CHARS + 4;

/// What one poll saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollResult {
    /// Standard output, then `[stderr]` and standard error when there was any; capped.
    pub output: String,
    /// The exit status; `-N` when killed by signal N, `-1` on timeout or failure to start.
    pub exit_code: i64,
}

/// `output` whole, or its first [`MAX_OUTPUT_CHARS`] characters and a fixed marker.
pub fn bound_output(output: &str) -> String {
    match output.char_indices().nth(MAX_OUTPUT_CHARS) {
        Some((at, _)) => format!("{}\n[truncated at {MAX_OUTPUT_CHARS} chars]", &output[..at]),
        None => output.to_owned(),
    }
}

/// `Err` with the reason when `command` matches the destructive patterns `bash` refuses.
pub fn check_command(command: &str) -> Result<(), String> {
    crate::builtin::blocklist::check(command)
}

/// Runs `command` once (see the module docs). Never fails: a timeout or a shell that cannot
/// start is reported in the output with exit code `-1`.
pub async fn run_poll(command: &str, cwd: &Path, timeout: Duration, env: &ChildEnv) -> PollResult {
    let mut child = match spawn_bash(command, cwd, env.from_process()) {
        Ok(child) => child,
        Err(e) => {
            return PollResult {
                output: format!(
                    "[command failed: could not start bash in {}: {e}]",
                    cwd.display()
                ),
                exit_code: -1,
            };
        }
    };
    let group = GroupKill::new(child.id());
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return PollResult {
            output: "[command failed: no output pipes]".into(),
            exit_code: -1,
        };
    };
    let mut out = Capped::default();
    let mut err = Capped::default();
    let waited = tokio::time::timeout(
        timeout,
        pump(&mut child, stdout, stderr, &group, &mut out, &mut err),
    )
    .await;
    let status = match waited {
        Err(_elapsed) => {
            return PollResult {
                output: format!("[command timed out after {}s]", timeout.as_secs_f64()),
                exit_code: -1,
            };
        }
        Ok(Err(e)) => {
            return PollResult {
                output: format!("[command failed: {e}]"),
                exit_code: -1,
            };
        }
        Ok(Ok(status)) => status,
    };
    let stdout = out.text();
    let stderr = err.text();
    let output = match (stdout.is_empty(), stderr.is_empty()) {
        (_, true) => stdout,
        (true, false) => stderr,
        (false, false) => format!("{stdout}\n[stderr]\n{stderr}"),
    };
    PollResult {
        output: bound_output(&output),
        exit_code: exit_code(status),
    }
}

fn exit_code(status: ExitStatus) -> i64 {
    match (status.code(), status.signal()) {
        (Some(code), _) => i64::from(code),
        (None, Some(signal)) => -i64::from(signal),
        (None, None) => -1,
    }
}

/// The first [`STREAM_CAP_BYTES`] bytes of a stream; the rest is read and dropped.
#[derive(Default)]
struct Capped {
    bytes: Vec<u8>,
}

impl Capped {
    fn push(&mut self, chunk: &[u8]) {
        let room = STREAM_CAP_BYTES.saturating_sub(self.bytes.len());
        self.bytes
            .extend_from_slice(&chunk[..chunk.len().min(room)]);
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// Reads both pipes until they close and the shell has exited. Leftover background
/// processes that keep the pipes open are killed after [`DRAIN_GRACE`].
async fn pump(
    child: &mut tokio::process::Child,
    mut stdout: impl AsyncRead + Unpin,
    mut stderr: impl AsyncRead + Unpin,
    group: &GroupKill,
    out: &mut Capped,
    err: &mut Capped,
) -> std::io::Result<ExitStatus> {
    let mut out_buf = vec![0u8; 8192];
    let mut err_buf = vec![0u8; 8192];
    let (mut out_open, mut err_open) = (true, true);
    let mut status: Option<ExitStatus> = None;
    let mut drain_deadline: Option<Instant> = None;
    loop {
        if !out_open
            && !err_open
            && let Some(status) = status
        {
            return Ok(status);
        }
        tokio::select! {
            read = stdout.read(&mut out_buf), if out_open => {
                match read? {
                    0 => out_open = false,
                    n => out.push(&out_buf[..n]),
                }
            }
            read = stderr.read(&mut err_buf), if err_open => {
                match read? {
                    0 => err_open = false,
                    n => err.push(&err_buf[..n]),
                }
            }
            exited = child.wait(), if status.is_none() => {
                status = Some(exited?);
                drain_deadline = Some(Instant::now() + DRAIN_GRACE);
            }
            () = grace_until(drain_deadline) => {
                // The shell is gone but something it started holds the pipes: stop it and
                // keep what was read.
                group.kill();
                if let Some(status) = status {
                    return Ok(status);
                }
            }
        }
    }
}

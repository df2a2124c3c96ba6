//! `bash`: runs a script with `bash -c` in the context's working directory, in its own
//! process group, with secrets scrubbed from the environment. Output lines are streamed to
//! the [`OutputSink`] as they arrive. Dropping the `execute` future, or hitting the timeout,
//! kills the whole process group.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, BufReader};
use tokio::time::Instant;

use super::{blocklist, header};
use crate::arguments::Args;
use crate::child_env::ChildEnv;
use crate::error::RegistryError;
use crate::process::{DRAIN_GRACE, GroupKill, grace_until, spawn_bash};
use crate::schema::builtin_definition;
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};
use crate::truncate::{BoundedText, truncate_output};

/// Accepted `timeout` range in seconds.
const TIMEOUT_RANGE: std::ops::RangeInclusive<i64> = 1..=600;
/// Output cap independent of the context limit (the original keeps 256 KB).
const OUTPUT_CAP: usize = 256 * 1024;
/// The `bash` tool.
#[derive(Debug, Clone)]
pub struct BashTool {
    definition: ToolDefinition,
    default_timeout: Duration,
    child_env: ChildEnv,
    extra_env: Vec<(OsString, OsString)>,
}

impl BashTool {
    pub fn new() -> Result<Self, RegistryError> {
        Ok(Self {
            definition: builtin_definition("bash")?,
            default_timeout: Duration::from_secs(120),
            child_env: ChildEnv::default(),
            extra_env: Vec::new(),
        })
    }

    /// Timeout used when a call gives none (clamped to 1–600 s).
    pub fn with_default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout.clamp(Duration::from_secs(1), Duration::from_secs(600));
        self
    }

    /// Which of the node's variables commands get ([`ChildEnv`]).
    pub fn with_child_env(mut self, child_env: ChildEnv) -> Self {
        self.child_env = child_env;
        self
    }

    /// Adds a variable to the commands' environment (configured explicitly, so it is set
    /// whatever its name).
    pub fn with_env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.extra_env.push((key.into(), value.into()));
        self
    }

    /// The environment a command runs with: the allowed part of the node's, plus the extras.
    fn environment(&self) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = Vec::new();
        for (key, value) in self
            .child_env
            .from_process()
            .into_iter()
            .chain(self.extra_env.iter().cloned())
        {
            env.retain(|(k, _)| *k != key);
            env.push((key, value));
        }
        env
    }
}

#[async_trait]
impl Tool for BashTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let command = a.non_blank("command")?;
        let timeout = match a.opt_int("timeout")? {
            None => None,
            Some(t) if TIMEOUT_RANGE.contains(&t) => Some(t),
            Some(t) => {
                return Err(format!(
                    "Error: timeout must be between 1 and 600 seconds, got {t}"
                ));
            }
        };
        let stop_on_error = a.opt_bool("stop_on_error")?.unwrap_or(false);
        blocklist::check(command)?;
        let mut normalized = json!({ "command": command, "stop_on_error": stop_on_error });
        if let Some(t) = timeout {
            normalized["timeout"] = json!(t);
        }
        Ok(Prepared {
            header: header("bash", command),
            preview: command.to_owned(),
            args: normalized,
            needs_approval: true,
            approval_label: "bash".to_owned(),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        out: &dyn OutputSink,
    ) -> ToolOutput {
        let command = match prepared.required_text("command") {
            Ok(command) => command,
            Err(missing) => return missing,
        };
        // `prepare` checked these; a hand-built `Prepared` is checked again, not trusted.
        if let Err(e) = blocklist::check(command) {
            return ToolOutput::error(e);
        }
        let timeout = match prepared.args.get("timeout").and_then(Value::as_i64) {
            Some(t) if TIMEOUT_RANGE.contains(&t) => Duration::from_secs(t.unsigned_abs()),
            Some(t) => {
                return ToolOutput::error(format!(
                    "Error: timeout must be between 1 and 600 seconds, got {t}"
                ));
            }
            None => self.default_timeout,
        };
        let stop_on_error = prepared
            .args
            .get("stop_on_error")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let limit = match ctx.truncation_limit {
            0 => OUTPUT_CAP,
            n => n.min(OUTPUT_CAP),
        };
        let run = Run {
            command,
            stop_on_error,
            timeout,
            limit,
        };
        // Cut to the limit by `report` itself: the exit-code line comes after the cut, as in
        // the original, and must not be cut again.
        run.execute(self.environment(), ctx, out).await
    }
}

struct Run<'a> {
    command: &'a str,
    stop_on_error: bool,
    timeout: Duration,
    limit: usize,
}

/// What a stream-reading loop saw.
struct Collected {
    stdout: BoundedText,
    stderr: BoundedText,
}

impl Run<'_> {
    async fn execute(
        &self,
        env: Vec<(OsString, OsString)>,
        ctx: &ToolContext,
        out: &dyn OutputSink,
    ) -> ToolOutput {
        let mut script = String::from("set -o pipefail\n");
        if self.stop_on_error {
            script.push_str("set -e\n");
        }
        script.push_str(self.command);

        let mut child = match spawn_bash(&script, &ctx.cwd, env) {
            Ok(child) => child,
            Err(e) => {
                return ToolOutput::error(format!(
                    "Error: could not start bash in {}: {e}",
                    ctx.cwd.display()
                ));
            }
        };
        let mut group = GroupKill::new(child.id());
        tracing::debug!(pid = ?child.id(), "bash started");

        let mut collected = Collected {
            stdout: BoundedText::new(self.limit),
            stderr: BoundedText::new(self.limit),
        };
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return ToolOutput::error("Error: bash started without output pipes");
        };
        let waited = tokio::time::timeout(
            self.timeout,
            pump(&mut child, stdout, stderr, &group, &mut collected, out),
        )
        .await;
        let status = match waited {
            Err(_elapsed) => {
                group.kill();
                let _ = child.start_kill();
                let mut text = format!("Command timed out after {}s", self.timeout.as_secs());
                let partial = combine(collected);
                if !partial.is_empty() {
                    text.push_str("\n\n[output before the timeout]\n");
                    text.push_str(&partial);
                }
                return ToolOutput::error(truncate_output(&text, self.limit));
            }
            Ok(Err(e)) => return ToolOutput::error(format!("Error: waiting for bash failed: {e}")),
            Ok(Ok(status)) => status,
        };
        // Background jobs that closed our pipes (e.g. `nohup x > log &`) may keep running.
        group.disarm();
        self.report(status, combine(collected))
    }

    /// The result as the original reports it (node spec §5.2): standard output, then the
    /// `[stderr] ` lines, stripped of surrounding whitespace and cut to the limit; then
    /// `\n[exit code: N]` when the exit code is not 0 (`-N` for death by signal N, as
    /// Python reports it); `(no output)` when nothing is left. An error when the code is
    /// neither 0 nor 1 (grep's "no match" is not one), or any non-zero under `stop_on_error`.
    fn report(&self, status: ExitStatus, body: String) -> ToolOutput {
        let mut text = truncate_output(body.trim(), self.limit);
        let code = match (status.code(), status.signal()) {
            (Some(code), _) => Some(code),
            (None, Some(signal)) => Some(-signal),
            (None, None) => None,
        };
        let is_error = match code {
            Some(0) => false,
            Some(code) => code != 1 || self.stop_on_error,
            None => true,
        };
        match code {
            Some(0) => {}
            Some(code) => text.push_str(&format!("\n[exit code: {code}]")),
            None => text.push_str("\n[exit status unknown]"),
        }
        if text.is_empty() {
            text.push_str("(no output)");
        }
        if is_error {
            ToolOutput::error(text)
        } else {
            ToolOutput::ok(text)
        }
    }
}

/// Longest piece of a line without a newline that is held before it is passed on.
const MAX_LINE_BYTES: usize = 64 * 1024;

/// Appends the next line (with its `\n`) to `buf`, or at most [`MAX_LINE_BYTES`] of a longer
/// one; returns 0 at end of stream. Cancel-safe when `buf` is kept between calls: bytes are
/// moved into `buf` as soon as they are consumed from the reader.
async fn read_line_capped(
    reader: &mut (impl AsyncBufRead + Unpin),
    buf: &mut Vec<u8>,
) -> std::io::Result<usize> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(0);
        }
        let room = MAX_LINE_BYTES.saturating_sub(buf.len()).max(1);
        let (take, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) if i < room => (i + 1, true),
            _ if available.len() >= room => (room, true),
            _ => (available.len(), false),
        };
        buf.extend_from_slice(&available[..take]);
        reader.consume(take);
        if done {
            return Ok(buf.len());
        }
    }
}

/// Standard output, then the standard error lines (each marked `[stderr] `) after a line
/// break, as the original joins them (so stdout ending in a newline leaves a blank line).
fn combine(collected: Collected) -> String {
    let mut text = collected.stdout.finish();
    let stderr = collected.stderr.finish();
    if !stderr.is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&stderr);
    }
    text
}

/// Reads both pipes line by line until they close and the shell has exited, streaming each
/// line to `out`. If the shell exits but something it left behind holds the pipes open,
/// the rest of the group is killed after a short grace period.
async fn pump(
    child: &mut tokio::process::Child,
    stdout: impl AsyncRead + Unpin,
    stderr: impl AsyncRead + Unpin,
    group: &GroupKill,
    collected: &mut Collected,
    out: &dyn OutputSink,
) -> std::io::Result<ExitStatus> {
    let mut stdout = BufReader::new(stdout);
    let mut stderr = BufReader::new(stderr);
    let (mut out_buf, mut err_buf) = (Vec::new(), Vec::new());
    let (mut out_open, mut err_open) = (true, true);
    let mut status: Option<ExitStatus> = None;
    let mut drain_deadline: Option<Instant> = None;
    let mut killed_leftovers = false;
    loop {
        if !out_open
            && !err_open
            && let Some(status) = status
        {
            return Ok(status);
        }
        tokio::select! {
            read = read_line_capped(&mut stdout, &mut out_buf), if out_open => {
                if read? == 0 {
                    out_open = false;
                }
                if !out_buf.is_empty() {
                    let line = String::from_utf8_lossy(&out_buf).into_owned();
                    out_buf.clear();
                    out.chunk(&line);
                    collected.stdout.push(&line);
                }
            }
            read = read_line_capped(&mut stderr, &mut err_buf), if err_open => {
                if read? == 0 {
                    err_open = false;
                }
                if !err_buf.is_empty() {
                    let line = format!("[stderr] {}", String::from_utf8_lossy(&err_buf));
                    err_buf.clear();
                    out.chunk(&line);
                    collected.stderr.push(&line);
                }
            }
            exited = child.wait(), if status.is_none() => {
                status = Some(exited?);
                drain_deadline = Some(Instant::now() + DRAIN_GRACE);
            }
            () = grace_until(drain_deadline) => {
                if killed_leftovers {
                    // Something outside the group still holds the pipes: stop reading.
                    if let Some(status) = status {
                        return Ok(status);
                    }
                }
                group.kill();
                killed_leftovers = true;
                drain_deadline = Some(Instant::now() + DRAIN_GRACE);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_is_the_allow_list_plus_configured_extras() {
        let tool = BashTool::new().unwrap().with_env("FOO_PLAIN", "shown");
        let env = tool.environment();
        assert!(env.iter().any(|(k, v)| k == "FOO_PLAIN" && v == "shown"));
        assert!(
            env.iter()
                .all(|(k, _)| k == "FOO_PLAIN" || ChildEnv::default().allows(&k.to_string_lossy())),
            "{env:?}"
        );
    }

    #[test]
    fn timeout_out_of_range_is_a_validation_error() {
        let tool = BashTool::new().unwrap();
        let ctx = ToolContext::new("/");
        for t in [0, 601, -5] {
            let err = tool
                .prepare(json!({"command": "true", "timeout": t}), &ctx)
                .unwrap_err();
            assert!(err.contains("between 1 and 600"), "{err}");
        }
        let ok = tool
            .prepare(json!({"command": "true", "timeout": "600"}), &ctx)
            .unwrap();
        assert_eq!(ok.args["timeout"], 600);
        assert!(ok.needs_approval);
        assert_eq!(ok.approval_label, "bash");
        assert_eq!(ok.header, "⚙ bash: true");
    }
}

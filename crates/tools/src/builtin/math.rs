//! `math`: Python code evaluated in a sandbox; what it prints is the result. Needs approval
//! in a main session (label `math`, node spec §5.2), auto-approved in sub-agents.
//!
//! The sandbox (justified in docs/security.md, "The math sandbox"): a `python3 -I -S` child
//! runs [`SANDBOX`] — the code is parsed and refused before it runs if it imports anything
//! outside a list of calculation modules or touches `_`-attributes; it runs with a small set
//! of builtins, under an audit hook that refuses files, sockets and processes, and with
//! resource limits (CPU seconds, address space, no file writes, no new processes or file
//! descriptors). The child starts in an empty temporary directory with an almost empty
//! environment, in a process group of its own with a wall-clock limit, and — where the
//! kernel allows (`unshare --net`, probed once) — in a network namespace of its own with no
//! interfaces up.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use super::{finish, header, schema_definition};
use crate::arguments::Args;
use crate::error::RegistryError;
use crate::process::{Captured, CapturedError, run_captured};
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};

/// The Python side of the sandbox.
const SANDBOX: &str = include_str!("math_sandbox.py");
/// Longest code accepted.
const MAX_CODE_BYTES: usize = 64 * 1024;
/// Bytes kept of what the code prints (the context's truncation applies after).
const OUTPUT_CAP: usize = 256 * 1024;
/// The wrapper's exit status for an error it reports itself (`Kind: message` on stderr).
const REPORTED: i32 = 3;

/// The limits one evaluation runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MathLimits {
    /// CPU seconds (then SIGXCPU ends it).
    pub cpu_seconds: u32,
    /// Address space in bytes (a bigger allocation raises MemoryError).
    pub memory_bytes: u64,
    /// Wall-clock limit (the process group is killed).
    pub wall: Duration,
}

impl Default for MathLimits {
    fn default() -> Self {
        Self {
            cpu_seconds: 10,
            memory_bytes: 256 * 1024 * 1024,
            wall: Duration::from_secs(30),
        }
    }
}

/// The `math` tool.
#[derive(Debug)]
pub struct MathTool {
    definition: ToolDefinition,
    python: String,
    limits: MathLimits,
    /// The `unshare` prefix that gives the child a network namespace of its own (empty
    /// when the kernel or the node's privileges do not allow one), probed at first use.
    isolation: OnceCell<Vec<OsString>>,
}

impl MathTool {
    pub fn new() -> Result<Self, RegistryError> {
        Ok(Self {
            definition: schema_definition("math", include_str!("../../schemas/math.json"))?,
            python: "python3".to_owned(),
            limits: MathLimits::default(),
            isolation: OnceCell::new(),
        })
    }

    /// The Python 3 interpreter (default `python3` on `PATH`).
    pub fn with_python(mut self, python: impl Into<String>) -> Self {
        self.python = python.into();
        self
    }

    pub fn with_limits(mut self, limits: MathLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Whether evaluations run without network access at the namespace level too (probed
    /// at the first call; `false` before it).
    pub fn network_isolated(&self) -> bool {
        self.isolation.get().is_some_and(|p| !p.is_empty())
    }

    fn environment(dir: &std::path::Path) -> Vec<(OsString, OsString)> {
        let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
        vec![
            ("PATH".into(), path),
            ("HOME".into(), dir.as_os_str().to_owned()),
            ("LANG".into(), "C.UTF-8".into()),
        ]
    }

    /// `unshare --net --map-root-user` (unprivileged user namespaces) or `unshare --net`
    /// (a node with the capability), whichever works here; none when neither does.
    async fn isolation(&self) -> &Vec<OsString> {
        self.isolation
            .get_or_init(|| async {
                for args in [
                    &["--net", "--map-root-user", "--"][..],
                    &["--net", "--"][..],
                ] {
                    let dir = std::env::temp_dir();
                    let mut probe: Vec<OsString> = args.iter().map(OsString::from).collect();
                    probe.push("true".into());
                    let ok = run_captured(Captured {
                        program: "unshare",
                        args: probe,
                        cwd: &dir,
                        env: Self::environment(&dir),
                        stdin: None,
                        timeout: Duration::from_secs(5),
                        output_cap: 4096,
                    })
                    .await
                    .is_ok_and(|out| out.status.success());
                    if ok {
                        let mut prefix: Vec<OsString> = vec!["unshare".into()];
                        prefix.extend(args.iter().map(OsString::from));
                        return prefix;
                    }
                }
                tracing::info!(
                    "math: no network namespace available (unshare --net refused); the \
                     sandbox's other layers still refuse sockets"
                );
                Vec::new()
            })
            .await
    }
}

#[async_trait]
impl Tool for MathTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let code = a.non_blank("code")?;
        if code.len() > MAX_CODE_BYTES {
            return Err(format!(
                "Error: code is {} bytes; the limit is {MAX_CODE_BYTES}",
                code.len()
            ));
        }
        if code.contains('\0') {
            return Err("Error: code contains a NUL character".to_owned());
        }
        Ok(Prepared {
            args: json!({ "code": code }),
            header: header("math", code),
            preview: code.to_owned(),
            needs_approval: true,
            approval_label: "math".to_owned(),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let code = match prepared.required_text("code") {
            Ok(c) => c,
            Err(missing) => return missing,
        };
        let dir = match tempfile::Builder::new().prefix("turnstone-math-").tempdir() {
            Ok(d) => d,
            Err(e) => return ToolOutput::error(format!("Error: cannot make the sandbox: {e}")),
        };
        let prefix = self.isolation().await.clone();
        let mut argv: Vec<OsString> = prefix;
        argv.extend(
            [
                self.python.as_str(),
                "-I",
                "-S",
                "-B",
                "-c",
                SANDBOX,
                &self.limits.cpu_seconds.to_string(),
                &self.limits.memory_bytes.to_string(),
            ]
            .map(OsString::from),
        );
        let program = argv.remove(0);
        let program = program.to_string_lossy().into_owned();
        let run = run_captured(Captured {
            program: &program,
            args: argv,
            cwd: dir.path(),
            env: Self::environment(dir.path()),
            stdin: Some(code.to_owned()),
            timeout: self.limits.wall,
            output_cap: OUTPUT_CAP,
        })
        .await;
        let out = match run {
            Ok(out) => out,
            Err(CapturedError::NotInstalled) => {
                return ToolOutput::error(format!(
                    "Error: math needs Python 3, and '{program}' was not found on this node"
                ));
            }
            Err(CapturedError::Spawn(e)) => {
                return ToolOutput::error(format!("Error: cannot start the sandbox: {e}"));
            }
            Err(CapturedError::TimedOut) => {
                return ToolOutput::error(format!(
                    "Error: the code ran longer than {}s and was stopped",
                    self.limits.wall.as_secs()
                ));
            }
        };
        let printed = out.stdout.trim_end();
        let failure = match (out.status.code(), out.status.signal()) {
            (Some(0), _) => None,
            (Some(REPORTED), _) => Some(out.stderr.trim().to_owned()),
            // SIGXCPU at the soft limit, SIGKILL at the hard one.
            (_, Some(24 | 9)) => Some(format!(
                "the code used more than {} s of CPU time and was stopped",
                self.limits.cpu_seconds
            )),
            (_, Some(sig)) => Some(format!("the sandbox was ended by signal {sig}")),
            // `unshare` could not execute the interpreter.
            (Some(127), _) => {
                return ToolOutput::error(format!(
                    "Error: math needs Python 3, and '{}' could not be started: {}",
                    self.python,
                    out.stderr.trim()
                ));
            }
            (Some(code), _) => {
                let reason = out.stderr.trim();
                Some(if reason.is_empty() {
                    format!("the sandbox exited with status {code}")
                } else {
                    format!("the sandbox failed (status {code}): {reason}")
                })
            }
            (None, None) => Some("the sandbox ended without a status".to_owned()),
        };
        let mut text = match failure {
            None if printed.is_empty() => {
                "(no output: the code printed nothing — print() the results)".to_owned()
            }
            None => printed.to_owned(),
            Some(why) if printed.is_empty() => format!("Error: {why}"),
            Some(why) => format!("{printed}\nError: {why}"),
        };
        if out.cut {
            text.push_str(&format!("\n[output cut at {OUTPUT_CAP} bytes]"));
        }
        let output = if out.status.success() {
            ToolOutput::ok(text)
        } else {
            ToolOutput::error(text)
        };
        finish(output, ctx)
    }
}

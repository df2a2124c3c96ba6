//! The `Tool` seam: what every built-in (and later MCP) tool implements, and what the
//! engine needs to prepare, approve and execute a call.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::Value;
pub use turnstone_proto::image::ImagePart;

/// Turnstone metadata of a tool (seed 000): stripped before the schema is sent to a model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolMeta {
    /// Available to the plan sub-agent.
    pub agent: bool,
    /// Available to the task sub-agent.
    pub task_agent: bool,
    /// Auto-approved inside sub-agents, and in the engine's read-only auto-approve set.
    pub auto_approve: bool,
    /// Argument to assume when the model sends a bare string instead of a JSON object.
    pub primary_key: Option<String>,
}

/// A tool's definition: the OpenAI function schema plus metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// JSON Schema object of the arguments.
    pub parameters: Value,
    pub meta: ToolMeta,
}

/// Per-workstream state a tool may read or update.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Working directory: relative paths resolve against it.
    pub cwd: PathBuf,
    /// Files read in this workstream (canonical paths): `edit_file` refuses to edit a file
    /// that is not in this set (read-before-edit guard). Shared by clones of the context.
    pub read_files: Arc<Mutex<HashSet<PathBuf>>>,
    /// Tool output limit in characters (head and tail kept); 0 = no limit.
    pub truncation_limit: usize,
    /// The workstream the call belongs to (empty outside a workstream, e.g. in unit tests).
    pub ws_id: Arc<str>,
    /// The node running the workstream (`local` for the terminal client).
    pub node_id: Arc<str>,
    /// The workstream's current turn (1-based; 0 outside a workstream's turns), advanced by
    /// the engine at the start of each turn ([`ToolContext::begin_turn`]). Tools with a
    /// per-turn budget (`notify`) key on it. Shared by clones of the context.
    pub turn: Arc<AtomicU64>,
    /// Re-orders web search results and retrieval candidates ([`crate::rerank`]); `None`:
    /// every tool keeps its native order.
    pub reranker: Option<Arc<dyn crate::rerank::Reranker>>,
}

impl ToolContext {
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        Self {
            cwd: cwd.into(),
            read_files: Arc::default(),
            truncation_limit: 0,
            ws_id: Arc::from(""),
            node_id: Arc::from("local"),
            turn: Arc::default(),
            reranker: None,
        }
    }

    /// A new turn of the workstream begins (the engine calls this before its first request).
    pub fn begin_turn(&self) -> u64 {
        self.turn.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The current turn (0 before the first).
    pub fn current_turn(&self) -> u64 {
        self.turn.load(Ordering::Acquire)
    }

    /// Forgets which files were read (after a compaction the contents are no longer in the
    /// conversation, so `edit_file` needs a fresh `read_file`).
    pub fn forget_reads(&self) {
        self.read_files.lock().clear();
    }

    /// The same context for another workstream (sub-agents, tests).
    pub fn for_workstream(mut self, ws_id: &str, node_id: &str) -> Self {
        self.ws_id = Arc::from(ws_id);
        self.node_id = Arc::from(node_id);
        self
    }
}

/// The display and approval facts of one call, computed before anything runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// Parsed and validated arguments, passed to `execute` unchanged.
    pub args: Value,
    /// One-line human header, e.g. `⚙ bash: echo hi`.
    pub header: String,
    /// Longer preview (a diff, file content); may be empty.
    pub preview: String,
    /// Whether a human must approve this call (before policy and auto-approve sets apply).
    pub needs_approval: bool,
    /// The label approvals and "always" decisions key on (e.g. `bash`, `overwrite_file`).
    pub approval_label: String,
}

/// Reading back the arguments `prepare` normalised: `execute` receives them as JSON, and
/// every tool reads them the same way.
impl Prepared {
    /// The string argument `key`, if present.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.args.get(key).and_then(Value::as_str)
    }

    /// The string argument `key` that `prepare` requires; a call whose `Prepared` lacks it
    /// (built by hand, not by `prepare`) gets the same error `prepare` would have given.
    pub fn required_text(&self, key: &str) -> Result<&str, ToolOutput> {
        self.text(key)
            .ok_or_else(|| ToolOutput::error(format!("Error: missing required argument '{key}'")))
    }

    /// The non-negative integer argument `key` as a count (a limit, a number of results).
    pub fn count(&self, key: &str) -> Option<usize> {
        self.args
            .get(key)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    }
}

/// Receives streamed output of a running tool (bash lines). Called from the tool's task.
pub trait OutputSink: Send + Sync {
    fn chunk(&self, text: &str);
}

/// A sink that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoOutput;

impl OutputSink for NoOutput {
    fn chunk(&self, _text: &str) {}
}

/// What a finished call returns to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text result. For a result with images it describes them, so a model that cannot
    /// see images (and every client) still learns what was read.
    pub content: String,
    pub is_error: bool,
    /// Images the call read (`read_file` of an image). The engine passes them to a model
    /// that can see images and drops them otherwise.
    pub images: Vec<ImagePart>,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            images: Vec::new(),
        }
    }
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            images: Vec::new(),
        }
    }
    /// The same output carrying `image`.
    pub fn with_image(mut self, image: ImagePart) -> Self {
        self.images.push(image);
        self
    }
}

/// A callable tool. `execute` is cancelled by dropping its future: implementations must
/// leave nothing running when that happens (e.g. `kill_on_drop` for child processes).
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    fn definition(&self) -> &ToolDefinition;

    /// Validates arguments and builds the header/preview. An `Err` is the text of a
    /// tool error fed back to the model; the call is then never executed. The built-in
    /// tools word it as `Error: …` (as the crate's argument checks do); the engine adds that
    /// prefix only to a text without one, so every tool's errors read alike.
    fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, String>;

    /// Runs the call. Failures are `ToolOutput { is_error: true, .. }`, never panics.
    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        out: &dyn OutputSink,
    ) -> ToolOutput;
}

mod bash;
mod files;
mod git;
mod man;
mod math;
mod notify;
mod open_preview;
mod registry;
mod search;
mod ssrf;
mod toolset;
mod watch;
mod web_fetch;
mod web_registry;
mod web_search;
mod web_support;

use parking_lot::Mutex;
use serde_json::Value;
use turnstone_tools::{NoOutput, OutputSink, Prepared, ToolContext, ToolOutput, ToolRegistry};

/// Records streamed chunks in arrival order.
#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<String>>);

impl OutputSink for Recorder {
    fn chunk(&self, text: &str) {
        self.0.lock().push(text.to_owned());
    }
}

impl Recorder {
    pub fn chunks(&self) -> Vec<String> {
        self.0.lock().clone()
    }
}

pub fn registry() -> ToolRegistry {
    ToolRegistry::with_builtins().unwrap()
}

pub fn prepare(name: &str, args: Value, ctx: &ToolContext) -> Result<Prepared, String> {
    registry().get(name).unwrap().prepare(args, ctx)
}

/// prepare + execute; panics if prepare refuses.
pub async fn run(name: &str, args: Value, ctx: &ToolContext) -> ToolOutput {
    let tool = registry().get(name).unwrap();
    let prepared = tool
        .prepare(args, ctx)
        .unwrap_or_else(|e| panic!("prepare {name}: {e}"));
    tool.execute(&prepared, ctx, &NoOutput).await
}

/// Polls `check` until it holds or ~10 s pass.
pub async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    check()
}

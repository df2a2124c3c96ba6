//! MCP tools as engine tools: each discovered `mcp__{server}__{tool}` becomes a
//! [`Tool`] in the node's live registry, kept in step with the MCP manager (every
//! discovery, `listChanged` refresh or reconnect replaces that server's tools at once; the
//! next turn of every workstream sees the change).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use turnstone_mcp::{McpManager, McpTool};
use turnstone_tools::{
    OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolMeta, ToolOutput, ToolRegistry,
    truncate_output,
};

/// One MCP tool, called through the manager.
pub struct McpToolAdapter {
    def: ToolDefinition,
    manager: Arc<McpManager>,
    needs_approval: bool,
}

impl std::fmt::Debug for McpToolAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolAdapter")
            .field("name", &self.def.name)
            .finish()
    }
}

impl McpToolAdapter {
    pub fn new(tool: &McpTool, manager: Arc<McpManager>) -> Self {
        Self {
            def: ToolDefinition {
                name: tool.qualified_name.clone(),
                description: tool.prefixed_description(),
                parameters: (*tool.input_schema).clone(),
                meta: ToolMeta {
                    auto_approve: tool.auto_approve,
                    ..ToolMeta::default()
                },
            },
            manager,
            needs_approval: tool.needs_approval(),
        }
    }
}

fn one_line(args: &Value) -> String {
    let s = args.to_string();
    if s.chars().count() > 120 {
        let cut: String = s.chars().take(117).collect();
        format!("{cut}...")
    } else {
        s
    }
}

#[async_trait]
impl Tool for McpToolAdapter {
    fn definition(&self) -> &ToolDefinition {
        &self.def
    }

    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        if !args.is_object() {
            return Err(format!(
                "Error: {} takes a JSON object of arguments",
                self.def.name
            ));
        }
        Ok(Prepared {
            header: format!("\u{2699} {}: {}", self.def.name, one_line(&args)),
            preview: serde_json::to_string_pretty(&args).unwrap_or_default(),
            needs_approval: self.needs_approval,
            approval_label: self.def.name.clone(),
            args,
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        match self
            .manager
            .call_tool(&self.def.name, prepared.args.clone())
            .await
        {
            Ok(r) => {
                let text = truncate_output(&r.text, ctx.truncation_limit);
                if r.is_error {
                    ToolOutput::error(format!("Error: {text}"))
                } else {
                    ToolOutput::ok(text)
                }
            }
            Err(e) => ToolOutput::error(format!("Error: {e}")),
        }
    }
}

/// Mirrors the manager's tools into `registry` now and after every change, until the
/// manager is dropped.
pub fn spawn_sync(
    manager: Arc<McpManager>,
    registry: Arc<ToolRegistry>,
) -> tokio::task::JoinHandle<()> {
    let mut changes = manager.subscribe();
    tokio::spawn(async move {
        let mut present: BTreeSet<String> = BTreeSet::new();
        loop {
            let mut by_server: BTreeMap<String, Vec<Arc<dyn Tool>>> = BTreeMap::new();
            for t in manager.tools_snapshot() {
                by_server
                    .entry(t.server.clone())
                    .or_default()
                    .push(Arc::new(McpToolAdapter::new(&t, manager.clone())));
            }
            for gone in present.difference(&by_server.keys().cloned().collect()) {
                registry.remove_mcp_server(gone);
            }
            for (server, tools) in &by_server {
                if let Err(e) = registry.replace_mcp_server(server, tools.clone()) {
                    tracing::warn!(server, error = %e, "MCP tools not registered");
                }
            }
            present = by_server.into_keys().collect();
            if changes.changed().await.is_err() {
                return;
            }
        }
    })
}

/// Connects an engine to MCP servers: `read_resource` and `use_prompt` join its registry,
/// the servers' prompt catalog its system prompt, and the servers' tools are mirrored into
/// the registry from now on (the returned task; abort it at shutdown). The node and the
/// terminal client both attach their engine with it.
pub fn attach(
    manager: &Arc<McpManager>,
    engine: &turnstone_engine::Engine,
) -> tokio::task::JoinHandle<()> {
    let registry = engine.registry();
    if let Err(e) = crate::mcp_resource_tools::register(manager, registry) {
        tracing::warn!(error = %e, "read_resource and use_prompt not registered");
    }
    engine.add_system_section(Arc::new(crate::mcp_resource_tools::PromptCatalog(
        manager.clone(),
    )));
    spawn_sync(manager.clone(), registry.clone())
}

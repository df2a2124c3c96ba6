use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use turnstone_tools::{
    ArgumentError, OutputSink, Prepared, Provenance, RegistryError, Tool, ToolContext,
    ToolDefinition, ToolOutput, ToolRegistry, parse_definition, truncate_output,
};

struct Echo(ToolDefinition);

#[async_trait]
impl Tool for Echo {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }
    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        Ok(Prepared {
            args,
            header: "echo".into(),
            preview: String::new(),
            needs_approval: true,
            approval_label: "mcp__x__echo".into(),
        })
    }
    async fn execute(&self, p: &Prepared, _ctx: &ToolContext, _out: &dyn OutputSink) -> ToolOutput {
        ToolOutput::ok(p.args.to_string())
    }
}

fn echo() -> Arc<dyn Tool> {
    let def = parse_definition(r#"{"name":"mcp__x__echo","description":"Echo.","parameters":{"type":"object","properties":{}}}"#)
        .unwrap();
    Arc::new(Echo(def))
}

#[test]
fn registered_tools_follow_builtins_and_duplicates_fail() {
    let mut reg = ToolRegistry::with_builtins().unwrap();
    reg.register(echo()).unwrap();
    assert_eq!(reg.names().last().unwrap(), "mcp__x__echo");
    assert_eq!(
        reg.register(echo()),
        Err(RegistryError::DuplicateTool("mcp__x__echo".into()))
    );
    assert_eq!(reg.specs().last().unwrap().name, "mcp__x__echo");
}

fn named(name: &str) -> Arc<dyn Tool> {
    let def = parse_definition(&format!(
        r#"{{"name":"{name}","description":"A tool.","parameters":{{"type":"object","properties":{{}}}}}}"#
    ))
    .unwrap();
    Arc::new(Echo(def))
}

/// Tools a node adds at run time (`memory`, `skill`, `watch`, …) take their place among the
/// built-ins by name, whatever the order they are added in; MCP tools stay after them all.
#[test]
fn runtime_tools_join_the_builtins_in_name_order_before_mcp_tools() {
    let reg = ToolRegistry::with_builtins().unwrap();
    reg.add(echo(), Provenance::Mcp("x".into())).unwrap();
    for name in [
        "watch",
        "memory",
        "task_agent",
        "skill",
        "zzz_last",
        "aaa_first",
        "recall",
    ] {
        reg.add(named(name), Provenance::Builtin).unwrap();
    }
    reg.add(named("mcp__a__tool"), Provenance::Mcp("a".into()))
        .unwrap();
    let expected = [
        "aaa_first",
        "bash",
        "diff_file",
        "edit_file",
        "git",
        "man",
        "math",
        "memory",
        "read_file",
        "recall",
        "search",
        "skill",
        "task_agent",
        "watch",
        "write_file",
        "zzz_last",
        "mcp__a__tool",
        "mcp__x__echo",
    ];
    assert_eq!(reg.names(), expected);
    // The same tools added in the reverse order give the same registry.
    let again = ToolRegistry::new();
    for name in expected.iter().rev() {
        let tool = reg.get(name).unwrap();
        again.add(tool, reg.provenance(name).unwrap()).unwrap();
    }
    assert_eq!(again.names(), expected);
    // Removing and re-adding a tool puts it back in its place.
    assert!(reg.remove("memory"));
    reg.add(named("memory"), Provenance::Builtin).unwrap();
    assert_eq!(reg.names(), expected);
}

#[test]
fn bare_strings_need_a_primary_key() {
    let mut reg = ToolRegistry::with_builtins().unwrap();
    reg.register(echo()).unwrap();
    assert_eq!(
        reg.parse_arguments("search", "TODO").unwrap(),
        json!({"query": "TODO"})
    );
    let err = reg.parse_arguments("mcp__x__echo", "not json").unwrap_err();
    assert!(matches!(err, ArgumentError::Json(_)));
    assert!(err.to_string().starts_with("JSON parse error: "), "{err}");
    assert_eq!(
        reg.parse_arguments("mcp__x__echo", "{\"a\":1}").unwrap(),
        json!({"a": 1})
    );
}

#[test]
fn unknown_tool_lists_available_names() {
    let reg = ToolRegistry::with_builtins().unwrap();
    let err = reg.parse_arguments("Read_File", "{}").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Unknown tool: 'Read_File'. tool 'Read_File' is not registered. Available tools: bash, diff_file, \
         edit_file, git, man, math, read_file, search, write_file"
    );
}

#[test]
fn truncation_marker_has_the_wire_format() {
    let text = format!("{}{}", "h".repeat(50), "t".repeat(50));
    assert_eq!(
        truncate_output(&text, 10),
        format!("hhhhh\n\n... [90 chars truncated — output exceeded 10 char limit] ...\n\nttttt")
    );
    assert_eq!(truncate_output(&text, 0), text);
}

#[tokio::test]
async fn every_builtin_survives_hostile_arguments() {
    let reg = ToolRegistry::with_builtins().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    let hostile = [
        json!(null),
        json!([]),
        json!("string"),
        json!({}),
        json!({"path": 5, "command": [], "query": {}, "path_a": null}),
        json!({"path": "\u{0}", "content": "x", "old_string": "\u{0}", "new_string": "", "query": "\u{0}", "command": "\u{0}", "path_a": "\u{0}", "content_b": ""}),
        json!({"path": "../../../../../../", "offset": -1, "limit": 1e300, "query": "(", "command": "true", "timeout": 1e300, "path_a": "/", "path_b": "/"}),
    ];
    for name in reg.names() {
        let tool = reg.get(&name).unwrap();
        for args in &hostile {
            if let Ok(prepared) = tool.prepare(args.clone(), &ctx) {
                if name == "bash" {
                    continue;
                }
                let _ = tool
                    .execute(&prepared, &ctx, &turnstone_tools::NoOutput)
                    .await;
            }
        }
    }
}

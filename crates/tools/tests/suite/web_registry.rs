//! The web tools in the registry: registration, order, metadata, primary keys.

use serde_json::json;
use turnstone_tools::{BuiltinOptions, ToolRegistry, WebOptions};

fn with_web() -> ToolRegistry {
    ToolRegistry::with_builtin_options(&BuiltinOptions {
        web: WebOptions {
            enabled: true,
            ..WebOptions::default()
        },
        ..BuiltinOptions::default()
    })
    .unwrap()
}

#[test]
fn web_tools_are_registered_alphabetically_with_seed_metadata() {
    let reg = with_web();
    assert_eq!(
        reg.names(),
        [
            "bash",
            "diff_file",
            "edit_file",
            "git",
            "man",
            "math",
            "notify",
            "read_file",
            "search",
            "web_fetch",
            "web_search",
            "write_file"
        ]
    );
    let meta = |n: &str| reg.get(n).unwrap().definition().meta.clone();
    assert!(!meta("web_fetch").auto_approve && meta("web_fetch").task_agent);
    assert!(meta("web_search").auto_approve && meta("web_search").task_agent);
    assert!(meta("notify").auto_approve && meta("notify").task_agent);
    assert_eq!(meta("web_fetch").primary_key.as_deref(), Some("url"));
    assert_eq!(meta("web_search").primary_key.as_deref(), Some("query"));
    assert_eq!(meta("notify").primary_key.as_deref(), Some("message"));
    for spec in reg.specs() {
        assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
    }
    assert_eq!(
        reg.parse_arguments("web_fetch", "https://example.com")
            .unwrap(),
        json!({"url": "https://example.com"})
    );
    // Without the switch the registry keeps the nine that need no network.
    assert_eq!(ToolRegistry::with_builtins().unwrap().len(), 9);
}

#[tokio::test]
async fn web_tools_survive_hostile_arguments() {
    let reg = with_web();
    let ctx = turnstone_tools::ToolContext::new("/");
    let hostile = [
        json!(null),
        json!([]),
        json!("string"),
        json!({}),
        json!({"url": 5, "query": [], "message": {}}),
        json!({"url": "\u{0}", "query": "\u{0}", "message": "\u{0}", "max_results": 1e300, "category": "\u{0}"}),
        json!({"url": "http://[::1", "question": null, "max_results": -1, "target": "", "title": ""}),
        json!({"url": "http://", "query": "x", "max_results": "9999999999999999999999"}),
    ];
    for name in ["notify", "web_fetch", "web_search"] {
        let tool = reg.get(name).unwrap();
        for args in &hostile {
            if let Ok(prepared) = tool.prepare(args.clone(), &ctx) {
                let out = tool
                    .execute(&prepared, &ctx, &turnstone_tools::NoOutput)
                    .await;
                // Nothing is configured: every executed call must end in a clear error.
                assert!(out.is_error, "{name} {args}: {}", out.content);
            }
        }
    }
}

//! `math`: evaluation, approval, and every boundary of the sandbox — files, sockets,
//! processes, the CPU limit, the memory limit — each refused with a clear tool error.

use std::time::Duration;

use serde_json::json;
use turnstone_tools::{MathLimits, MathTool, NoOutput, Tool, ToolContext, ToolOutput};

use super::{prepare, registry};

/// A sandbox with a short CPU limit so the loop test is quick.
fn tool() -> MathTool {
    MathTool::new().unwrap().with_limits(MathLimits {
        cpu_seconds: 1,
        memory_bytes: 256 * 1024 * 1024,
        wall: Duration::from_secs(20),
    })
}

async fn eval(code: &str) -> ToolOutput {
    let ctx = ToolContext::new(std::env::temp_dir());
    let tool = tool();
    let prepared = tool.prepare(json!({ "code": code }), &ctx).unwrap();
    tool.execute(&prepared, &ctx, &NoOutput).await
}

#[tokio::test]
async fn math_prints_results_and_needs_approval() {
    let ctx = ToolContext::new(std::env::temp_dir());
    let prepared = prepare("math", json!({"code": "print(2**100)"}), &ctx).unwrap();
    assert!(prepared.needs_approval);
    assert_eq!(prepared.approval_label, "math");
    assert_eq!(prepared.preview, "print(2**100)");
    // Auto-approved in sub-agents (node spec §5.2).
    let meta = registry().get("math").unwrap().definition().meta.clone();
    assert!(meta.auto_approve && meta.agent && meta.task_agent);
    let out = eval("import math\nfrom fractions import Fraction\nprint(math.comb(52, 5))\nprint(Fraction(1, 3) + Fraction(1, 6))").await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(out.content, "2598960\n1/2");
    let silent = eval("x = 1 + 1").await;
    assert!(!silent.is_error);
    assert!(
        silent.content.contains("printed nothing"),
        "{}",
        silent.content
    );
    let failing = eval("print('before')\nprint(1 / 0)").await;
    assert!(failing.is_error);
    assert_eq!(
        failing.content,
        "before\nError: ZeroDivisionError: division by zero (line 2)"
    );
    let syntax = eval("print(").await;
    assert!(syntax.is_error);
    assert!(
        syntax.content.starts_with("Error: SyntaxError"),
        "{}",
        syntax.content
    );
}

#[tokio::test]
async fn math_arguments_are_validated() {
    let ctx = ToolContext::new(std::env::temp_dir());
    assert!(
        prepare("math", json!({}), &ctx)
            .unwrap_err()
            .contains("missing required argument 'code'")
    );
    assert!(
        prepare("math", json!({"code": "  "}), &ctx)
            .unwrap_err()
            .contains("must not be empty")
    );
    assert!(
        prepare("math", json!({"code": 5}), &ctx)
            .unwrap_err()
            .contains("must be a string")
    );
    let long = "x = 1\n".repeat(20_000);
    assert!(
        prepare("math", json!({"code": long}), &ctx)
            .unwrap_err()
            .contains("the limit is")
    );
    assert_eq!(
        registry().parse_arguments("math", "print(1)").unwrap(),
        json!({"code": "print(1)"})
    );
}

#[tokio::test]
async fn math_cannot_read_files() {
    for code in [
        "print(open('/etc/passwd').read())",
        "import io\nprint(io.open('/etc/passwd').read())",
        "import pathlib\nprint(pathlib.Path('/etc/passwd').read_text())",
    ] {
        let out = eval(code).await;
        assert!(out.is_error, "{code}: {}", out.content);
        assert!(!out.content.contains("root:"), "{code}: {}", out.content);
        assert!(
            out.content.starts_with("Error: "),
            "{code}: {}",
            out.content
        );
    }
    let out = eval("print(open('/etc/passwd').read())").await;
    assert_eq!(
        out.content,
        "Error: NameError: name 'open' is not defined (line 1)"
    );
}

#[tokio::test]
async fn math_cannot_open_sockets() {
    let out = eval("import socket\nsocket.create_connection(('127.0.0.1', 80))").await;
    assert!(out.is_error);
    assert!(
        out.content
            .starts_with("Error: Refused: import of 'socket' is not allowed"),
        "{}",
        out.content
    );
    let sneaky = eval("import json\nprint(json.decoder.__builtins__)").await;
    assert!(sneaky.is_error);
    assert!(
        sneaky
            .content
            .contains("attribute '__builtins__' is not allowed"),
        "{}",
        sneaky.content
    );
}

#[tokio::test]
async fn math_cannot_start_processes() {
    for (code, expected) in [
        (
            "import os\nos.system('id')",
            "import of 'os' is not allowed",
        ),
        (
            "import subprocess\nsubprocess.run(['id'])",
            "import of 'subprocess' is not allowed",
        ),
        (
            "__import__('os').system('id')",
            "the name '__import__' is not allowed",
        ),
        (
            "().__class__.__base__.__subclasses__()",
            "attribute '__subclasses__' is not allowed",
        ),
        ("eval(\"__import__('os')\")", "name 'eval' is not defined"),
        ("getattr(1, 'real')", "name 'getattr' is not defined"),
    ] {
        let out = eval(code).await;
        assert!(out.is_error, "{code}: {}", out.content);
        assert!(out.content.contains(expected), "{code}: {}", out.content);
    }
}

#[tokio::test]
async fn math_stops_an_infinite_loop_at_its_cpu_limit() {
    let started = tokio::time::Instant::now();
    let out = eval("while True:\n    pass").await;
    assert!(out.is_error);
    assert_eq!(
        out.content,
        "Error: the code used more than 1 s of CPU time and was stopped"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn math_refuses_a_huge_allocation() {
    let out = eval("x = bytearray(4 * 1024 ** 3)\nprint(len(x))").await;
    assert!(out.is_error);
    assert_eq!(
        out.content,
        "Error: MemoryError: the code needed more than the 256 MB memory limit"
    );
}

#[tokio::test]
async fn math_without_python_is_a_clear_error() {
    let ctx = ToolContext::new(std::env::temp_dir());
    let tool = MathTool::new()
        .unwrap()
        .with_python("turnstone-no-such-python");
    let prepared = tool.prepare(json!({"code": "print(1)"}), &ctx).unwrap();
    let out = tool.execute(&prepared, &ctx, &NoOutput).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("math needs Python 3"),
        "{}",
        out.content
    );
}

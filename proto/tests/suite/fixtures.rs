//! Literal JSON shapes from `spec/cluster-protocol.md` and `spec/node-api.md`,
//! written the way the Python original prints them (`", "`/`": "` separators,
//! `\uXXXX` escapes). Values the specs elide (`…`) are filled in.
//!
//! `FULL` fixtures carry every field in the original's key order, so the
//! encoded form must have exactly these keys, in this order, with these values.
//! `PARTIAL` fixtures are abbreviated in the spec; they must decode and
//! round-trip, and their snapshots show the filled defaults.

/// A real server's ws id (32 hex).
pub const W: &str = "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60";

pub const INBOUND_FULL: &[(&str, &str)] = &[
    (
        "send_existing_ws",
        r#"{"type": "send", "correlation_id": "9082b522c877", "timestamp": 1795948743.5014775, "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "message": "say hi", "auto_approve": true, "auto_approve_tools": [], "name": "", "target_node": ""}"#,
    ),
    (
        "send_new_ws_directed",
        r#"{"type": "send", "correlation_id": "0a1b2c3d4e5f", "timestamp": 1795948744.25, "ws_id": "", "message": "runtool", "auto_approve": false, "auto_approve_tools": ["read_file", "bash"], "name": "scratch", "target_node": "node-b"}"#,
    ),
    (
        "approve_always",
        r#"{"type": "approve", "correlation_id": "77aa88bb99cc", "timestamp": 1795948750.125, "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "request_id": "9581019dbea9", "approved": true, "feedback": null, "always": true}"#,
    ),
    (
        "approve_denied_with_feedback",
        r#"{"type": "approve", "correlation_id": "77aa88bb99cd", "timestamp": 1795948751.0, "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "request_id": "9581019dbea9", "approved": false, "feedback": "not now", "always": false}"#,
    ),
    (
        "plan_feedback_reject",
        r#"{"type": "plan_feedback", "correlation_id": "abcdefabcdef", "timestamp": 1795948752.5, "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "request_id": "1234567890ab", "feedback": "reject"}"#,
    ),
    (
        "command_clear",
        r#"{"type": "command", "correlation_id": "c0ffeec0ffee", "timestamp": 1795948753.0, "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "command": "/clear"}"#,
    ),
    (
        "create_workstream_console",
        r#"{"type": "create_workstream", "correlation_id": "3e1f00d2a9b8", "timestamp": 1795948740.75, "name": "via-console", "auto_approve": false, "auto_approve_tools": [], "target_node": "node-a", "model": "", "initial_message": "say hi", "resume_ws": "", "user_id": "", "skill": ""}"#,
    ),
    (
        "create_workstream_resume",
        r#"{"type": "create_workstream", "correlation_id": "3e1f00d2a9b9", "timestamp": 1795948741.0, "name": "discord-42", "auto_approve": true, "auto_approve_tools": ["search"], "target_node": "", "model": "fast", "initial_message": "", "resume_ws": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "user_id": "u-7", "skill": "triage"}"#,
    ),
    (
        "close_workstream",
        r#"{"type": "close_workstream", "correlation_id": "d1d2d3d4d5d6", "timestamp": 1795948760.0, "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60"}"#,
    ),
    (
        "list_workstreams",
        r#"{"type": "list_workstreams", "correlation_id": "e1e2e3e4e5e6", "timestamp": 1795948761.0}"#,
    ),
    (
        "health",
        r#"{"type": "health", "correlation_id": "f1f2f3f4f5f6", "timestamp": 1795948762.0}"#,
    ),
    (
        "list_nodes",
        r#"{"type": "list_nodes", "correlation_id": "a1a2a3a4a5a6", "timestamp": 1795948763.0}"#,
    ),
    (
        "cancel",
        r#"{"type": "cancel", "correlation_id": "b1b2b3b4b5b6", "timestamp": 1795948764.0, "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60"}"#,
    ),
];

/// Abbreviated inbound shapes from the live trace (cluster spec §12).
pub const INBOUND_PARTIAL: &[(&str, &str)] = &[
    (
        "trace_reroute_send_without_timestamp",
        r#"{"type": "send", "correlation_id": "5a5a5a5a5a5a", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "message": "hello"}"#,
    ),
    (
        "trace_create_targeted",
        r#"{"type": "create_workstream", "correlation_id": "6b6b6b6b6b6b", "timestamp": 1795948700.0, "target_node": "node-a"}"#,
    ),
];

pub const OUTBOUND_FULL: &[(&str, &str)] = &[
    (
        "ack_ok",
        r#"{"type": "ack", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "9082b522c877", "timestamp": 1795948743.6, "status": "ok", "detail": ""}"#,
    ),
    (
        "ack_create_failed_global",
        r#"{"type": "ack", "ws_id": "", "correlation_id": "3e1f00d2a9b8", "timestamp": 1795948743.7, "status": "error", "detail": "All 50 workstreams are active"}"#,
    ),
    (
        "content",
        r#"{"type": "content", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "", "timestamp": 1795948744.1, "text": "Hello from fake LLM."}"#,
    ),
    (
        "reasoning",
        r#"{"type": "reasoning", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "", "timestamp": 1795948744.2, "text": "thinking..."}"#,
    ),
    (
        "tool_info",
        r#"{"type": "tool_info", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "", "timestamp": 1795948744.3, "items": [{"call_id": "call_2", "header": "\u2699 read_file: README.md", "preview": "", "func_name": "read_file", "approval_label": "read_file", "needs_approval": false, "error": null}]}"#,
    ),
    (
        "approval_request",
        r#"{"type": "approval_request", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "9581019dbea9", "timestamp": 1795948745.0, "items": [{"call_id": "call_1", "header": "\u2699 bash: echo hi", "preview": "", "func_name": "bash", "approval_label": "bash", "needs_approval": true, "error": null, "verdict": {"verdict_id": "0f9e8d7c6b5a49382716051423324150", "call_id": "call_1", "func_name": "bash", "func_args": "{\"command\": \"echo hi\"}", "intent_summary": "Print a greeting", "risk_level": "low", "confidence": 0.9, "recommendation": "approve", "reasoning": "echo has no side effects", "evidence": ["echo"], "tier": "heuristic", "judge_model": "", "latency_ms": 0}}]}"#,
    ),
    (
        "tool_output_chunk",
        r#"{"type": "tool_output_chunk", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "", "timestamp": 1795948746.0, "call_id": "call_1", "chunk": "hi\n"}"#,
    ),
    (
        "tool_result",
        r#"{"type": "tool_result", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "", "timestamp": 1795948746.1, "call_id": "call_1", "name": "bash", "output": "hi"}"#,
    ),
    (
        "plan_review",
        r#"{"type": "plan_review", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "1234567890ab", "timestamp": 1795948747.0, "content": "1. Read the code\n2. Fix the bug"}"#,
    ),
    (
        "status",
        r#"{"type": "status", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "", "timestamp": 1795948748.0, "prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24, "context_window": 32768, "pct": 0.1, "effort": "medium", "cache_creation_tokens": 0, "cache_read_tokens": 0, "tool_calls_this_turn": 0, "turn_count": 1}"#,
    ),
    (
        "state_change_thinking",
        r#"{"type": "state_change", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "", "timestamp": 1795948743.8, "state": "thinking"}"#,
    ),
    (
        "turn_complete",
        r#"{"type": "turn_complete", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "3e1f00d2a9b8", "timestamp": 1795948748.2, "content": "Hello from fake LLM."}"#,
    ),
    (
        "stream_end",
        r#"{"type": "stream_end", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "", "timestamp": 1795948747.9}"#,
    ),
    (
        "ws_created_global",
        r#"{"type": "ws_created", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "3e1f00d2a9b8", "timestamp": 1795948742.0, "name": "via-console", "node_id": "", "resumed": false, "message_count": 0}"#,
    ),
    (
        "ws_created_cluster_recovery",
        r#"{"type": "ws_created", "ws_id": "00112233445566778899aabbccddeeff", "correlation_id": "", "timestamp": 1795948700.5, "name": "default", "node_id": "node-a", "resumed": false, "message_count": 0}"#,
    ),
    (
        "ws_closed",
        r#"{"type": "ws_closed", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "", "timestamp": 1795948800.0}"#,
    ),
    (
        "ws_list",
        r#"{"type": "ws_list", "ws_id": "", "correlation_id": "e1e2e3e4e5e6", "timestamp": 1795948761.1, "workstreams": [{"id": "00112233445566778899aabbccddeeff", "name": "default", "state": "idle"}, {"id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "name": "ok", "state": "thinking"}]}"#,
    ),
    (
        "ws_rename",
        r#"{"type": "ws_rename", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "", "timestamp": 1795948749.0, "name": "ok"}"#,
    ),
    (
        "health_response",
        r#"{"type": "health_response", "ws_id": "", "correlation_id": "f1f2f3f4f5f6", "timestamp": 1795948762.1, "data": {"status": "ok", "version": "0.9.6", "node_id": "node-b", "uptime_seconds": 5.62, "model": "fake-model", "max_ws": 50, "workstreams": {"total": 1, "idle": 1, "thinking": 0, "running": 0, "attention": 0, "error": 0}, "backend": {"status": "up", "circuit_state": "closed"}}}"#,
    ),
    (
        "error_unknown_type_global",
        r#"{"type": "error", "ws_id": "", "correlation_id": "", "timestamp": 1795948765.0, "message": "Failed to process message: Unknown inbound message type: 'bogus'"}"#,
    ),
    (
        "info",
        r#"{"type": "info", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "", "timestamp": 1795948766.0, "message": "[Generation cancelled]"}"#,
    ),
    (
        "node_list",
        r#"{"type": "node_list", "ws_id": "", "correlation_id": "a1a2a3a4a5a6", "timestamp": 1795948763.1, "nodes": [{"server_url": "http://127.0.0.1:8781", "started": 1795948600.123, "max_ws": 50, "node_id": "node-a"}, {"server_url": "http://127.0.0.1:8782", "started": 1795948601.5, "max_ws": 50, "node_id": "node-b"}]}"#,
    ),
    (
        "ws_resumed",
        r#"{"type": "ws_resumed", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "3e1f00d2a9b9", "timestamp": 1795948742.5, "message_count": 12, "name": "discord-42"}"#,
    ),
    (
        "cluster_state_approval",
        r#"{"type": "cluster_state", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "", "timestamp": 1795948745.5, "state": "running", "node_id": "node-a", "tokens": 24, "context_ratio": 0.000732421875, "activity": "\u23f3 Awaiting approval: bash \u2014 ", "activity_state": "approval"}"#,
    ),
    (
        "intent_verdict",
        r#"{"type": "intent_verdict", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "", "timestamp": 1795948745.8, "call_id": "call_1", "func_name": "bash", "intent_summary": "Print a greeting", "risk_level": "low", "recommendation": "approve", "reasoning": "Harmless echo.", "tier": "llm", "judge_model": "judge-small", "verdict_id": "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5", "confidence": 0.97, "evidence": "[\"echo hi\"]", "latency_ms": 412}"#,
    ),
    (
        "output_warning",
        r#"{"type": "output_warning", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "", "timestamp": 1795948746.5, "call_id": "call_1", "func_name": "bash", "risk_level": "high", "flags": "[\"secret\"]", "annotations": "[\"AWS key redacted\"]", "redacted": 1}"#,
    ),
    (
        "config_change",
        r#"{"type": "config_change", "ws_id": "", "correlation_id": "", "timestamp": 1795948770.0, "key": "judge.enabled", "node_id": "node-a", "action": "set"}"#,
    ),
    (
        "unknown_type_keeps_base_and_extra",
        r#"{"type": "node_joined", "ws_id": "", "correlation_id": "", "timestamp": 1795948771.0, "node_id": "node-c", "max_ws": 8}"#,
    ),
];

/// Abbreviated outbound shapes (cluster spec §12 and console §6.4).
pub const OUTBOUND_PARTIAL: &[(&str, &str)] = &[
    (
        "trace_ws_created_cluster_start",
        r#"{"type":"ws_created","ws_id":"00112233445566778899aabbccddeeff","correlation_id":"","name":"default","node_id":"node-a","resumed":false,"message_count":0}"#,
    ),
    (
        "trace_error_global",
        r#"{"type":"error","ws_id":"","correlation_id":"","message":"Failed to process message: Unknown inbound message type: 'bogus'"}"#,
    ),
    (
        "trace_approval_request",
        r#"{"type":"approval_request","correlation_id":"9581019dbea9","items":[{"call_id":"call_1","header":"\u2699 bash: echo hi","func_name":"bash","approval_label":"bash","needs_approval":true,"error":null,"verdict":{"tier":"heuristic"}}]}"#,
    ),
    (
        "console_synthetic_ws_created",
        r#"{"type": "ws_created", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "name": "via-console", "node_id": "node-a"}"#,
    ),
];

/// Per-workstream SSE events (node spec §2.2, §2.4, §2.5, §2.6), plus our
/// `ws_state` / `turn_complete` additions.
pub const WS_EVENTS: &[(&str, &str)] = &[
    (
        "connected",
        r#"{"type": "connected", "model": "fake-model", "model_alias": "default", "skip_permissions": false}"#,
    ),
    (
        "history_pending_approval",
        r#"{"type": "history", "messages": [{"role": "user", "content": "run echo hi"}, {"role": "assistant", "content": "Let me run it.", "tool_calls": [{"id": "call_abc", "name": "bash", "arguments": "{\"command\": \"echo hi\"}"}], "pending": true}]}"#,
    ),
    (
        "history_denied_and_errors",
        r#"{"type": "history", "messages": [{"role": "user", "content": [{"type": "text", "text": "delete it"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "name": "bash", "arguments": "{\"command\": \"rm -rf x\"}"}], "denied": true}, {"role": "tool", "content": "Denied by user: no", "denied": true}, {"role": "tool", "content": "Error: file not found", "is_error": true}, {"role": "assistant", "content": "Understood."}]}"#,
    ),
    (
        "state_change",
        r#"{"type": "state_change", "state": "thinking"}"#,
    ),
    ("thinking_start", r#"{"type": "thinking_start"}"#),
    ("thinking_stop", r#"{"type": "thinking_stop"}"#),
    (
        "reasoning",
        r#"{"type": "reasoning", "text": "thinking..."}"#,
    ),
    ("content", r#"{"type": "content", "text": "t me run it."}"#),
    ("stream_end", r#"{"type": "stream_end"}"#),
    (
        "tool_info",
        r#"{"type": "tool_info", "items": [{"call_id": "call_2", "header": "\u2699 read_file: README.md", "preview": "", "func_name": "read_file", "approval_label": "read_file", "needs_approval": false, "error": null}]}"#,
    ),
    (
        "approve_request",
        r#"{"type": "approve_request", "items": [{"call_id": "call_abc", "header": "\u2699 bash: echo hi", "preview": "", "func_name": "bash", "approval_label": "bash", "needs_approval": true, "error": null, "verdict": {"verdict_id": "0f9e8d7c6b5a49382716051423324150", "call_id": "call_abc", "func_name": "bash", "func_args": "{\"command\": \"echo hi\"}", "intent_summary": "Print a greeting", "risk_level": "low", "confidence": 0.9, "recommendation": "approve", "reasoning": "echo has no side effects", "evidence": ["echo"], "tier": "heuristic", "judge_model": "", "latency_ms": 0}}, {"call_id": "call_x", "header": "\u2699 frobnicate", "preview": "", "func_name": "frobnicate", "approval_label": "frobnicate", "needs_approval": false, "error": "Unknown tool: frobnicate"}], "judge_pending": true}"#,
    ),
    (
        "approval_resolved",
        r#"{"type": "approval_resolved", "approved": true, "feedback": ""}"#,
    ),
    (
        "approval_resolved_cancel",
        r#"{"type": "approval_resolved", "approved": false, "feedback": "Cancelled by user"}"#,
    ),
    (
        "intent_verdict",
        r#"{"type": "intent_verdict", "verdict_id": "a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5", "call_id": "call_abc", "func_name": "bash", "func_args": "{\"command\": \"echo hi\"}", "intent_summary": "Print a greeting", "risk_level": "low", "confidence": 0.97, "recommendation": "approve", "reasoning": "Harmless echo.", "evidence": ["echo hi"], "tier": "llm", "judge_model": "judge-small", "latency_ms": 412}"#,
    ),
    (
        "output_warning",
        r#"{"type": "output_warning", "call_id": "call_abc", "flags": ["secret"], "risk_level": "high", "annotations": ["AWS key redacted"], "func_name": "bash", "output_length": 2048, "redacted": true}"#,
    ),
    (
        "tool_output_chunk",
        r#"{"type": "tool_output_chunk", "call_id": "call_abc", "chunk": "hi\n"}"#,
    ),
    (
        "tool_result",
        r#"{"type": "tool_result", "call_id": "call_abc", "name": "bash", "output": "hi"}"#,
    ),
    (
        "tool_result_error",
        r#"{"type": "tool_result", "call_id": "call_x", "name": "frobnicate", "output": "Unknown tool: frobnicate", "is_error": true}"#,
    ),
    (
        "status",
        r#"{"type": "status", "prompt_tokens": 150, "completion_tokens": 20, "total_tokens": 170, "context_window": 32768, "pct": 0.5, "effort": "medium", "cache_creation_tokens": 0, "cache_read_tokens": 0, "tool_calls_this_turn": 1, "turn_count": 1}"#,
    ),
    (
        "plan_review",
        r#"{"type": "plan_review", "content": "1. Read the code\n2. Fix the bug"}"#,
    ),
    (
        "plan_review_with_request_id",
        r#"{"type": "plan_review", "request_id": "9f8e7d6c5b4a3928", "content": "1. Read the code"}"#,
    ),
    (
        "plan_resolved",
        r#"{"type": "plan_resolved", "request_id": "9f8e7d6c5b4a3928", "decision": "refine", "feedback": "Add tests", "decided_by": "user"}"#,
    ),
    (
        "preview",
        r#"{"type": "preview", "preview_id": "0123456789abcdef0123456789abcdef", "kind": "web", "title": "Report", "url": "/v1/api/previews/0123456789abcdef0123456789abcdef?ws_id=5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60"}"#,
    ),
    (
        "info_nudge",
        r#"{"type": "info", "message": "[metacognition: nudge injected \u2014 denial]"}"#,
    ),
    (
        "info_cancelled",
        r#"{"type": "info", "message": "[Generation cancelled]"}"#,
    ),
    (
        "error",
        r#"{"type": "error", "message": "Error: backend unavailable"}"#,
    ),
    (
        "busy_error",
        r#"{"type": "busy_error", "message": "Cannot rewind/retry while processing."}"#,
    ),
    ("clear_ui", r#"{"type": "clear_ui"}"#),
    ("cancelled", r#"{"type": "cancelled"}"#),
    (
        "ws_state_idle_on_ws_stream",
        r#"{"type": "ws_state", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "state": "idle", "tokens": 170, "context_ratio": 0.00518798828125, "activity": "", "activity_state": "", "content": "Let me run it.All done."}"#,
    ),
    (
        "turn_complete",
        r#"{"type": "turn_complete", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "correlation_id": "9082b522c877", "content": "Let me run it.All done."}"#,
    ),
    (
        "unknown_type_kept",
        r#"{"type": "compaction_progress", "done": 3, "total": 10}"#,
    ),
];

/// Global SSE events (node spec §2.3, §2.4).
pub const GLOBAL_EVENTS: &[(&str, &str)] = &[
    (
        "ws_state_thinking",
        r#"{"type": "ws_state", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "state": "thinking", "tokens": 0, "context_ratio": 0.0, "activity": "", "activity_state": ""}"#,
    ),
    (
        "ws_state_running_after_approval",
        r#"{"type": "ws_state", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "state": "running", "tokens": 0, "context_ratio": 0.0, "activity": "\u23f3 Awaiting approval: bash \u2014 ", "activity_state": "approval"}"#,
    ),
    (
        "ws_state_idle",
        r#"{"type": "ws_state", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "state": "idle", "tokens": 170, "context_ratio": 0.00518798828125, "activity": "", "activity_state": "", "content": "Let me run it.All done."}"#,
    ),
    (
        "ws_activity_thinking",
        r#"{"type": "ws_activity", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "activity": "Thinking\u2026", "activity_state": "thinking"}"#,
    ),
    (
        "ws_activity_tool",
        r#"{"type": "ws_activity", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "activity": "\u2699 read_file: README.md", "activity_state": "tool"}"#,
    ),
    (
        "ws_activity_cleared",
        r#"{"type": "ws_activity", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "activity": "", "activity_state": ""}"#,
    ),
    (
        "ws_rename",
        r#"{"type": "ws_rename", "ws_id": "5f1c0e8a9b2d4c6e8f0a1b2c3d4e5f60", "name": "Fake Title Here"}"#,
    ),
    (
        "ws_closed_evicted",
        r#"{"type": "ws_closed", "ws_id": "00112233445566778899aabbccddeeff", "reason": "evicted", "name": "default"}"#,
    ),
    (
        "ws_closed_idle",
        r#"{"type": "ws_closed", "ws_id": "00112233445566778899aabbccddeeff", "reason": "idle"}"#,
    ),
];

/// Parses a fixture as a plain JSON value.
pub fn value(json: &str) -> serde_json::Value {
    serde_json::from_str(json).expect("fixture is JSON")
}

/// The top-level keys of a JSON object, in order.
pub fn keys(v: &serde_json::Value) -> Vec<String> {
    v.as_object().expect("object").keys().cloned().collect()
}

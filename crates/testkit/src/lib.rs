//! # turnstone-testkit
//!
//! Dev-only test support for Turnstone (never a dependency of production code):
//!
//! * [`FakeLlm`] — the one fake model backend of the project: an OpenAI-compatible HTTP server
//!   (`GET /v1/models`, `POST /v1/chat/completions`, streaming and not) on `127.0.0.1:<port>`,
//!   with per-request reply overrides and injected [`Fault`]s. Also shipped as the
//!   `turnstone-fake-llm` binary for demos and benchmarks.
//! * [`FakeAnthropic`] — the same rules behind an Anthropic Messages API shaped server
//!   (`POST /v1/messages`, streamed events, thinking with signatures, tool use, server-side
//!   web search, `error` events) with [`AnthropicFault`]s; see [`fake_anthropic`].
//! * [`FakeRerank`] — a Cohere/Jina-compatible `/rerank` server scoring by token overlap, in
//!   each real service's reply shape, with injected [`RerankFault`]s; see [`fake_rerank`].
//! * [`ScriptedProvider`] — the same rules in-process, as a zero-latency
//!   [`turnstone_llm::Provider`] (no HTTP, no JSON) for engine tests and benchmarks.
//! * [`route_walk`] — walk an axum router over HTTP for route-table tests.
//! * [`secrets`] — fake secrets of many formats inside realistic tool output (the output
//!   guard's fixtures).
//! * [`assert_eventually!`] / [`eventually()`] — poll a condition instead of sleeping.
//! * [`promtool`] — `promtool check metrics` on a service's `/metrics` text.
//!
//! It knows the OpenAI chat-completions wire format and the neutral `turnstone-llm` types;
//! it must not know about tools, sessions, workstreams or storage beyond the text rules below.
//!
//! ## The script rules
//!
//! Without a queued reply or fault, the reply depends only on the **last message** of the
//! conversation ([`script::reply_for`]):
//!
//! | last message | reply |
//! |---|---|
//! | role `tool` | text `done: <first 200 characters of the tool output>`, finish `stop` |
//! | a line `TOOL: <cmd>` | a `bash` tool call with arguments `{"command":"<cmd>"}` |
//! | a line `CALL:<name> <raw args>` | a call to `<name>` with `<raw args>` **verbatim** (trimmed; may be invalid JSON; empty → `{}`) |
//! | a line `THINK: <text>` | reasoning `<text>` before the reply (several lines joined by `\n`) |
//! | anything else | text equal to the message content (echo), finish `stop` |
//!
//! Details: directives are recognised at the start of a line (leading spaces ignored).
//! `TOOL` and `CALL` lines combine, in order, into parallel calls with ids `call_0`,
//! `call_1`, …; a reply with tool calls has empty text and finish `tool_calls`. With `THINK`
//! lines but no calls the text is the remaining (non-directive) lines joined by `\n`.
//!
//! Token counts reported in `usage`: prompt ≈ characters of all message contents / 4,
//! completion ≈ characters of reasoning + text + tool names and arguments / 4, each at least 1.
//!
//! ## Example
//!
//! ```no_run
//! # async fn demo() {
//! use turnstone_testkit::{FakeLlm, Fault, ScriptReply};
//! let llm = FakeLlm::start().await;
//! llm.push_fault(Fault::Status { code: 429, retry_after: Some(2), body: "slow down".into() });
//! llm.push_reply(ScriptReply::text("hello").with_reasoning("thinking"));
//! // point the client at llm.base_url() ...
//! turnstone_testkit::assert_eventually!(llm.request_count() == 2, "client never retried");
//! # }
//! ```

pub mod db;
pub mod error;
pub mod eventually;
pub mod fake_anthropic;
pub mod fake_llm;
pub mod fake_rerank;
pub mod mcp_fixtures;
mod openai_wire;
pub mod process;
pub mod promtool;
pub mod route_walk;
pub mod script;
pub mod scripted_provider;
pub mod secrets;

pub use error::TestkitError;
pub use eventually::eventually;
pub use fake_anthropic::{AnthropicFault, FakeAnthropic, FakeAnthropicConfig, RecordedHeaders};
pub use fake_llm::{FakeLlm, FakeLlmConfig, Fault};
pub use fake_rerank::{FakeRerank, RerankFault, RerankShape};
pub use process::{cpu_seconds, process_running};
pub use script::{ScriptMessage, ScriptReply, reply_for};
pub use scripted_provider::{ProviderFault, ScriptedProvider};

#[doc(hidden)]
pub mod __private {
    pub use tokio;
}

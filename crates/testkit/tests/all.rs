//! Integration tests of the test kit: the HTTP fake (rules, stream shape, faults, inspection),
//! the binary, the in-process provider and the polling assertions.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use turnstone_llm::{ChatMessage, ChatRequest, FinishReason, LlmError, Provider, StreamEvent};
use turnstone_testkit::{
    FakeLlm, FakeLlmConfig, Fault, ProviderFault, ScriptReply, ScriptedProvider, assert_eventually,
    eventually,
};

// ---------------------------------------------------------------- helpers

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn chat_body(messages: Value, stream: bool, include_usage: bool) -> Value {
    let mut body = json!({ "model": "m1", "messages": messages, "stream": stream });
    if include_usage {
        body["stream_options"] = json!({ "include_usage": true });
    }
    body
}

fn user(text: &str) -> Value {
    json!([{ "role": "system", "content": "be brief" }, { "role": "user", "content": text }])
}

async fn post(llm: &FakeLlm, body: &Value) -> reqwest::Response {
    client()
        .post(format!("{}/chat/completions", llm.base_url()))
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn complete(llm: &FakeLlm, messages: Value) -> Value {
    let resp = post(llm, &chat_body(messages, false, false)).await;
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

/// The `data:` payloads of an SSE body.
fn sse_payloads(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            e.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data event: {e:?}"))
                .to_string()
        })
        .collect()
}

async fn stream_payloads(llm: &FakeLlm, messages: Value, include_usage: bool) -> Vec<String> {
    let resp = post(llm, &chat_body(messages, true, include_usage)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    sse_payloads(&resp.text().await.unwrap())
}

fn chunks(payloads: &[String]) -> Vec<Value> {
    payloads
        .iter()
        .filter(|p| *p != "[DONE]")
        .map(|p| serde_json::from_str(p).unwrap())
        .collect()
}

/// Concatenates `delta.<field>` over all chunks.
fn joined(chunks: &[Value], field: &str) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"][field].as_str())
        .collect()
}

// ---------------------------------------------------------------- rules over HTTP

#[tokio::test]
async fn echo_rule() {
    let llm = FakeLlm::start().await;
    let v = complete(&llm, user("hello world")).await;
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "m1");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["message"]["content"], "hello world");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    let usage = &v["usage"];
    assert_eq!(usage["prompt_tokens"], 5); // "be brief" + "hello world" = 19 chars
    assert_eq!(usage["completion_tokens"], 3);
    assert_eq!(usage["total_tokens"], 8);
}

#[tokio::test]
async fn tool_rule_gives_bash_call() {
    let llm = FakeLlm::start().await;
    let v = complete(&llm, user("run it\nTOOL: ls -la /tmp")).await;
    let msg = &v["choices"][0]["message"];
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert!(msg["content"].is_null());
    let call = &msg["tool_calls"][0];
    assert_eq!(call["id"], "call_0");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "bash");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({ "command": "ls -la /tmp" }));
}

#[tokio::test]
async fn call_rule_keeps_invalid_json_verbatim_and_combines_in_order() {
    let llm = FakeLlm::start().await;
    let v = complete(
        &llm,
        user("CALL:write_file {\"path\": \"a.txt\", \nTOOL: pwd\nCALL:list"),
    )
    .await;
    let calls = v["choices"][0]["message"]["tool_calls"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0]["function"]["name"], "write_file");
    assert_eq!(calls[0]["function"]["arguments"], "{\"path\": \"a.txt\",");
    assert_eq!(calls[1]["function"]["name"], "bash");
    assert_eq!(calls[1]["id"], "call_1");
    assert_eq!(calls[2]["function"]["name"], "list");
    assert_eq!(calls[2]["function"]["arguments"], "{}");
}

#[tokio::test]
async fn think_rule_adds_reasoning() {
    let llm = FakeLlm::start().await;
    let v = complete(&llm, user("THINK: the user wants a greeting\nhi")).await;
    let msg = &v["choices"][0]["message"];
    assert_eq!(msg["reasoning_content"], "the user wants a greeting");
    assert_eq!(msg["content"], "hi");
}

#[tokio::test]
async fn tool_result_rule_says_done_with_200_chars() {
    let llm = FakeLlm::start().await;
    let output = format!("{}{}", "a".repeat(200), "b".repeat(50));
    let messages = json!([
        { "role": "user", "content": "TOOL: ls" },
        { "role": "assistant", "content": null, "tool_calls": [{ "id": "call_0", "type": "function", "function": { "name": "bash", "arguments": "{}" } }] },
        { "role": "tool", "tool_call_id": "call_0", "content": output },
    ]);
    let v = complete(&llm, messages).await;
    assert_eq!(
        v["choices"][0]["message"]["content"],
        format!("done: {}", "a".repeat(200))
    );
}

#[tokio::test]
async fn pushed_replies_are_served_in_order_then_rules_resume() {
    let llm = FakeLlm::start().await;
    llm.push_reply(ScriptReply::text("first"));
    llm.push_reply(ScriptReply::text("second").with_finish_reason("length"));
    assert_eq!(
        complete(&llm, user("x")).await["choices"][0]["message"]["content"],
        "first"
    );
    let v = complete(&llm, user("x")).await;
    assert_eq!(v["choices"][0]["message"]["content"], "second");
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(
        complete(&llm, user("back to echo")).await["choices"][0]["message"]["content"],
        "back to echo"
    );
}

// ---------------------------------------------------------------- stream shape

#[tokio::test]
async fn stream_of_text_has_role_chunk_content_chunks_finish_and_done() {
    let llm = FakeLlm::start().await;
    let payloads = stream_payloads(&llm, user("THINK: hmm, ok\nhello there"), false).await;
    assert_eq!(payloads.last().unwrap(), "[DONE]");
    let chunks = chunks(&payloads);
    let first = &chunks[0];
    assert_eq!(first["object"], "chat.completion.chunk");
    assert_eq!(first["choices"][0]["delta"], json!({ "role": "assistant" }));
    assert!(first["choices"][0]["finish_reason"].is_null());
    // content split into 4-character pieces
    let pieces: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(pieces, vec!["hell", "o th", "ere"]);
    assert_eq!(joined(&chunks, "reasoning_content"), "hmm, ok");
    // reasoning comes before content
    let first_reasoning = chunks
        .iter()
        .position(|c| c["choices"][0]["delta"]["reasoning_content"].is_string());
    let first_content = chunks
        .iter()
        .position(|c| c["choices"][0]["delta"]["content"].is_string());
    assert!(first_reasoning.unwrap() < first_content.unwrap());
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["delta"], json!({}));
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert!(
        chunks.iter().all(|c| c.get("usage").is_none()),
        "no usage without include_usage"
    );
}

#[tokio::test]
async fn stream_usage_chunk_only_with_include_usage() {
    let llm = FakeLlm::start().await;
    let payloads = stream_payloads(&llm, user("count me"), true).await;
    assert_eq!(payloads.last().unwrap(), "[DONE]");
    let chunks = chunks(&payloads);
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 4); // 16 chars
    assert_eq!(usage["usage"]["completion_tokens"], 2); // 8 chars
    assert_eq!(usage["usage"]["total_tokens"], 6);
    assert_eq!(
        chunks.iter().filter(|c| c.get("usage").is_some()).count(),
        1
    );
    // the finish chunk precedes the usage chunk
    assert_eq!(
        chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
        "stop"
    );
}

#[tokio::test]
async fn stream_tool_calls_are_deltas_by_index() {
    let llm = FakeLlm::start().await;
    let payloads = stream_payloads(
        &llm,
        user("TOOL: echo hi\nCALL:read_file {\"path\":\"/etc/hosts\"}"),
        true,
    )
    .await;
    let chunks = chunks(&payloads);
    let deltas: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .collect();
    let mut names = Vec::new();
    let mut args = [String::new(), String::new()];
    for (n, delta) in deltas.iter().enumerate() {
        let index = delta["index"].as_u64().unwrap() as usize;
        if let Some(id) = delta["id"].as_str() {
            // the first delta of each call carries id, type and name
            assert_eq!(id, format!("call_{index}"));
            assert_eq!(delta["type"], "function");
            names.push(delta["function"]["name"].as_str().unwrap().to_string());
        } else {
            assert!(
                delta.get("type").is_none() && delta["function"].get("name").is_none(),
                "delta {n}"
            );
        }
        args[index].push_str(delta["function"]["arguments"].as_str().unwrap());
    }
    assert_eq!(names, vec!["bash", "read_file"]);
    assert_eq!(
        serde_json::from_str::<Value>(&args[0]).unwrap(),
        json!({ "command": "echo hi" })
    );
    assert_eq!(args[1], "{\"path\":\"/etc/hosts\"}");
    let arg_chunks_of_second = deltas
        .iter()
        .filter(|d| d["index"] == 1 && d.get("id").is_none())
        .count();
    assert!(
        arg_chunks_of_second > 1,
        "arguments must be split across several chunks"
    );
    let finish = chunks
        .iter()
        .find(|c| c["choices"][0]["finish_reason"].is_string())
        .unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    assert!(
        chunks
            .iter()
            .all(|c| c["choices"][0]["delta"].get("content").is_none())
    );
}

#[tokio::test]
async fn pacing_and_chunk_size_are_configurable() {
    let llm = FakeLlm::start_with(FakeLlmConfig {
        model: "pace".into(),
        chunk_chars: 2,
        tokens_per_sec: Some(10_000.0),
        first_byte_delay: Duration::from_millis(1),
        ..FakeLlmConfig::default()
    })
    .await;
    let payloads = stream_payloads(&llm, user("abcde"), false).await;
    let chunks = chunks(&payloads);
    let pieces: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(pieces, vec!["ab", "cd", "e"]);
    assert_eq!(
        complete(&llm, user("abcde")).await["choices"][0]["message"]["content"],
        "abcde"
    );
}

/// The HTTP body chunks of a streamed reply to `text`.
async fn body_chunks(llm: &FakeLlm, text: &str) -> Vec<bytes::Bytes> {
    let mut resp = post(llm, &chat_body(user(text), true, false)).await;
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await.unwrap() {
        out.push(chunk);
    }
    out
}

#[tokio::test]
async fn a_zero_latency_reply_is_written_at_once_and_a_paced_one_token_by_token() {
    let text = "a reply of several four-character chunks";
    let instant = FakeLlm::start().await;
    let chunks = body_chunks(&instant, text).await;
    assert_eq!(chunks.len(), 1, "{chunks:?}");
    let payloads = sse_payloads(std::str::from_utf8(&chunks[0]).unwrap());
    assert!(
        payloads.len() > 10,
        "still one SSE event per delta: {payloads:?}"
    );

    let paced = FakeLlm::start_with(FakeLlmConfig {
        tokens_per_sec: Some(1_000.0),
        ..FakeLlmConfig::default()
    })
    .await;
    let chunks = body_chunks(&paced, text).await;
    assert!(chunks.len() > 10, "{chunks:?}");
}

// ---------------------------------------------------------------- faults

#[tokio::test]
async fn status_fault_sends_code_retry_after_and_body_once() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::Status {
        code: 429,
        retry_after: Some(7),
        body: r#"{"error":"slow"}"#.into(),
    });
    llm.push_fault(Fault::Status {
        code: 503,
        retry_after: None,
        body: "down".into(),
    });
    let resp = post(&llm, &chat_body(user("x"), true, true)).await;
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "7");
    assert_eq!(resp.headers()["content-type"], "application/json");
    assert_eq!(resp.text().await.unwrap(), r#"{"error":"slow"}"#);
    let resp = post(&llm, &chat_body(user("x"), true, true)).await;
    assert_eq!(resp.status(), 503);
    assert!(resp.headers().get("retry-after").is_none());
    assert_eq!(resp.text().await.unwrap(), "down");
    assert_eq!(
        complete(&llm, user("ok now")).await["choices"][0]["message"]["content"],
        "ok now"
    );
    assert_eq!(llm.request_count(), 3);
}

#[tokio::test]
async fn drop_mid_stream_sends_n_chunks_then_aborts() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::DropMidStream { after_chunks: 3 });
    let mut resp = post(
        &llm,
        &chat_body(user("a fairly long message to stream"), true, true),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let mut received = Vec::new();
    let outcome = loop {
        match resp.chunk().await {
            Ok(Some(bytes)) => received.extend_from_slice(&bytes),
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    assert!(
        outcome.is_err(),
        "the connection must be aborted, not closed cleanly"
    );
    let payloads = sse_payloads(std::str::from_utf8(&received).unwrap());
    assert_eq!(payloads.len(), 3);
    assert!(!payloads.contains(&"[DONE]".to_string()));
    assert_eq!(
        chunks(&payloads)[0]["choices"][0]["delta"]["role"],
        "assistant"
    );
    // consumed: the next stream is complete
    let payloads = stream_payloads(&llm, user("again"), false).await;
    assert_eq!(payloads.last().unwrap(), "[DONE]");
}

#[tokio::test]
async fn drop_mid_stream_on_non_streaming_request_truncates_body() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::DropMidStream { after_chunks: 0 });
    let resp = post(&llm, &chat_body(user("x"), false, false)).await;
    assert!(resp.bytes().await.is_err());
}

#[tokio::test]
async fn malformed_chunk_inside_a_fine_stream() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::MalformedChunk);
    let payloads = stream_payloads(&llm, user("hello"), false).await;
    assert_eq!(payloads[1], "{not json");
    assert_eq!(
        payloads
            .iter()
            .filter(|p| serde_json::from_str::<Value>(p).is_err())
            .count(),
        2
    ); // + [DONE]
    assert_eq!(payloads.last().unwrap(), "[DONE]");
    let good: Vec<String> = payloads.into_iter().filter(|p| p != "{not json").collect();
    assert_eq!(joined(&chunks(&good), "content"), "hello");
}

#[tokio::test]
async fn empty_body_fault() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::EmptyBody);
    let resp = post(&llm, &chat_body(user("x"), true, false)).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.bytes().await.unwrap().is_empty());
}

#[tokio::test]
async fn raw_sse_fault_is_sent_verbatim() {
    let llm = FakeLlm::start().await;
    let items = vec![
        r#"{"choices":[{"index":0,"delta":{"content":"<thi"}}]}"#.to_string(),
        "[DONE]".to_string(),
    ];
    llm.push_fault(Fault::RawSse(items.clone()));
    let resp = post(&llm, &chat_body(user("x"), true, false)).await;
    assert_eq!(resp.status(), 200);
    let body = resp.text().await.unwrap();
    assert_eq!(
        body,
        format!("data: {}\n\ndata: {}\n\n", items[0], items[1])
    );
}

#[tokio::test]
async fn hang_fault_never_answers_until_the_server_is_dropped() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::Hang);
    let url = format!("{}/chat/completions", llm.base_url());
    let pending = tokio::spawn(async move {
        client()
            .post(url)
            .json(&chat_body(user("x"), true, false))
            .send()
            .await
            .map(|r| r.status())
    });
    assert_eventually!(
        llm.request_count() == 1,
        "the hanging request never arrived"
    );
    // the fault was consumed by the hanging request: others are served meanwhile
    assert_eq!(
        complete(&llm, user("still alive")).await["choices"][0]["message"]["content"],
        "still alive"
    );
    assert!(
        !pending.is_finished(),
        "a hanging request must not be answered"
    );
    drop(llm);
    let status = pending.await.unwrap().unwrap();
    assert_eq!(status, 503);
}

// ---------------------------------------------------------------- inspection and bad input

#[tokio::test]
async fn requests_are_recorded_in_order() {
    let llm = FakeLlm::start().await;
    let first = chat_body(user("one"), false, false);
    let second = json!({ "model": "m2", "messages": [{"role": "user", "content": "two"}], "temperature": 0.5, "tools": [] });
    post(&llm, &first).await;
    post(&llm, &second).await;
    assert_eq!(llm.request_count(), 2);
    assert_eq!(llm.requests(), vec![first, second.clone()]);
    assert_eq!(llm.last_request(), Some(second));
}

/// A long-running model keeps no request: each body holds the whole conversation.
#[tokio::test]
async fn a_model_that_records_nothing_still_counts_and_answers() {
    let llm = FakeLlm::start_with(FakeLlmConfig {
        record_requests: false,
        ..FakeLlmConfig::default()
    })
    .await;
    let reply = complete(&llm, user("one")).await;
    assert_eq!(reply["choices"][0]["message"]["content"], "one");
    post(&llm, &chat_body(user("two"), true, false)).await;
    assert_eq!(llm.request_count(), 2);
    assert_eq!(llm.requests(), Vec::<Value>::new());
    assert_eq!(llm.last_request(), None);
    assert!(llm.traceparents().is_empty());
}

#[tokio::test]
async fn models_list_has_no_created_field() {
    let llm = FakeLlm::start_with(FakeLlmConfig {
        model: "qwen-test".into(),
        context_window: 4096,
        ..FakeLlmConfig::default()
    })
    .await;
    let v: Value = client()
        .get(format!("{}/models", llm.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        v,
        json!({"object": "list", "data": [{"id": "qwen-test", "object": "model", "owned_by": "turnstone-testkit", "max_model_len": 4096}]})
    );
    assert_eq!(
        llm.request_count(),
        0,
        "model listing is not a chat request"
    );
    // without a model in the request, the configured one is echoed
    let v = complete(&llm, user("x")).await;
    assert_eq!(v["model"], "m1");
    let resp = post(
        &llm,
        &json!({"messages": [{"role": "user", "content": "y"}]}),
    )
    .await;
    assert_eq!(resp.json::<Value>().await.unwrap()["model"], "qwen-test");
}

#[tokio::test]
async fn malformed_request_gets_400_and_consumes_no_fault() {
    let llm = FakeLlm::start().await;
    llm.push_fault(Fault::EmptyBody);
    let url = format!("{}/chat/completions", llm.base_url());
    let resp = client()
        .post(&url)
        .header("content-type", "application/json")
        .body("{oops")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid JSON")
    );
    let resp = post(&llm, &json!({"model": "m", "messages": "not a list"})).await;
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert!(v["error"]["message"].as_str().unwrap().contains("messages"));
    assert_eq!(llm.requests()[0], json!("{oops"));
    // the fault is still queued for the next valid request
    let resp = post(&llm, &chat_body(user("x"), false, false)).await;
    assert!(resp.bytes().await.unwrap().is_empty());
}

#[tokio::test]
async fn accepted_connections_get_tcp_nodelay() {
    let llm = FakeLlm::start().await;
    complete(&llm, user("x")).await;
    assert!(llm.nodelay_connections() >= 1);
}

#[tokio::test]
async fn dropping_the_handle_stops_the_server() {
    let llm = FakeLlm::start().await;
    let url = format!("{}/models", llm.base_url());
    assert!(
        client()
            .get(&url)
            .send()
            .await
            .unwrap()
            .status()
            .is_success()
    );
    drop(llm);
    let refused = eventually(Duration::from_secs(10), || async {
        client().get(&url).send().await.is_err()
    })
    .await;
    assert!(refused, "server still answers after drop");
}

// ---------------------------------------------------------------- binary

#[tokio::test]
async fn binary_prints_listening_line_and_serves() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_turnstone-fake-llm"))
        .args([
            "--port",
            "0",
            "--model",
            "bin-model",
            "--context-window",
            "8192",
            "--chunk-chars",
            "3",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let base = line
        .strip_prefix("turnstone-fake-llm listening on ")
        .unwrap()
        .to_string();
    assert!(
        base.starts_with("http://127.0.0.1:") && base.ends_with("/v1"),
        "{line}"
    );
    let models: Value = client()
        .get(format!("{base}/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "bin-model");
    assert_eq!(models["data"][0]["max_model_len"], 8192);
    let resp = client()
        .post(format!("{base}/chat/completions"))
        .json(&chat_body(user("abcdefg"), true, true))
        .send()
        .await
        .unwrap();
    let payloads = sse_payloads(&resp.text().await.unwrap());
    let pieces: Vec<String> = chunks(&payloads)
        .iter()
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(pieces, vec!["abc", "def", "g"]);
    // SIGTERM ends it cleanly
    let pid = child.id().unwrap().to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}

// ---------------------------------------------------------------- ScriptedProvider

fn request(messages: Vec<ChatMessage>) -> ChatRequest {
    ChatRequest {
        model: "fake".into(),
        messages: messages.into(),
        ..ChatRequest::default()
    }
}

async fn collect(
    provider: &ScriptedProvider,
    req: &ChatRequest,
) -> Vec<Result<StreamEvent, LlmError>> {
    provider.stream(req).await.unwrap().collect().await
}

#[tokio::test]
async fn provider_stream_order_for_text() {
    let provider = ScriptedProvider::new();
    let events = collect(
        &provider,
        &request(vec![ChatMessage::user("THINK: hm\nhello world")]),
    )
    .await;
    let events: Vec<StreamEvent> = events.into_iter().map(Result::unwrap).collect();
    assert_eq!(events[0], StreamEvent::Reasoning("hm".into()));
    assert_eq!(
        &events[1..4],
        &[
            StreamEvent::Content("hell".into()),
            StreamEvent::Content("o wo".into()),
            StreamEvent::Content("rld".into())
        ]
    );
    assert!(
        matches!(events[4], StreamEvent::Usage(u) if u.completion_tokens == 4 && u.total_tokens == u.prompt_tokens + 4)
    );
    assert_eq!(events[5], StreamEvent::Finish(FinishReason::Stop));
    assert_eq!(events.len(), 6);
    assert_eq!(provider.call_count(), 1);
}

#[tokio::test]
async fn provider_stream_order_for_tool_calls_and_done() {
    let provider = ScriptedProvider::new();
    let events = collect(
        &provider,
        &request(vec![ChatMessage::user("TOOL: ls\nCALL:grep {bad")]),
    )
    .await;
    let events: Vec<StreamEvent> = events.into_iter().map(Result::unwrap).collect();
    let StreamEvent::ToolCalls(calls) = &events[0] else {
        panic!("{events:?}")
    };
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].name.as_str()),
        ("call_0", "bash")
    );
    assert_eq!(calls[0].arguments, r#"{"command":"ls"}"#);
    assert_eq!(
        (
            calls[1].id.as_str(),
            calls[1].name.as_str(),
            calls[1].arguments.as_str()
        ),
        ("call_1", "grep", "{bad")
    );
    assert!(matches!(events[1], StreamEvent::Usage(_)));
    assert_eq!(events[2], StreamEvent::Finish(FinishReason::ToolCalls));
    assert_eq!(events.len(), 3);

    let follow_up = request(vec![
        ChatMessage::user("TOOL: ls"),
        ChatMessage::assistant(None, calls.clone()),
        ChatMessage::tool("call_0", "file.txt"),
    ]);
    let done = provider.complete(&follow_up).await.unwrap();
    assert_eq!(done.content, "done: file.txt");
    assert_eq!(done.finish_reason, Some(FinishReason::Stop));
    assert_eq!(provider.call_count(), 2);
    assert_eq!(provider.requests().len(), 2);
    assert_eq!(provider.last_request(), Some(follow_up));
}

#[tokio::test]
async fn provider_overrides_and_failures() {
    let provider = ScriptedProvider::new()
        .with_context_window(1234)
        .with_chunk_chars(100);
    assert_eq!(
        provider.capabilities("any").await.unwrap().context_window,
        1234
    );
    provider.fail_next(2, || LlmError::Server {
        status: 502,
        retry_after: None,
        body: "bad gateway".into(),
    });
    provider.push_reply(ScriptReply::text("scripted").with_finish_reason("length"));
    let req = request(vec![ChatMessage::user("ignored")]);
    for _ in 0..2 {
        let err = provider.stream(&req).await.err().unwrap();
        assert!(matches!(err, LlmError::Server { status: 502, .. }));
    }
    let events = collect(&provider, &req).await;
    assert_eq!(
        events[0].as_ref().unwrap(),
        &StreamEvent::Content("scripted".into())
    );
    assert_eq!(
        events.last().unwrap().as_ref().unwrap(),
        &StreamEvent::Finish(FinishReason::Length)
    );
    assert_eq!(provider.call_count(), 3);

    provider.push_fault(ProviderFault::InterruptAfter { events: 1 });
    let events = collect(&provider, &req).await;
    assert_eq!(events.len(), 2);
    assert_eq!(
        events[0].as_ref().unwrap(),
        &StreamEvent::Content("ignored".into())
    );
    assert!(matches!(events[1], Err(LlmError::StreamInterrupted(_))));
    provider.push_fault(ProviderFault::InterruptAfter { events: 0 });
    assert!(matches!(
        provider.complete(&req).await,
        Err(LlmError::StreamInterrupted(_))
    ));
    assert_eq!(provider.call_count(), 5);
}

#[tokio::test]
async fn provider_hang_never_returns_and_is_consumed() {
    use futures::FutureExt;
    let provider = ScriptedProvider::new();
    let req = request(vec![ChatMessage::user("x")]);
    provider.push_fault(ProviderFault::Hang);
    assert!(
        provider.stream(&req).now_or_never().is_none(),
        "a hanging call must not return"
    );
    assert_eq!(provider.call_count(), 1);
    assert!(
        provider.complete(&req).now_or_never().is_some(),
        "the next call is served at once"
    );
}

#[tokio::test]
async fn provider_without_recording_keeps_no_requests() {
    let provider = ScriptedProvider::new().without_recording();
    provider
        .complete(&request(vec![ChatMessage::user("x")]))
        .await
        .unwrap();
    assert!(provider.requests().is_empty());
    assert_eq!(provider.call_count(), 1);
}

// ---------------------------------------------------------------- polling assertions

#[tokio::test]
async fn assert_eventually_waits_for_a_condition() {
    let counter = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&counter);
    let task = tokio::spawn(async move {
        for _ in 0..3 {
            tokio::task::yield_now().await;
            c.fetch_add(1, Ordering::SeqCst);
        }
    });
    assert_eventually!(
        counter.load(Ordering::SeqCst) == 3,
        "counter is {}",
        counter.load(Ordering::SeqCst)
    );
    task.await.unwrap();
    assert!(eventually(Duration::from_millis(100), || async { true }).await);
    assert!(!eventually(Duration::from_millis(50), || async { false }).await);
}

#[tokio::test]
#[should_panic(expected = "never true")]
async fn assert_eventually_panics_with_the_message_on_timeout() {
    assert_eventually!(
        1 + 1 == 3,
        timeout = Duration::from_millis(60),
        "never {}",
        "true"
    );
}

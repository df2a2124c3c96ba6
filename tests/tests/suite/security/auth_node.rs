//! A real `turnstone-server` for the security tests: loopback, its own SQLite file, the
//! built-in scripted model, a known full-access token, and what it printed at start (the
//! setup code) read from its stdout.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The full-access token every test node is configured with.
pub const TOKEN: &str = "security-suite-full-access-token";
/// Its JWT secret (so tests can check claims).
pub const SECRET: &str = "security-suite-jwt-secret-0123456789abcdef";
/// A password good enough for setup.
pub const PASSWORD: &str = "correct horse battery";

/// Generous: a debug build on a loaded 2-core machine.
const START_DEADLINE: Duration = Duration::from_secs(60);

pub struct AuthNode {
    /// Killed when dropped.
    _child: Child,
    pub url: String,
    /// Lines printed after the listening line (token, setup code).
    pub printed: Vec<String>,
    pub http: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// How to start one.
pub struct Start {
    /// `TURNSTONE_AUTH_TOKEN` (default [`TOKEN`]; `None`: no configured token).
    pub token: Option<&'static str>,
    /// `TURNSTONE_AUTH_ENABLED=0` (loopback only).
    pub auth_disabled: bool,
    pub args: Vec<String>,
}

impl Default for Start {
    fn default() -> Self {
        Self {
            token: Some(TOKEN),
            auth_disabled: false,
            args: Vec::new(),
        }
    }
}

impl AuthNode {
    pub async fn start() -> Self {
        Self::start_with(Start::default()).await
    }

    pub async fn start_with(start: Start) -> Self {
        let binary =
            turnstone_e2e::workspace_binary("turnstone-server").unwrap_or_else(|e| panic!("{e}"));
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(binary);
        cmd.args(["--host", "127.0.0.1", "--port", "0", "--log-level", "warn"])
            .arg("--db-path")
            .arg(dir.path().join("node.db"))
            .arg("--cwd")
            .arg(dir.path())
            .args(&start.args)
            .current_dir(dir.path())
            .env_remove("TURNSTONE_BASE_URL")
            .env_remove("TURNSTONE_MODEL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("TURNSTONE_HOST")
            .env_remove("TURNSTONE_PORT")
            .env_remove("TURNSTONE_DB_BACKEND")
            .env_remove("TURNSTONE_DB_PATH")
            .env_remove("TURNSTONE_DB_URL")
            .env_remove("TURNSTONE_AUTH_TOKEN")
            .env_remove("TURNSTONE_METRICS_AUTH")
            .env_remove("TURNSTONE_TRUSTED_PROXIES")
            .env_remove("TURNSTONE_RATELIMIT_TRUSTED_PROXIES")
            .env("TURNSTONE_JWT_SECRET", SECRET)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        match start.token {
            Some(token) => cmd.env("TURNSTONE_AUTH_TOKEN", token),
            None => cmd.env_remove("TURNSTONE_AUTH_TOKEN"),
        };
        if start.auth_disabled {
            cmd.env("TURNSTONE_AUTH_ENABLED", "0");
        } else {
            cmd.env_remove("TURNSTONE_AUTH_ENABLED");
        }
        let mut child = cmd.spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(START_DEADLINE, lines.next_line())
            .await
            .expect("no listening line in time")
            .unwrap()
            .expect("stdout closed before the listening line");
        let url = first
            .split_once(" listening on ")
            .map(|(_, url)| url.trim().to_string())
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
        // What follows the listening line comes at once (flushed together).
        let mut printed = Vec::new();
        while let Ok(Ok(Some(line))) =
            tokio::time::timeout(Duration::from_millis(500), lines.next_line()).await
        {
            printed.push(line);
        }
        // Keep reading so that the server never writes into a closed pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            _child: child,
            url,
            printed,
            http: reqwest::Client::new(),
            _dir: dir,
        }
    }

    /// The value of a printed `label: value` line.
    pub fn printed_value(&self, label: &str) -> Option<String> {
        self.printed
            .iter()
            .find_map(|l| l.strip_prefix(label))
            .and_then(|rest| rest.rsplit_once(": "))
            .map(|(_, v)| v.trim().to_string())
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// A request with an optional bearer token and JSON body: status and JSON reply.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        bearer: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, self.url(path));
        if let Some(token) = bearer {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Creates the first user (`admin`) with the full-access token.
    pub async fn setup_admin(&self) {
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                "/v1/api/auth/setup",
                Some(TOKEN),
                Some(json!({"username": "admin", "display_name": "Admin", "password": PASSWORD})),
            )
            .await;
        assert_eq!(status, 200, "setup: {body}");
    }

    /// Creates a user with `role` (as the full-access token); returns its id.
    pub async fn create_user(&self, username: &str, role: &str) -> String {
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                "/v1/api/admin/users",
                Some(TOKEN),
                Some(json!({"username": username, "display_name": username,
                            "password": PASSWORD, "role": role})),
            )
            .await;
        assert_eq!(status, 201, "create user: {body}");
        body["user_id"].as_str().unwrap().to_string()
    }

    /// An API token for `username` with `scopes` (as the full-access token): the raw token
    /// and its id.
    pub async fn create_token(&self, username: &str, scopes: &str) -> (String, String) {
        let (status, token) = self
            .call(
                reqwest::Method::POST,
                "/v1/api/admin/tokens",
                Some(TOKEN),
                Some(json!({"username": username, "name": "test", "scopes": scopes})),
            )
            .await;
        assert_eq!(status, 201, "create token: {token}");
        (
            token["token"].as_str().unwrap().to_string(),
            token["token_id"].as_str().unwrap().to_string(),
        )
    }

    /// The body of an anonymous `GET`.
    pub async fn get_text(&self, path: &str) -> String {
        self.http
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// A password login: the reply's JWT.
    pub async fn login(&self, username: &str) -> String {
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                "/v1/api/auth/login",
                None,
                Some(json!({"username": username, "password": PASSWORD})),
            )
            .await;
        assert_eq!(status, 200, "login {username}: {body}");
        body["jwt"].as_str().unwrap().to_string()
    }
}

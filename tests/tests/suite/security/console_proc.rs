//! A `turnstone-console` process for the security tests: loopback, fast discovery and
//! polling, the cluster harness's shared JWT secret, and a console token to call it with.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;
use turnstone_runtime::auth::{AUDIENCE_CONSOLE, JwtSecret, NewClaims, Scopes, mint};

use super::super::cluster::harness::{Proc, SECRET, binary, free_port};

pub struct ConsoleProc {
    pub url: String,
    pub http: reqwest::Client,
    _proc: Proc,
    /// Holds the console's SQLite store.
    _dir: tempfile::TempDir,
}

impl ConsoleProc {
    /// A console of `prefix` on `redis_url` with `extra` flags.
    pub async fn start(redis_url: &str, prefix: &str, extra: &[&str]) -> Self {
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new(binary("turnstone-console"))
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--redis-url",
                redis_url,
                "--prefix",
                prefix,
                "--poll-interval",
                "0.2",
                "--discovery-interval",
                "0.2",
                "--log-level",
                "warn",
            ])
            .arg("--db-path")
            .arg(dir.path().join("console.db"))
            .args(extra)
            .env("TURNSTONE_JWT_SECRET", SECRET)
            .env_remove("TURNSTONE_AUTH_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let console = Self {
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
            _proc: Proc { child },
            _dir: dir,
        };
        for _ in 0..200 {
            if console
                .http
                .get(format!("{}/health", console.url))
                .send()
                .await
                .is_ok()
            {
                return console;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the console did not come up");
    }

    /// A full-access console token.
    pub fn token() -> String {
        mint(
            &NewClaims::new("", Scopes::full(), "test", AUDIENCE_CONSOLE),
            &JwtSecret::new(SECRET),
            Duration::from_secs(600),
        )
        .unwrap()
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.url))
            .bearer_auth(Self::token())
            .send()
            .await
            .unwrap()
    }

    /// The console's record of `node_id` in `GET /v1/api/cluster/nodes`, if listed.
    pub async fn node(&self, node_id: &str) -> Option<Value> {
        let page: Value = self
            .get("/v1/api/cluster/nodes?limit=1000")
            .await
            .json()
            .await
            .ok()?;
        page["nodes"]
            .as_array()?
            .iter()
            .find(|n| n["node_id"] == node_id)
            .cloned()
    }
}

//! Redis with an ACL user, a password and mutual TLS: the bridge, the console and the queue
//! client all connect through the one connection builder (`turnstone_queue::RedisSettings`),
//! with the password given as a file (`TURNSTONE_REDIS_PASSWORD_FILE`) and the CA, client
//! certificate and key as `TURNSTONE_REDIS_TLS_*_FILE`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;
use turnstone_proto::mq::{CreateWorkstreamMessage, SendMessage};
use turnstone_queue::{RedisSettings, TurnstoneClient, WaitOptions};

use super::harness::*;

const USER: &str = "turnstone-app";
const PASSWORD: &str = "acl-password-7c1d";

/// `openssl …` in `dir`; the test fails with the reason when openssl is missing.
fn openssl(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("this test needs the openssl command: {e}"));
    assert!(status.success(), "openssl {args:?} failed");
}

/// A CA, a server certificate for localhost/127.0.0.1 and a client certificate, as PEM files.
fn certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=turnstone-test-ca",
        ],
    );
    // Extensions make them X.509 v3 (webpki refuses v1 certificates).
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("client.ext"),
        "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    for (name, ext) in [("server", "server.ext"), ("client", "client.ext")] {
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
                "-subj",
                &format!("/CN={name}"),
            ],
        );
        let mut args = vec![
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &format!("{name}.pem"),
            "-days",
            "2",
        ]
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
        args.extend(["-extfile".to_string(), ext.to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        openssl(dir, &args);
    }
}

/// redis-server with TLS only (client certificates required), a default-user password and
/// one ACL user.
struct TlsRedis {
    port: u16,
    dir: tempfile::TempDir,
    _child: tokio::process::Child,
}

impl TlsRedis {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        certificates(dir.path());
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", ""])
            .args([
                "--tls-cert-file",
                "server.pem",
                "--tls-key-file",
                "server.key",
            ])
            .args(["--tls-ca-cert-file", "ca.pem", "--tls-auth-clients", "yes"])
            .args(["--requirepass", "default-user-password"])
            .args([
                "--user",
                USER,
                "on",
                &format!(">{PASSWORD}"),
                "~*",
                "&*",
                "+@all",
            ])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("this test needs redis-server: {e}"));
        let r = Self {
            port,
            dir,
            _child: child,
        };
        wait_for_redis("TLS redis up", &r.settings().client().unwrap()).await;
        r
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn url(&self) -> String {
        format!("rediss://localhost:{}/0", self.port)
    }

    fn settings(&self) -> RedisSettings {
        RedisSettings {
            url: Some(self.url()),
            username: Some(USER.into()),
            password: Some(PASSWORD.into()),
            tls_ca_file: Some(self.file("ca.pem")),
            tls_cert_file: Some(self.file("client.pem")),
            tls_key_file: Some(self.file("client.key")),
            ..RedisSettings::default()
        }
    }

    /// The contract's environment for a Redis user: URL, user, password file, TLS files.
    fn env(&self, password_file: &Path) -> Vec<(String, String)> {
        let path = |p: PathBuf| p.to_str().unwrap().to_string();
        vec![
            ("TURNSTONE_REDIS_URL".into(), self.url()),
            ("TURNSTONE_REDIS_USERNAME".into(), USER.into()),
            (
                "TURNSTONE_REDIS_PASSWORD_FILE".into(),
                path(password_file.to_path_buf()),
            ),
            (
                "TURNSTONE_REDIS_TLS_CA_FILE".into(),
                path(self.file("ca.pem")),
            ),
            (
                "TURNSTONE_REDIS_TLS_CERT_FILE".into(),
                path(self.file("client.pem")),
            ),
            (
                "TURNSTONE_REDIS_TLS_KEY_FILE".into(),
                path(self.file("client.key")),
            ),
        ]
    }
}

fn spawn(name: &str, args: &[&str], env: &[(String, String)]) -> Proc {
    let mut cmd = Command::new(binary(name));
    cmd.args(args)
        .env("TURNSTONE_JWT_SECRET", SECRET)
        .env_remove("TURNSTONE_AUTH_TOKEN")
        .env_remove("TURNSTONE_REDIS_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Proc {
        child: cmd.spawn().unwrap(),
    }
}

#[tokio::test]
async fn bridge_console_and_queue_client_use_acl_user_password_file_and_mutual_tls() {
    let redis = TlsRedis::start().await;
    let secrets = tempfile::tempdir().unwrap();
    let password_file = secrets.path().join("redis-password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    let env = redis.env(&password_file);
    let prefix = unique_prefix("tls");

    let node = NodeProc::start("tls-node").await;
    let _bridge = spawn(
        "turnstone-bridge",
        &[
            "--server-url",
            &node.url,
            "--heartbeat-ttl",
            "4",
            "--probe-interval-ms",
            "200",
        ],
        &[
            env.clone(),
            vec![
                ("TURNSTONE_REDIS_PREFIX".into(), prefix.clone()),
                ("TURNSTONE_NODE_ID".into(), node.node_id.clone()),
            ],
        ]
        .concat(),
    );

    // The queue client through the same builder: a whole turn over TLS as the ACL user.
    let client = TurnstoneClient::connect(&redis.settings(), &prefix)
        .await
        .unwrap();
    let ws = client
        .create_workstream_and_wait(
            CreateWorkstreamMessage {
                name: "tls".into(),
                ..CreateWorkstreamMessage::default()
            },
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let reply = client
        .send_and_wait(
            SendMessage {
                ws_id: ws,
                message: "over tls".into(),
                ..SendMessage::default()
            },
            WaitOptions {
                timeout: Duration::from_secs(60),
                ..WaitOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(reply.content(), "over tls");

    // The console: ready (it reaches Redis) and it sees the node the bridge announces.
    let port = free_port();
    let _console = spawn(
        "turnstone-console",
        &[
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--poll-interval",
            "1",
            "--discovery-interval",
            "1",
            "--db-path",
            &secrets.path().join("console.db").to_string_lossy(),
        ],
        &[
            env.clone(),
            vec![("TURNSTONE_REDIS_PREFIX".into(), prefix.clone())],
        ]
        .concat(),
    );
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    eventually(
        "console ready and seeing the node",
        Duration::from_secs(30),
        || async {
            let ready = http.get(format!("{base}/ready")).send().await;
            let health = http.get(format!("{base}/health")).send().await;
            match (ready, health) {
                (Ok(r), Ok(h)) if r.status().as_u16() == 200 => {
                    let h: serde_json::Value = h.json().await.unwrap_or_default();
                    h["nodes"].as_u64().unwrap_or(0) >= 1
                        || h["nodes"]["total"].as_u64().unwrap_or(0) >= 1
                }
                _ => false,
            }
        },
    )
    .await;

    // Without the client certificate, or with a wrong password, Redis refuses.
    let mut no_cert = redis.settings();
    no_cert.tls_cert_file = None;
    no_cert.tls_key_file = None;
    assert!(
        no_cert
            .client()
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .is_err(),
        "mutual TLS must be required"
    );
    let wrong = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(wrong.path(), "not-the-password\n").unwrap();
    let port2 = free_port();
    let mut wrong_env = redis.env(wrong.path());
    wrong_env.push(("TURNSTONE_REDIS_PREFIX".into(), prefix.clone()));
    let _refused = spawn(
        "turnstone-console",
        &[
            "--host",
            "127.0.0.1",
            "--port",
            &port2.to_string(),
            "--db-path",
            &secrets.path().join("console-2.db").to_string_lossy(),
        ],
        &wrong_env,
    );
    let ready2 = format!("http://127.0.0.1:{port2}/ready");
    eventually(
        "console with a wrong password is not ready",
        Duration::from_secs(30),
        || async {
            match http.get(&ready2).send().await {
                Ok(r) if r.status().as_u16() == 503 => {
                    let body = r.text().await.unwrap_or_default();
                    assert!(!body.contains(PASSWORD));
                    body.contains("redis unreachable")
                }
                _ => false,
            }
        },
    )
    .await;
}

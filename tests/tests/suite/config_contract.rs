//! The configuration contract, from the outside: `--check-config` of the node, the bridge
//! and the console as processes — the effective configuration (secrets redacted) and exit 0,
//! or exit 2 with one message naming the problem: a bad value, an unknown key in the
//! service's table, an unreadable `*_FILE`, a secret given twice, an unknown `TURNSTONE_*`
//! variable. Old names still work, with a warning.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const SECRET: &str = "jwt-secret-from-a-file-0123456789abcdef-0123456789";
const PASSWORD: &str = "redis-password-from-a-file";

fn binary(name: &str) -> PathBuf {
    turnstone_e2e::workspace_binary(name).unwrap_or_else(|e| panic!("{e}"))
}

/// `binary --check-config args…` with exactly `env` (plus PATH/HOME), in `dir`.
fn check(name: &str, dir: &Path, args: &[&str], env: &[(&str, String)]) -> (i32, String, String) {
    let mut cmd = Command::new(binary(name));
    cmd.arg("--check-config")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .current_dir(dir)
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().unwrap();
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("jwt"), format!("{SECRET}\n")).unwrap();
        std::fs::write(dir.path().join("redis-password"), format!("{PASSWORD}\n")).unwrap();
        std::fs::write(
            dir.path().join("config.toml"),
            "[server]\nmax_workstreams = 7\n\n[bridge]\nserver_url = \"http://node-a:8080\"\nconcurrency = 9\n\n[console]\npoll_interval = 3.5\nprefix = \"filecfg\"\n",
        )
        .unwrap();
        Self { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }
}

/// Asserts a failed check: exit 2, one line on stderr containing every `needle`.
fn assert_refused((code, stdout, stderr): (i32, String, String), needles: &[&str]) {
    assert_eq!(code, 2, "stdout: {stdout}\nstderr: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "`{n}` not in: {stderr}");
    }
    assert!(
        !stderr.contains(SECRET) && !stderr.contains(PASSWORD),
        "{stderr}"
    );
}

#[test]
fn node_check_config_prints_the_effective_configuration_and_names_errors() {
    let f = Files::new();
    let dir = f.dir.path();
    let env = vec![
        ("TURNSTONE_CONFIG", f.path("config.toml")),
        ("TURNSTONE_JWT_SECRET_FILE", f.path("jwt")),
        ("TURNSTONE_NODE_ID", "node-7".to_string()),
        ("TURNSTONE_DRAIN_TIMEOUT", "40".to_string()),
        ("TURNSTONE_DB_PATH", f.path("n.db")),
    ];
    let (code, out, err) = check("turnstone-server", dir, &[], &env);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("node_id = \"node-7\"  # env TURNSTONE_NODE_ID"),
        "{out}"
    );
    assert!(out.contains("drain_timeout = \"40\""), "{out}");
    assert!(
        out.contains("TURNSTONE_JWT_SECRET = \"<redacted>\"  # file "),
        "{out}"
    );
    assert!(
        !out.contains(SECRET) && !err.contains(SECRET),
        "the secret leaked"
    );
    assert!(
        !dir.join("n.db").exists(),
        "--check-config must not open the store"
    );

    // Without a node id the host name is the default.
    let (code, out, _) = check("turnstone-server", dir, &[], &env[..2]);
    assert_eq!(code, 0);
    let host = hostname();
    assert!(out.contains(&format!("node_id = \"{host}\"")), "{out}");

    // An old name: accepted, with a warning naming the new one.
    let (code, out, err) = check(
        "turnstone-server",
        dir,
        &[],
        &[("OPENAI_API_KEY", "sk-old-name-key".into())],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("OPENAI_API_KEY is deprecated; use TURNSTONE_API_KEY"),
        "{err}"
    );
    assert!(
        out.contains("api_key = \"<redacted>\"  # env OPENAI_API_KEY"),
        "{out}"
    );
    assert!(!out.contains("sk-old-name-key"));

    // Errors: bad value, unknown key in its table, unreadable file, both, unknown variable.
    assert_refused(
        check("turnstone-server", dir, &["--drain-timeout", "soon"], &[]),
        &["--drain-timeout", "soon"],
    );
    std::fs::write(dir.join("bad.toml"), "[server]\nmax_worksteams = 3\n").unwrap();
    assert_refused(
        check(
            "turnstone-server",
            dir,
            &["--config", &f.path("bad.toml")],
            &[],
        ),
        &["max_worksteams"],
    );
    assert_refused(
        check(
            "turnstone-server",
            dir,
            &[],
            &[("TURNSTONE_DB_URL_FILE", f.path("missing-db-url"))],
        ),
        &["TURNSTONE_DB_URL_FILE", "missing-db-url"],
    );
    assert_refused(
        check(
            "turnstone-server",
            dir,
            &[],
            &[
                ("TURNSTONE_JWT_SECRET_FILE", f.path("jwt")),
                ("TURNSTONE_JWT_SECRET", "inline".into()),
            ],
        ),
        &["TURNSTONE_JWT_SECRET_FILE", "one way only"],
    );
    assert_refused(
        check(
            "turnstone-server",
            dir,
            &[],
            &[("TURNSTONE_REDIS_URL", "redis://x".into())],
        ),
        &["TURNSTONE_REDIS_URL", "turnstone-server does not read"],
    );
}

/// The node's `[server]` keys that are flags are one layer of its settings: flag > env >
/// file > default, for `approval_timeout` and `max_workstreams` (a file value used to beat
/// an explicit flag), with the source `--check-config` names.
#[test]
fn node_settings_layer_flag_over_env_over_file_over_default() {
    let f = Files::new();
    let dir = f.dir.path();
    std::fs::write(
        dir.join("node.toml"),
        "[server]\napproval_timeout = 111\nmax_workstreams = 11\nauto_title = false\n",
    )
    .unwrap();
    let config = f.path("node.toml");
    let line = |out: &str, key: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("no {key} in {out}"))
            .to_string()
    };
    let run = |args: &[&str], env: &[(&str, String)]| {
        let (code, out, err) = check("turnstone-server", dir, args, env);
        assert_eq!(code, 0, "{out}\n{err}");
        out
    };

    let out = run(&[], &[]);
    assert_eq!(
        line(&out, "approval_timeout"),
        "approval_timeout = \"3600\"  # default"
    );
    assert_eq!(
        line(&out, "max_workstreams"),
        "max_workstreams = \"50\"  # default"
    );

    let out = run(&["--config", &config], &[]);
    assert_eq!(
        line(&out, "approval_timeout"),
        format!("approval_timeout = \"111\"  # {config} [server]")
    );
    assert_eq!(
        line(&out, "max_workstreams"),
        format!("max_workstreams = \"11\"  # {config} [server]")
    );

    let env = [("TURNSTONE_APPROVAL_TIMEOUT", "222".to_string())];
    let out = run(&["--config", &config], &env);
    assert_eq!(
        line(&out, "approval_timeout"),
        "approval_timeout = \"222\"  # env TURNSTONE_APPROVAL_TIMEOUT"
    );

    let out = run(
        &[
            "--config",
            &config,
            "--approval-timeout",
            "333",
            "--max-workstreams",
            "33",
        ],
        &env,
    );
    assert_eq!(
        line(&out, "approval_timeout"),
        "approval_timeout = \"333\"  # flag"
    );
    assert_eq!(
        line(&out, "max_workstreams"),
        "max_workstreams = \"33\"  # flag"
    );

    // The file named by TURNSTONE_CONFIG, and the default one under $HOME, are the same layer.
    let out = run(&[], &[("TURNSTONE_CONFIG", config.clone())]);
    assert!(line(&out, "max_workstreams").starts_with("max_workstreams = \"11\""));
    std::fs::create_dir_all(dir.join(".config/turnstone")).unwrap();
    std::fs::copy(
        dir.join("node.toml"),
        dir.join(".config/turnstone/config.toml"),
    )
    .unwrap();
    let out = run(&["--max-workstreams", "44"], &[]);
    assert!(line(&out, "approval_timeout").starts_with("approval_timeout = \"111\""));
    assert_eq!(
        line(&out, "max_workstreams"),
        "max_workstreams = \"44\"  # flag"
    );
    std::fs::remove_file(dir.join(".config/turnstone/config.toml")).unwrap();

    // A value of the wrong type in the file is named, as a flag's would be.
    std::fs::write(
        dir.join("bad.toml"),
        "[server]\napproval_timeout = \"soon\"\n",
    )
    .unwrap();
    assert_refused(
        check(
            "turnstone-server",
            dir,
            &["--config", &f.path("bad.toml")],
            &[],
        ),
        &["approval", "soon"],
    );
}

/// The node's model, tool and workstream settings (issue 18 §6) are flags, environment
/// names and `[server]` keys; the original's `[database]`, `[ratelimit]`, `[health]`,
/// `[session]`, `[tools]` and `[auth]` tables set them too (`--check-config` names the table
/// as the source), and a key of those tables the node does not read is refused by name.
#[test]
fn node_reads_the_originals_tables_and_refuses_unknown_keys_by_name() {
    let f = Files::new();
    let dir = f.dir.path();
    std::fs::write(
        dir.join("tables.toml"),
        r#"
[server]
temperature = 0.3
[database]
backend = "sqlite"
path = "from-file.db"
pool_size = 4
[ratelimit]
enabled = true
requests_per_second = 2.5
burst = 7
trusted_proxies = "10.0.0.0/8"
[health]
circuit_breaker_threshold = 3
circuit_breaker_cooldown = 9.5
[session]
instructions = "Be terse."
retention_days = 30
auto_compact_pct = 0.5
compact_max_tokens = 2048
[tools]
timeout = 45
truncation = 9000
search = "off"
search_threshold = 12
search_max_results = 7
allow_private_network = true
[auth]
enabled = true
[[auth.tokens]]
value = "token-from-the-file"
role = "read"
[bridge]
server_url = "http://elsewhere:8080"
"#,
    )
    .unwrap();
    let config = f.path("tables.toml");
    let (code, out, err) = check(
        "turnstone-server",
        dir,
        &["--config", &config, "--max-tokens", "512"],
        &[],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    for (key, value, table) in [
        ("temperature", "0.3", "server"),
        ("db_backend", "sqlite", "database"),
        ("db_path", "from-file.db", "database"),
        ("db_pool_size", "4", "database"),
        ("ratelimit_enabled", "true", "ratelimit"),
        ("ratelimit_rps", "2.5", "ratelimit"),
        ("ratelimit_burst", "7", "ratelimit"),
        ("trusted_proxy", "10.0.0.0/8", "ratelimit"),
        ("circuit_breaker_threshold", "3", "health"),
        ("circuit_breaker_cooldown", "9.5", "health"),
        ("instructions", "Be terse.", "session"),
        ("session_retention_days", "30", "session"),
        ("tool_timeout", "45", "tools"),
        ("tool_truncation", "9000", "tools"),
        ("tool_search", "off", "tools"),
        ("tool_search_threshold", "12", "tools"),
        ("tool_search_max_results", "7", "tools"),
    ] {
        let line = format!("{key} = \"{value}\"  # {config} [{table}]");
        assert!(out.contains(&line), "`{line}` not in:\n{out}");
    }
    assert!(out.contains("max_tokens = \"512\"  # flag"), "{out}");
    assert!(out.contains("context_window = \"0\"  # default"), "{out}");
    assert!(
        out.contains("reasoning_effort = \"medium\"  # default"),
        "{out}"
    );
    assert!(
        out.contains("workstream_idle_timeout = \"120\"  # default"),
        "{out}"
    );
    assert!(!out.contains("token-from-the-file"), "{out}");

    // Environment over the table, flag over the environment.
    let (code, out, err) = check(
        "turnstone-server",
        dir,
        &["--config", &config, "--tool-timeout", "50"],
        &[("TURNSTONE_TOOL_TRUNCATION", "777".into())],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("tool_timeout = \"50\"  # flag"), "{out}");
    assert!(
        out.contains("tool_truncation = \"777\"  # env TURNSTONE_TOOL_TRUNCATION"),
        "{out}"
    );

    let refused = |name: &str, text: &str, needles: &[&str]| {
        std::fs::write(dir.join(name), text).unwrap();
        assert_refused(
            check("turnstone-server", dir, &["--config", &f.path(name)], &[]),
            needles,
        );
    };
    refused(
        "ssl.toml",
        "[database]\nsslmode = \"require\"\n",
        &["[database] sslmode is not supported", "url"],
    );
    refused(
        "probe.toml",
        "[health]\nbackend_probe_interval = 30\n",
        &["[health] backend_probe_interval is not supported"],
    );
    refused(
        "rl.toml",
        "[ratelimit]\nrps = 3\n",
        &["unknown key `rps` in [ratelimit]"],
    );
    refused(
        "auth.toml",
        "[auth]\nsecret = \"x\"\n",
        &["unknown key `secret` in [auth]"],
    );
    refused(
        "session.toml",
        "[session]\nmystery = 1\n",
        &["unknown key `mystery` in [session]"],
    );
    refused(
        "tools.toml",
        "[tools]\ntimeout = 0\n",
        &["tool_timeout must be between 1 and 3600"],
    );
    refused(
        "twice.toml",
        "[server]\nauto_compact_pct = 0.5\n[session]\nauto_compact_pct = 0.6\n",
        &["[session] auto_compact_pct and [server] auto_compact_pct"],
    );
    refused(
        "db-twice.toml",
        "[server]\ndb_path = \"a.db\"\n[database]\npath = \"b.db\"\n",
        &["[database] path", "db_path"],
    );
    assert_refused(
        check("turnstone-server", dir, &["--temperature", "3"], &[]),
        &["temperature must be between 0 and 2"],
    );
    assert_refused(
        check(
            "turnstone-server",
            dir,
            &["--reasoning-effort", "extreme"],
            &[],
        ),
        &["reasoning_effort", "extreme"],
    );
}

#[test]
fn bridge_check_config_reads_its_table_secret_files_and_old_names() {
    let f = Files::new();
    let dir = f.dir.path();
    let env = [
        ("TURNSTONE_CONFIG", f.path("config.toml")),
        ("TURNSTONE_JWT_SECRET_FILE", f.path("jwt")),
        ("TURNSTONE_REDIS_PASSWORD_FILE", f.path("redis-password")),
        ("TURNSTONE_REDIS_USERNAME", "bridge-user".into()),
        ("REDIS_HOST", "redis.internal".into()),
        ("TURNSTONE_MQ_PREFIX", "oldprefix".into()),
        ("TURNSTONE_SERVER_URL", "http://127.0.0.1:9".into()),
    ];
    let (code, out, err) = check("turnstone-bridge", dir, &[], &env);
    assert_eq!(code, 0, "{out}\n{err}");
    // Env wins over the file; the file over defaults.
    assert!(
        out.contains("server_url = \"http://127.0.0.1:9\"  # env TURNSTONE_SERVER_URL"),
        "{out}"
    );
    assert!(out.contains("concurrency = \"9\"  # "), "{out}");
    assert!(out.contains("[bridge]"), "{out}");
    assert!(
        out.contains("redis_host = \"redis.internal\"  # env REDIS_HOST (deprecated alias)"),
        "{out}"
    );
    assert!(out.contains("prefix = \"oldprefix\""), "{out}");
    assert!(
        out.contains("redis_password = \"<redacted>\"  # file "),
        "{out}"
    );
    assert!(err.contains("REDIS_HOST is deprecated"), "{err}");
    assert!(
        err.contains("TURNSTONE_MQ_PREFIX is deprecated; use TURNSTONE_REDIS_PREFIX"),
        "{err}"
    );
    for leaked in [SECRET, PASSWORD] {
        assert!(
            !out.contains(leaked) && !err.contains(leaked),
            "a secret leaked"
        );
    }

    std::fs::write(
        dir.join("bad.toml"),
        "[bridge]\nconcurency = 3\n[console]\nwhatever = 1\n",
    )
    .unwrap();
    assert_refused(
        check(
            "turnstone-bridge",
            dir,
            &["--config", &f.path("bad.toml")],
            &[],
        ),
        &["unknown key `concurency` in [bridge]"],
    );
    assert_refused(
        check(
            "turnstone-bridge",
            dir,
            &[],
            &[("TURNSTONE_AUTH_TOKEN_FILE", f.path("nope"))],
        ),
        &["TURNSTONE_AUTH_TOKEN_FILE", "nope"],
    );
    assert_refused(
        check(
            "turnstone-bridge",
            dir,
            &["--redis-password", "inline"],
            &[("TURNSTONE_REDIS_PASSWORD_FILE", f.path("redis-password"))],
        ),
        &["TURNSTONE_REDIS_PASSWORD_FILE", "one way only"],
    );
    assert_refused(
        check(
            "turnstone-bridge",
            dir,
            &[],
            &[("TURNSTONE_CONSOLE_PORT", "1".into())],
        ),
        &["TURNSTONE_CONSOLE_PORT", "turnstone-bridge does not read"],
    );
    assert_refused(
        check("turnstone-bridge", dir, &["--server-url", "node:8080"], &[]),
        &["--server-url"],
    );
    assert_refused(
        check(
            "turnstone-bridge",
            dir,
            &[],
            &[("TURNSTONE_REDIS_TLS_CA_FILE", f.path("no-ca.pem"))],
        ),
        &["rediss://"],
    );
}

#[test]
fn console_check_config_reads_its_table_secret_files_and_old_names() {
    let f = Files::new();
    let dir = f.dir.path();
    let env = [
        ("TURNSTONE_CONFIG", f.path("config.toml")),
        ("TURNSTONE_JWT_SECRET_FILE", f.path("jwt")),
        ("TURNSTONE_REDIS_URL_FILE", f.path("redis-password")),
        ("TURNSTONE_REDIS_HOST", "old-host".into()),
    ];
    // The "URL" file holds no URL: a bad value, named without its secret.
    assert_refused(check("turnstone-console", dir, &[], &env), &["redis"]);
    std::fs::write(
        dir.join("redis-url"),
        format!("redis://console:{PASSWORD}@redis.internal:6380/1\n"),
    )
    .unwrap();
    let env = [
        ("TURNSTONE_CONFIG", f.path("config.toml")),
        ("TURNSTONE_JWT_SECRET_FILE", f.path("jwt")),
        ("TURNSTONE_REDIS_URL_FILE", f.path("redis-url")),
        ("TURNSTONE_PREFIX", "oldprefix".into()),
    ];
    let (code, out, err) = check("turnstone-console", dir, &[], &env);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("poll_interval = \"3.5\"  # "), "{out}");
    assert!(out.contains("redis_url = \"<redacted>\"  # file "), "{out}");
    // The flag-less env name beats the file; the old name beats the file, with a warning.
    assert!(out.contains("prefix = \"oldprefix\""), "{out}");
    assert!(
        err.contains("TURNSTONE_PREFIX is deprecated; use TURNSTONE_REDIS_PREFIX"),
        "{err}"
    );
    for leaked in [SECRET, PASSWORD] {
        assert!(
            !out.contains(leaked) && !err.contains(leaked),
            "a secret leaked"
        );
    }

    std::fs::write(dir.join("bad.toml"), "[console]\npoll_intervall = 3\n").unwrap();
    assert_refused(
        check(
            "turnstone-console",
            dir,
            &["--config", &f.path("bad.toml")],
            &[],
        ),
        &["unknown key `poll_intervall` in [console]"],
    );
    assert_refused(
        check(
            "turnstone-console",
            dir,
            &[],
            &[("TURNSTONE_JWT_SECRET_FILE", f.path("missing"))],
        ),
        &["TURNSTONE_JWT_SECRET_FILE", "missing"],
    );
    assert_refused(
        check(
            "turnstone-console",
            dir,
            &[],
            &[("TURNSTONE_MODEL", "x".into())],
        ),
        &["TURNSTONE_MODEL", "turnstone-console does not read"],
    );
    assert_refused(
        check(
            "turnstone-console",
            dir,
            &["--poll-interval=-1"],
            &[("TURNSTONE_JWT_SECRET_FILE", f.path("jwt"))],
        ),
        &["poll-interval"],
    );

    // Storage: the node's flags; the PostgreSQL URL is a secret (a file, redacted).
    std::fs::write(
        dir.join("db-url"),
        format!("postgresql://console:{PASSWORD}@db.internal:5432/turnstone\n"),
    )
    .unwrap();
    let env = [
        ("TURNSTONE_JWT_SECRET_FILE", f.path("jwt")),
        ("TURNSTONE_DB_BACKEND", "postgresql".into()),
        ("TURNSTONE_DB_URL_FILE", f.path("db-url")),
    ];
    let (code, out, err) = check("turnstone-console", dir, &[], &env);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("db_backend = \"postgresql\""), "{out}");
    assert!(out.contains("db_url = \"<redacted>\"  # file "), "{out}");
    assert!(
        !out.contains(PASSWORD) && !err.contains(PASSWORD),
        "a secret leaked"
    );
    assert_refused(
        check(
            "turnstone-console",
            dir,
            &["--db-backend", "postgresql"],
            &[("TURNSTONE_JWT_SECRET_FILE", f.path("jwt"))],
        ),
        &["--db-backend postgresql needs --db-url"],
    );
    assert_refused(
        check(
            "turnstone-console",
            dir,
            &["--db-backend", "mysql"],
            &[("TURNSTONE_JWT_SECRET_FILE", f.path("jwt"))],
        ),
        &["expected sqlite or postgresql"],
    );
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

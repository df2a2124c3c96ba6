//! `turnstone-cluster up`: a whole local cluster as child processes — a private
//! `redis-server` (unless `--redis-url`), the scripted fake model (unless `--base-url`),
//! N nodes on SQLite, N bridges and the console — found next to the launcher's own
//! executable. Every child runs in its own process group; on Ctrl-C/SIGTERM (or when a
//! child dies) each group gets SIGTERM, then SIGKILL after a grace period, so nothing is
//! left running.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The binaries the launcher starts, found next to its own executable.
pub const SIBLINGS: [&str; 4] = [
    "turnstone-server",
    "turnstone-bridge",
    "turnstone-console",
    "turnstone-fake-llm",
];

/// How long a child may take to print its listening line.
const START_DEADLINE: Duration = Duration::from_secs(60);
/// How long a child gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Why the cluster could not start.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(
        "missing binaries next to {dir}: {missing}. Build them together: \
         `cargo build --release --bins` (then run target/release/turnstone-cluster)"
    )]
    MissingBinaries { dir: String, missing: String },
    #[error(
        "redis-server was not found on PATH. Install the Debian package `redis-server` \
         (`apt-get install redis-server`), or pass --redis-url redis://HOST:PORT/DB to use a \
         running Redis"
    )]
    NoRedisServer,
    #[error("cannot start {what}: {source}")]
    Spawn {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} did not start: {detail}")]
    NotReady { what: String, detail: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// What `up` was asked for.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub nodes: usize,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub redis_url: Option<String>,
    /// Console port (0 = any free port).
    pub port: u16,
    pub host: String,
    /// Where node databases and logs go (default: a temp dir removed at exit).
    pub data_dir: Option<PathBuf>,
    /// Where the sibling binaries are (default: the launcher's own directory).
    pub bin_dir: Option<PathBuf>,
}

/// One child process in its own process group.
#[derive(Debug)]
pub struct Proc {
    pub name: String,
    pub child: Child,
    /// Its stdout/stderr log file.
    pub log: PathBuf,
}

impl Proc {
    fn pid(&self) -> Option<rustix::process::Pid> {
        self.child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw)
    }

    /// SIGTERM to the group, wait, then SIGKILL to the group.
    pub async fn stop(&mut self) {
        let Some(pid) = self.pid() else {
            return; // already reaped
        };
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::TERM);
        if tokio::time::timeout(STOP_GRACE, self.child.wait())
            .await
            .is_err()
        {
            tracing::warn!(name = %self.name, "did not stop in time; killing");
        }
        // Whatever is left in the group (including grandchildren) goes now.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        let _ = self.child.wait().await;
    }
}

/// A running cluster.
#[derive(Debug)]
pub struct Cluster {
    /// In start order; stopped in reverse.
    pub procs: Vec<Proc>,
    pub console_url: String,
    pub node_urls: Vec<(String, String)>,
    pub redis_url: String,
    pub token: String,
    pub data_dir: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl Cluster {
    /// Stops every child, newest first.
    pub async fn stop(&mut self) {
        while let Some(mut p) = self.procs.pop() {
            p.stop().await;
        }
    }

    /// The process ids of every child (each leads its own process group).
    pub fn pids(&self) -> Vec<u32> {
        self.procs.iter().filter_map(|p| p.child.id()).collect()
    }

    /// Resolves with the name of the first child that exits on its own.
    pub async fn first_exit(&mut self) -> String {
        let waits = self.procs.iter_mut().map(|p| {
            let name = p.name.clone();
            Box::pin(async move {
                let _ = p.child.wait().await;
                name
            })
        });
        let (name, _, _) = futures::future::select_all(waits).await;
        name
    }
}

/// The sibling binaries, or an error naming the missing ones.
pub fn find_siblings(dir: &Path) -> Result<Vec<PathBuf>, LaunchError> {
    let paths: Vec<PathBuf> = SIBLINGS
        .iter()
        .map(|n| dir.join(format!("{n}{}", std::env::consts::EXE_SUFFIX)))
        .collect();
    let missing: Vec<&str> = SIBLINGS
        .iter()
        .zip(&paths)
        .filter(|(_, p)| !p.is_file())
        .map(|(n, _)| *n)
        .collect();
    if missing.is_empty() {
        Ok(paths)
    } else {
        Err(LaunchError::MissingBinaries {
            dir: dir.display().to_string(),
            missing: missing.join(", "),
        })
    }
}

/// The `cargo build` arguments that produce the sibling binaries for a binary directory
/// (`…/release` → `--release`).
pub fn sibling_build_args(bin_dir: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "build",
        "--bins",
        "-p",
        "turnstone-node",
        "-p",
        "turnstone-bridge",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(["-p".to_string(), "turnstone-testkit".to_string()]);
    match bin_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => {}
        Some("release") => args.push("--release".into()),
        Some(other) => {
            args.push("--profile".into());
            args.push(other.to_string());
        }
    }
    args
}

/// Runs `$CARGO build …` for the siblings (in the package's workspace), showing its output.
async fn build_siblings(bin_dir: &Path) -> Result<(), LaunchError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let args = sibling_build_args(bin_dir);
    eprintln!(
        "turnstone-cluster: building the other binaries (cargo {})",
        args.join(" ")
    );
    let mut cmd = Command::new(cargo);
    cmd.args(&args).stdin(Stdio::null());
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
        cmd.current_dir(dir);
    }
    let status = cmd.status().await.map_err(|source| LaunchError::Spawn {
        what: "cargo build".into(),
        source,
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(LaunchError::NotReady {
            what: "cargo build of the sibling binaries".into(),
            detail: format!("it exited with {status}"),
        })
    }
}

/// `redis-server` on `PATH`.
pub fn find_redis_server() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
}

async fn free_port() -> Result<u16, LaunchError> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    Ok(l.local_addr()?.port())
}

/// Spawns `cmd` in its own process group with stderr to `log`, and stdout piped (to read a
/// listening line) or to `log` too.
fn spawn(mut cmd: Command, name: &str, log: &Path, pipe_stdout: bool) -> Result<Proc, LaunchError> {
    let err = std::fs::File::create(log)?;
    let out = if pipe_stdout {
        Stdio::piped()
    } else {
        Stdio::from(err.try_clone()?)
    };
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(Stdio::from(err))
        .process_group(0)
        .kill_on_drop(true);
    let child = cmd.spawn().map_err(|source| LaunchError::Spawn {
        what: name.to_string(),
        source,
    })?;
    Ok(Proc {
        name: name.to_string(),
        child,
        log: log.to_path_buf(),
    })
}

/// Reads stdout lines until one contains `marker`; returns the text after it. The rest of
/// stdout keeps being drained into the log file, so the child never blocks on a full pipe.
async fn wait_for_line(p: &mut Proc, marker: &str) -> Result<String, LaunchError> {
    let Some(stdout) = p.child.stdout.take() else {
        return Err(LaunchError::NotReady {
            what: p.name.clone(),
            detail: "no stdout".into(),
        });
    };
    let mut lines = BufReader::new(stdout).lines();
    let found = tokio::time::timeout(START_DEADLINE, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some((_, rest)) = line.split_once(marker) {
                return Some(rest.trim().to_string());
            }
        }
        None
    })
    .await;
    let log = std::fs::read_to_string(&p.log).unwrap_or_default();
    let tail: String = log
        .lines()
        .rev()
        .take(8)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    match found {
        Ok(Some(rest)) => {
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            Ok(rest)
        }
        Ok(None) => Err(LaunchError::NotReady {
            what: p.name.clone(),
            detail: format!("it exited; log {}:\n{tail}", p.log.display()),
        }),
        Err(_) => Err(LaunchError::NotReady {
            what: p.name.clone(),
            detail: format!(
                "no listening line within {}s; log {}:\n{tail}",
                START_DEADLINE.as_secs(),
                p.log.display()
            ),
        }),
    }
}

async fn wait_for_redis(url: &str) -> Result<(), LaunchError> {
    let client = redis::Client::open(url).map_err(|e| LaunchError::NotReady {
        what: "redis".into(),
        detail: e.to_string(),
    })?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut c) = client.get_multiplexed_async_connection().await {
            let pong: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut c).await;
            if pong.is_ok() {
                return Ok(());
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(LaunchError::NotReady {
                what: "redis".into(),
                detail: format!("{url} does not answer PING"),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts the cluster. On any failure the children started so far are stopped.
pub async fn up(opts: UpOptions) -> Result<Cluster, LaunchError> {
    let bin_dir = match &opts.bin_dir {
        Some(d) => d.clone(),
        None => std::env::current_exe()?
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
    };
    let bins = match find_siblings(&bin_dir) {
        Ok(bins) => bins,
        // Started by `cargo run --bin turnstone-cluster`: cargo built only this package's
        // binaries. Build the others the same way, once, then look again.
        Err(LaunchError::MissingBinaries { .. }) if std::env::var_os("CARGO").is_some() => {
            build_siblings(&bin_dir).await?;
            find_siblings(&bin_dir)?
        }
        Err(e) => return Err(e),
    };
    let (server_bin, bridge_bin, console_bin, llm_bin) = (&bins[0], &bins[1], &bins[2], &bins[3]);
    let redis_bin = if opts.redis_url.is_none() {
        Some(find_redis_server().ok_or(LaunchError::NoRedisServer)?)
    } else {
        None
    };
    let (data_dir, temp) = match &opts.data_dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            (d.clone(), None)
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("turnstone-cluster-")
                .tempdir()?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    let token =
        turnstone_runtime::auth::generate_api_token().map_err(|e| LaunchError::NotReady {
            what: "token".into(),
            detail: e.to_string(),
        })?;
    let secret = turnstone_runtime::auth::random_hex(32).map_err(|e| LaunchError::NotReady {
        what: "secret".into(),
        detail: e.to_string(),
    })?;
    let mut cluster = Cluster {
        procs: Vec::new(),
        console_url: String::new(),
        node_urls: Vec::new(),
        redis_url: String::new(),
        token: token.clone(),
        data_dir: data_dir.clone(),
        _temp: temp,
    };
    match start_all(
        &opts,
        &mut cluster,
        redis_bin.as_deref(),
        [server_bin, bridge_bin, console_bin, llm_bin],
        &secret,
    )
    .await
    {
        Ok(()) => Ok(cluster),
        Err(e) => {
            cluster.stop().await;
            Err(e)
        }
    }
}

/// A command with the auth environment every cluster member shares and nothing inherited
/// that would change its behaviour.
fn member(bin: &Path, cwd: &Path, secret: &str, token: &str) -> Command {
    let mut cmd = Command::new(bin);
    cmd.current_dir(cwd)
        .env("TURNSTONE_JWT_SECRET", secret)
        .env("TURNSTONE_AUTH_TOKEN", token)
        .env_remove("TURNSTONE_AUTH_ENABLED")
        .env_remove("TURNSTONE_NODE_ID")
        .env_remove("TURNSTONE_HOST")
        .env_remove("TURNSTONE_PORT")
        .env_remove("TURNSTONE_BASE_URL")
        .env_remove("TURNSTONE_DB_BACKEND")
        .env_remove("TURNSTONE_DB_PATH")
        .env_remove("TURNSTONE_DB_URL")
        .env("NO_COLOR", "1");
    cmd
}

async fn start_all(
    opts: &UpOptions,
    cluster: &mut Cluster,
    redis_bin: Option<&Path>,
    [server_bin, bridge_bin, console_bin, llm_bin]: [&PathBuf; 4],
    secret: &str,
) -> Result<(), LaunchError> {
    let dir = cluster.data_dir.clone();
    let token = cluster.token.clone();

    // Redis.
    let redis_url = match (&opts.redis_url, redis_bin) {
        (Some(url), _) => url.clone(),
        (None, Some(bin)) => {
            let port = free_port().await?;
            let redis_dir = dir.join("redis");
            std::fs::create_dir_all(&redis_dir)?;
            let mut cmd = Command::new(bin);
            cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .arg("--dir")
                .arg(&redis_dir);
            let p = spawn(cmd, "redis-server", &dir.join("redis.log"), false)?;
            cluster.procs.push(p);
            format!("redis://127.0.0.1:{port}/0")
        }
        (None, None) => return Err(LaunchError::NoRedisServer),
    };
    wait_for_redis(&redis_url).await?;
    cluster.redis_url = redis_url.clone();

    // The model.
    let base_url = match &opts.base_url {
        Some(u) => u.clone(),
        None => {
            let mut cmd = Command::new(llm_bin);
            cmd.args(["--host", "127.0.0.1", "--port", "0"]);
            let mut p = spawn(cmd, "turnstone-fake-llm", &dir.join("fake-llm.log"), true)?;
            let url = wait_for_line(&mut p, " listening on ").await;
            cluster.procs.push(p);
            url?
        }
    };

    // Nodes and their bridges.
    for i in 1..=opts.nodes.max(1) {
        let id = format!("node-{i}");
        let cwd = dir.join(&id);
        std::fs::create_dir_all(&cwd)?;
        let mut cmd = member(server_bin, &cwd, secret, &token);
        cmd.args(["--host", "127.0.0.1", "--port", "0", "--node-id", &id])
            .arg("--db-path")
            .arg(cwd.join("turnstone.db"))
            .arg("--cwd")
            .arg(&cwd)
            .args(["--base-url", &base_url]);
        if let Some(m) = &opts.model {
            cmd.args(["--model", m]);
        }
        let mut p = spawn(cmd, &id, &dir.join(format!("{id}.log")), true)?;
        let url = wait_for_line(&mut p, " listening on ").await;
        cluster.procs.push(p);
        let url = url?;
        cluster.node_urls.push((id.clone(), url.clone()));

        let mut cmd = member(bridge_bin, &cwd, secret, &token);
        cmd.args(["--server-url", &url, "--redis-url", &redis_url])
            .args(["--node-id", &id, "--auth-token", &token]);
        let p = spawn(
            cmd,
            &format!("bridge-{i}"),
            &dir.join(format!("bridge-{i}.log")),
            false,
        )?;
        cluster.procs.push(p);
    }

    // The console.
    let mut cmd = member(console_bin, &dir, secret, &token);
    cmd.args(["--host", &opts.host, "--port", &opts.port.to_string()])
        .args(["--redis-url", &redis_url])
        .arg("--db-path")
        .arg(dir.join("console.db"))
        // A local cluster is small: notice changes within seconds.
        .args(["--discovery-interval", "2", "--poll-interval", "2"]);
    let mut p = spawn(cmd, "turnstone-console", &dir.join("console.log"), true)?;
    let url = wait_for_line(&mut p, " listening on ").await;
    cluster.procs.push(p);
    cluster.console_url = url?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sibling_builds_follow_the_profile_directory() {
        let args = sibling_build_args(Path::new("/t/target/release"));
        assert!(args.contains(&"--release".to_string()));
        assert!(args.contains(&"turnstone-bridge".to_string()));
        assert!(
            !sibling_build_args(Path::new("/t/target/debug")).contains(&"--release".to_string())
        );
        let custom = sibling_build_args(Path::new("/t/target/bench"));
        assert_eq!(
            custom[custom.len() - 2..],
            ["--profile".to_string(), "bench".to_string()]
        );
    }

    #[test]
    fn missing_siblings_are_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("turnstone-server"), "").unwrap();
        let err = find_siblings(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("turnstone-bridge, turnstone-console, turnstone-fake-llm"),
            "{err}"
        );
        assert!(!err.contains("turnstone-server,"), "{err}");
    }
}

//! Child processes of the tests: the workspace's binaries (built beforehand with
//! `cargo build --workspace --bins`, same profile and target dir), killed with their process
//! group when dropped.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// `target/<profile>/<name>`, built with the same profile as this test.
pub fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap();
    let path = profile.join(name);
    assert!(
        path.is_file(),
        "binary `{name}` not found at {}: run `cargo build --workspace --bins` (same profile and \
         target dir) before these tests",
        path.display()
    );
    path
}

/// A child process killed (with its process group) when dropped.
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(mut cmd: Command, log: PathBuf) -> Self {
        let err = std::fs::File::create(&log).unwrap();
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err))
            .env("NO_COLOR", "1")
            .process_group(0)
            .kill_on_drop(true);
        Self {
            child: cmd.spawn().unwrap(),
            log,
        }
    }

    /// Reads stdout until a line contains `marker`; returns the rest of that line. The rest
    /// of stdout is drained in the background.
    pub async fn line_after(&mut self, marker: &str) -> String {
        let mut lines = BufReader::new(self.child.stdout.take().unwrap()).lines();
        let found = tokio::time::timeout(Duration::from_secs(60), async {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some((_, rest)) = line.split_once(marker) {
                    return Some(rest.trim().to_string());
                }
            }
            None
        })
        .await;
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        match found {
            Ok(Some(rest)) => rest,
            other => panic!(
                "no {marker:?} line ({other:?}); log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            ),
        }
    }

    pub fn pid(&self) -> Option<rustix::process::Pid> {
        self.child
            .id()
            .and_then(|id| rustix::process::Pid::from_raw(id as i32))
    }

    pub fn signal(&self, sig: rustix::process::Signal) {
        if let Some(pid) = self.pid() {
            let _ = rustix::process::kill_process(pid, sig);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(pid) = self.pid() {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.start_kill();
    }
}

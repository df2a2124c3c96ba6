//! The interactive client in a real pseudo-terminal: `turnstone` runs inside a detached
//! `tmux` session on a private tmux server; keys are typed with `send-keys` and the screen
//! is read back with `capture-pane`, polling with a deadline.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::{SCRUBBED_ENV, binary};

const DEADLINE: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(100);

/// A private tmux server running one session; killed on drop, whatever happened.
struct TmuxSession {
    socket: String,
    _home: tempfile::TempDir,
    _work: tempfile::TempDir,
}

impl TmuxSession {
    /// Starts `turnstone <args>` in a 160×50 pane. When it exits, the pane shows
    /// `[exited with <code>]` and stays open.
    fn start(args: &[&str]) -> Self {
        Self::start_with_env(&[], args)
    }

    /// Like [`start`](Self::start), with extra environment variables for `turnstone`.
    fn start_with_env(env: &[(&str, &str)], args: &[&str]) -> Self {
        let found = Command::new("sh")
            .args(["-c", "command -v tmux"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        assert!(
            found,
            "tmux is required for the terminal test: run `apt-get install tmux` (or scripts/services)"
        );
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let socket = format!(
            "turnstone-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let mut line = String::from("env");
        for var in SCRUBBED_ENV {
            line.push_str(&format!(" -u {var}"));
        }
        for (key, value) in env {
            line.push_str(&format!(" {key}='{value}'"));
        }
        line.push_str(&format!(
            " HOME={} TURNSTONE_DB_PATH={} TERM=xterm-256color {} --cwd {}",
            quote(home.path()),
            quote(&home.path().join("sessions.db")),
            quote(binary()),
            quote(work.path())
        ));
        for a in args {
            line.push_str(&format!(" '{a}'"));
        }
        // The wrapping shell must survive the test's Ctrl-C to report the exit code (a trap
        // with a command is reset for the child, which handles SIGINT itself).
        let script = format!("trap 'true' INT; {line}; echo \"[exited with $?]\"; exec cat");
        let session = Self {
            socket,
            _home: home,
            _work: work,
        };
        let out = session.tmux(&[
            "new-session",
            "-d",
            "-s",
            "main",
            "-x",
            "160",
            "-y",
            "50",
            "sh",
            "-c",
            &script,
        ]);
        assert!(out.status.success(), "tmux new-session failed: {out:?}");
        session
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap()
    }

    /// Types `text` literally, then Enter.
    fn type_line(&self, text: &str) {
        let out = self.tmux(&["send-keys", "-t", "main", "-l", text]);
        assert!(out.status.success(), "{out:?}");
        self.key("Enter");
    }

    fn key(&self, key: &str) {
        let out = self.tmux(&["send-keys", "-t", "main", key]);
        assert!(out.status.success(), "{out:?}");
    }

    /// The whole pane including scroll-back; `escapes` keeps colours as ANSI sequences.
    fn screen(&self, escapes: bool) -> String {
        let mut args = vec!["capture-pane", "-p", "-J", "-S", "-", "-t", "main"];
        if escapes {
            args.push("-e");
        }
        String::from_utf8_lossy(&self.tmux(&args).stdout).into_owned()
    }

    /// Polls the screen until `pred` holds; panics with the screen after the deadline.
    async fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        self.wait_up_to(DEADLINE, what, pred).await
    }

    async fn wait_up_to(&self, limit: Duration, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let screen = self.screen(false);
            if pred(&screen) {
                return screen;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("timed out waiting for {what}; screen:\n{screen}");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn wait_line(&self, line: &str) -> String {
        self.wait(&format!("a line {line:?}"), |s| {
            s.lines().any(|l| l.trim_end() == line)
        })
        .await
    }

    async fn wait_text(&self, text: &str) -> String {
        self.wait(&format!("{text:?}"), |s| s.contains(text)).await
    }
}

impl Drop for TmuxSession {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

fn count_lines(screen: &str, line: &str) -> usize {
    screen.lines().filter(|l| l.trim_end() == line).count()
}

#[tokio::test]
async fn streams_a_reply_approves_a_tool_and_switches_workstreams() {
    let tty = TmuxSession::start(&[]);
    tty.wait_text("Type /help for commands.").await;
    tty.wait_line(">").await;

    // A reply streams back, styled (the prompt echo is `> …`, the reply a line of its own).
    tty.type_line("hello from the **terminal**");
    tty.wait_line("hello from the terminal").await;
    let styled = tty.screen(true);
    assert!(
        styled.contains("\x1b[1mterminal"),
        "bold is rendered with ANSI on a terminal:\n{styled:?}"
    );

    // A tool call is approved at the prompt.
    tty.type_line("TOOL: echo from-tty");
    tty.wait_text("Approve? [y]es / [n]o / [a]lways").await;
    let before = tty.screen(false);
    assert_eq!(count_lines(&before, "done: from-tty"), 0, "{before}");
    tty.type_line("y");
    let screen = tty.wait_line("done: from-tty").await;
    assert!(
        screen
            .lines()
            .any(|l| l.trim_end() == "  \u{2502} from-tty"),
        "the command's output is shown:\n{screen}"
    );

    // Workstreams: a new one, then back to the first.
    tty.type_line("/ws new side");
    tty.wait_text("Created workstream 2: side (now current)")
        .await;
    tty.type_line("/ws 1");
    tty.wait_text("Switched to workstream 1: ws-").await;
    tty.type_line("/ws list");
    let screen = tty.wait_text("  2. side  idle").await;
    assert!(
        screen.lines().any(|l| l.starts_with("* 1. ws-")),
        "workstream 1 is current:\n{screen}"
    );

    tty.type_line("/exit");
    tty.wait_text("[exited with 0]").await;
}

#[tokio::test]
async fn ctrl_c_cancels_the_turn_and_a_second_ctrl_c_exits() {
    let tty = TmuxSession::start(&["--skip-permissions"]);
    tty.wait_line(">").await;
    tty.type_line("TOOL: sleep 60");
    tty.wait_text("bash: sleep 60").await;
    tty.key("C-c");
    tty.wait_text("[Generation cancelled]").await;
    let screen = tty.wait_line(">").await;
    assert!(
        !screen.contains("done:"),
        "the turn did not finish:\n{screen}"
    );
    tty.key("C-c");
    tty.wait_text("[exited with 0]").await;
}

#[tokio::test]
async fn no_color_turns_styling_off() {
    let tty = TmuxSession::start_with_env(&[("NO_COLOR", "1")], &[]);
    tty.wait_line(">").await;
    tty.type_line("plain **text**");
    tty.wait_line("plain **text**").await;
    let screen = tty.screen(true);
    assert!(!screen.contains("\x1b[1mtext"), "{screen:?}");
    tty.type_line("/exit");
    tty.wait_text("[exited with 0]").await;
}

#[tokio::test]
async fn slash_model_switches_only_the_current_workstream() {
    let small = turnstone_testkit::FakeLlm::start().await;
    let big = turnstone_testkit::FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[model]\ndefault = \"small\"\n\
             [models.small]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"small-1\"\n\
             [models.big]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"big-1\"\n",
            small.base_url(),
            big.base_url()
        ),
    )
    .unwrap();
    let tty = TmuxSession::start(&["--config", config.to_str().unwrap()]);
    tty.wait_text("Type /help for commands.").await;
    tty.type_line("/model big");
    tty.wait_text("Model switched to big (big-1).").await;
    tty.type_line("asked on big");
    tty.wait_line("asked on big").await;
    // A new workstream starts on the default alias.
    tty.type_line("/ws new other");
    tty.wait_text("Created workstream 2: other (now current)")
        .await;
    tty.type_line("/model");
    tty.wait_text("Model: small-1 (alias small). Aliases: big, small.")
        .await;
    tty.type_line("asked on small");
    tty.wait_line("asked on small").await;
    assert_eq!(big.request_count(), 1);
    assert_eq!(small.request_count(), 1);
    assert_eq!(big.last_request().unwrap()["model"], "big-1");
}

#[tokio::test]
async fn a_watch_fires_into_its_workstream() {
    let tty = TmuxSession::start_with_env(
        &[("TURNSTONE_WATCH_TICK_SECS", "1")],
        &["--skip-permissions"],
    );
    tty.wait_text("Type /help for commands.").await;
    tty.type_line(
        r#"CALL:watch {"action": "create", "name": "tick", "command": "echo ready-now", "poll_every": "10s", "stop_on": "'ready' in output"}"#,
    );
    tty.wait_text("done: ").await;
    // The first poll is due 10 s later; its notice starts a turn in this workstream.
    let screen = tty
        .wait_up_to(Duration::from_secs(60), "the watch notice", |s| {
            s.contains("[watch 'tick' triggered: condition met]")
        })
        .await;
    assert!(screen.contains("ready-now"), "{screen}");
}

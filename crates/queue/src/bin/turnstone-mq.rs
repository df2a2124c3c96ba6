//! `turnstone-mq`: a shell producer/consumer for a Turnstone cluster over Redis.
//!
//! ```text
//! turnstone-mq send --ws WS [--node N] [--auto-approve] MESSAGE   # prints the correlation id
//! turnstone-mq wait --ws WS --correlation CID [--timeout S]       # prints the turn's text
//! turnstone-mq tail --ws WS [--from ID] [--count N]               # JSON lines {"id","event"}
//! ```
//!
//! Exit status: 0 done, 1 timed out (`wait`), 2 bad arguments, 3 Redis or other failure.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use futures::StreamExt;
use turnstone_proto::mq::{OutboundEvent, SendMessage};
use turnstone_queue::client::check_stream_id;
use turnstone_queue::{ClientError, TurnstoneClient};

#[derive(Debug, Parser)]
#[command(
    name = "turnstone-mq",
    version,
    about = "Send messages to a Turnstone cluster through Redis and read its events"
)]
struct Cli {
    /// Redis URL (`redis://[:password@]host:port/db`, `rediss://` for TLS).
    #[arg(
        long,
        env = "TURNSTONE_REDIS_URL",
        default_value = "redis://127.0.0.1:6379/0"
    )]
    redis_url: String,
    /// Key prefix of the cluster.
    #[arg(long, env = "TURNSTONE_MQ_PREFIX", default_value = "turnstone")]
    prefix: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Queue a message for a workstream; prints its correlation id.
    Send {
        /// Workstream id.
        #[arg(long = "ws")]
        ws: String,
        /// Deliver to this node's queue (default: the workstream's owner, else the shared queue).
        #[arg(long)]
        node: Option<String>,
        /// Approve every tool call of this workstream without asking.
        #[arg(long)]
        auto_approve: bool,
        /// The message text.
        message: String,
    },
    /// Wait for the turn started by a correlation id; prints its text (exit 1 on timeout).
    Wait {
        #[arg(long = "ws")]
        ws: String,
        /// The correlation id `send` printed.
        #[arg(long)]
        correlation: String,
        /// Seconds to wait.
        #[arg(long, default_value_t = 600.0)]
        timeout: f64,
    },
    /// Print a workstream's events as JSON lines `{"id": <stream id>, "event": {...}}`.
    Tail {
        #[arg(long = "ws")]
        ws: String,
        /// Replay after this stream id (`0` = from the start); default: only new events.
        #[arg(long)]
        from: Option<String>,
        /// Stop after this many events.
        #[arg(long)]
        count: Option<u64>,
    },
}

/// A failure and the exit status it maps to.
struct Failure {
    code: u8,
    message: String,
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        let code = match e {
            ClientError::InvalidArgument(_) => 2,
            ClientError::Timeout(_) => 1,
            _ => 3,
        };
        Self {
            code,
            message: e.to_string(),
        }
    }
}

fn usage(message: impl Into<String>) -> Failure {
    Failure {
        code: 2,
        message: message.into(),
    }
}

fn check_id(what: &str, value: &str) -> Result<(), Failure> {
    let ok = !value.is_empty()
        && value.len() <= 256
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(usage(format!(
            "--{what} {value:?}: expected 1-256 characters of [A-Za-z0-9._-]"
        )))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("turnstone-mq: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    if cli.prefix.is_empty() {
        return Err(usage("--prefix must not be empty"));
    }
    // Check arguments before connecting, so a typo is reported as such.
    match &cli.command {
        Command::Send { ws, node, .. } => {
            check_id("ws", ws)?;
            if let Some(n) = node {
                check_id("node", n)?;
            }
        }
        Command::Wait {
            ws,
            correlation,
            timeout,
        } => {
            check_id("ws", ws)?;
            check_id("correlation", correlation)?;
            if !timeout.is_finite() || *timeout < 0.0 || *timeout > 1e9 {
                return Err(usage(format!("--timeout {timeout}: expected seconds >= 0")));
            }
        }
        Command::Tail { ws, from, .. } => {
            check_id("ws", ws)?;
            if let Some(f) = from {
                check_stream_id(f).map_err(|e| usage(format!("--from: {e}")))?;
            }
        }
    }
    let client = TurnstoneClient::new(&cli.redis_url, &cli.prefix).await?;
    let mut out = std::io::stdout().lock();
    match cli.command {
        Command::Send {
            ws,
            node,
            auto_approve,
            message,
        } => {
            let cid = client
                .send(SendMessage {
                    ws_id: ws,
                    message,
                    auto_approve,
                    target_node: node.unwrap_or_default(),
                    ..SendMessage::default()
                })
                .await?;
            print_line(&mut out, &cid)?;
        }
        Command::Wait {
            ws,
            correlation,
            timeout,
        } => {
            let text = wait(&client, &ws, &correlation, Duration::from_secs_f64(timeout)).await?;
            print_line(&mut out, &text)?;
        }
        Command::Tail { ws, from, count } => {
            let mut events = client.subscribe_ws(&ws, from.as_deref()).await?;
            let mut seen = 0u64;
            while count.is_none_or(|c| seen < c) {
                let Some(item) = events.next().await else {
                    break;
                };
                match item {
                    Ok((id, event)) => {
                        let line = serde_json::json!({"id": id, "event": event.to_value()});
                        print_line(&mut out, &line.to_string())?;
                        seen += 1;
                    }
                    Err(e @ ClientError::BadEntry { .. }) => eprintln!("turnstone-mq: {e}"),
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    Ok(())
}

/// The `content` of the `turn_complete` carrying `correlation`, searched from the start of the
/// workstream's stream (the turn may be over already) and then live.
async fn wait(
    client: &TurnstoneClient,
    ws: &str,
    correlation: &str,
    timeout: Duration,
) -> Result<String, Failure> {
    let search = async {
        let mut events = client.subscribe_ws(ws, Some("0")).await?;
        while let Some(item) = events.next().await {
            match item {
                Ok((_, OutboundEvent::TurnComplete(t))) if t.correlation_id == correlation => {
                    return Ok(Some(t.body.content));
                }
                Ok(_) | Err(ClientError::BadEntry { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    };
    match tokio::time::timeout(timeout, search).await {
        Ok(Ok(Some(text))) => Ok(text),
        Ok(Ok(None)) => Err(Failure {
            code: 3,
            message: "the event stream ended".into(),
        }),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(Failure {
            code: 1,
            message: format!(
                "timed out after {:.1}s waiting for turn_complete of {correlation} in workstream {ws}",
                timeout.as_secs_f64()
            ),
        }),
    }
}

fn print_line(out: &mut impl Write, line: &str) -> Result<(), Failure> {
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| Failure {
            code: 3,
            message: format!("stdout: {e}"),
        })
}

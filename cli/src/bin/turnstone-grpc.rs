//! `turnstone-grpc`: a node's workstreams over its gRPC API (`turnstone.v1.NodeService`, see
//! `docs/grpc.md`) from the shell.
//!
//! ```text
//! turnstone-grpc send --ws <ws_id> [--wait] [--correlation-id ID] <message>
//! turnstone-grpc tail --ws <ws_id> [--after SEQ] [--until TYPE]
//! turnstone-grpc tail --node [--after NODE_SEQ] [--until TYPE]
//! turnstone-grpc approve --ws <ws_id> [--request-id ID] [--deny] [--feedback TEXT]
//! ```
//!
//! `tail` prints one line per event: its `seq` (`-` when it has none), then the event's JSON
//! as SSE sends it. `--after` resumes from a `seq` seen earlier.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use turnstone_grpc::client::{self, NodeClient};
use turnstone_grpc::v1 as pb;

#[derive(Debug, Parser)]
#[command(name = "turnstone-grpc", about = "A Turnstone node over gRPC")]
struct Args {
    /// The node: its HTTP port (gRPC shares it) or its `--grpc-port`.
    #[arg(
        long,
        global = true,
        env = "TURNSTONE_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    url: String,
    /// Bearer credential (config token, `ts_` API token or JWT).
    #[arg(long, global = true, env = "TURNSTONE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Debug, Subcommand)]
enum Verb {
    /// Send a message; `--wait` returns when the turn completes and prints its content.
    Send {
        #[arg(long)]
        ws: String,
        #[arg(long)]
        wait: bool,
        /// Makes the send idempotent (a repeat starts nothing).
        #[arg(long, default_value = "")]
        correlation_id: String,
        message: String,
    },
    /// Print a workstream's events (or the node's, with `--node`) as they come.
    Tail {
        #[arg(long, required_unless_present = "node")]
        ws: Option<String>,
        #[arg(long, conflicts_with = "ws")]
        node: bool,
        /// Resume after this sequence number.
        #[arg(long)]
        after: Option<u64>,
        /// Stop after the first event of this type (e.g. `turn_complete`).
        #[arg(long)]
        until: Option<String>,
    },
    /// Decide the pending approval (or the one named by `--request-id`).
    Approve {
        #[arg(long)]
        ws: String,
        #[arg(long, default_value = "")]
        request_id: String,
        #[arg(long)]
        deny: bool,
        #[arg(long)]
        feedback: Option<String>,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("turnstone-grpc: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A failed call, said as `CODE: message`.
fn said(status: tonic::Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}

async fn run(args: Args) -> Result<(), String> {
    let mut node: NodeClient = client::connect(&args.url, args.token.as_deref())
        .await
        .map_err(|e| e.to_string())?;
    match args.verb {
        Verb::Send {
            ws,
            wait,
            correlation_id,
            message,
        } => {
            let send = pb::SendRequest {
                ws_id: ws,
                message,
                correlation_id,
                ..pb::SendRequest::default()
            };
            if wait {
                let reply = node
                    .send_and_wait(pb::SendAndWaitRequest {
                        send: Some(send),
                        ..pb::SendAndWaitRequest::default()
                    })
                    .await
                    .map_err(said)?
                    .into_inner();
                match reply.turn_complete {
                    Some(done) if reply.completed => println!("{}", done.content),
                    _ => {
                        let status = reply.send.map(|s| s.status).unwrap_or_default();
                        return Err(format!("the turn did not complete (send: {status})"));
                    }
                }
            } else {
                let reply = node.send(send).await.map_err(said)?.into_inner();
                println!("{}", reply.status);
            }
        }
        Verb::Tail {
            ws,
            node: node_wide,
            after,
            until,
        } => {
            let print = |event: Option<pb::Event>| -> bool {
                let Some(e) = event else { return false };
                let seq = e.seq.map_or_else(|| "-".to_string(), |s| s.to_string());
                println!("{seq} {}", e.json);
                until.as_deref() == Some(e.r#type.as_str())
            };
            if node_wide {
                let mut stream = node
                    .stream_node_events(pb::StreamNodeEventsRequest {
                        after_seq: after,
                        boot: None,
                    })
                    .await
                    .map_err(said)?
                    .into_inner();
                while let Some(item) = stream.message().await.map_err(said)? {
                    if print(item.event) {
                        break;
                    }
                }
            } else {
                let mut stream = node
                    .stream_events(pb::StreamEventsRequest {
                        ws_id: ws.unwrap_or_default(),
                        after_seq: after,
                    })
                    .await
                    .map_err(said)?
                    .into_inner();
                while let Some(item) = stream.message().await.map_err(said)? {
                    if print(item.event) {
                        break;
                    }
                }
            }
        }
        Verb::Approve {
            ws,
            request_id,
            deny,
            feedback,
        } => {
            let reply = node
                .approve(pb::ApproveRequest {
                    ws_id: ws,
                    approved: !deny,
                    feedback,
                    always: false,
                    request_id,
                    ..Default::default()
                })
                .await
                .map_err(said)?
                .into_inner();
            println!("{}", reply.status);
        }
    }
    Ok(())
}

//! The supervisor of one MCP server: connect with a timeout, discover, serve refreshes
//! and list changes, and on loss reconnect with a bounded backoff that always ends in a full
//! rediscovery. It publishes what the server offers into the manager's shared state.

use std::{collections::HashSet, sync::Arc, time::Duration};

use tokio::{sync::mpsc, time::Instant};
use turnstone_backoff::Backoff;

use super::{Command, Inner, McpOptions, Reply, Server};
use crate::{
    connection::{Catalog, Connection, DiscoveryError, ListKind, connect, discover},
    error::McpError,
    types::ServerState,
};

/// How a connected period ended.
enum End {
    Cancelled,
    Lost(String),
    Reconnect(Option<Reply>),
}

/// The wait before reconnect `attempt` (attempts 0 and 1 wait `backoff_initial`).
fn backoff(options: &McpOptions, attempt: u32) -> Duration {
    Backoff::new(options.backoff_initial, options.backoff_max)
        .without_jitter()
        .nth(attempt.saturating_sub(1))
}

fn answer(waiters: &mut Vec<Reply>, result: &Result<(), McpError>) {
    for w in waiters.drain(..) {
        let _ = w.send(result.clone());
    }
}

/// One server's life: connect (bounded), discover, serve, and on loss reconnect with a
/// bounded backoff.
pub(super) async fn supervise(
    inner: Arc<Inner>,
    idx: usize,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    let server = inner.servers[idx].clone();
    let name = server.config.name.clone();
    let cancel = inner.cancel.clone();
    let mut attempt: u32 = 0;
    let mut ever_ready = false;
    let mut waiters: Vec<Reply> = Vec::new();
    loop {
        let (changes_tx, mut changes_rx) = mpsc::unbounded_channel();
        let establish = establish(&server, &inner.options.child_env, changes_tx);
        tokio::pin!(establish);
        let outcome = loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => return,
                result = &mut establish => break result,
                command = commands.recv() => match command {
                    Some(c) => waiters.extend(c.into_reply()),
                    None => return,
                },
            }
        };
        match outcome {
            Ok((conn, catalog, warnings)) => {
                {
                    let mut rt = server.runtime();
                    if ever_ready {
                        rt.reconnects += 1;
                    }
                    rt.client = Some(conn.client.clone());
                    rt.closed = Some(conn.closed.clone());
                    rt.stderr = conn.stderr.clone();
                    rt.catalog = catalog;
                    rt.server_info = conn.server_info.clone();
                    rt.last_error = (!warnings.is_empty()).then(|| warnings.join("; "));
                }
                tracing::info!(mcp_server = %name, tools = server.runtime().catalog.tools.len(), "MCP server ready");
                ever_ready = true;
                attempt = 0;
                server.set_state(ServerState::Ready);
                inner.rebuild();
                answer(&mut waiters, &Ok(()));
                let end = serve(&inner, &server, &conn, &mut commands, &mut changes_rx).await;
                server.runtime().client = None;
                // Stops the service loop; it closes the transport (and so the child).
                conn.client.cancellation_token().cancel();
                match end {
                    End::Cancelled => return,
                    End::Lost(reason) => {
                        tracing::warn!(mcp_server = %name, "MCP server connection lost: {reason}");
                        server.runtime().last_error = Some(reason);
                        attempt = 1;
                        server.set_state(ServerState::Reconnecting { attempt });
                        inner.rebuild();
                    }
                    End::Reconnect(reply) => {
                        waiters.extend(reply);
                        server.set_state(ServerState::Reconnecting { attempt: 0 });
                        inner.rebuild();
                        continue;
                    }
                }
            }
            Err(reason) => {
                attempt = attempt.saturating_add(1);
                tracing::warn!(mcp_server = %name, attempt, "MCP server connection failed: {reason}");
                server.runtime().last_error = Some(reason.clone());
                if !ever_ready || attempt > inner.options.max_reconnect_attempts {
                    server.runtime().catalog = Catalog::default();
                    server.set_state(ServerState::Failed {
                        reason: reason.clone(),
                    });
                } else {
                    server.set_state(ServerState::Reconnecting { attempt });
                }
                inner.rebuild();
                answer(
                    &mut waiters,
                    &Err(McpError::NotConnected {
                        server: name.clone(),
                        state: format!("failed: {reason}"),
                    }),
                );
            }
        }
        // Wait before the next attempt; a refresh/reconnect request cuts the wait short.
        let delay = backoff(&inner.options, attempt);
        tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
            command = commands.recv() => match command {
                Some(c) => waiters.extend(c.into_reply()),
                None => return,
            },
        }
    }
}

/// Connect + initialize + full discovery, bounded by the startup timeout.
async fn establish(
    server: &Server,
    child_env: &turnstone_tools::ChildEnv,
    changes: mpsc::UnboundedSender<ListKind>,
) -> Result<(Connection, Catalog, Vec<String>), String> {
    let limit = server.config.startup_timeout;
    let work = async {
        let conn = connect(&server.config, child_env, changes).await?;
        let kinds: HashSet<ListKind> = ListKind::ALL.into_iter().collect();
        match discover(
            conn.client.peer(),
            &server.config,
            &conn.capabilities,
            &kinds,
            &Catalog::default(),
        )
        .await
        {
            Ok((catalog, warnings)) => Ok((conn, catalog, warnings)),
            Err(DiscoveryError::Lost(r) | DiscoveryError::Failed(r)) => {
                conn.client.cancellation_token().cancel();
                let mut reason = format!("discovery failed: {r}");
                if let Some(line) = conn.stderr.last_line().await {
                    reason.push_str(&format!(" (stderr: {line})"));
                }
                Err(reason)
            }
        }
    };
    match tokio::time::timeout(limit, work).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "timed out after {}s connecting (connect, initialize and discovery)",
            limit.as_secs_f64()
        )),
    }
}

/// Serves a connected server until it is lost, a reconnect is asked for, or shutdown.
async fn serve(
    inner: &Inner,
    server: &Server,
    conn: &Connection,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    changes: &mut mpsc::UnboundedReceiver<ListKind>,
) -> End {
    let cancel = inner.cancel.clone();
    let mut closed = conn.closed.clone();
    let period = inner.options.refresh_interval;
    let mut next_poll = period.map(|p| Instant::now() + p);
    loop {
        let poll = async {
            match next_poll {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let kinds: HashSet<ListKind> = tokio::select! {
            biased;
            () = cancel.cancelled() => return End::Cancelled,
            _ = async { closed.wait_for(|c| *c).await.is_ok() } => return End::Lost(lost_reason(conn).await),
            command = commands.recv() => match command {
                None => return End::Cancelled,
                Some(Command::Reconnect(reply)) => return End::Reconnect(reply),
                Some(Command::Refresh(reply)) => {
                    let result = rediscover(inner, server, conn, &ListKind::ALL.into_iter().collect()).await;
                    match result {
                        Ok(()) => { if let Some(r) = reply { let _ = r.send(Ok(())); } }
                        Err(DiscoveryError::Lost(reason)) => {
                            if let Some(r) = reply {
                                let _ = r.send(Err(McpError::Disconnected {
                                    server: server.config.name.clone(),
                                    operation: "refresh".into(),
                                    detail: reason.clone(),
                                }));
                            }
                            return End::Lost(reason);
                        }
                        Err(DiscoveryError::Failed(reason)) => {
                            if let Some(r) = reply {
                                let _ = r.send(Err(McpError::Protocol {
                                    server: server.config.name.clone(),
                                    operation: "refresh".into(),
                                    detail: reason,
                                }));
                            }
                        }
                    }
                    continue;
                }
            },
            Some(kind) = changes.recv() => {
                // Debounce: fold every notification of the quiet period into one refresh.
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => return End::Cancelled,
                    () = tokio::time::sleep(inner.options.debounce) => {}
                }
                let mut kinds = HashSet::from([kind]);
                while let Ok(k) = changes.try_recv() {
                    kinds.insert(k);
                }
                kinds
            }
            () = poll => {
                next_poll = period.map(|p| Instant::now() + p);
                ListKind::ALL.into_iter().collect()
            }
        };
        match rediscover(inner, server, conn, &kinds).await {
            Ok(()) => {}
            Err(DiscoveryError::Lost(reason)) => return End::Lost(reason),
            Err(DiscoveryError::Failed(_)) => {}
        }
    }
}

/// Re-lists `kinds` (bounded by the startup timeout) and publishes the result.
async fn rediscover(
    inner: &Inner,
    server: &Server,
    conn: &Connection,
    kinds: &HashSet<ListKind>,
) -> Result<(), DiscoveryError> {
    let previous = server.runtime().catalog.clone();
    let limit = server.config.startup_timeout;
    let result = tokio::time::timeout(
        limit,
        discover(
            conn.client.peer(),
            &server.config,
            &conn.capabilities,
            kinds,
            &previous,
        ),
    )
    .await
    .unwrap_or_else(|_| {
        Err(DiscoveryError::Failed(format!(
            "re-listing timed out after {}s",
            limit.as_secs_f64()
        )))
    });
    match result {
        Ok((catalog, warnings)) => {
            {
                let mut rt = server.runtime();
                rt.catalog = catalog;
                rt.last_error = (!warnings.is_empty()).then(|| warnings.join("; "));
            }
            inner.rebuild();
            Ok(())
        }
        Err(DiscoveryError::Failed(reason)) => {
            tracing::warn!(mcp_server = %server.config.name, "MCP refresh failed: {reason}");
            if *conn.closed.borrow() {
                return Err(DiscoveryError::Lost(lost_reason(conn).await));
            }
            server.runtime().last_error = Some(reason.clone());
            Err(DiscoveryError::Failed(reason))
        }
        Err(lost) => Err(lost),
    }
}

async fn lost_reason(conn: &Connection) -> String {
    let mut reason = "the server closed the connection".to_owned();
    if let Some(line) = conn.stderr.last_line().await {
        reason.push_str(&format!(" (stderr: {line})"));
    }
    reason
}

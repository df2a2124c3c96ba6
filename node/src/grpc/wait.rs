//! `SendAndWait`: the send of `Send`, then the workstream's events until the turn's
//! `turn_complete` (matched by correlation id) or the deadline. The turn runs on in the
//! workstream whatever happens to the call; only with `cancel_on_disconnect` does a call
//! that ends early (cancelled by the client, or past its deadline) cancel it.

use tokio::time::Instant;
use tonic::Status;
use turnstone_engine::WorkstreamHandle;
use turnstone_grpc::v1::{self as pb, event::Payload};
use turnstone_runtime::auth::Identity;

use super::events::event_of;
use super::service::NodeGrpc;
use crate::send_queue::Submitted;
use crate::server::events::ws_frames;

/// When the wait ends: the sooner of the client's `grpc-timeout` and `timeout_ms` (`0`:
/// none); `None`: only when the turn completes or the client goes away.
pub fn deadline_of(metadata: &tonic::metadata::MetadataMap, timeout_ms: u64) -> Option<Instant> {
    let header = metadata
        .get("grpc-timeout")
        .and_then(|v| v.to_str().ok())
        .and_then(grpc_timeout);
    let own = (timeout_ms > 0).then(|| std::time::Duration::from_millis(timeout_ms));
    let wait = match (header, own) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }?;
    Some(Instant::now() + wait)
}

/// A `grpc-timeout` value: up to 8 digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`).
fn grpc_timeout(text: &str) -> Option<std::time::Duration> {
    use std::time::Duration;
    let split = text.len().checked_sub(1)?;
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Cancels the turn when dropped before [`CancelGuard::disarm`] (the call was cancelled or
/// timed out) — only when the caller asked for it.
struct CancelGuard {
    ws: Option<WorkstreamHandle>,
}

impl CancelGuard {
    fn disarm(&mut self) {
        self.ws = None;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if let Some(ws) = self.ws.take() {
            ws.cancel();
        }
    }
}

pub async fn send_and_wait(
    service: &NodeGrpc,
    identity: Option<&Identity>,
    mut send: pb::SendRequest,
    cancel_on_disconnect: bool,
    deadline: Option<Instant>,
) -> Result<pb::SendAndWaitResponse, Status> {
    let node = service.node();
    let ws = node
        .resolve(&send.ws_id)
        .await
        .map_err(super::access::status_of)?;
    // The turn is recognised by its correlation id: one is made when the caller gave none.
    if send.correlation_id.is_empty() {
        send.correlation_id = turnstone_engine::new_correlation_id();
    }
    let correlation_id = send.correlation_id.clone();
    // Subscribed before the send: no event of the turn can be missed.
    let mut sub = ws.subscribe(None);
    let (submitted, send_reply) = service.submit_for_wait(identity, send).await?;
    let mut response = pb::SendAndWaitResponse {
        send: Some(send_reply),
        ..pb::SendAndWaitResponse::default()
    };
    if !matches!(submitted, Submitted::Started | Submitted::Queued { .. }) {
        // Refused (busy), or a repeat whose turn this call did not start: nothing to wait for.
        return Ok(response);
    }
    let mut guard = CancelGuard {
        ws: cancel_on_disconnect.then(|| ws.clone()),
    };
    let sleep = async {
        match deadline {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(sleep);
    loop {
        let item = tokio::select! {
            item = sub.next() => item,
            _ = &mut sleep => break,
        };
        let Some(item) = item else { break };
        for event in ws_frames(node, &ws, item).into_iter().filter_map(event_of) {
            let done = match &event.payload {
                Some(Payload::TurnComplete(tc)) if tc.correlation_id == correlation_id => {
                    Some(tc.clone())
                }
                _ => None,
            };
            response.events.push(event);
            if let Some(tc) = done {
                guard.disarm();
                response.completed = true;
                response.turn_complete = Some(tc);
                return Ok(response);
            }
        }
    }
    // Past the deadline (or the workstream closed): the guard cancels the turn if asked.
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn grpc_timeout_values() {
        assert_eq!(grpc_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(grpc_timeout("2M"), Some(Duration::from_secs(120)));
        assert_eq!(grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(grpc_timeout("S"), None);
        assert_eq!(grpc_timeout("123456789S"), None);
        assert_eq!(grpc_timeout("5x"), None);
        assert_eq!(grpc_timeout(""), None);
    }
}

//! What the bridge writes to Redis for producers besides the event stream: events on
//! pub/sub (best effort, as the original protocol) and dead letters (never lost).

use serde::Serialize;
use turnstone_proto::ids::now_timestamp;
use turnstone_proto::mq::OutboundEvent;
use turnstone_queue::Backoff;

use crate::Ctx;

/// One entry of the dead-letter list `{p}:dead`, keys in wire order.
#[derive(Serialize)]
struct DeadLetter<'a> {
    reason: &'a str,
    payload: &'a str,
    correlation_id: &'a str,
    node_id: &'a str,
    at: f64,
}

impl Ctx {
    /// Publishes one event on pub/sub (best effort, as the original protocol); failures are
    /// logged and counted.
    pub(crate) async fn publish(&self, channel: &str, event: &OutboundEvent) {
        let mut conn = self.redis.clone();
        let payload = event.encode();
        let r: Result<i64, _> = redis::cmd("PUBLISH")
            .arg(channel)
            .arg(&payload)
            .query_async(&mut conn)
            .await;
        if let Err(e) = r {
            self.metrics.inc(&self.metrics.publish_errors);
            tracing::warn!(channel, error = %e, "publish failed");
        }
    }

    /// Appends a dead letter: the reason, the original payload, who and when. Retries until
    /// Redis takes it (a dead letter must not be lost either). The list keeps the newest
    /// `--dead-letter-max` entries; what is trimmed is counted.
    pub(crate) async fn dead_letter(&self, reason: &str, payload: &str, correlation_id: &str) {
        let entry = serde_json::to_string(&DeadLetter {
            reason,
            payload,
            correlation_id,
            node_id: &self.node_id,
            at: now_timestamp(),
        })
        .unwrap_or_default();
        let key = self.keys.dead_letter();
        let max = isize::try_from(self.cfg.dead_letter_max).unwrap_or(isize::MAX);
        let mut backoff = Backoff::default();
        loop {
            let mut conn = self.redis.clone();
            // Appended and trimmed to the newest `dead_letter_max` in one transaction.
            let r: Result<(isize,), _> = redis::pipe()
                .atomic()
                .rpush(&key, &entry)
                .ltrim(&key, -max, -1)
                .ignore()
                .query_async(&mut conn)
                .await;
            match r {
                Ok((len,)) => {
                    let trimmed = u64::try_from(len.saturating_sub(max)).unwrap_or(0);
                    if trimmed > 0 {
                        self.metrics
                            .add(&self.metrics.dead_letters_trimmed, trimmed);
                    }
                    break;
                }
                Err(e) if !self.cancel.is_cancelled() => {
                    tracing::warn!(error = %e, "dead letter not written yet; retrying");
                    tokio::time::sleep(backoff.delay()).await;
                }
                Err(_) => break,
            }
        }
        self.metrics.inc(&self.metrics.dead_letters);
        tracing::warn!(reason, correlation_id, "message dead-lettered");
    }
}

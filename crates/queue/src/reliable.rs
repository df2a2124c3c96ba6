//! At-least-once consumption of one inbound list.
//!
//! [`ReliableQueue::take`] moves the head of the queue to the tail of a processing list in
//! one command (`BLMOVE`), so a consumer that dies holding a message leaves it in Redis;
//! [`ReliableQueue::ack`] removes it once it has been handed on. After a restart,
//! [`ReliableQueue::pending`] returns what is still in the processing list, to be re-driven.
//! The processing list shares the queue's hash slot (see `Keys::processing`).

use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::{ConnectionLike, MultiplexedConnection};

use crate::QueueError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReliableQueue {
    pub queue: String,
    pub processing: String,
}

impl ReliableQueue {
    pub fn new(queue: impl Into<String>, processing: impl Into<String>) -> Self {
        Self {
            queue: queue.into(),
            processing: processing.into(),
        }
    }

    /// Waits up to `timeout` for a message and moves it into the processing list. Use a
    /// dedicated connection (`conn::blocking_connection`).
    pub async fn take(
        &self,
        conn: &mut MultiplexedConnection,
        timeout: Duration,
    ) -> Result<Option<String>, QueueError> {
        let got: Option<String> = conn
            .blmove(
                &self.queue,
                &self.processing,
                redis::Direction::Left,
                redis::Direction::Right,
                timeout.as_secs_f64(),
            )
            .await?;
        Ok(got)
    }

    /// Moves a message without waiting (`None` when the queue is empty).
    pub async fn try_take<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
    ) -> Result<Option<String>, QueueError> {
        let got: Option<String> = redis::cmd("LMOVE")
            .arg(&self.queue)
            .arg(&self.processing)
            .arg("LEFT")
            .arg("RIGHT")
            .query_async(conn)
            .await?;
        Ok(got)
    }

    /// Everything still in the processing list, oldest first.
    pub async fn pending<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
    ) -> Result<Vec<String>, QueueError> {
        let items: Vec<String> = redis::cmd("LRANGE")
            .arg(&self.processing)
            .arg(0)
            .arg(-1)
            .query_async(conn)
            .await?;
        Ok(items)
    }

    /// Acknowledges one message: removes one copy of it from the processing list.
    pub async fn ack<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        payload: &str,
    ) -> Result<bool, QueueError> {
        let removed: i64 = redis::cmd("LREM")
            .arg(&self.processing)
            .arg(1)
            .arg(payload)
            .query_async(conn)
            .await?;
        Ok(removed > 0)
    }

    /// Replaces a held message by another (e.g. the same message with a correlation id
    /// assigned), atomically, so a redelivery sees the new form.
    pub async fn replace<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        old: &str,
        new: &str,
    ) -> Result<(), QueueError> {
        let _: () = redis::pipe()
            .atomic()
            .cmd("LREM")
            .arg(&self.processing)
            .arg(1)
            .arg(old)
            .ignore()
            .cmd("RPUSH")
            .arg(&self.processing)
            .arg(new)
            .ignore()
            .query_async(conn)
            .await?;
        Ok(())
    }

    /// Gives every held message back to the front of the queue, in its original order, in
    /// one atomic script (a consumer that stops for good: nothing stays in its processing
    /// list). Returns how many moved.
    pub async fn hand_back<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
    ) -> Result<u64, QueueError> {
        const HAND_BACK: &str = r#"
local n = 0
while redis.call('LMOVE', KEYS[1], KEYS[2], 'RIGHT', 'LEFT') do n = n + 1 end
return n
"#;
        let moved: u64 = redis::Script::new(HAND_BACK)
            .key(&self.processing)
            .key(&self.queue)
            .invoke_async(conn)
            .await?;
        Ok(moved)
    }

    /// Length of the queue (not counting held messages).
    pub async fn len<C: AsyncCommands + Send>(&self, conn: &mut C) -> Result<u64, QueueError> {
        Ok(conn.llen(&self.queue).await?)
    }
}

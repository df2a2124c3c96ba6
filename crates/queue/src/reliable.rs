//! At-least-once consumption of one inbound list.
//!
//! [`ReliableQueue::take`] moves the head of the queue to the tail of a processing list in
//! one command (`BLMOVE`), so a consumer that dies holding a message leaves it in Redis;
//! [`ReliableQueue::ack`] removes it once it has been handed on. After a restart,
//! [`ReliableQueue::pending`] returns what is still in the processing list, to be re-driven.
//! The processing list shares the queue's hash slot (see `Keys::processing`).
//!
//! A held message the consumer has begun to hand to its node is **marked handed** (the
//! consumer sets its field in [`ReliableQueue::handed`], a hash beside the processing list)
//! until it is acknowledged: its outcome is unknown (the node may have applied it and died before
//! answering), so it may only go back to the same node, which applies it once per
//! correlation id. [`ReliableQueue::hand_back`] and [`ReliableQueue::release_unhanded`] move
//! every other held message and leave the handed ones where they are. [`ReliableQueue::hand`]
//! marks a message only while it is still held: a consumer that was cut off or stalled may
//! find it released to another consumer meanwhile, and must then not deliver it.

use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::{ConnectionLike, MultiplexedConnection};

use crate::QueueError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReliableQueue {
    pub queue: String,
    pub processing: String,
    /// Hash beside the processing list: held payloads already handed to the node.
    pub handed: String,
}

/// Moves the held messages that were not handed to the node from a list to another queue,
/// oldest first, up to `ARGV[1]`; handed ones stay, in their order. `KEYS[1]` list,
/// `KEYS[2]` its handed hash, `KEYS[3]` destination, optional `KEYS[4]` a key whose
/// existence cancels the move (the list's node heartbeat: it came back); `ARGV[2]` `front`
/// or `back`. Returns `{moved, kept}`, `{-1, 0}` when cancelled.
const RELEASE_UNHANDED: &str = r#"
if KEYS[4] and redis.call('EXISTS', KEYS[4]) == 1 then return {-1, 0} end
local n = math.min(redis.call('LLEN', KEYS[1]), tonumber(ARGV[1]))
local moved, kept = 0, 0
local out = {}
for i = 1, n do
  local m = redis.call('LPOP', KEYS[1])
  if not m then break end
  if redis.call('HEXISTS', KEYS[2], m) == 1 then
    redis.call('RPUSH', KEYS[1], m)
    kept = kept + 1
  else
    out[#out + 1] = m
    moved = moved + 1
  end
end
if ARGV[2] == 'front' then
  for i = #out, 1, -1 do redis.call('LPUSH', KEYS[3], out[i]) end
else
  for i = 1, #out do redis.call('RPUSH', KEYS[3], out[i]) end
end
return {moved, kept}
"#;

/// `KEYS[1]` processing list, `KEYS[2]` its handed hash, optional `KEYS[3]` a hash to record
/// in too; `ARGV[1]` the message, `ARGV[2]`/`ARGV[3]` the field and TTL (s) for `KEYS[3]`.
/// Marks the message handed only if it is still in the list (1, else 0), and records the
/// field only when it is handed the first time (not when a handed message is redelivered).
const HAND: &str = r#"
if not redis.call('LPOS', KEYS[1], ARGV[1]) then return 0 end
if redis.call('HSETNX', KEYS[2], ARGV[1], 1) == 1 and KEYS[3] then
  redis.call('HSET', KEYS[3], ARGV[2], 1)
  redis.call('EXPIRE', KEYS[3], ARGV[3])
end
return 1
"#;

/// `KEYS[1]` processing list, `KEYS[2]` its handed hash, `KEYS[3]` destination queue;
/// `ARGV[1]` the message, `ARGV[2]` '1' = move it even if it is marked handed. Moves it from
/// the list to the destination if it is still held (1); 0 = not held; 2 = handed, not moved.
const MOVE_HELD: &str = r#"
if ARGV[2] ~= '1' and redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  if redis.call('LPOS', KEYS[1], ARGV[1]) then return 2 end
  return 0
end
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('RPUSH', KEYS[3], ARGV[1])
return 1
"#;

/// What [`ReliableQueue::move_held`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    /// It left the processing list for the destination.
    Moved,
    /// It was not held any more (released meanwhile, or already acknowledged).
    NotHeld,
    /// It is marked handed to this consumer's node, which may have applied it: it stays.
    Handed,
}

/// A field recorded in another hash in the same step as a [`ReliableQueue::hand`].
#[derive(Debug, Clone, Copy)]
pub struct AlsoRecord<'a> {
    pub hash: &'a str,
    pub field: &'a str,
    pub ttl: Duration,
}

impl ReliableQueue {
    /// Marks the held message `raw` handed — and writes `also`, in the same atomic step,
    /// the first time only: a redelivery of a message handed before (its consumer died
    /// before the acknowledgement) must not record again what may have been settled since —
    /// only while it is still in the processing list. `false`: it is not held any more
    /// (released to the shared queue by another consumer's janitor while this one was cut
    /// off or stalled, or already acknowledged); whoever holds it now delivers it, so the
    /// caller must drop it.
    pub async fn hand<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        raw: &str,
        also: Option<AlsoRecord<'_>>,
    ) -> Result<bool, QueueError> {
        let script = redis::Script::new(HAND);
        let mut call = script.prepare_invoke();
        call.key(&self.processing).key(&self.handed).arg(raw);
        if let Some(a) = also {
            call.key(a.hash).arg(a.field).arg(a.ttl.as_secs().max(1));
        }
        let held: i64 = call.invoke_async(conn).await?;
        Ok(held == 1)
    }

    /// Hands the held message `raw` to another queue (routing it to another consumer) and
    /// stops holding it, in one atomic step: pushing first and acknowledging after would
    /// leave two copies if this consumer died in between, and its redelivery of the second
    /// could run on another node than the first. A message marked handed stays
    /// ([`Moved::Handed`]): this consumer's node may have applied it, and another node would
    /// run it again. `even_if_handed` moves it anyway (its node said it never saw it).
    pub async fn move_held<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        raw: &str,
        to: &str,
        even_if_handed: bool,
    ) -> Result<Moved, QueueError> {
        let moved: i64 = redis::Script::new(MOVE_HELD)
            .key(&self.processing)
            .key(&self.handed)
            .key(to)
            .arg(raw)
            .arg(if even_if_handed { "1" } else { "0" })
            .invoke_async(conn)
            .await?;
        Ok(match moved {
            1 => Moved::Moved,
            2 => Moved::Handed,
            _ => Moved::NotHeld,
        })
    }

    pub fn new(queue: impl Into<String>, processing: impl Into<String>) -> Self {
        let processing = processing.into();
        Self {
            queue: queue.into(),
            handed: format!("{processing}:handed"),
            processing,
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

    /// Acknowledges one message: removes one copy of it from the processing list, and its
    /// handed mark, in one transaction.
    pub async fn ack<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        payload: &str,
    ) -> Result<bool, QueueError> {
        let (removed,): (i64,) = redis::pipe()
            .atomic()
            .cmd("LREM")
            .arg(&self.processing)
            .arg(1)
            .arg(payload)
            .cmd("HDEL")
            .arg(&self.handed)
            .arg(payload)
            .ignore()
            .query_async(conn)
            .await?;
        Ok(removed > 0)
    }

    /// Moves up to `max` held messages that were never handed to the node to the back of
    /// `to` (the janitor, for a node that is gone), unless `unless_exists` exists when the
    /// script runs (the node's heartbeat: it came back); handed ones stay until their
    /// node's consumer re-drives them. Returns `(moved, kept)`, `None` when cancelled.
    pub async fn release_unhanded<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        to: &str,
        max: u64,
        unless_exists: &str,
    ) -> Result<Option<(u64, u64)>, QueueError> {
        let (moved, kept): (i64, u64) = redis::Script::new(RELEASE_UNHANDED)
            .key(&self.processing)
            .key(&self.handed)
            .key(to)
            .key(unless_exists)
            .arg(max)
            .arg("back")
            .invoke_async(conn)
            .await?;
        Ok(u64::try_from(moved).ok().map(|m| (m, kept)))
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

    /// Gives every held message that was not handed to the node back to the front of the
    /// queue, in its original order, in one atomic script (a consumer that stops for good:
    /// nothing it did not hand on stays in its processing list). Handed ones stay for this
    /// node's next consumer. Returns how many moved.
    pub async fn hand_back<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
    ) -> Result<u64, QueueError> {
        let (moved, _kept): (u64, u64) = redis::Script::new(RELEASE_UNHANDED)
            .key(&self.processing)
            .key(&self.handed)
            .key(&self.queue)
            .arg(u64::MAX >> 12)
            .arg("front")
            .invoke_async(conn)
            .await?;
        Ok(moved)
    }

    /// Length of the queue (not counting held messages).
    pub async fn len<C: AsyncCommands + Send>(&self, conn: &mut C) -> Result<u64, QueueError> {
        Ok(conn.llen(&self.queue).await?)
    }
}

#[cfg(test)]
mod tests {
    use redis::AsyncCommands;

    use super::*;

    #[tokio::test]
    async fn a_message_released_meanwhile_is_not_handed_and_a_redelivery_records_nothing_again() {
        let p = format!("tqhand{:08x}", rand::random::<u32>());
        let q = ReliableQueue::new(format!("{{{p}}}"), format!("{{{p}}}:processing:a"));
        let (shared, awaiting) = (format!("{{{p}}}:shared"), format!("{p}:awaiting"));
        let mut conn = redis::Client::open("redis://127.0.0.1:6379/0")
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let _: () = conn.rpush(&q.queue, &["m1", "m2"]).await.unwrap();
        assert_eq!(q.try_take(&mut conn).await.unwrap().as_deref(), Some("m1"));
        assert_eq!(q.try_take(&mut conn).await.unwrap().as_deref(), Some("m2"));
        let record = |field| AlsoRecord {
            hash: &awaiting,
            field,
            ttl: Duration::from_secs(60),
        };
        // m1 is handed while held; then another consumer's janitor releases what is not.
        assert!(q.hand(&mut conn, "m1", Some(record("c1"))).await.unwrap());
        let released = q
            .release_unhanded(&mut conn, &shared, 10, &format!("{p}:no-heartbeat"))
            .await
            .unwrap();
        assert_eq!(released, Some((1, 1)));
        // The stalled consumer now tries to hand m2: it is not held any more.
        assert!(!q.hand(&mut conn, "m2", Some(record("c2"))).await.unwrap());
        let handed: Vec<String> = conn.hkeys(&q.handed).await.unwrap();
        assert_eq!(handed, ["m1"]);
        let awaited: Vec<String> = conn.hkeys(&awaiting).await.unwrap();
        assert_eq!(awaited, ["c1"]);
        let ttl: i64 = conn.ttl(&awaiting).await.unwrap();
        assert!((1..=60).contains(&ttl), "{ttl}");
        let moved: Vec<String> = conn.lrange(&shared, 0, -1).await.unwrap();
        assert_eq!(moved, ["m2"]);
        // m1's record is settled (its turn ended); handing m1 again — a redelivery after its
        // consumer died unacknowledged — records nothing again.
        let _: () = conn.hdel(&awaiting, "c1").await.unwrap();
        assert!(q.hand(&mut conn, "m1", Some(record("c1"))).await.unwrap());
        let awaited: Vec<String> = conn.hkeys(&awaiting).await.unwrap();
        assert!(awaited.is_empty(), "{awaited:?}");
        let _: () = redis::cmd("DEL")
            .arg(&[&q.queue, &q.processing, &q.handed, &shared, &awaiting])
            .query_async(&mut conn)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_forward_moves_a_held_message_once_and_nothing_not_held() {
        let p = format!("tqmove{:08x}", rand::random::<u32>());
        let q = ReliableQueue::new(format!("{{{p}}}"), format!("{{{p}}}:processing:a"));
        let to = format!("{p}:inbound:b");
        let mut conn = redis::Client::open("redis://127.0.0.1:6379/0")
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let _: () = conn.rpush(&q.queue, "m1").await.unwrap();
        assert_eq!(q.try_take(&mut conn).await.unwrap().as_deref(), Some("m1"));
        assert_eq!(
            q.move_held(&mut conn, "m1", &to, false).await.unwrap(),
            Moved::Moved
        );
        // A redelivery of the same message (its consumer died before it knew) finds it gone.
        assert_eq!(
            q.move_held(&mut conn, "m1", &to, false).await.unwrap(),
            Moved::NotHeld
        );
        // A message handed to this consumer's node stays held, unless moved on purpose.
        let _: () = conn.rpush(&q.queue, "m2").await.unwrap();
        assert_eq!(q.try_take(&mut conn).await.unwrap().as_deref(), Some("m2"));
        assert!(q.hand(&mut conn, "m2", None).await.unwrap());
        assert_eq!(
            q.move_held(&mut conn, "m2", &to, false).await.unwrap(),
            Moved::Handed
        );
        let held: Vec<String> = conn.lrange(&q.processing, 0, -1).await.unwrap();
        assert_eq!(held, ["m2"]);
        assert_eq!(
            q.move_held(&mut conn, "m2", &to, true).await.unwrap(),
            Moved::Moved
        );
        let there: Vec<String> = conn.lrange(&to, 0, -1).await.unwrap();
        assert_eq!(there, ["m1", "m2"]);
        let held: Vec<String> = conn.lrange(&q.processing, 0, -1).await.unwrap();
        assert!(held.is_empty());
        let marks: Vec<String> = conn.hkeys(&q.handed).await.unwrap();
        assert!(marks.is_empty(), "{marks:?}");
        let _: () = redis::cmd("DEL")
            .arg(&[&q.queue, &q.processing, &q.handed, &to])
            .query_async(&mut conn)
            .await
            .unwrap();
    }
}

//! Publishing one node event exactly once.
//!
//! A node event has a stable position (`boot`, `node_seq`). The [`Publisher`]'s script appends
//! the event to the workstream's capped stream under the id `<boot>-<node_seq>` and, only if
//! that append was new, publishes the compatible pub/sub messages. Redis refuses an id that is
//! not above the stream's last one, so a bridge that replays events after a crash or a
//! reconnect publishes nothing twice — on the stream or on pub/sub. The script touches one
//! key (the stream), so it is valid under Redis Cluster.

use redis::Script;
use redis::aio::ConnectionLike;

use crate::QueueError;

const SCRIPT: &str = r#"
-- KEYS[1] stream; ARGV[1] entry id; ARGV[2] maxlen; ARGV[3] ttl seconds;
-- ARGV[4] event type; ARGV[5] event json; ARGV[6..] channel, payload pairs
local ok = redis.pcall('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], ARGV[1], 'type', ARGV[4], 'event', ARGV[5])
if type(ok) == 'table' and ok.err then
  if string.find(ok.err, 'equal or smaller', 1, true) then
    return 0
  end
  return redis.error_reply(ok.err)
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
for i = 6, #ARGV, 2 do
  redis.call('PUBLISH', ARGV[i], ARGV[i + 1])
end
return 1
"#;

/// One event to publish: its stream entry and the pub/sub messages that go with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Publication {
    /// `{p}:stream:{ws_id}`.
    pub stream: String,
    /// `<boot>-<node_seq>`: increasing over the node's life, across restarts.
    pub entry_id: String,
    /// The event's `type`, stored beside it so readers can filter without parsing.
    pub event_type: String,
    /// The event JSON kept in the stream.
    pub event: String,
    /// `(channel, payload)` pairs published when the entry is new.
    pub channels: Vec<(String, String)>,
}

/// Runs the publish script (loaded once per connection by `EVALSHA`, falling back to `EVAL`).
#[derive(Debug, Clone)]
pub struct Publisher {
    script: Script,
    /// Approximate cap of each stream (`MAXLEN ~`).
    pub maxlen: u64,
    /// Streams expire this long after their last append.
    pub ttl_secs: u64,
}

impl Publisher {
    pub fn new(maxlen: u64, ttl_secs: u64) -> Self {
        Self {
            script: Script::new(SCRIPT),
            maxlen,
            ttl_secs,
        }
    }

    fn invocation<'a>(&'a self, p: &'a Publication) -> redis::ScriptInvocation<'a> {
        let mut inv = self.script.key(&p.stream);
        inv.arg(&p.entry_id)
            .arg(self.maxlen)
            .arg(self.ttl_secs)
            .arg(&p.event_type)
            .arg(&p.event);
        for (channel, payload) in &p.channels {
            inv.arg(channel).arg(payload);
        }
        inv
    }

    /// Publishes one event; `Ok(false)` when it had been published before.
    pub async fn publish<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        p: &Publication,
    ) -> Result<bool, QueueError> {
        let fresh: i64 = self.invocation(p).invoke_async(conn).await?;
        Ok(fresh == 1)
    }

    /// Publishes a batch in one round trip (in order); returns how many were new. Falls back
    /// to one at a time if the script is not cached on the server yet.
    pub async fn publish_batch<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        batch: &[Publication],
    ) -> Result<usize, QueueError> {
        if batch.is_empty() {
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        for p in batch {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(self.script.get_hash()).arg(1).arg(&p.stream);
            cmd.arg(&p.entry_id)
                .arg(self.maxlen)
                .arg(self.ttl_secs)
                .arg(&p.event_type)
                .arg(&p.event);
            for (channel, payload) in &p.channels {
                cmd.arg(channel).arg(payload);
            }
            pipe.add_command(cmd);
        }
        match pipe.query_async::<Vec<i64>>(conn).await {
            Ok(results) => Ok(results.iter().filter(|r| **r == 1).count()),
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                // Load it (by running the first one through `invoke`), then retry the rest.
                let mut fresh = 0;
                for p in batch {
                    fresh += usize::from(self.publish(conn, p).await?);
                }
                Ok(fresh)
            }
            Err(e) => Err(e.into()),
        }
    }
}

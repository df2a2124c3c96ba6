//! Publishing one node event exactly once.
//!
//! A node event has a stable position (`boot`, `node_seq`). The [`Publisher`]'s script appends
//! the event to the workstream's capped stream under the id `<boot>-<node_seq>` and, only if
//! that append was new, publishes the compatible pub/sub messages. Redis refuses an id that is
//! not above the stream's last one, so a bridge that replays events after a crash or a
//! reconnect publishes nothing twice — on the stream or on pub/sub.
//!
//! A publication may also **settle** an entry of a hash (the bridge's turns awaiting their
//! `turn_complete`): the entry is removed with the append. A settling publication marked
//! `only_if_awaited` is published only while the entry is still there — how a
//! `turn_complete` recovered from the node after a restart is published at most once.

use redis::Script;
use redis::aio::ConnectionLike;

use crate::QueueError;

const SCRIPT: &str = r#"
-- KEYS[1] stream; KEYS[2] (optional) hash the publication settles; ARGV[1] entry id;
-- ARGV[2] maxlen; ARGV[3] ttl seconds; ARGV[4] event type; ARGV[5] event json;
-- ARGV[6] settled field ('' none); ARGV[7] '1' = only if that field is there;
-- ARGV[8..] channel, payload pairs
local settles = KEYS[2] ~= nil and ARGV[6] ~= ''
if settles and ARGV[7] == '1' and redis.call('HEXISTS', KEYS[2], ARGV[6]) == 0 then
  return 0
end
local ok = redis.pcall('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], ARGV[1], 'type', ARGV[4], 'event', ARGV[5])
if type(ok) == 'table' and ok.err then
  if string.find(ok.err, 'equal or smaller', 1, true) then
    if settles and ARGV[7] ~= '1' then redis.call('HDEL', KEYS[2], ARGV[6]) end
    return 0
  end
  return redis.error_reply(ok.err)
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
if settles then redis.call('HDEL', KEYS[2], ARGV[6]) end
for i = 8, #ARGV, 2 do
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
    /// The hash entry this publication settles, if any.
    pub settles: Option<Settle>,
}

/// A hash entry removed by a publication (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Settle {
    pub hash: String,
    pub field: String,
    /// Publish only while the entry is there (a recovered event that the normal path may
    /// already have published).
    pub only_if_awaited: bool,
}

/// Runs the publish script (loaded once per connection by `EVALSHA`, falling back to `EVAL`).
#[derive(Debug, Clone)]
pub struct Publisher {
    script: Script,
    /// Approximate cap of each stream (`MAXLEN ~`), as the script's argument.
    maxlen_arg: String,
    /// Streams expire this many seconds after their last append, as the script's argument.
    ttl_arg: String,
}

impl Publisher {
    pub fn new(maxlen: u64, ttl_secs: u64) -> Self {
        Self {
            script: Script::new(SCRIPT),
            maxlen_arg: maxlen.to_string(),
            ttl_arg: ttl_secs.to_string(),
        }
    }

    fn invocation<'a>(&'a self, p: &'a Publication) -> redis::ScriptInvocation<'a> {
        let mut inv = self.script.key(&p.stream);
        if let Some(settle) = &p.settles {
            inv.key(&settle.hash);
        }
        for arg in p.args(self) {
            inv.arg(arg);
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
            cmd.arg(self.script.get_hash());
            match &p.settles {
                Some(settle) => cmd.arg(2).arg(&p.stream).arg(&settle.hash),
                None => cmd.arg(1).arg(&p.stream),
            };
            for arg in p.args(self) {
                cmd.arg(arg);
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

impl Publication {
    /// The script's `ARGV`, in order (borrowed: an event is not copied to be sent).
    fn args<'a>(&'a self, publisher: &'a Publisher) -> Vec<&'a str> {
        let (field, only_if) = match &self.settles {
            Some(s) => (s.field.as_str(), if s.only_if_awaited { "1" } else { "0" }),
            None => ("", "0"),
        };
        let mut args = Vec::with_capacity(7 + 2 * self.channels.len());
        args.extend([
            self.entry_id.as_str(),
            publisher.maxlen_arg.as_str(),
            publisher.ttl_arg.as_str(),
            self.event_type.as_str(),
            self.event.as_str(),
            field,
            only_if,
        ]);
        for (channel, payload) in &self.channels {
            args.push(channel);
            args.push(payload);
        }
        args
    }
}

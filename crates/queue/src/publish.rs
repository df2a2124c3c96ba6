//! Publishing one node event exactly once.
//!
//! A node event has a stable origin: the node, its run (`boot`) and its position in that run
//! (`node_seq`). The [`Publisher`]'s script keeps, per workstream stream, the last position
//! appended from each node (`{p}:stream-pos:{ws_id}`) and appends an event only when its
//! position is past that node's — so a bridge that replays events after a crash or a
//! reconnect publishes nothing twice, on the stream or on pub/sub. The stream's entry ids
//! are Redis's own (time-ordered), so a workstream that moves to another node (whose run
//! may have begun earlier) keeps one increasing stream.
//!
//! A publication may also **settle** an entry of a hash (the bridge's turns awaiting their
//! `turn_complete`): the entry is removed with the append. A settling publication marked
//! `only_if_awaited` is published only while the entry is still there — how a
//! `turn_complete` recovered from the node after a restart (it has no origin) is published
//! at most once.

use redis::Script;
use redis::aio::ConnectionLike;

use crate::QueueError;

const SCRIPT: &str = r#"
-- KEYS[1] stream; KEYS[2] its positions hash; KEYS[3] (optional) hash the publication
-- settles. ARGV[1] origin node ('' none); ARGV[2] boot; ARGV[3] node_seq; ARGV[4] maxlen;
-- ARGV[5] ttl seconds; ARGV[6] event type; ARGV[7] event json; ARGV[8] settled field
-- ('' none); ARGV[9] '1' = only if that field is there; ARGV[10..] channel, payload pairs
local settles = KEYS[3] ~= nil and ARGV[8] ~= ''
if settles and ARGV[9] == '1' and redis.call('HEXISTS', KEYS[3], ARGV[8]) == 0 then
  return 0
end
if ARGV[1] ~= '' then
  local last = redis.call('HGET', KEYS[2], ARGV[1])
  if last then
    local b, s = string.match(last, '^(%d+)-(%d+)$')
    local nb, ns = tonumber(ARGV[2]), tonumber(ARGV[3])
    if b and (nb < tonumber(b) or (nb == tonumber(b) and ns <= tonumber(s))) then
      if settles and ARGV[9] ~= '1' then redis.call('HDEL', KEYS[3], ARGV[8]) end
      return 0
    end
  end
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. '-' .. ARGV[3])
  redis.call('EXPIRE', KEYS[2], ARGV[5])
end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[4], '*', 'type', ARGV[6], 'event', ARGV[7])
redis.call('EXPIRE', KEYS[1], ARGV[5])
if settles then redis.call('HDEL', KEYS[3], ARGV[8]) end
for i = 10, #ARGV, 2 do
  redis.call('PUBLISH', ARGV[i], ARGV[i + 1])
end
return 1
"#;

/// One event to publish: its stream entry and the pub/sub messages that go with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Publication {
    /// `{p}:stream:{ws_id}`.
    pub stream: String,
    /// `{p}:stream-pos:{ws_id}`: the last position appended per node.
    pub positions: String,
    /// Where the event comes from; `None` for one published once by its settlement.
    pub origin: Option<Origin>,
    /// The event's `type`, stored beside it so readers can filter without parsing.
    pub event_type: String,
    /// The event JSON kept in the stream.
    pub event: String,
    /// `(channel, payload)` pairs published when the entry is new.
    pub channels: Vec<(String, String)>,
    /// The hash entry this publication settles, if any.
    pub settles: Option<Settle>,
}

/// A node event's place: node, run, position in the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub node_id: String,
    pub boot: u64,
    pub seq: u64,
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
        inv.key(&p.positions);
        if let Some(settle) = &p.settles {
            inv.key(&settle.hash);
        }
        let (boot, seq) = p.position_args();
        inv.arg(p.origin_node()).arg(boot).arg(seq);
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
                Some(settle) => cmd
                    .arg(3)
                    .arg(&p.stream)
                    .arg(&p.positions)
                    .arg(&settle.hash),
                None => cmd.arg(2).arg(&p.stream).arg(&p.positions),
            };
            let (boot, seq) = p.position_args();
            cmd.arg(p.origin_node()).arg(boot).arg(seq);
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
    fn origin_node(&self) -> &str {
        self.origin.as_ref().map_or("", |o| o.node_id.as_str())
    }

    fn position_args(&self) -> (u64, u64) {
        self.origin.as_ref().map_or((0, 0), |o| (o.boot, o.seq))
    }

    /// The script's `ARGV` after the origin, in order (borrowed: an event is not copied to
    /// be sent).
    fn args<'a>(&'a self, publisher: &'a Publisher) -> Vec<&'a str> {
        let (field, only_if) = match &self.settles {
            Some(s) => (s.field.as_str(), if s.only_if_awaited { "1" } else { "0" }),
            None => ("", "0"),
        };
        let mut args = Vec::with_capacity(6 + 2 * self.channels.len());
        args.extend([
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

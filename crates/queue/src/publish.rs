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
//! **Text deltas join.** Adjacent `content` (or `reasoning`) deltas of one workstream that
//! reach the publisher together are one publication ([`Publication::join`], [`coalesce`]):
//! one stream entry and one pub/sub message whose text is theirs in order, as a client that
//! concatenates deltas reads it anyway. Each part keeps its own `node_seq`, and the script
//! keeps only the parts past the stream's position — a replay that joins differently from
//! the run it repeats (its batches are cut elsewhere) republishes no text.
//!
//! **One script call per workstream.** [`Publisher::publish_batch`] sends a batch as one
//! pipeline with one call of the script per stream: the call appends that workstream's
//! events in order, reads each origin's position once and writes it once, and sets each
//! key's expiry once. Events of different workstreams are independent; the order of each
//! workstream's own events is kept on its stream and on every channel.
//!
//! A publication may also **settle** an entry of a hash (the bridge's turns awaiting their
//! `turn_complete`): the entry is removed with the append. A settling publication marked
//! `only_if_awaited` is published only while the entry is still there — how a
//! `turn_complete` recovered from the node after a restart (it has no origin) is published
//! at most once.

use std::collections::HashMap;

use redis::Script;
use redis::aio::ConnectionLike;
use turnstone_proto::mq::OutboundEvent;

use crate::QueueError;

const SCRIPT: &str = r#"
-- One call publishes a workstream's events of a batch, in order. KEYS[1] the stream;
-- KEYS[2] its positions hash; KEYS[3] (optional) the hash publications settle.
-- ARGV[1] maxlen; ARGV[2] ttl seconds; then one record per event: origin node ('' none),
-- boot, node_seq (a delta's: its last part's), event type, settled field ('' none), '1' =
-- only if that field is there, the event JSON (or a text delta's up to its text), n, then n
-- (node_seq, JSON-escaped text) parts, m, then m (channel, payload) pairs ('' = the stored
-- event). Returns how many events were new.
local settling = KEYS[3]
-- Per origin node: false (none), or {boot, seq, 'boot-seq'} as this call moves it.
local pos = {}
local moved = {}
local fresh = 0
local i = 3
while i <= #ARGV do
  local node, boot, seq = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local etype, field, only_if, event = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5] == '1', ARGV[i + 6]
  local n = tonumber(ARGV[i + 7])
  local parts_at = i + 8
  local m = tonumber(ARGV[parts_at + 2 * n])
  local channels_at = parts_at + 2 * n + 1
  local next_record = channels_at + 2 * m
  local settles = settling ~= nil and field ~= ''
  local new = not (settles and only_if and redis.call('HEXISTS', settling, field) == 0)
  local after = -1
  if new and node ~= '' then
    local p = pos[node]
    if p == nil then
      p = false
      local last = redis.call('HGET', KEYS[2], node)
      if last then
        local b, s = string.match(last, '^(%d+)-(%d+)$')
        if b then p = {tonumber(b), tonumber(s)} end
      end
    end
    if p and (boot < p[1] or (boot == p[1] and seq <= p[2])) then
      if settles and not only_if then redis.call('HDEL', settling, field) end
      new = false
      pos[node] = p
    else
      if p and boot == p[1] then after = p[2] end
      pos[node] = {boot, seq, ARGV[i + 1] .. '-' .. ARGV[i + 2]}
      moved[node] = true
    end
  end
  if new then
    if n > 0 then
      local parts = {event}
      for j = parts_at, parts_at + 2 * n - 2, 2 do
        if tonumber(ARGV[j]) > after then parts[#parts + 1] = ARGV[j + 1] end
      end
      parts[#parts + 1] = '"}'
      event = table.concat(parts)
    end
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'type', etype, 'event', event)
    if settles then redis.call('HDEL', settling, field) end
    for j = channels_at, next_record - 2, 2 do
      local payload = ARGV[j + 1]
      if payload == '' then payload = event end
      redis.call('PUBLISH', ARGV[j], payload)
    end
    fresh = fresh + 1
  end
  i = next_record
end
local positions = {}
for node in pairs(moved) do
  positions[#positions + 1] = node
  positions[#positions + 1] = pos[node][3]
end
if #positions > 0 then
  redis.call('HSET', KEYS[2], unpack(positions))
  redis.call('EXPIRE', KEYS[2], ARGV[2])
end
if fresh > 0 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return fresh
"#;

/// How a text delta's JSON ends after its text: the text is its last field (the script
/// appends the same two characters).
const DELTA_TAIL: &str = "\"}";

/// One event to publish: its stream entry and the pub/sub messages that go with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Publication {
    /// `{p}:stream:{ws_id}`.
    pub stream: String,
    /// `{p}:stream-pos:{ws_id}`: the last position appended per node.
    pub positions: String,
    /// Where the event comes from (a joined delta: its last part); `None` for one published
    /// once by its settlement.
    pub origin: Option<Origin>,
    /// The event's `type`, stored beside it so readers can filter without parsing.
    pub event_type: String,
    /// The event kept in the stream.
    pub event: StoredEvent,
    /// `(channel, payload)` pairs published when the entry is new; `None` publishes the
    /// stored event.
    pub channels: Vec<(String, Option<String>)>,
    /// The hash entry this publication settles, if any.
    pub settles: Option<Settle>,
}

/// The event a publication keeps in its stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredEvent {
    /// The event's JSON.
    Whole(String),
    /// A text delta (`content`, `reasoning`): its JSON up to the text (`head`, ending
    /// `"text":"`), and the text as JSON-escaped parts, each under the `node_seq` of the node
    /// event it came from. Its JSON is `head`, the parts, then `"}`.
    Delta {
        head: String,
        parts: Vec<(u64, String)>,
    },
}

impl StoredEvent {
    /// The event's JSON, every part of a delta included.
    pub fn json(&self) -> String {
        match self {
            Self::Whole(json) => json.clone(),
            Self::Delta { head, parts } => {
                let mut json = head.clone();
                parts.iter().for_each(|(_, text)| json.push_str(text));
                json + DELTA_TAIL
            }
        }
    }

    /// A text delta's stored form, or the event whole (`seq`: its `node_seq`).
    fn of(event: &OutboundEvent, seq: u64) -> Self {
        let json = event.encode();
        let (OutboundEvent::Content(delta) | OutboundEvent::Reasoning(delta)) = event else {
            return Self::Whole(json);
        };
        // The JSON ends with the text, quoted, and `}`; anything else stays whole.
        let quoted = serde_json::to_string(&delta.text).unwrap_or_default();
        let escaped = quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"'));
        let head = escaped.and_then(|e| json.strip_suffix(&format!("{e}{DELTA_TAIL}")));
        match (head, escaped) {
            (Some(head), Some(text)) => Self::Delta {
                head: head.to_string(),
                parts: vec![(seq, text.to_string())],
            },
            _ => Self::Whole(json),
        }
    }
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

impl Publication {
    /// The publication of one event of a workstream, stored under `event_type`: `groups` are
    /// (channels, event) pairs, the first group's event is the one stored, and each group's
    /// event goes to its channels. `None` when there is no group.
    pub fn new(
        stream: String,
        positions: String,
        origin: Option<Origin>,
        event_type: String,
        groups: Vec<(Vec<String>, OutboundEvent)>,
    ) -> Option<Self> {
        let mut groups = groups.into_iter();
        let (names, first) = groups.next()?;
        let seq = origin.as_ref().map_or(0, |o| o.seq);
        let mut channels: Vec<(String, Option<String>)> =
            names.into_iter().map(|c| (c, None)).collect();
        for (names, event) in groups {
            let payload = event.encode();
            channels.extend(names.into_iter().map(|c| (c, Some(payload.clone()))));
        }
        Some(Self {
            stream,
            positions,
            origin,
            event_type,
            event: StoredEvent::of(&first, seq),
            channels,
            settles: None,
        })
    }

    /// Appends `next`'s text to this one's when both are text deltas of the same type, stream,
    /// channels and node run, `next` comes later, and neither settles anything; otherwise
    /// gives `next` back.
    pub fn join(&mut self, next: Self) -> Option<Self> {
        let same_run = match (&self.origin, &next.origin) {
            (Some(a), Some(b)) => a.node_id == b.node_id && a.boot == b.boot && a.seq < b.seq,
            _ => false,
        };
        let joinable = same_run
            && self.settles.is_none()
            && next.settles.is_none()
            && self.stream == next.stream
            && self.event_type == next.event_type
            && self.channels == next.channels;
        match (&mut self.event, next.event) {
            (StoredEvent::Delta { parts, .. }, StoredEvent::Delta { parts: more, .. })
                if joinable =>
            {
                parts.extend(more);
                self.origin = next.origin;
                None
            }
            (_, event) => Some(Self { event, ..next }),
        }
    }

    fn origin_node(&self) -> &str {
        self.origin.as_ref().map_or("", |o| o.node_id.as_str())
    }

    fn position_args(&self) -> (u64, u64) {
        self.origin.as_ref().map_or((0, 0), |o| (o.boot, o.seq))
    }
}

/// Joins each text delta of `batch` to the workstream's previous publication in it, where
/// that one is a delta it can join ([`Publication::join`]). The order within each stream is
/// kept; publications of different streams are independent.
pub fn coalesce(batch: Vec<Publication>) -> Vec<Publication> {
    let mut out: Vec<Publication> = Vec::with_capacity(batch.len());
    // The index in `out` of each stream's latest publication.
    let mut latest: HashMap<String, usize> = HashMap::new();
    for p in batch {
        let next = match latest.get(&p.stream) {
            Some(&i) => match out[i].join(p) {
                None => continue,
                Some(p) => p,
            },
            None => p,
        };
        latest.insert(next.stream.clone(), out.len());
        out.push(next);
    }
    out
}

/// Runs the publish script (loaded once per connection by `EVALSHA`, loaded again on
/// `NOSCRIPT`).
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

    /// The script's invocation for `group`: publications of one stream, in order, settling
    /// (if at all) entries of one hash.
    fn command(&self, group: &[&Publication]) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.script.get_hash());
        let first = group[0];
        match group.iter().find_map(|p| p.settles.as_ref()) {
            Some(settle) => cmd
                .arg(3)
                .arg(&first.stream)
                .arg(&first.positions)
                .arg(&settle.hash),
            None => cmd.arg(2).arg(&first.stream).arg(&first.positions),
        };
        cmd.arg(&self.maxlen_arg).arg(&self.ttl_arg);
        for p in group {
            let (boot, seq) = p.position_args();
            let (field, only_if) = match &p.settles {
                Some(s) => (s.field.as_str(), if s.only_if_awaited { "1" } else { "0" }),
                None => ("", "0"),
            };
            cmd.arg(p.origin_node())
                .arg(boot)
                .arg(seq)
                .arg(&p.event_type)
                .arg(field)
                .arg(only_if);
            match &p.event {
                StoredEvent::Whole(json) => {
                    cmd.arg(json).arg(0);
                }
                StoredEvent::Delta { head, parts } => {
                    cmd.arg(head).arg(parts.len());
                    for (seq, text) in parts {
                        cmd.arg(seq).arg(text);
                    }
                }
            }
            cmd.arg(p.channels.len());
            for (channel, payload) in &p.channels {
                cmd.arg(channel).arg(payload.as_deref().unwrap_or(""));
            }
        }
        cmd
    }

    /// Publishes one event; `Ok(false)` when it had been published before.
    pub async fn publish<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        p: &Publication,
    ) -> Result<bool, QueueError> {
        Ok(self.publish_batch(conn, std::slice::from_ref(p)).await? == 1)
    }

    /// Publishes a batch in one round trip (each stream's publications in order, one script
    /// call per stream); returns how many were new. If the server did not have the script,
    /// loads it and sends the whole batch again: what of it ran (another client may have
    /// loaded the script meanwhile) is skipped by the script.
    pub async fn publish_batch<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        batch: &[Publication],
    ) -> Result<usize, QueueError> {
        if batch.is_empty() {
            return Ok(0);
        }
        let mut pipe = redis::pipe();
        for group in by_stream(batch) {
            pipe.add_command(self.command(&group));
        }
        let fresh = |results: Vec<i64>| results.iter().sum::<i64>() as usize;
        match pipe.query_async::<Vec<i64>>(conn).await {
            Ok(results) => Ok(fresh(results)),
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.script.prepare_invoke().load_async(conn).await?;
                Ok(fresh(pipe.query_async(conn).await?))
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// `batch` cut into one group per stream, in the order each stream first appears, each in
/// the batch's order. A publication that settles an entry of another hash than its stream's
/// group does starts a new group of that stream (one call names one such hash).
fn by_stream(batch: &[Publication]) -> Vec<Vec<&Publication>> {
    // Each group, and the hash it settles entries of (if any).
    let mut groups: Vec<(Option<&str>, Vec<&Publication>)> = Vec::new();
    // The index in `groups` of each stream's latest group.
    let mut latest: HashMap<&str, usize> = HashMap::new();
    for p in batch {
        let hash = p.settles.as_ref().map(|s| s.hash.as_str());
        match latest.get(p.stream.as_str()).map(|&i| &mut groups[i]) {
            Some((settled, group)) if hash.is_none() || settled.is_none_or(|h| Some(h) == hash) => {
                *settled = settled.or(hash);
                group.push(p);
            }
            _ => {
                latest.insert(&p.stream, groups.len());
                groups.push((hash, vec![p]));
            }
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use redis::AsyncCommands;
    use turnstone_proto::mq::{ContentEvent, StateChangeBody, StateChangeEvent};
    use turnstone_proto::sse::Text;

    use super::*;

    /// The publication of `event` (stored as `event_type`) on test stream `stream`, from
    /// node `n`'s run 7 at `seq`.
    fn published(stream: &str, seq: u64, event_type: &str, event: OutboundEvent) -> Publication {
        let origin = Origin {
            node_id: "n".into(),
            boot: 7,
            seq,
        };
        Publication::new(
            format!("{stream}:stream"),
            format!("{stream}:pos"),
            Some(origin),
            event_type.into(),
            vec![(vec![format!("{stream}:events")], event)],
        )
        .unwrap()
    }

    fn delta(stream: &str, seq: u64, text: &str) -> Publication {
        let text = Text { text: text.into() };
        let event = OutboundEvent::Content(ContentEvent::new("w", text));
        published(stream, seq, "content", event)
    }

    fn state(stream: &str, seq: u64) -> Publication {
        let body = StateChangeBody {
            state: "idle".into(),
        };
        published(
            stream,
            seq,
            "state_change",
            StateChangeEvent::new("w", body).into(),
        )
    }

    fn text_of(json: &str) -> String {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        v["text"].as_str().unwrap().to_string()
    }

    #[test]
    fn a_text_delta_is_stored_as_its_head_and_escaped_parts_and_reads_back_whole() {
        let tricky = "a \"quoted\" \\ line\nand ünïcode \u{1}";
        let p = delta("s", 3, tricky);
        let StoredEvent::Delta { head, parts } = &p.event else {
            panic!("not a delta: {:?}", p.event);
        };
        assert!(head.ends_with("\"text\":\""), "{head}");
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].0, 3);
        assert_eq!(text_of(&p.event.json()), tricky);
        // Other events are kept whole.
        assert!(matches!(state("s", 4).event, StoredEvent::Whole(_)));
    }

    #[test]
    fn adjacent_deltas_of_a_stream_join_and_nothing_else_does() {
        let batch = vec![
            delta("a", 1, "Hel"),
            delta("b", 2, "one "),
            delta("a", 3, "lo "),
            delta("b", 4, "two"),
            delta("a", 5, "world"),
            state("a", 6),
            delta("a", 7, "again"),
        ];
        let out = coalesce(batch);
        let summary: Vec<(String, String, u64)> = out
            .iter()
            .map(|p| {
                let json = p.event.json();
                let text = if p.event_type == "content" {
                    text_of(&json)
                } else {
                    p.event_type.clone()
                };
                (p.stream.clone(), text, p.origin.as_ref().unwrap().seq)
            })
            .collect();
        let row = |s: &str, t: &str, q| (format!("{s}:stream"), t.to_string(), q);
        assert_eq!(
            summary,
            [
                row("a", "Hello world", 5),
                row("b", "one two", 4),
                row("a", "state_change", 6),
                row("a", "again", 7),
            ]
        );
        // Another run of the node, or an earlier position, does not join.
        let mut first = delta("a", 5, "x");
        let mut other_run = delta("a", 6, "y");
        other_run.origin.as_mut().unwrap().boot = 8;
        assert!(first.join(other_run).is_some());
        assert!(first.join(delta("a", 4, "z")).is_some());
        assert!(first.join(delta("a", 6, "y")).is_none());
    }

    async fn redis() -> redis::aio::MultiplexedConnection {
        redis::Client::open("redis://127.0.0.1:6379/0")
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    async fn stored(conn: &mut redis::aio::MultiplexedConnection, stream: &str) -> Vec<String> {
        let entries: redis::streams::StreamRangeReply = conn.xrange_all(stream).await.unwrap();
        entries
            .ids
            .iter()
            .map(|e| e.get::<String>("event").unwrap())
            .collect()
    }

    /// A replay cut into other batches than the run it repeats: every part of text reaches
    /// the stream and the channel once, in order.
    #[tokio::test]
    async fn a_replay_joined_differently_publishes_each_part_of_text_once() {
        let s = format!("tqpub{:08x}", rand::random::<u32>());
        let mut conn = redis().await;
        let mut sub = redis::Client::open("redis://127.0.0.1:6379/0")
            .unwrap()
            .get_async_pubsub()
            .await
            .unwrap();
        sub.subscribe(format!("{s}:events")).await.unwrap();
        let publisher = Publisher::new(1000, 60);
        let parts = ["a", "b", "c", "d", "e", "f"];
        let all = |from: usize, to: usize| -> Vec<Publication> {
            (from..to)
                .map(|i| delta(&s, i as u64 + 1, parts[i]))
                .collect()
        };
        // The run: parts 1-2 joined, then 3 alone; the bridge dies before 4.
        let mut run = coalesce(all(0, 2));
        run.extend(all(2, 3));
        assert_eq!(publisher.publish_batch(&mut conn, &run).await.unwrap(), 2);
        // The replay from an older cursor: 2-5 arrive together, then 1-6 again.
        let replay = coalesce(all(1, 5));
        assert_eq!(replay.len(), 1);
        assert_eq!(
            publisher.publish_batch(&mut conn, &replay).await.unwrap(),
            1
        );
        let again = coalesce(all(0, 6));
        assert_eq!(publisher.publish_batch(&mut conn, &again).await.unwrap(), 1);
        assert_eq!(publisher.publish_batch(&mut conn, &again).await.unwrap(), 0);
        let texts: Vec<String> = stored(&mut conn, &format!("{s}:stream"))
            .await
            .iter()
            .map(|j| text_of(j))
            .collect();
        assert_eq!(texts, ["ab", "c", "de", "f"]);
        let mut messages = sub.on_message();
        let mut heard = String::new();
        for _ in 0..4 {
            let m = tokio::time::timeout(std::time::Duration::from_secs(5), messages.next())
                .await
                .expect("a message on the channel")
                .unwrap();
            heard.push_str(&text_of(&m.get_payload::<String>().unwrap()));
        }
        assert_eq!(heard, "abcdef");
    }

    fn settling(stream: &str, seq: u64, field: &str, only_if_awaited: bool) -> Publication {
        Publication {
            settles: Some(Settle {
                hash: format!("{stream}:awaiting"),
                field: field.into(),
                only_if_awaited,
            }),
            ..state(stream, seq)
        }
    }

    #[test]
    fn a_batch_is_one_group_per_stream_in_order_and_a_second_settled_hash_starts_another() {
        let mut other_hash = settling("a", 5, "c2", false);
        other_hash.settles.as_mut().unwrap().hash = "elsewhere".into();
        let batch = vec![
            delta("a", 1, "x"),
            state("b", 2),
            settling("a", 3, "c1", false),
            delta("b", 4, "y"),
            other_hash,
            state("a", 6),
        ];
        let groups: Vec<Vec<(String, u64)>> = by_stream(&batch)
            .iter()
            .map(|g| {
                g.iter()
                    .map(|p| (p.stream.clone(), p.origin.as_ref().unwrap().seq))
                    .collect()
            })
            .collect();
        let at = |s: &str, q| (format!("{s}:stream"), q);
        assert_eq!(
            groups,
            [
                vec![at("a", 1), at("a", 3)],
                vec![at("b", 2), at("b", 4)],
                vec![at("a", 5), at("a", 6)],
            ]
        );
    }

    /// One call for a workstream's batch: what a replay already published is skipped
    /// wherever it sits in the batch, settlements happen either way (or, for one published
    /// only while awaited, not at all once settled), and the positions end at the last.
    #[tokio::test]
    async fn one_call_publishes_what_is_new_of_a_streams_batch_and_settles_what_it_names() {
        let s = format!("tqgroup{:08x}", rand::random::<u32>());
        let mut conn = redis().await;
        let publisher = Publisher::new(1000, 60);
        let awaiting = format!("{s}:awaiting");
        let _: () = conn
            .hset_multiple(&awaiting, &[("c1", "x"), ("c2", "x"), ("c3", "x")])
            .await
            .unwrap();
        // Events 2 and 4 were published before (by the run a replay repeats).
        let earlier = vec![state(&s, 2), state(&s, 4)];
        assert_eq!(
            publisher.publish_batch(&mut conn, &earlier).await.unwrap(),
            2
        );
        let batch = vec![
            state(&s, 1),                  // behind the position: skipped
            settling(&s, 3, "c1", false),  // behind too: skipped, but settles c1
            delta(&s, 5, "new"),           // new
            settling(&s, 6, "c2", false),  // new, settles c2
            settling(&s, 7, "gone", true), // only while awaited: "gone" never was
            settling(&s, 8, "c3", true),   // awaited: published, settles c3
        ];
        assert_eq!(publisher.publish_batch(&mut conn, &batch).await.unwrap(), 3);
        let types: Vec<String> = stored(&mut conn, &format!("{s}:stream"))
            .await
            .iter()
            .map(|j| {
                let v: serde_json::Value = serde_json::from_str(j).unwrap();
                v["type"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(
            types,
            [
                "state_change",
                "state_change",
                "content",
                "state_change",
                "state_change"
            ]
        );
        let left: Vec<String> = conn.hkeys(&awaiting).await.unwrap();
        assert!(left.is_empty(), "{left:?}");
        let position: String = conn.hget(format!("{s}:pos"), "n").await.unwrap();
        assert_eq!(position, "7-8");
        // The whole batch again publishes nothing.
        assert_eq!(publisher.publish_batch(&mut conn, &batch).await.unwrap(), 0);
        let ttl: i64 = conn.ttl(format!("{s}:pos")).await.unwrap();
        assert!(ttl > 0 && ttl <= 60, "{ttl}");
    }

    /// A server without the script (flushed, or restarted) gets it loaded, and the batch runs.
    #[tokio::test]
    async fn a_batch_sent_before_the_script_is_loaded_runs_once_it_is() {
        let s = format!("tqnoscript{:08x}", rand::random::<u32>());
        let mut conn = redis().await;
        let publisher = Publisher::new(1000, 60);
        // Other clients' scripts are loaded again by their own `NOSCRIPT` handling.
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut conn)
            .await
            .unwrap();
        let batch = vec![delta(&s, 1, "x"), state(&s, 2)];
        assert_eq!(publisher.publish_batch(&mut conn, &batch).await.unwrap(), 2);
        assert_eq!(stored(&mut conn, &format!("{s}:stream")).await.len(), 2);
    }
}

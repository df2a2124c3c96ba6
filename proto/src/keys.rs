//! The Redis key and channel schema (cluster spec §2), as pure functions of a
//! prefix. Nothing here talks to Redis.
//!
//! Every name is `{prefix}:...`; the default prefix is `"turnstone"`.
//!
//! **Redis Cluster.** Some commands touch several keys that must then share a
//! hash slot:
//! - the bridge's pop `BLPOP [inbound_node(id), inbound()]` (and any atomic
//!   move from those lists into [`Keys::processing`]);
//! - moving a message from an inbound or processing list to [`Keys::dead_letter`].
//!
//! The original uses plain keys (single-node Redis). Hash tags are not decided
//! yet; nothing here precludes them: a prefix written as a hash tag, e.g.
//! `"{turnstone}"`, puts every key of the schema in one slot, and the
//! functions never escape or strip braces.
//!
//! ```
//! use turnstone_proto::keys::Keys;
//!
//! let keys = Keys::default();
//! assert_eq!(keys.inbound_node("node-a"), "turnstone:inbound:node-a");
//! assert_eq!(keys.events_ws("9f3c"), "turnstone:events:9f3c");
//! assert_eq!(keys.node_id_from_heartbeat_key("turnstone:node:node-a"), Some("node-a"));
//! ```

/// The prefix used when none is configured (cluster spec §2).
pub const DEFAULT_PREFIX: &str = "turnstone";

/// TTL set with `EXPIRE` after every push to a response list (cluster spec §2).
pub const RESPONSE_TTL_SECS: u64 = 600;

/// Default TTL of a heartbeat key; it is refreshed every TTL/2 (cluster spec §2, §3.3).
pub const DEFAULT_HEARTBEAT_TTL_SECS: u64 = 60;

/// `COUNT` hint of the heartbeat `SCAN` (cluster spec §2).
pub const NODE_SCAN_COUNT: u64 = 100;

/// The key schema for one prefix (cluster spec §2).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Keys {
    prefix: String,
}

impl Default for Keys {
    fn default() -> Self {
        Self::new(DEFAULT_PREFIX)
    }
}

impl Keys {
    /// The schema under `prefix` (no trailing `:`).
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
        }
    }

    /// The prefix every name starts with.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn join(&self, parts: &[&str]) -> String {
        let mut out = String::with_capacity(
            self.prefix.len() + parts.iter().map(|p| p.len() + 1).sum::<usize>(),
        );
        out.push_str(&self.prefix);
        for part in parts {
            out.push(':');
            out.push_str(part);
        }
        out
    }

    /// `{p}:inbound` — LIST, FIFO (`RPUSH` + `BLPOP`): the shared work queue.
    /// Written by clients, the console, the scheduler, the channel gateway;
    /// read by every bridge after its own queue.
    pub fn inbound(&self) -> String {
        self.join(&["inbound"])
    }

    /// `{p}:inbound:{node_id}` — LIST: work directed at one node (targeted or
    /// re-routed to the owner). Read first by that node's bridge. Popped
    /// together with [`Keys::inbound`] (same hash slot under Redis Cluster).
    pub fn inbound_node(&self, node_id: &str) -> String {
        self.join(&["inbound", node_id])
    }

    /// `{p}:resp:{request_id}` — LIST: `approve` / `plan_feedback` replies,
    /// `EXPIRE` [`RESPONSE_TTL_SECS`] after each push. Written by clients,
    /// the channel gateway, or a bridge moving an inbound reply; read
    /// (`BLPOP`) by the bridge waiting on that approval.
    pub fn response(&self, request_id: &str) -> String {
        self.join(&["resp", request_id])
    }

    /// `{p}:ws:{ws_id}` — STRING: the owning `node_id` of a workstream.
    /// Written by the bridge on create and recovery (and the simulator);
    /// read by bridges for routing, by clients and the channel router.
    pub fn ws_owner(&self, ws_id: &str) -> String {
        self.join(&["ws", ws_id])
    }

    /// `{p}:node:{node_id}` — STRING with `EX heartbeat_ttl`: the
    /// [`crate::mq::NodeHeartbeat`] JSON. Written by the bridge's heartbeat
    /// (and the simulator); read by console discovery and `list_nodes`.
    pub fn node_heartbeat(&self, node_id: &str) -> String {
        self.join(&["node", node_id])
    }

    /// `{p}:node:*` — the `SCAN MATCH` pattern over heartbeat keys.
    pub fn node_heartbeat_pattern(&self) -> String {
        self.join(&["node", "*"])
    }

    /// The `node_id` of a heartbeat key (the suffix after `{p}:node:`), or
    /// `None` if `key` is not one.
    pub fn node_id_from_heartbeat_key<'a>(&self, key: &'a str) -> Option<&'a str> {
        key.strip_prefix(self.prefix.as_str())?
            .strip_prefix(":node:")
            .filter(|id| !id.is_empty())
    }

    /// `{p}:events:{ws_id}` — PUB/SUB channel: outbound events of one
    /// workstream. Published by the bridge (and simulator); subscribed by
    /// per-workstream consumers. Ws ids are hex, so they never collide with
    /// `global` / `cluster`.
    pub fn events_ws(&self, ws_id: &str) -> String {
        self.join(&["events", ws_id])
    }

    /// Alias of [`Keys::events_ws`].
    pub fn outbound_ws(&self, ws_id: &str) -> String {
        self.events_ws(ws_id)
    }

    /// `{p}:events:global` — PUB/SUB channel: node-level outbound events
    /// (`ws_created`, `ws_list`, `health_response`, `node_list`, failures...).
    /// Published by bridges and the simulator; subscribed by producers
    /// waiting for answers.
    pub fn events_global(&self) -> String {
        self.join(&["events", "global"])
    }

    /// `{p}:events:cluster` — PUB/SUB channel: `cluster_state`, `ws_created`
    /// (with `node_id`), `ws_closed`, `ws_rename`. Published by bridges and
    /// the simulator; subscribed by the console collector.
    pub fn events_cluster(&self) -> String {
        self.join(&["events", "cluster"])
    }

    /// `{p}:scheduler:lock` — STRING `SET NX EX 60`: the console scheduler's
    /// leader lock (owner token; released by compare-and-delete).
    pub fn scheduler_lock(&self) -> String {
        self.join(&["scheduler", "lock"])
    }

    /// `{<queue>}:processing:{node_id}` — LIST (our addition): messages the
    /// bridge of `node_id` has moved out of `queue` (an inbound list) but not
    /// yet handed to its node; re-driven after a restart. The queue's own name
    /// is the hash tag, so under Redis Cluster the atomic move stays in one slot.
    pub fn processing(&self, queue: &str, node_id: &str) -> String {
        format!("{{{queue}}}:processing:{node_id}")
    }

    /// `{p}:ws:{ws_id}:pin` — STRING (our addition), no TTL: the workstream's home,
    /// `soft:<node_id>` (re-homed to a live node when that one is down) or
    /// `hard:<node_id>` (never moves: messages for it fail while the node is down;
    /// a bare `hard` from earlier versions names no node). It outlives the lease,
    /// so a message still finds where its workstream lived after the lease ran out.
    pub fn ws_pin(&self, ws_id: &str) -> String {
        self.join(&["ws", ws_id, "pin"])
    }

    /// `{p}:bridge:{node_id}:cursor` — STRING (our addition): `<boot>:<node_seq>`
    /// of the last node event the bridge published (its resume point).
    pub fn bridge_cursor(&self, node_id: &str) -> String {
        self.join(&["bridge", node_id, "cursor"])
    }

    /// `{p}:bridge:{node_id}:awaiting` — HASH (our addition): correlation id → ws_id of
    /// every send the bridge handed to its node whose `turn_complete` it has not published
    /// yet (what it asks the node about after a restart).
    pub fn bridge_awaiting(&self, node_id: &str) -> String {
        self.join(&["bridge", node_id, "awaiting"])
    }

    /// `{p}:bridge:{node_id}:decisions` — HASH (our addition): request id →
    /// `<ws_id>\n<reply>` of every approval or plan reply the bridge has taken off its
    /// response list and not yet handed to its node. The take and this record are one
    /// script, so a bridge killed in between relays the reply after its restart.
    pub fn bridge_decisions(&self, node_id: &str) -> String {
        self.join(&["bridge", node_id, "decisions"])
    }

    /// `{p}:bridge:{node_id}:wake` — LIST (our addition): nudges the bridge's
    /// approval waiter to re-block on a new set of response lists.
    pub fn bridge_wake(&self, node_id: &str) -> String {
        self.join(&["bridge", node_id, "wake"])
    }

    /// `{p}:dead` — LIST (our addition): malformed or undeliverable messages
    /// with the reason. Written by bridges; read by operators and tools.
    pub fn dead_letter(&self) -> String {
        self.join(&["dead"])
    }

    /// `{p}:stream:{ws_id}` — STREAM (our addition), capped: the ordered,
    /// replayable outbound events of one workstream. Written by the owning
    /// bridge (`XADD`); read by late or reconnecting consumers (`XREAD`).
    pub fn stream(&self, ws_id: &str) -> String {
        self.join(&["stream", ws_id])
    }

    /// `{p}:stream-pos:{ws_id}` — HASH (our addition), expiring with the stream: node id →
    /// `<boot>-<node_seq>` of the last event of that node appended to the stream (what
    /// makes a replay append nothing twice).
    pub fn stream_positions(&self, ws_id: &str) -> String {
        self.join(&["stream-pos", ws_id])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_prefix_names() {
        let k = Keys::default();
        assert_eq!(k.prefix(), "turnstone");
        assert_eq!(k.inbound(), "turnstone:inbound");
        assert_eq!(k.inbound_node("n1"), "turnstone:inbound:n1");
        assert_eq!(k.response("9581019dbea9"), "turnstone:resp:9581019dbea9");
        assert_eq!(k.ws_owner("W"), "turnstone:ws:W");
        assert_eq!(k.node_heartbeat("node-a"), "turnstone:node:node-a");
        assert_eq!(k.node_heartbeat_pattern(), "turnstone:node:*");
        assert_eq!(k.events_ws("W"), "turnstone:events:W");
        assert_eq!(k.outbound_ws("W"), "turnstone:events:W");
        assert_eq!(k.events_global(), "turnstone:events:global");
        assert_eq!(k.events_cluster(), "turnstone:events:cluster");
        assert_eq!(k.scheduler_lock(), "turnstone:scheduler:lock");
        assert_eq!(
            k.processing("turnstone:inbound", "b1"),
            "{turnstone:inbound}:processing:b1"
        );
        assert_eq!(k.ws_pin("W"), "turnstone:ws:W:pin");
        assert_eq!(k.dead_letter(), "turnstone:dead");
        assert_eq!(k.stream("W"), "turnstone:stream:W");
    }

    #[test]
    fn custom_and_hash_tag_prefixes_are_kept_verbatim() {
        let k = Keys::new("t1");
        assert_eq!(k.inbound(), "t1:inbound");
        let tagged = Keys::new("{ts}");
        assert_eq!(tagged.inbound_node("a"), "{ts}:inbound:a");
        assert_eq!(tagged.dead_letter(), "{ts}:dead");
    }

    #[test]
    fn heartbeat_key_suffix() {
        let k = Keys::default();
        assert_eq!(
            k.node_id_from_heartbeat_key("turnstone:node:a.b_c-1"),
            Some("a.b_c-1")
        );
        assert_eq!(k.node_id_from_heartbeat_key("turnstone:node:"), None);
        assert_eq!(k.node_id_from_heartbeat_key("turnstone:ws:x"), None);
        assert_eq!(k.node_id_from_heartbeat_key("other:node:x"), None);
        assert_eq!(
            Keys::new("t").node_id_from_heartbeat_key("turnstone:node:x"),
            None
        );
    }
}

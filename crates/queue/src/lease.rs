//! Node heartbeats, workstream ownership leases, liveness and placement.
//!
//! * Heartbeat `{p}:node:{id}` = `{"server_url","started","max_ws"}` with a TTL (the
//!   original's key and JSON): a node is alive exactly while its key exists.
//! * Ownership `{p}:ws:{ws_id}` = owner node id, with a TTL the owner's bridge refreshes —
//!   a lease, so the ownership of a node that is gone for good runs out instead of routing
//!   messages into a dead queue forever.
//! * Placement of a workstream whose owner is gone: [`rendezvous`] over the live nodes, so
//!   every bridge that has to decide picks the same node without talking to the others.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::ConnectionLike;
use serde_json::Value;
use turnstone_proto::keys::Keys;

use crate::QueueError;

/// Lease and heartbeat operations under one key prefix.
#[derive(Debug, Clone)]
pub struct Leases {
    pub keys: Keys,
}

const RELEASE_IF_OWNER: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"#;

const CLAIM_FROM: &str = r#"
-- KEYS[1] ownership key, KEYS[2] pin record; ARGV[1] expected owner ('' = absent);
-- ARGV[2] new owner; ARGV[3] ttl. The new owner becomes the home of a soft workstream.
local cur = redis.call('GET', KEYS[1])
if (cur == false and ARGV[1] == '') or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
  local pin = redis.call('GET', KEYS[2])
  if not pin or string.sub(pin, 1, 4) ~= 'hard' then
    redis.call('SET', KEYS[2], 'soft:' .. ARGV[2])
  end
  return 1
end
return 0
"#;

const OWN: &str = r#"
-- KEYS[1] ownership key, KEYS[2] pin record; ARGV[1] owner; ARGV[2] ttl; ARGV[3] '1' = only
-- if no other node holds the lease. Returns 1 when owned, 0 when another node holds it.
if ARGV[3] == '1' then
  local cur = redis.call('GET', KEYS[1])
  if cur and cur ~= ARGV[1] then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
local pin = redis.call('GET', KEYS[2])
if not pin or string.sub(pin, 1, 4) ~= 'hard' then
  redis.call('SET', KEYS[2], 'soft:' .. ARGV[1])
end
return 1
"#;

const REFRESH_OURS: &str = r#"
-- KEYS ownership keys; ARGV[1] owner; ARGV[2] ttl. Takes or refreshes each lease that is
-- absent or already ARGV[1]'s; returns the 1-based positions of those another node holds.
local taken = {}
for i, key in ipairs(KEYS) do
  local cur = redis.call('GET', key)
  if cur == false or cur == ARGV[1] then
    redis.call('SET', key, ARGV[1], 'EX', ARGV[2])
  else
    taken[#taken + 1] = i
  end
end
return taken
"#;

impl Leases {
    pub fn new(keys: Keys) -> Self {
        Self { keys }
    }

    /// Writes (refreshes) a node's heartbeat.
    pub async fn heartbeat<C: AsyncCommands + Send>(
        &self,
        conn: &mut C,
        node_id: &str,
        value: &Value,
        ttl: Duration,
    ) -> Result<(), QueueError> {
        let _: () = conn
            .set_ex(
                self.keys.node_heartbeat(node_id),
                value.to_string(),
                ttl.as_secs().max(1),
            )
            .await?;
        Ok(())
    }

    /// Removes a node's heartbeat (its node is down): other bridges take over its queue.
    pub async fn withdraw<C: AsyncCommands + Send>(
        &self,
        conn: &mut C,
        node_id: &str,
    ) -> Result<(), QueueError> {
        let _: () = conn.del(self.keys.node_heartbeat(node_id)).await?;
        Ok(())
    }

    pub async fn is_alive<C: AsyncCommands + Send>(
        &self,
        conn: &mut C,
        node_id: &str,
    ) -> Result<bool, QueueError> {
        Ok(conn.exists(self.keys.node_heartbeat(node_id)).await?)
    }

    /// Every node heartbeat as stored, by node id (`SCAN MATCH {p}:node:*` then `MGET` in
    /// batches of 500), sorted by node id. Keys that expire between the two calls are skipped.
    /// The console's discovery reads these; [`Leases::live_nodes`] parses them.
    pub async fn heartbeats<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
    ) -> Result<Vec<(String, Vec<u8>)>, QueueError> {
        let pattern = self.keys.node_heartbeat_pattern();
        let mut cursor: u64 = 0;
        let mut keys: Vec<String> = Vec::new();
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(100)
                .query_async(conn)
                .await?;
            keys.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        keys.sort();
        keys.dedup();
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(500) {
            let values: Vec<Option<Vec<u8>>> =
                redis::cmd("MGET").arg(chunk).query_async(conn).await?;
            for (key, value) in chunk.iter().zip(values) {
                if let (Some(id), Some(raw)) = (self.keys.node_id_from_heartbeat_key(key), value) {
                    out.push((id.to_string(), raw));
                }
            }
        }
        Ok(out)
    }

    /// Live nodes and their heartbeat JSON (as the original's `list_nodes`; an unreadable
    /// heartbeat is `null`).
    pub async fn live_nodes<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
    ) -> Result<BTreeMap<String, Value>, QueueError> {
        Ok(self
            .heartbeats(conn)
            .await?
            .into_iter()
            .map(|(id, raw)| (id, serde_json::from_slice(&raw).unwrap_or(Value::Null)))
            .collect())
    }

    /// The owner named by a workstream's lease.
    pub async fn owner<C: AsyncCommands + Send>(
        &self,
        conn: &mut C,
        ws_id: &str,
    ) -> Result<Option<String>, QueueError> {
        Ok(conn.get(self.keys.ws_owner(ws_id)).await?)
    }

    /// Takes or refreshes the lease of `ws_id` for `node_id`, and makes `node_id` its home
    /// (the pin record, which has no TTL) unless it is hard-pinned (a hard pin never moves).
    pub async fn own<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        ws_id: &str,
        node_id: &str,
        ttl: Duration,
    ) -> Result<(), QueueError> {
        self.own_if(conn, ws_id, node_id, ttl, false)
            .await
            .map(drop)
    }

    /// [`Leases::own`] only while no other node holds the lease (`false`: another does, and
    /// nothing changed). What a node announces of itself (a workstream it created, perhaps
    /// replayed from its event log long after) must not take a workstream back from the node
    /// it moved to.
    pub async fn own_unless_held<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        ws_id: &str,
        node_id: &str,
        ttl: Duration,
    ) -> Result<bool, QueueError> {
        self.own_if(conn, ws_id, node_id, ttl, true).await
    }

    async fn own_if<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        ws_id: &str,
        node_id: &str,
        ttl: Duration,
        unless_held: bool,
    ) -> Result<bool, QueueError> {
        let owned: i64 = redis::Script::new(OWN)
            .key(self.keys.ws_owner(ws_id))
            .key(self.keys.ws_pin(ws_id))
            .arg(node_id)
            .arg(ttl.as_secs().max(1))
            .arg(if unless_held { "1" } else { "0" })
            .invoke_async(conn)
            .await?;
        Ok(owned == 1)
    }

    /// Where a message for `ws_id` belongs, in one round trip: its lease's owner, and its
    /// pin (home) record.
    pub async fn placement<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        ws_id: &str,
    ) -> Result<(Option<String>, Option<Pin>), QueueError> {
        let (owner, pin): (Option<String>, Option<String>) = redis::cmd("MGET")
            .arg(self.keys.ws_owner(ws_id))
            .arg(self.keys.ws_pin(ws_id))
            .query_async(conn)
            .await?;
        Ok((owner, pin.as_deref().and_then(Pin::parse)))
    }

    /// Refreshes the leases of `ws_ids` for `node_id` (500 per round trip) — only those that
    /// are absent or already `node_id`'s: a workstream another node holds has moved there
    /// (re-homed while this node was down or cut off), and taking it back would make two
    /// owners of one conversation. Returns the ids held by another node.
    pub async fn own_all<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        ws_ids: &[String],
        node_id: &str,
        ttl: Duration,
    ) -> Result<Vec<String>, QueueError> {
        let script = redis::Script::new(REFRESH_OURS);
        let mut held_elsewhere = Vec::new();
        for chunk in ws_ids.chunks(500) {
            let mut call = script.prepare_invoke();
            for ws in chunk {
                call.key(self.keys.ws_owner(ws));
            }
            let taken: Vec<usize> = call
                .arg(node_id)
                .arg(ttl.as_secs().max(1))
                .invoke_async(conn)
                .await?;
            held_elsewhere.extend(
                taken
                    .into_iter()
                    .filter_map(|i| chunk.get(i.wrapping_sub(1)).cloned()),
            );
        }
        Ok(held_elsewhere)
    }

    /// Moves the lease from `expected` (`None` = no lease) to `new_owner`, only if it still
    /// names `expected`: of several bridges re-homing one workstream, one wins.
    pub async fn claim<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        ws_id: &str,
        expected: Option<&str>,
        new_owner: &str,
        ttl: Duration,
    ) -> Result<bool, QueueError> {
        let won: i64 = redis::Script::new(CLAIM_FROM)
            .key(self.keys.ws_owner(ws_id))
            .key(self.keys.ws_pin(ws_id))
            .arg(expected.unwrap_or(""))
            .arg(new_owner)
            .arg(ttl.as_secs().max(1))
            .invoke_async(conn)
            .await?;
        Ok(won == 1)
    }

    /// Drops the lease (and the pin) of a closed workstream if `node_id` still owns it.
    pub async fn release<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        ws_id: &str,
        node_id: &str,
    ) -> Result<(), QueueError> {
        let _: i64 = redis::Script::new(RELEASE_IF_OWNER)
            .key(self.keys.ws_owner(ws_id))
            .arg(node_id)
            .invoke_async(conn)
            .await?;
        let _: i64 = redis::cmd("DEL")
            .arg(self.keys.ws_pin(ws_id))
            .query_async(conn)
            .await?;
        Ok(())
    }

    /// Hard-pins `ws_id` to `node_id` (it never moves to another node).
    pub async fn pin_hard<C: AsyncCommands + Send>(
        &self,
        conn: &mut C,
        ws_id: &str,
        node_id: &str,
    ) -> Result<(), QueueError> {
        let _: () = conn
            .set(self.keys.ws_pin(ws_id), format!("hard:{node_id}"))
            .await?;
        Ok(())
    }
}

/// A workstream's pin record `{p}:ws:{ws_id}:pin`: the node it lives on and whether it may
/// move. Unlike the lease it has no TTL, so a message for a workstream whose node has been
/// gone longer than the lease still finds where it lived: it moves from there (soft) or
/// fails while that node is down (hard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub hard: bool,
    /// Empty for a bare `hard` written before pins named their node.
    pub node: String,
}

impl Pin {
    pub fn parse(raw: &str) -> Option<Self> {
        let (mode, node) = raw.split_once(':').unwrap_or((raw, ""));
        let hard = match mode {
            "hard" => true,
            "soft" => false,
            _ => return None,
        };
        Some(Self {
            hard,
            node: node.to_string(),
        })
    }
}

/// Rendezvous (highest random weight) choice of a node for `ws_id`: every caller with the
/// same live set picks the same node, and removing a node only moves the workstreams it had.
pub fn rendezvous<'a>(ws_id: &str, nodes: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    nodes
        .into_iter()
        .max_by_key(|node| (fnv1a(ws_id, node), *node))
}

/// 64-bit FNV-1a over `a`, a separator and `b`, then a final avalanche (splitmix64), so
/// similar names spread evenly. Stable across processes and versions (unlike `DefaultHasher`).
fn fnv1a(a: &str, b: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in a.bytes().chain([0u8]).chain(b.bytes()) {
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendezvous_is_stable_and_moves_only_the_lost_nodes_share() {
        let nodes = ["a", "b", "c", "d"];
        let ws: Vec<String> = (0..2000).map(|i| format!("ws{i}")).collect();
        let before: Vec<&str> = ws
            .iter()
            .map(|w| rendezvous(w, nodes.iter().copied()).unwrap_or_default())
            .collect();
        // Spread: every node gets a fair share (2000/4 = 500 ± 20%).
        for n in nodes {
            let count = before.iter().filter(|c| **c == n).count();
            assert!((400..=600).contains(&count), "{n}: {count}");
        }
        // Drop "c": only its workstreams move.
        let after: Vec<&str> = ws
            .iter()
            .map(|w| rendezvous(w, ["a", "b", "d"]).unwrap_or_default())
            .collect();
        for (b, a) in before.iter().zip(&after) {
            if *b != "c" {
                assert_eq!(b, a);
            } else {
                assert_ne!(*a, "c");
            }
        }
        // Order of the input does not matter.
        assert_eq!(
            rendezvous("x", ["d", "c", "b", "a"]),
            rendezvous("x", ["a", "b", "c", "d"])
        );
        assert_eq!(rendezvous("x", std::iter::empty()), None);
    }

    #[tokio::test]
    async fn a_refresh_takes_back_no_lease_another_node_holds() {
        let prefix = format!("tqlease{:08x}", rand::random::<u32>());
        let leases = Leases::new(Keys::new(&prefix));
        let mut conn = redis::Client::open("redis://127.0.0.1:6379/0")
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let ttl = Duration::from_secs(30);
        // "moved" re-homed to node b while node a was away; "mine" and "new" are a's.
        leases.own(&mut conn, "moved", "b", ttl).await.unwrap();
        leases.own(&mut conn, "mine", "a", ttl).await.unwrap();
        let ids: Vec<String> = ["mine", "moved", "new"].map(String::from).to_vec();
        let held = leases.own_all(&mut conn, &ids, "a", ttl).await.unwrap();
        assert_eq!(held, ["moved"]);
        for (ws, owner) in [("mine", "a"), ("moved", "b"), ("new", "a")] {
            assert_eq!(
                leases.owner(&mut conn, ws).await.unwrap().as_deref(),
                Some(owner),
                "{ws}"
            );
        }
        // More than one script call's worth (500 per call) keeps the positions right.
        let many: Vec<String> = (0..1203).map(|i| format!("w{i}")).collect();
        leases.own(&mut conn, "w777", "b", ttl).await.unwrap();
        // What a node announces of itself does not take a lease another node holds.
        assert!(
            !leases
                .own_unless_held(&mut conn, "w777", "a", ttl)
                .await
                .unwrap()
        );
        assert_eq!(
            leases.owner(&mut conn, "w777").await.unwrap().as_deref(),
            Some("b")
        );
        assert!(
            leases
                .own_unless_held(&mut conn, "w777", "b", ttl)
                .await
                .unwrap()
        );
        let held = leases.own_all(&mut conn, &many, "a", ttl).await.unwrap();
        assert_eq!(held, ["w777"]);
        let _: () = redis::cmd("DEL")
            .arg(
                ids.iter()
                    .chain(&many)
                    .map(|w| leases.keys.ws_owner(w))
                    .collect::<Vec<_>>(),
            )
            .query_async(&mut conn)
            .await
            .unwrap();
    }
}

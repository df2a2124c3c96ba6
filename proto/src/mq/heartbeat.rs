//! The value of a node heartbeat key (cluster spec §2, §3.3).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ProtoError;
use crate::tolerant::{decode_fields, into_object, parse_object};

/// `max_ws` assumed when a heartbeat or `/health` omits it (cluster spec §4.1).
pub const DEFAULT_MAX_WS: u64 = 10;

/// The JSON stored at `{p}:node:{node_id}` (cluster spec §2) with
/// `EX heartbeat_ttl`. `node_list` items are this object plus `node_id`.
///
/// The simulator adds `sim` and `workstreams`; they are omitted when `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeHeartbeat {
    /// The node's base URL, without a trailing `/` (`sim://<id>` for the simulator).
    pub server_url: String,
    /// Unix epoch seconds when the bridge started.
    pub started: f64,
    /// The node's workstream capacity.
    pub max_ws: u64,
    /// Set by the simulator only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim: Option<bool>,
    /// Set by the simulator only: live workstream count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workstreams: Option<u64>,
    /// Ours: Unix seconds when the bridge signed this heartbeat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_at: Option<i64>,
    /// Ours: hex HMAC-SHA256 with the cluster's JWT secret over node id, `server_url` and
    /// `signed_at` (`turnstone_runtime::auth::heartbeat`); absent when the bridge has no
    /// secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
}

impl Default for NodeHeartbeat {
    fn default() -> Self {
        Self {
            server_url: String::new(),
            started: 0.0,
            max_ws: DEFAULT_MAX_WS,
            sim: None,
            workstreams: None,
            signed_at: None,
            sig: None,
        }
    }
}

impl NodeHeartbeat {
    /// Tolerant decoding of a heartbeat value.
    pub fn decode(bytes: &[u8]) -> Result<Self, ProtoError> {
        decode_fields("node_heartbeat", parse_object(bytes)?)
    }

    /// The JSON text stored in Redis.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A `node_list` item: this heartbeat's keys followed by `node_id`
    /// (cluster spec §1.3).
    pub fn to_node_list_item(&self, node_id: &str) -> Value {
        let mut map = match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        map.insert("node_id".to_owned(), Value::String(node_id.to_owned()));
        Value::Object(map)
    }

    /// Reads a `node_list` item back: the heartbeat and its `node_id`.
    pub fn from_node_list_item(item: &Value) -> Result<(String, Self), ProtoError> {
        let mut map = into_object(item.clone())?;
        let node_id = match map.shift_remove("node_id") {
            Some(Value::String(s)) => s,
            _ => String::new(),
        };
        Ok((node_id, decode_fields("node_list", map)?))
    }
}

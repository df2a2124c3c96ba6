//! What a workstream tells its frontends. The types are the wire contract's
//! ([`turnstone_proto::event`]): declared once there, re-exported here so the engine and its
//! embedders keep writing `turnstone_engine::Event`. Every event gets a per-workstream `seq`
//! ([`Envelope`]); the serialised [`Event`] is the per-workstream SSE payload of the node API
//! (`type` tag plus fields, spec `node-api.md` §2.2), plus `turn_complete`, our addition.

pub use turnstone_proto::event::{Envelope, Event, StatusInfo, ToolItem, WsState};

//! `turnstone-proto`: the wire contract of Turnstone, as plain data.
//!
//! It owns the serde types and pure functions that every other crate agrees
//! on, compatible with Turnstone v0.9.6 (see `spec/cluster-protocol.md` and
//! `spec/node-api.md`):
//!
//! - [`event`]: the events a workstream emits ([`event::Event`]), declared once: the
//!   engine builds them, the node serialises them, and the SSE and MQ views below derive
//!   from them ([`event::Event::to_ws_event`], [`mq::OutboundEvent::from_event`]); also the
//!   node-wide stream's entries ([`event::NodeStreamEntry`]);
//! - [`mq`]: the Redis MQ messages — 10 inbound message types
//!   ([`mq::InboundMessage`]), 25 outbound event types ([`mq::OutboundEvent`]),
//!   the node heartbeat value, and the SSE → MQ relay shapes (cluster spec §1);
//! - [`sse`]: the node's SSE event payloads — per-workstream [`sse::WsEvent`]
//!   and global [`sse::GlobalEvent`], with `ToolItem`, `Verdict`,
//!   `HistoryEntry` and `WorkstreamState` (node spec §2);
//! - [`receipt`]: effect receipts ([`receipt::EffectStatus`]) of interrupted tool batches;
//! - [`keys`]: the Redis key and channel schema as functions of a prefix
//!   (cluster spec §2);
//! - [`api`]: the simple HTTP request/response bodies (node spec §1.3);
//! - [`routes`]: the scopes and what each node API route needs ([`routes::NODE_ROUTES`],
//!   node spec §3.4), which the node enforces and the console's proxy classifies by;
//! - [`settings`]: the cluster-wide runtime settings (`system_settings` keys, their types
//!   and ranges) and the `_internal/config-reload` / `model-reload` bodies;
//! - [`image`]: an image carried in a conversation ([`image::ImagePart`]), with the marker
//!   clients see instead of its bytes;
//! - [`ids`]: every generated id (correlation, request, workstream; one length per kind)
//!   and wire timestamps.
//!
//! Decoding is tolerant the way the original is: unknown keys are ignored,
//! missing keys take the spec defaults, and bad input is a [`ProtoError`],
//! never a panic. Encoding emits every field in the original's key order
//! (except the few keys the spec says are absent when empty).
//!
//! It must not know tokio, HTTP or Redis I/O: no sockets, no clients, no
//! async. Transports (`turnstone-queue`, the node's HTTP layer, the bridge)
//! build on these types.

mod error;
mod tolerant;

pub mod api;
pub mod event;
pub mod ids;
pub mod image;
pub mod keys;
pub mod mq;
pub mod receipt;
pub mod routes;
pub mod settings;
pub mod sse;

pub use error::ProtoError;

//! The Redis MQ protocol (cluster spec §1): inbound messages pushed on lists,
//! outbound events published on channels, and the heartbeat value.
//!
//! Encoding (§1.1): one JSON object per Redis string, discriminated by `type`;
//! every field is always emitted, defaults included. Decoding is tolerant:
//! unknown keys are dropped, missing keys (and top-level `null`s) take the
//! defaults, a missing inbound `correlation_id` is generated.
//!
//! ```
//! use turnstone_proto::mq::{AckBody, AckEvent, InboundMessage, OutboundEvent};
//!
//! let msg = InboundMessage::decode(br#"{"type": "send", "ws_id": "ab12", "message": "hi"}"#).unwrap();
//! assert_eq!(msg.type_name(), "send");
//! assert_eq!(msg.ws_id(), "ab12");
//! assert_eq!(msg.correlation_id().len(), 12); // generated
//!
//! let ack = OutboundEvent::from(AckEvent::new("ab12", AckBody::default()))
//!     .with_correlation_id(msg.correlation_id());
//! assert!(ack.encode().starts_with(r#"{"type":"ack","ws_id":"ab12","#));
//! ```

mod heartbeat;
mod inbound;
mod outbound;
mod relay;

pub use heartbeat::{DEFAULT_MAX_WS, NodeHeartbeat};
pub use inbound::*;
pub use outbound::*;

//! The gRPC contract of Turnstone, package `turnstone.v1` (`proto/turnstone/v1/*.proto`):
//! the generated messages, the `NodeService` server trait (the node implements it) and its
//! client, the encoded file descriptors that server reflection serves, and [`client`]: a
//! connected client that sends the bearer credential; [`serve`]: HTTP and gRPC on one port;
//! [`metrics`]: call counts and durations by method and status code.
//!
//! ```
//! use turnstone_grpc::v1::{SendRequest, WorkstreamState};
//!
//! let send = SendRequest { ws_id: "ws1".into(), message: "hi".into(), ..Default::default() };
//! assert_eq!(send.ws_id, "ws1");
//! assert_eq!(WorkstreamState::Idle.as_str_name(), "WORKSTREAM_STATE_IDLE");
//! ```

pub mod client;
pub mod metrics;
pub mod serve;

/// `turnstone.v1`: messages, `node_service_server`, `node_service_client`.
#[allow(clippy::all, clippy::unwrap_used, clippy::expect_used, missing_docs)]
pub mod v1 {
    tonic::include_proto!("turnstone.v1");
}

/// The encoded `FileDescriptorSet` of `turnstone.v1`, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/turnstone_v1_descriptor.bin"));

/// The full name of the node service (`turnstone.v1.NodeService`).
pub const NODE_SERVICE: &str = "turnstone.v1.NodeService";

/// The full name of the console service (`turnstone.v1.ConsoleService`).
pub const CONSOLE_SERVICE: &str = "turnstone.v1.ConsoleService";

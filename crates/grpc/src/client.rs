//! A connected `NodeService` client that sends the bearer credential with every call.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use turnstone_grpc::client;
//! use turnstone_grpc::v1::ListWorkstreamsRequest;
//!
//! let mut node = client::connect("http://127.0.0.1:8080", Some("token")).await?;
//! let list = node.list_workstreams(ListWorkstreamsRequest {}).await?.into_inner();
//! println!("{} workstreams", list.workstreams.len());
//! # Ok(()) }
//! ```

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use crate::v1::node_service_client::NodeServiceClient;

/// The node service over one channel, with the credential attached.
pub type NodeClient = NodeServiceClient<InterceptedService<Channel, Bearer>>;

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("bad node address {0:?}: {1}")]
    Address(String, tonic::transport::Error),
    #[error("cannot connect to {0}: {1}")]
    Connect(String, tonic::transport::Error),
    #[error("the token cannot be sent as metadata (it must be visible ASCII)")]
    Token,
}

/// Adds `authorization: Bearer <token>` to every request (nothing without a token).
#[derive(Debug, Clone, Default)]
pub struct Bearer(Option<MetadataValue<Ascii>>);

impl Bearer {
    pub fn new(token: Option<&str>) -> Result<Self, ClientError> {
        token
            .map(|t| {
                format!("Bearer {t}")
                    .parse()
                    .map_err(|_| ClientError::Token)
            })
            .transpose()
            .map(Self)
    }
}

impl Interceptor for Bearer {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// Connects to the node at `url` (`http://host:port`, its HTTP port or `--grpc-port`).
pub async fn connect(url: &str, token: Option<&str>) -> Result<NodeClient, ClientError> {
    let bearer = Bearer::new(token)?;
    let channel = Endpoint::from_shared(url.to_string())
        .map_err(|e| ClientError::Address(url.to_string(), e))?
        .connect()
        .await
        .map_err(|e| ClientError::Connect(url.to_string(), e))?;
    Ok(NodeServiceClient::with_interceptor(channel, bearer)
        .max_decoding_message_size(64 * 1024 * 1024))
}

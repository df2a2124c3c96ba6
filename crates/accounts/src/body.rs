//! Request bodies of the account routes, read within the service's size limit and decoded
//! with the protocol's tolerant rules (`turnstone_proto::api::decode`): the node's and the
//! console's JSON extractors both read through [`read_wire_json`].

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use crate::error::AccountsError;

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Over the limit of the service's `DefaultBodyLimit`.
    #[error("request body too large")]
    TooLarge,
    #[error("Cannot read request body: {0}")]
    Unreadable(String),
    #[error(transparent)]
    Decode(#[from] turnstone_proto::ProtoError),
}

/// Reads the body and decodes it as `T`.
pub async fn read_wire_json<T: DeserializeOwned, S: Send + Sync>(
    req: Request,
    state: &S,
) -> Result<T, BodyError> {
    let bytes = Bytes::from_request(req, state).await.map_err(|e| {
        if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            BodyError::TooLarge
        } else {
            BodyError::Unreadable(e.body_text())
        }
    })?;
    let what = std::any::type_name::<T>()
        .rsplit("::")
        .next()
        .unwrap_or("body");
    Ok(turnstone_proto::api::decode(what, &bytes)?)
}

impl From<BodyError> for AccountsError {
    fn from(e: BodyError) -> Self {
        match e {
            BodyError::TooLarge => Self::TooLarge,
            BodyError::Unreadable(_) => Self::BadRequest(e.to_string()),
            BodyError::Decode(p) => p.into(),
        }
    }
}

/// A JSON body of the account routes.
#[derive(Debug)]
pub struct AccountsJson<T>(pub T);

impl<S, T> FromRequest<S> for AccountsJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = AccountsError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(read_wire_json(req, state).await?))
    }
}

//! Request bodies: read within the size limit, parsed tolerantly with the wire types of
//! `turnstone-proto`. Unparseable JSON is `400 {"error": "Invalid JSON body"}`; a body over
//! the limit is `413`.

use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// Largest accepted request body.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// A JSON body decoded as `T` with the protocol's tolerant rules.
#[derive(Debug)]
pub struct WireJson<T>(pub T);

impl<S, T> FromRequest<S> for WireJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        turnstone_accounts::body::read_wire_json(req, state)
            .await
            .map(Self)
            .map_err(|e| ApiError::from(turnstone_accounts::AccountsError::from(e)))
    }
}

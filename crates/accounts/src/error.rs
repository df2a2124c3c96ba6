//! The one error of the shared account routes: a status and a message, answered as
//! `{"error": "..."}` (the shape of both the node's and the console's errors).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use turnstone_store::StoreError;

/// A failed account operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccountsError {
    /// 400: the request is wrong; the message says how.
    #[error("{0}")]
    BadRequest(String),
    /// 403: the resource may not be changed here (read-only).
    #[error("{0}")]
    Forbidden(String),
    /// 404.
    #[error("{0}")]
    NotFound(String),
    /// 409: the request is valid but the state forbids it (setup done).
    #[error("{0}")]
    Conflict(String),
    /// 413: the body is over the service's limit.
    #[error("Request body too large")]
    TooLarge,
    /// 503: the service has no storage.
    #[error("{0}")]
    Unavailable(String),
    /// 500: storage or hashing failed.
    #[error("{0}")]
    Internal(String),
}

impl AccountsError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// 503 `Storage not available`.
    pub fn no_storage() -> Self {
        Self::Unavailable("Storage not available".into())
    }

    /// A storage failure (500), its cause in the message.
    pub fn storage(e: StoreError) -> Self {
        Self::Internal(format!("storage error: {e}"))
    }

    /// A storage answer about the request: bad input is 400, a missing row 404, the rest 500.
    pub fn from_store(e: StoreError) -> Self {
        match e {
            StoreError::InvalidInput(m) => Self::BadRequest(m),
            StoreError::NotFound(m) => Self::NotFound(format!("Not found: {m}")),
            other => Self::storage(other),
        }
    }
}

impl IntoResponse for AccountsError {
    fn into_response(self) -> Response {
        let status = self.status();
        (
            status,
            axum::Json(serde_json::json!({ "error": self.to_string() })),
        )
            .into_response()
    }
}

impl From<turnstone_proto::ProtoError> for AccountsError {
    fn from(e: turnstone_proto::ProtoError) -> Self {
        match e {
            turnstone_proto::ProtoError::Malformed(_) => {
                Self::BadRequest("Invalid JSON body".into())
            }
            other => Self::BadRequest(format!("Invalid request: {other}")),
        }
    }
}

//! The console's one error type for HTTP handlers: every failure is `{"error": "..."}` with a
//! 4xx/5xx status, as the original console answers.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// A failed request.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the request itself is wrong (bad JSON, bad query values, bad ids).
    #[error("{0}")]
    BadRequest(String),
    /// 401/403 from the auth layer, with the original's exact message.
    #[error("{message}")]
    Auth { status: u16, message: String },
    /// 403: the console refuses to act (e.g. proxy to a node whose heartbeat is untrusted).
    #[error("{0}")]
    Forbidden(String),
    /// 404.
    #[error("{0}")]
    NotFound(String),
    /// 409: the request conflicts with the stored state.
    #[error("{0}")]
    Conflict(String),
    /// 413.
    #[error("Request body too large (limit {0} bytes)")]
    TooLarge(usize),
    /// 502: a node could not be reached through the proxy.
    #[error("{0}")]
    BadGateway(String),
    /// 503: nothing can serve the request (no placeable node, Redis down).
    #[error("{0}")]
    Unavailable(String),
    /// 500.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Auth { status, .. } => {
                StatusCode::from_u16(*status).unwrap_or(StatusCode::UNAUTHORIZED)
            }
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BadGateway(_) => StatusCode::BAD_GATEWAY,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        (status, Json(json!({ "error": self.to_string() }))).into_response()
    }
}

impl From<turnstone_accounts::AccountsError> for ApiError {
    fn from(e: turnstone_accounts::AccountsError) -> Self {
        use turnstone_accounts::AccountsError as A;
        match e {
            A::BadRequest(m) => Self::BadRequest(m),
            A::Forbidden(m) => Self::Forbidden(m),
            A::NotFound(m) => Self::NotFound(m),
            A::Conflict(m) => Self::Conflict(m),
            A::TooLarge => Self::TooLarge(crate::BODY_LIMIT),
            A::Unavailable(m) => Self::Unavailable(m),
            A::Internal(m) => Self::Internal(m),
        }
    }
}

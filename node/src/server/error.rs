//! One error type for every route: each maps to a status and a `{"error": "..."}` body, the
//! shape the original API and its SDK expect.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// An error a route returns.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiError {
    /// 400 with the given message.
    BadRequest(String),
    /// 401/403 from authentication, with the exact body of the auth layer.
    Auth { status: u16, message: String },
    /// 404 with the given message.
    NotFound(String),
    /// 409: the thing was already decided; `detail` is merged into the body.
    Conflict { message: String, detail: Value },
    /// 413: the body is larger than the limit.
    TooLarge(usize),
    /// 503: a dependency is not available.
    Unavailable(String),
    /// 500 with the given message (a dependency failed).
    Internal(String),
}

impl ApiError {
    pub fn unknown_workstream() -> Self {
        Self::NotFound("Unknown workstream".to_string())
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Auth { status, .. } => {
                StatusCode::from_u16(*status).unwrap_or(StatusCode::UNAUTHORIZED)
            }
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict { .. } => StatusCode::CONFLICT,
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The text of the `error` field (for an `error` event of a command).
    pub fn message(&self) -> String {
        self.body()["error"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    pub fn body(&self) -> Value {
        match self {
            Self::BadRequest(m) | Self::NotFound(m) | Self::Unavailable(m) | Self::Internal(m) => {
                json!({ "error": m })
            }
            Self::Auth { message, .. } => json!({ "error": message }),
            Self::TooLarge(limit) => {
                json!({ "error": format!("Request body too large (limit {limit} bytes)") })
            }
            Self::Conflict { message, detail } => {
                let mut body = json!({ "error": message });
                if let (Some(body), Some(detail)) = (body.as_object_mut(), detail.as_object()) {
                    for (k, v) in detail {
                        body.insert(k.clone(), v.clone());
                    }
                }
                body
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status(), axum::Json(self.body())).into_response()
    }
}

impl From<turnstone_accounts::AccountsError> for ApiError {
    fn from(e: turnstone_accounts::AccountsError) -> Self {
        use turnstone_accounts::AccountsError as A;
        match e {
            A::BadRequest(m) => Self::BadRequest(m),
            A::Forbidden(message) => Self::Auth {
                status: 403,
                message,
            },
            A::NotFound(m) => Self::NotFound(m),
            A::Conflict(message) => Self::Conflict {
                message,
                detail: Value::Null,
            },
            A::TooLarge => Self::TooLarge(super::body::BODY_LIMIT),
            A::Unavailable(m) => Self::Unavailable(m),
            A::Internal(m) => Self::Internal(m),
        }
    }
}

impl From<turnstone_proto::ProtoError> for ApiError {
    fn from(e: turnstone_proto::ProtoError) -> Self {
        match e {
            turnstone_proto::ProtoError::Malformed(_) => {
                Self::BadRequest("Invalid JSON body".to_string())
            }
            other => Self::BadRequest(format!("Invalid request: {other}")),
        }
    }
}

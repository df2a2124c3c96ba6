//! The auth layer: every request is checked against the route's required scope before it
//! reaches a handler; public routes pass; failures get the original's exact 401/403 bodies.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::state::Node;

pub async fn require_scope(
    State(node): State<Arc<Node>>,
    mut req: Request,
    next: Next,
) -> Response {
    let authorization = header_text(&req, header::AUTHORIZATION);
    let cookie = header_text(&req, header::COOKIE);
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    match node
        .auth
        .check_request(&method, &path, authorization.as_deref(), cookie.as_deref())
        .await
    {
        Ok(identity) => {
            if let Some(identity) = identity {
                req.extensions_mut().insert(identity);
            }
            next.run(req).await
        }
        Err(e) => ApiError::Auth {
            status: e.status(),
            message: e.body_message(),
        }
        .into_response(),
    }
}

fn header_text(req: &Request, name: header::HeaderName) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

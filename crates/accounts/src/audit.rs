//! The audit log of admin changes (`audit_events`): who did it ([`Actor`]: the caller's user
//! id and address, read from the request), what, to which resource, with a detail that never
//! holds a secret. Both services' admin handlers record through [`Actor::record`]; a failure
//! to record is logged at ERROR and never undoes or fails the change already made.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use serde_json::Value;
use turnstone_runtime::auth::Identity;
use turnstone_store::{NewAuditEvent, Store};

/// Who makes a change, from where (an extractor: empty fields when auth is off or the
/// service has no connect info).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Actor {
    pub user_id: String,
    pub ip: String,
}

impl<S: Send + Sync> FromRequestParts<S> for Actor {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self {
            user_id: parts
                .extensions
                .get::<Identity>()
                .map(|i| i.user_id.clone())
                .unwrap_or_default(),
            ip: parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.ip().to_string())
                .unwrap_or_default(),
        })
    }
}

impl Actor {
    /// Records `action` (e.g. `user.create`) on `resource_type`/`resource_id`.
    pub async fn record(
        &self,
        store: &Arc<dyn Store>,
        action: &str,
        resource_type: &str,
        resource_id: &str,
        detail: Value,
    ) {
        let event = NewAuditEvent {
            user_id: self.user_id.clone(),
            action: action.into(),
            resource_type: resource_type.into(),
            resource_id: resource_id.into(),
            detail: detail.to_string(),
            ip_address: self.ip.clone(),
        };
        if let Err(e) = store.record_audit(event).await {
            tracing::error!(action, resource_id, error = %e, "audit event not recorded");
        }
    }
}

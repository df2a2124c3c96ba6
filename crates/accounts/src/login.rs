//! The wire types of the auth endpoints both services serve (node spec §3.5, cluster spec
//! §6.3): login, its reply, the login UI's status and `whoami`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnstone_runtime::auth::Identity;

/// `401 {"error": "Invalid credentials"}`.
pub const INVALID_CREDENTIALS: &str = "Invalid credentials";
/// `429 {"error": "Too many login attempts"}`.
pub const TOO_MANY_ATTEMPTS: &str = "Too many login attempts";
/// `401` of `whoami` without a user.
pub const NOT_AUTHENTICATED: &str = "Not authenticated";

/// `POST /v1/api/auth/login`: `{"token"}`, or `{"username", "password"}`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default)]
pub struct LoginBody {
    /// A config token, a `ts_` API token or a JWT.
    pub token: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
}

/// The 200 reply of login.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoginReply {
    /// Always `"ok"`.
    pub status: String,
    /// `"full"` when the scopes include `write`, else `"read"`.
    pub role: String,
    /// Comma-joined, sorted (`approve,read,write`).
    pub scopes: String,
    /// Comma-joined, sorted; absent when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<String>,
    /// A session JWT; absent when the node has no JWT secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<String>,
    /// Absent for identity-less tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

/// `GET /v1/api/auth/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AuthStatusReply {
    pub auth_enabled: bool,
    pub has_users: bool,
    /// `auth_enabled && !has_users`, on a node with storage (setup is impossible without).
    pub setup_required: bool,
}

/// `GET /v1/api/auth/whoami`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WhoamiReply {
    pub user_id: String,
    /// Comma-joined, sorted; absent when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<String>,
}

/// The 200 reply of a login (or setup) for `identity`.
pub fn login_reply(identity: &Identity, jwt: Option<String>) -> LoginReply {
    LoginReply {
        status: "ok".to_string(),
        role: identity.role().as_str().to_string(),
        scopes: identity.scopes.to_string(),
        permissions: (!identity.permissions.is_empty()).then(|| identity.permissions.to_string()),
        jwt,
        user_id: (!identity.user_id.is_empty()).then(|| identity.user_id.clone()),
    }
}

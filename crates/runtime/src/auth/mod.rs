//! Authentication and authorisation shared by every Turnstone service (node, console,
//! bridge), wire-compatible with the original (node API spec §3).
//!
//! * [`scope`] — scopes `read` ⊂ `write` ⊂ `approve` and RBAC permission strings.
//! * [`policy`] — what a request needs ([`Access`], from a row of a route table), whether auth
//!   is on ([`auth_enabled`]) and where it may be off ([`check_bind_policy`]). Which route
//!   needs what is no business of this crate: the tables live next to the routers (the
//!   node's is the contract's `turnstone_proto::routes::NODE_ROUTES`).
//! * [`jwt`] — HS256 tokens: [`mint`], [`verify`], service identities and [`ServiceToken`].
//! * [`heartbeat`] — HMAC signatures of node heartbeats (who may be sent credentials).
//! * [`tokens`] — config tokens (constant-time) and `ts_` API tokens (SHA-256 +
//!   [`ApiTokenLookup`]).
//! * [`authenticator`] — [`Authenticator`]: credentials from the `Authorization` header or the
//!   `turnstone_auth` cookie → [`Identity`].
//!
//! It knows no HTTP framework, no URL and no storage: a service wraps
//! [`Authenticator::check_access`] in its own middleware and turns an [`AuthError`] into a response with
//! [`AuthError::status`] and [`AuthError::body_message`]; the store implements
//! [`ApiTokenLookup`]. Secrets and tokens never appear in `Debug` output or logs.
//!
//! ```
//! use turnstone_proto::routes::{Lookup, NODE_ROUTES, lookup};
//! use turnstone_runtime::auth::{Access, Scope};
//! let Lookup::Entry(needs) = lookup(NODE_ROUTES, "POST", "/v1/api/send") else { panic!() };
//! assert_eq!(Access::of_route(needs, false), Access::Requires(Scope::Write));
//! ```

pub mod authenticator;
pub mod heartbeat;
pub mod jwt;
pub mod policy;
pub mod scope;
pub mod tokens;

pub use authenticator::{
    AUTH_COOKIE, AuthConfig, AuthEnv, Authenticator, SecretSource, bearer_token,
    clear_cookie_header, cookie_value, extract_token, set_cookie_header,
};
pub use jwt::{
    AUDIENCE_CHANNEL, AUDIENCE_CONSOLE, AUDIENCE_SERVER, Claims, DEFAULT_LEEWAY, DEFAULT_TOKEN_TTL,
    ISSUER, JwtError, JwtSecret, NewClaims, SERVICE_TOKEN_TTL, ServiceToken, mint, mint_at, verify,
    verify_at,
};
pub use policy::{Access, auth_enabled, check_bind_policy, must_require_auth};
pub use scope::{Permissions, Scope, Scopes};
pub use tokens::{
    API_TOKEN_PREFIX, ApiTokenLookup, ApiTokenLookupError, ApiTokenRecord, ConfigToken, TokenRole,
    generate_api_token, hash_api_token, looks_like_api_token, match_config_token, random_hex,
    secrets_equal,
};

use std::time::SystemTime;

/// The permission that switching approvals off needs (with the `approve` scope).
pub const APPROVALS_OFF_PERMISSION: &str = "tools.approve";

/// Body text of every 401 the auth layer produces.
pub const UNAUTHORIZED_MESSAGE: &str = "Unauthorized: missing or invalid token";

/// Why a request was not let through, or an auth operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No bearer token and no `turnstone_auth` cookie.
    #[error("missing credentials")]
    MissingCredentials,
    /// A token was presented but no token kind accepted it.
    #[error("invalid token")]
    InvalidToken,
    /// A JWT was refused (returned by [`verify`]; the authenticator falls through to the other
    /// token kinds and reports [`AuthError::InvalidToken`]).
    #[error("invalid JWT: {0}")]
    Jwt(#[from] JwtError),
    /// Authenticated, but the token does not grant the scope.
    #[error("token lacks '{0}' scope")]
    InsufficientScope(Scope),
    /// Authenticated with the scope, but the user does not hold the RBAC permission.
    #[error("missing permission '{0}'")]
    MissingPermission(String),
    /// A scope name that is not `read`, `write` or `approve`.
    #[error("unknown scope {0:?}")]
    UnknownScope(String),
    /// The system random generator failed.
    #[error("random generator failure")]
    Random,
}

impl AuthError {
    /// HTTP status: 403 for a missing scope or permission, 500 for an internal failure, else 401.
    pub fn status(&self) -> u16 {
        match self {
            AuthError::InsufficientScope(_) | AuthError::MissingPermission(_) => 403,
            AuthError::Random => 500,
            AuthError::MissingCredentials
            | AuthError::InvalidToken
            | AuthError::Jwt(_)
            | AuthError::UnknownScope(_) => 401,
        }
    }

    /// The `error` string of the JSON body (`{"error": "<this>"}`), exactly as the original.
    pub fn body_message(&self) -> String {
        match self {
            AuthError::InsufficientScope(scope) => {
                format!("Forbidden: token lacks '{scope}' scope")
            }
            AuthError::MissingPermission(permission) => {
                format!("Forbidden: missing permission '{permission}'")
            }
            AuthError::Random => "Internal Server Error".to_string(),
            AuthError::MissingCredentials
            | AuthError::InvalidToken
            | AuthError::Jwt(_)
            | AuthError::UnknownScope(_) => UNAUTHORIZED_MESSAGE.to_string(),
        }
    }

    /// The whole JSON body, `{"error": "..."}`.
    pub fn body_json(&self) -> serde_json::Value {
        serde_json::json!({ "error": self.body_message() })
    }
}

/// How an identity proved itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialKind {
    Jwt,
    ApiToken,
    ConfigToken,
    /// A stored user's password (login and setup only; sessions then use a JWT).
    Password,
}

/// Who is calling, after authentication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// User id; empty for config tokens and JWTs minted from them.
    pub user_id: String,
    /// Expanded through the hierarchy.
    pub scopes: Scopes,
    /// Token source (`config`, `database`, `password`, `oidc`, `jwt`, `console`, `bridge`, …).
    pub source: String,
    pub permissions: Permissions,
    pub kind: CredentialKind,
    /// The user's session generation the credential was issued under (JWTs minted for this
    /// identity carry it, and are refused once it moves on); `None` for identity-less and
    /// service credentials.
    pub generation: Option<i64>,
    /// When the credential stops being valid (a JWT's `exp`, an API token's expiry): a JWT
    /// minted for this identity never outlives it.
    pub expires_at: Option<SystemTime>,
}

impl Identity {
    /// Whether this identity holds `permission`. Identity-less credentials (config tokens,
    /// no user id) and the services (`src` `console` or `bridge`, which act for users the
    /// console authorised) count as full access, as in the original.
    pub fn has_permission(&self, permission: &str) -> bool {
        self.user_id.is_empty()
            || self.may_act_for_other_users()
            || self.permissions.contains(permission)
    }

    /// Whether this identity may switch approvals off (`auto_approve`, `auto_approve_tools`):
    /// it needs the `approve` scope and the [`APPROVALS_OFF_PERMISSION`] permission
    /// (identity-less config tokens hold every permission). The bridge's own token carries
    /// the permission only when the bridge is configured to relay producers' auto-approve,
    /// so a bridge cannot launder a producer's request.
    /// Unlike [`Identity::has_permission`], a service identity does not count as holding it
    /// unless its token names it.
    pub fn may_switch_approvals_off(&self) -> bool {
        self.scopes.has(Scope::Approve)
            && (self.user_id.is_empty() || self.permissions.contains(APPROVALS_OFF_PERMISSION))
    }

    /// Only service callers (`src` `console` or `bridge`) may create workstreams on behalf of
    /// another user (`user_id` in `workstreams/new`).
    pub fn may_act_for_other_users(&self) -> bool {
        matches!(self.source.as_str(), "console" | "bridge")
    }

    /// `full` iff the scopes include `write` (the login response's `role`).
    pub fn role(&self) -> TokenRole {
        TokenRole::for_scopes(&self.scopes)
    }
}

/// `Ok` if `identity` grants what `access` requires.
pub fn authorize(identity: &Identity, access: Access) -> Result<(), AuthError> {
    match access {
        Access::Public => Ok(()),
        Access::Requires(scope) | Access::RequiresPermission(scope, _)
            if !identity.scopes.has(scope) =>
        {
            Err(AuthError::InsufficientScope(scope))
        }
        Access::RequiresPermission(_, permission) if !identity.has_permission(permission) => {
            Err(AuthError::MissingPermission(permission.to_string()))
        }
        Access::Requires(_) | Access::RequiresPermission(..) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(scopes: &str, user: &str, source: &str) -> Identity {
        Identity {
            user_id: user.into(),
            scopes: Scopes::parse(scopes).expand(),
            source: source.into(),
            permissions: Permissions::parse("read"),
            kind: CredentialKind::Jwt,
            generation: None,
            expires_at: None,
        }
    }

    #[test]
    fn error_statuses_and_bodies() {
        assert_eq!(AuthError::MissingCredentials.status(), 401);
        assert_eq!(
            AuthError::InvalidToken.body_message(),
            "Unauthorized: missing or invalid token"
        );
        let forbidden = AuthError::InsufficientScope(Scope::Approve);
        assert_eq!(forbidden.status(), 403);
        assert_eq!(
            forbidden.body_message(),
            "Forbidden: token lacks 'approve' scope"
        );
        assert_eq!(
            forbidden.body_json().to_string(),
            r#"{"error":"Forbidden: token lacks 'approve' scope"}"#
        );
        assert_eq!(AuthError::Jwt(JwtError::Expired).status(), 401);
    }

    #[test]
    fn switching_approvals_off_needs_approve_and_tools_approve() {
        let mut admin = identity("approve", "u", "password");
        admin.permissions = Permissions::parse("approve,tools.approve");
        assert!(admin.may_switch_approvals_off());
        // The approve scope alone is not enough for a user or a service…
        assert!(!identity("approve", "u", "password").may_switch_approvals_off());
        assert!(!identity("approve", "bridge", "bridge").may_switch_approvals_off());
        // …nor the permission without the scope.
        let mut writer = identity("write", "u", "password");
        writer.permissions = Permissions::parse("write,tools.approve");
        assert!(!writer.may_switch_approvals_off());
        // Identity-less full-access config tokens may.
        assert!(identity("approve", "", "config").may_switch_approvals_off());
    }

    #[test]
    fn authorize_by_hierarchy() {
        let reader = identity("read", "u", "password");
        assert_eq!(authorize(&reader, Access::Public), Ok(()));
        assert_eq!(authorize(&reader, Access::Requires(Scope::Read)), Ok(()));
        assert_eq!(
            authorize(&reader, Access::Requires(Scope::Write)),
            Err(AuthError::InsufficientScope(Scope::Write))
        );
        let approver = identity("approve", "u", "bridge");
        for scope in Scope::ALL {
            assert_eq!(authorize(&approver, Access::Requires(scope)), Ok(()));
        }
    }

    #[test]
    fn authorize_a_permission_after_the_scope() {
        let users = Access::RequiresPermission(Scope::Approve, "admin.users");
        let mut admin = identity("approve", "u", "password");
        admin.permissions = Permissions::parse("approve,admin.users");
        assert_eq!(authorize(&admin, users), Ok(()));
        let approver = identity("approve", "u", "password");
        let refused = authorize(&approver, users).unwrap_err();
        assert_eq!(refused, AuthError::MissingPermission("admin.users".into()));
        assert_eq!(refused.status(), 403);
        assert_eq!(
            refused.body_message(),
            "Forbidden: missing permission 'admin.users'"
        );
        // The scope is checked first; identity-less config tokens hold every permission.
        assert_eq!(
            authorize(&identity("write", "u", "password"), users),
            Err(AuthError::InsufficientScope(Scope::Approve))
        );
        assert_eq!(authorize(&identity("approve", "", "config"), users), Ok(()));
    }

    #[test]
    fn permissions_and_service_sources() {
        let user = identity("read", "u", "password");
        assert!(user.has_permission("read"));
        assert!(!user.has_permission("conversation.modify"));
        assert!(!user.may_act_for_other_users());
        let config = identity("approve", "", "config");
        assert!(config.has_permission("conversation.modify"));
        assert!(identity("approve", "bridge", "bridge").may_act_for_other_users());
        assert!(identity("read", "console-collector", "console").may_act_for_other_users());
        assert_eq!(config.role(), TokenRole::Full);
        assert_eq!(user.role(), TokenRole::Read);
    }
}

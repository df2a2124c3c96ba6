//! The [`Authenticator`]: configuration (`[auth]` + `TURNSTONE_*` environment), credential
//! extraction (bearer header, then the `turnstone_auth` cookie) and token-kind detection
//! (JWT → `ts_` API token → config token, spec §3.3).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::jwt::{self, DEFAULT_LEEWAY, JwtSecret, NewClaims};
use super::policy::{self, Access};
use super::tokens::{
    API_TOKEN_PREFIX, ApiTokenLookup, ConfigToken, TokenRole, hash_api_token, match_config_token,
};
use super::{AuthError, CredentialKind, Identity, authorize};

/// Name of the session cookie.
pub const AUTH_COOKIE: &str = "turnstone_auth";
/// `Max-Age` of the session cookie set at login (24 h).
pub const AUTH_COOKIE_MAX_AGE: u64 = 86_400;

/// The `[auth]` section of `config.toml`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// On by default.
    pub enabled: bool,
    pub jwt_secret: Option<String>,
    /// `[[auth.tokens]]` entries.
    pub tokens: Vec<ConfigToken>,
    /// The terminal client's outgoing token; servers ignore it.
    pub token: Option<String>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            jwt_secret: None,
            tokens: Vec::new(),
            token: None,
        }
    }
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthConfig")
            .field("enabled", &self.enabled)
            .field(
                "jwt_secret",
                &self.jwt_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("tokens", &self.tokens)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The auth-related environment: `TURNSTONE_AUTH_ENABLED`, `TURNSTONE_AUTH_TOKEN`,
/// `TURNSTONE_JWT_SECRET`. Passed explicitly so tests never touch the process environment.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AuthEnv {
    pub auth_enabled: Option<String>,
    pub auth_token: Option<String>,
    pub jwt_secret: Option<String>,
}

impl AuthEnv {
    /// Reads the three variables from the process environment.
    pub fn from_process() -> Self {
        let var = |name: &str| std::env::var(name).ok();
        Self {
            auth_enabled: var("TURNSTONE_AUTH_ENABLED"),
            auth_token: var("TURNSTONE_AUTH_TOKEN"),
            jwt_secret: var("TURNSTONE_JWT_SECRET"),
        }
    }
}

impl fmt::Debug for AuthEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthEnv")
            .field("auth_enabled", &self.auth_enabled)
            .field(
                "auth_token",
                &self.auth_token.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "jwt_secret",
                &self.jwt_secret.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Where the JWT secret came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretSource {
    /// `TURNSTONE_JWT_SECRET`.
    Env,
    /// `[auth] jwt_secret`.
    Config,
    /// Generated at start-up; tokens die with the process.
    Ephemeral,
}

/// Authenticates credentials and checks requests. Cheap to share behind an `Arc`.
pub struct Authenticator {
    enabled: bool,
    secret: Option<JwtSecret>,
    secret_source: Option<SecretSource>,
    config_tokens: Vec<ConfigToken>,
    audience: String,
    leeway: Duration,
    api_tokens: Option<Arc<dyn ApiTokenLookup>>,
}

impl Authenticator {
    /// Resolves the configuration of a service that accepts JWTs for `audience` (e.g.
    /// [`jwt::AUDIENCE_SERVER`]).
    ///
    /// * enabled: `TURNSTONE_AUTH_ENABLED` beats `[auth] enabled` ([`policy::auth_enabled`]);
    /// * JWT secret (only when enabled): `TURNSTONE_JWT_SECRET`, else `[auth] jwt_secret`,
    ///   else a random ephemeral one with a warning; one shorter than 32 chars is accepted
    ///   with a warning;
    /// * config tokens: `[[auth.tokens]]` plus `TURNSTONE_AUTH_TOKEN` as role `full`.
    pub fn from_config(
        config: &AuthConfig,
        env: &AuthEnv,
        audience: impl Into<String>,
    ) -> Result<Self, AuthError> {
        let enabled = policy::auth_enabled(config.enabled, env.auth_enabled.as_deref());
        let (secret, secret_source) = if enabled {
            let (secret, source) = resolve_secret(config, env)?;
            (Some(secret), Some(source))
        } else {
            (None, None)
        };
        let mut config_tokens = config.tokens.clone();
        if let Some(token) = non_blank(env.auth_token.as_deref()) {
            config_tokens.push(ConfigToken::new(token, TokenRole::Full));
        }
        Ok(Self {
            enabled,
            secret,
            secret_source,
            config_tokens,
            audience: audience.into(),
            leeway: DEFAULT_LEEWAY,
            api_tokens: None,
        })
    }

    /// An authenticator with explicit parts (tests, tools, other services).
    pub fn new(
        enabled: bool,
        secret: Option<JwtSecret>,
        config_tokens: Vec<ConfigToken>,
        audience: impl Into<String>,
    ) -> Self {
        let secret = secret.filter(|s| !s.is_empty());
        Self {
            enabled,
            secret_source: secret.as_ref().map(|_| SecretSource::Config),
            secret,
            config_tokens,
            audience: audience.into(),
            leeway: DEFAULT_LEEWAY,
            api_tokens: None,
        }
    }

    /// Enables `ts_` API tokens (the original checks them only when storage is available).
    pub fn with_api_tokens(mut self, lookup: Arc<dyn ApiTokenLookup>) -> Self {
        self.api_tokens = Some(lookup);
        self
    }

    /// Clock skew tolerated on JWT `exp`/`nbf` (default 30 s).
    pub fn with_leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The JWT secret; `None` when auth is disabled (login then returns no `jwt`).
    pub fn jwt_secret(&self) -> Option<&JwtSecret> {
        self.secret.as_ref()
    }

    pub fn secret_source(&self) -> Option<SecretSource> {
        self.secret_source
    }

    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// What an auth middleware does with a request whose route needs `access` (a row of the
    /// service's route table): `Ok(None)` when auth is disabled or the route is public
    /// (handlers then see no identity), `Ok(Some(identity))` when the credentials grant the
    /// scope (and the permission, if any), else the error to answer with (401/403).
    pub async fn check_access(
        &self,
        access: Access,
        authorization: Option<&str>,
        cookie: Option<&str>,
    ) -> Result<Option<Identity>, AuthError> {
        if !self.enabled || access == Access::Public {
            return Ok(None);
        }
        let identity = self.authenticate(authorization, cookie).await?;
        authorize(&identity, access)?;
        Ok(Some(identity))
    }

    /// Authenticates the credentials of a request: the `Authorization: Bearer` token (scheme
    /// case-insensitive) if there is one, else the `turnstone_auth` cookie. Does not look at
    /// whether auth is enabled.
    pub async fn authenticate(
        &self,
        authorization: Option<&str>,
        cookie: Option<&str>,
    ) -> Result<Identity, AuthError> {
        let token = extract_token(authorization, cookie).ok_or(AuthError::MissingCredentials)?;
        self.authenticate_token(token).await
    }

    /// Authenticates one raw token (also the `{"token"}` login body).
    pub async fn authenticate_token(&self, token: &str) -> Result<Identity, AuthError> {
        self.authenticate_token_at(token, SystemTime::now()).await
    }

    /// [`Authenticator::authenticate_token`] as if the clock read `now`. Kinds are tried in
    /// order JWT → `ts_` API token → config token; a kind that rejects the token falls
    /// through to the next.
    pub async fn authenticate_token_at(
        &self,
        token: &str,
        now: SystemTime,
    ) -> Result<Identity, AuthError> {
        let token = token.trim();
        if token.is_empty() {
            return Err(AuthError::MissingCredentials);
        }

        if let Some(secret) = &self.secret
            && token.contains('.')
        {
            match jwt::verify_at(token, secret, &self.audience, now, self.leeway) {
                Ok(claims) if self.session_is_current(&claims).await => {
                    let expires_at = u64::try_from(claims.exp)
                        .ok()
                        .map(|secs| UNIX_EPOCH + Duration::from_secs(secs));
                    return Ok(Identity {
                        user_id: claims.sub,
                        scopes: claims.scopes,
                        source: claims.src,
                        permissions: claims.permissions,
                        kind: CredentialKind::Jwt,
                        generation: claims.generation,
                        expires_at,
                    });
                }
                Ok(_) => {
                    tracing::debug!("JWT of an ended session (user deleted, logged out or revoked)")
                }
                Err(e) => tracing::debug!(reason = %e, "JWT rejected; trying other token kinds"),
            }
        }

        if let Some(lookup) = &self.api_tokens
            && token.starts_with(API_TOKEN_PREFIX)
        {
            match lookup.lookup_api_token(&hash_api_token(token)).await {
                Ok(Some(record)) if record.expires_at.is_none_or(|exp| exp > now) => {
                    return Ok(Identity {
                        user_id: record.user_id,
                        scopes: record.scopes.expand(),
                        source: "database".to_string(),
                        permissions: record.permissions,
                        kind: CredentialKind::ApiToken,
                        generation: record.generation,
                        expires_at: record.expires_at,
                    });
                }
                Ok(Some(_)) => tracing::debug!("API token expired"),
                Ok(None) => tracing::debug!("API token unknown"),
                Err(e) => tracing::warn!(error = %e, "API token lookup failed"),
            }
        }

        if let Some(role) = match_config_token(token, &self.config_tokens) {
            return Ok(Identity {
                user_id: String::new(),
                scopes: role.scopes(),
                source: "config".to_string(),
                permissions: Default::default(),
                kind: CredentialKind::ConfigToken,
                generation: None,
                expires_at: None,
            });
        }

        Err(AuthError::InvalidToken)
    }

    /// `Ok` if `identity` grants what `access` requires.
    pub fn authorize(&self, identity: &Identity, access: Access) -> Result<(), AuthError> {
        authorize(identity, access)
    }

    /// A JWT for `identity` with this authenticator's audience (what login returns and puts
    /// in the cookie). `Ok(None)` when there is no secret (auth disabled).
    pub fn mint_for(
        &self,
        identity: &Identity,
        ttl: Duration,
    ) -> Result<Option<String>, AuthError> {
        let Some(secret) = &self.secret else {
            return Ok(None);
        };
        let claims = NewClaims::new(
            identity.user_id.clone(),
            identity.scopes,
            identity.source.clone(),
            self.audience.clone(),
        )
        .with_permissions(identity.permissions.clone())
        .with_generation(identity.generation);
        // Never beyond the credential it was minted from: a re-login with a JWT or an
        // expiring API token does not extend it.
        let now = SystemTime::now();
        let ttl = match identity.expires_at {
            Some(end) => ttl.min(end.duration_since(now).unwrap_or(Duration::ZERO)),
            None => ttl,
        };
        jwt::mint_at(&claims, secret, ttl, now).map(Some)
    }

    /// Whether the session a JWT belongs to still stands: a token without a `gen` claim
    /// (identity-less, or minted by another service) does; one with it needs its user to
    /// exist with that very generation (logout, token revocation and deletion move it on).
    async fn session_is_current(&self, claims: &jwt::Claims) -> bool {
        let Some(generation) = claims.generation else {
            return true;
        };
        let Some(lookup) = &self.api_tokens else {
            return false;
        };
        match lookup.session_generation(&claims.sub).await {
            Ok(current) => current == Some(generation),
            Err(e) => {
                tracing::warn!(error = %e, "session lookup failed; JWT refused");
                false
            }
        }
    }
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator")
            .field("enabled", &self.enabled)
            .field("secret", &self.secret)
            .field("secret_source", &self.secret_source)
            .field("config_tokens", &self.config_tokens)
            .field("audience", &self.audience)
            .field("leeway", &self.leeway)
            .field("api_tokens", &self.api_tokens.is_some())
            .finish()
    }
}

fn non_blank(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

fn resolve_secret(
    config: &AuthConfig,
    env: &AuthEnv,
) -> Result<(JwtSecret, SecretSource), AuthError> {
    let (secret, source) = if let Some(s) = non_blank(env.jwt_secret.as_deref()) {
        (JwtSecret::new(s), SecretSource::Env)
    } else if let Some(s) = non_blank(config.jwt_secret.as_deref()) {
        (JwtSecret::new(s), SecretSource::Config)
    } else {
        tracing::warn!(
            "no JWT secret configured (TURNSTONE_JWT_SECRET or [auth] jwt_secret); using a \
             random ephemeral secret: issued tokens stop working at restart and other \
             services cannot mint tokens for this one"
        );
        (JwtSecret::generate_ephemeral()?, SecretSource::Ephemeral)
    };
    if secret.is_weak() {
        tracing::warn!(
            min_len = jwt::MIN_SECRET_LEN,
            "the JWT secret is shorter than the recommended minimum length"
        );
    }
    Ok((secret, source))
}

/// The token of a request: the bearer token if the `Authorization` header has a non-empty
/// one, else the `turnstone_auth` cookie.
pub fn extract_token<'a>(
    authorization: Option<&'a str>,
    cookie: Option<&'a str>,
) -> Option<&'a str> {
    authorization
        .and_then(bearer_token)
        .or_else(|| cookie.and_then(|c| cookie_value(c, AUTH_COOKIE)))
}

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive); `None`
/// for other schemes or an empty token.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let authorization = authorization.trim_start();
    let (scheme, rest) = authorization.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case("bearer") || !rest.starts_with([' ', '\t']) {
        return None;
    }
    let token = rest.trim();
    (!token.is_empty()).then_some(token)
}

/// The value of cookie `name` in a `Cookie` header (`a=1; b=2`); surrounding double quotes
/// are removed. `None` if absent or empty.
pub fn cookie_value<'a>(cookie_header: &'a str, name: &str) -> Option<&'a str> {
    cookie_header.split(';').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        if key.trim() != name {
            return None;
        }
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        (!value.is_empty()).then_some(value)
    })
}

/// The `Set-Cookie` value a successful login sends (`Secure` only over HTTPS).
pub fn set_cookie_header(token: &str, secure: bool) -> String {
    let mut cookie = format!(
        "{AUTH_COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={AUTH_COOKIE_MAX_AGE}"
    );
    if secure {
        cookie.push_str("; Secure");
    }
    cookie
}

/// The `Set-Cookie` value of a logout.
pub fn clear_cookie_header() -> String {
    format!("{AUTH_COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_parsing() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("BEARER abc"), Some("abc"));
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearerabc"), None);
        assert_eq!(bearer_token("Basic dXNlcjpwYXNz"), None);
        assert_eq!(bearer_token("Bear"), None);
        assert_eq!(
            bearer_token("Beaé abc"),
            None,
            "no panic on a char boundary"
        );
    }

    #[test]
    fn cookie_parsing() {
        assert_eq!(
            cookie_value("a=1; turnstone_auth=tok; b=2", AUTH_COOKIE),
            Some("tok")
        );
        assert_eq!(
            cookie_value("turnstone_auth=\"tok\"", AUTH_COOKIE),
            Some("tok")
        );
        assert_eq!(cookie_value("xturnstone_auth=tok", AUTH_COOKIE), None);
        assert_eq!(cookie_value("turnstone_auth=", AUTH_COOKIE), None);
        assert_eq!(cookie_value("garbage", AUTH_COOKIE), None);
        assert_eq!(cookie_value("turnstone_auth=a=b", AUTH_COOKIE), Some("a=b"));
    }

    #[test]
    fn header_beats_cookie_and_non_bearer_falls_back() {
        let cookie = Some("turnstone_auth=from-cookie");
        assert_eq!(
            extract_token(Some("Bearer from-header"), cookie),
            Some("from-header")
        );
        assert_eq!(
            extract_token(Some("Basic xyz"), cookie),
            Some("from-cookie")
        );
        assert_eq!(extract_token(None, cookie), Some("from-cookie"));
        assert_eq!(extract_token(None, None), None);
    }

    #[test]
    fn cookie_headers() {
        assert_eq!(
            set_cookie_header("jwt", false),
            "turnstone_auth=jwt; Path=/; HttpOnly; SameSite=Lax; Max-Age=86400"
        );
        assert!(set_cookie_header("jwt", true).ends_with("; Secure"));
        assert_eq!(
            clear_cookie_header(),
            "turnstone_auth=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"
        );
    }

    #[test]
    fn config_defaults_and_unknown_keys() {
        let cfg: AuthConfig = serde_json::from_str("{}").unwrap();
        assert!(cfg.enabled);
        assert!(cfg.tokens.is_empty());
        assert!(serde_json::from_str::<AuthConfig>(r#"{"enabld": false}"#).is_err());
        let dbg = format!(
            "{:?}",
            AuthConfig {
                jwt_secret: Some("the-secret-value".into()),
                token: Some("cli-token-value".into()),
                ..AuthConfig::default()
            }
        );
        assert!(!dbg.contains("the-secret-value") && !dbg.contains("cli-token-value"));
    }
}

//! The console's settings and the credentials it presents to nodes.

use std::time::Duration;

use turnstone_runtime::auth::{
    AUDIENCE_SERVER, AuthError, Identity, JwtSecret, NewClaims, ServiceToken, mint,
};

/// Lifetime of the per-request JWT the proxy mints for a user (cluster spec §6.6).
pub const PROXY_TOKEN_TTL: Duration = Duration::from_secs(300);

/// How the collector and the proxy behave. Defaults follow the original console.
#[derive(Debug, Clone)]
pub struct ConsoleConfig {
    /// Redis key prefix (`turnstone`).
    pub prefix: String,
    /// How often every node's `/health` and `/v1/api/dashboard` are polled.
    pub poll_interval: Duration,
    /// How often the heartbeat keys are scanned.
    pub discovery_interval: Duration,
    /// Timeout of one poll request (connect + response).
    pub poll_timeout: Duration,
    /// Most polls in flight at once.
    pub poll_concurrency: usize,
    /// Spread polls over `[0, poll_interval/2)` by a per-node hash (off in tests that want
    /// prompt first polls).
    pub poll_jitter: bool,
    /// A node with busy workstreams whose event sequence has not moved for this long is a
    /// zombie ("progress stalled").
    pub stall_after: Duration,
    /// A node whose reported event-loop lag exceeds this is a zombie.
    pub max_event_loop_lag: Duration,
    /// Queue length of each cluster SSE client; events beyond it are dropped (and counted).
    pub sse_queue: usize,
    /// Interval of the SSE keep-alive comments.
    pub sse_ping: Duration,
    /// Connect timeout of proxied requests (streams have no read timeout).
    pub proxy_connect_timeout: Duration,
    /// Total timeout of proxied non-streaming requests.
    pub proxy_timeout: Duration,
    /// Most node requests in flight at once across every admin fan-out
    /// (`cluster.node_fan_out_limit`, cluster spec §6.5).
    pub node_fan_out_limit: usize,
    /// Per-node timeout of the admin fan-outs that have no fixed one (watches, models).
    pub fan_out_timeout: Duration,
    /// Oldest heartbeat signature trusted (`--heartbeat-max-age`); checked when the console
    /// has the JWT secret.
    pub heartbeat_max_age: Duration,
    /// `--node-url-allow`: the hosts node URLs may name (any when `None`).
    pub node_url_allow: Option<crate::trust::NodeUrlAllow>,
    /// How often the scheduler looks for due tasks (cluster spec §6.8: 15 s).
    pub scheduler_tick: Duration,
    /// Days `usage_events` rows are kept (`--usage-retention-days`, default
    /// [`DEFAULT_USAGE_RETENTION_DAYS`]); the scheduler prunes older ones. 0: kept forever.
    pub usage_retention_days: u32,
}

/// Days model usage rows are kept unless configured otherwise.
pub const DEFAULT_USAGE_RETENTION_DAYS: u32 = 90;

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            prefix: "turnstone".into(),
            poll_interval: Duration::from_secs(10),
            discovery_interval: Duration::from_secs(15),
            poll_timeout: Duration::from_secs(10),
            poll_concurrency: 200,
            poll_jitter: true,
            stall_after: Duration::from_secs(120),
            max_event_loop_lag: Duration::from_secs(2),
            sse_queue: 2000,
            sse_ping: Duration::from_secs(5),
            proxy_connect_timeout: Duration::from_secs(10),
            proxy_timeout: Duration::from_secs(30),
            node_fan_out_limit: 200,
            fan_out_timeout: Duration::from_secs(10),
            heartbeat_max_age: Duration::from_secs(120),
            node_url_allow: None,
            scheduler_tick: Duration::from_secs(15),
            usage_retention_days: DEFAULT_USAGE_RETENTION_DAYS,
        }
    }
}

/// What the console sends to nodes as `Authorization` (cluster spec §6.1, §6.6).
#[derive(Debug, Default)]
pub struct NodeCredentials {
    /// The JWT secret shared with the nodes (`TURNSTONE_JWT_SECRET`).
    secret: Option<JwtSecret>,
    /// `--auth-token`: a static token the nodes accept.
    static_token: Option<String>,
    collector: Option<ServiceToken>,
    proxy: Option<ServiceToken>,
}

impl NodeCredentials {
    /// Credentials from the shared secret and/or a static token. With a static token the
    /// collector uses it; otherwise it mints `console-collector` service JWTs.
    pub fn new(secret: Option<JwtSecret>, static_token: Option<String>) -> Self {
        let secret = secret.filter(|s| !s.is_empty());
        let static_token = static_token.filter(|t| !t.trim().is_empty());
        let collector = match (&static_token, &secret) {
            (None, Some(s)) => Some(ServiceToken::new(NewClaims::console_collector(), s.clone())),
            _ => None,
        };
        let proxy = secret
            .as_ref()
            .map(|s| ServiceToken::new(NewClaims::console_proxy(), s.clone()));
        Self {
            secret,
            static_token,
            collector,
            proxy,
        }
    }

    /// The JWT secret shared with the nodes, if any (it also checks heartbeat signatures).
    pub fn secret(&self) -> Option<&JwtSecret> {
        self.secret.as_ref()
    }

    /// No credentials (nodes with auth off).
    pub fn none() -> Self {
        Self::default()
    }

    /// The header value of a collector poll, if any.
    pub fn collector_header(&self) -> Result<Option<String>, AuthError> {
        if let Some(token) = &self.static_token {
            return Ok(Some(format!("Bearer {token}")));
        }
        match &self.collector {
            Some(t) => t.authorization_header().map(Some),
            None => Ok(None),
        }
    }

    /// The header value of one proxied request: a fresh 5-minute JWT carrying the user's
    /// identity when there is one and a secret, else the proxy service token, else the
    /// static token, else nothing.
    pub fn proxy_header(&self, user: Option<&Identity>) -> Result<Option<String>, AuthError> {
        if let (Some(identity), Some(secret)) = (user, &self.secret) {
            let claims = NewClaims::new(
                identity.user_id.clone(),
                identity.scopes,
                "console-proxy",
                AUDIENCE_SERVER,
            )
            .with_permissions(identity.permissions.clone());
            return mint(&claims, secret, PROXY_TOKEN_TTL).map(|t| Some(format!("Bearer {t}")));
        }
        if let Some(t) = &self.proxy {
            return t.authorization_header().map(Some);
        }
        Ok(self.static_token.as_ref().map(|t| format!("Bearer {t}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstone_runtime::auth::{CredentialKind, Permissions, Scopes, verify};

    #[test]
    fn the_proxy_token_carries_the_user_and_expires_in_five_minutes() {
        let secret = JwtSecret::new("a-secret-that-is-long-enough-for-tests-0001");
        let creds = NodeCredentials::new(Some(secret.clone()), None);
        let user = Identity {
            user_id: "alice".into(),
            scopes: Scopes::read_only(),
            source: "password".into(),
            permissions: Permissions::parse("read"),
            kind: CredentialKind::Jwt,
            generation: None,
            expires_at: None,
        };
        let header = creds.proxy_header(Some(&user)).unwrap().unwrap();
        let token = header.strip_prefix("Bearer ").unwrap();
        let claims = verify(token, &secret, AUDIENCE_SERVER).unwrap();
        assert_eq!(claims.sub, "alice");
        assert_eq!(claims.src, "console-proxy");
        assert_eq!(claims.exp - claims.iat.unwrap(), 300);
        assert!(!claims.scopes.has(turnstone_runtime::auth::Scope::Write));
        // Without a user: the console-proxy service identity.
        let header = creds.proxy_header(None).unwrap().unwrap();
        let claims = verify(
            header.strip_prefix("Bearer ").unwrap(),
            &secret,
            AUDIENCE_SERVER,
        )
        .unwrap();
        assert_eq!(claims.sub, "console-proxy");
        // The collector mints its own read-only identity.
        let header = creds.collector_header().unwrap().unwrap();
        let claims = verify(
            header.strip_prefix("Bearer ").unwrap(),
            &secret,
            AUDIENCE_SERVER,
        )
        .unwrap();
        assert_eq!(claims.sub, "console-collector");
    }

    #[test]
    fn a_static_token_is_the_fallback() {
        let creds = NodeCredentials::new(None, Some("tok".into()));
        assert_eq!(
            creds.collector_header().unwrap().as_deref(),
            Some("Bearer tok")
        );
        assert_eq!(
            creds.proxy_header(None).unwrap().as_deref(),
            Some("Bearer tok")
        );
        assert_eq!(NodeCredentials::none().proxy_header(None).unwrap(), None);
    }
}

//! Integration tests of `turnstone_runtime::auth`: the authenticator end
//! to end (token kinds, precedence, fall-through, scopes, configuration and its warnings).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use turnstone_runtime::auth::{
    AUDIENCE_CONSOLE, AUDIENCE_SERVER, Access, ApiTokenLookup, ApiTokenLookupError, ApiTokenRecord,
    AuthConfig, AuthEnv, AuthError, Authenticator, ConfigToken, CredentialKind, DEFAULT_TOKEN_TTL,
    JwtSecret, NewClaims, Permissions, Scope, Scopes, SecretSource, TokenRole, hash_api_token,
    mint,
};

const SECRET: &str = "integration-test-secret-0123456789abcdef";

// What a request needs: the route tables that say it live next to their routers and are
// tested there (proto `routes`, the node's and the console's route tests).
const R: Access = Access::Requires(Scope::Read);
const W: Access = Access::Requires(Scope::Write);
const A: Access = Access::Requires(Scope::Approve);

// ---------------------------------------------------------------------------------------
// Authenticator

#[derive(Default)]
struct FakeTokenStore {
    rows: HashMap<String, ApiTokenRecord>,
    /// Session generation per user id (a user not listed does not exist).
    generations: HashMap<String, i64>,
    fail: bool,
    seen: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl ApiTokenLookup for FakeTokenStore {
    async fn lookup_api_token(
        &self,
        token_hash: &str,
    ) -> Result<Option<ApiTokenRecord>, ApiTokenLookupError> {
        self.seen.lock().unwrap().push(token_hash.to_string());
        if self.fail {
            return Err(ApiTokenLookupError("database is down".into()));
        }
        Ok(self.rows.get(token_hash).cloned())
    }

    async fn session_generation(&self, user_id: &str) -> Result<Option<i64>, ApiTokenLookupError> {
        Ok(self.generations.get(user_id).copied())
    }
}

#[tokio::test]
async fn a_jwt_with_a_generation_stands_only_while_its_user_has_that_generation() {
    let secret = JwtSecret::new("a-test-secret-that-is-long-enough-for-hs256");
    let mut lookup = FakeTokenStore::default();
    lookup.generations.insert("u1".into(), 3);
    let auth = Authenticator::new(true, Some(secret.clone()), Vec::new(), AUDIENCE_SERVER)
        .with_api_tokens(Arc::new(lookup));
    let token = |user: &str, generation: Option<i64>| {
        let claims = NewClaims::new(user, Scopes::read_only(), "password", AUDIENCE_SERVER)
            .with_generation(generation);
        mint(&claims, &secret, Duration::from_secs(60)).unwrap()
    };
    let current = auth
        .authenticate_token(&token("u1", Some(3)))
        .await
        .unwrap();
    assert_eq!(current.generation, Some(3));
    assert!(current.expires_at.is_some());
    for (user, generation) in [("u1", Some(2)), ("u1", Some(4)), ("gone", Some(0))] {
        assert_eq!(
            auth.authenticate_token(&token(user, generation)).await,
            Err(AuthError::InvalidToken),
            "{user} {generation:?}"
        );
    }
    // Without `gen` (service and identity-less tokens) there is no session to check.
    assert!(
        auth.authenticate_token(&token("console-proxy", None))
            .await
            .is_ok()
    );
    // A node without user storage refuses any token tied to a session.
    let bare = Authenticator::new(true, Some(secret.clone()), Vec::new(), AUDIENCE_SERVER);
    assert!(
        bare.authenticate_token(&token("u1", Some(3)))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_minted_session_never_outlives_the_credential_it_came_from() {
    let secret = JwtSecret::new("a-test-secret-that-is-long-enough-for-hs256");
    let auth = Authenticator::new(true, Some(secret.clone()), Vec::new(), AUDIENCE_SERVER);
    let short = mint(
        &NewClaims::new("", Scopes::read_only(), "config", AUDIENCE_SERVER),
        &secret,
        Duration::from_secs(60),
    )
    .unwrap();
    let identity = auth.authenticate_token(&short).await.unwrap();
    let renewed = auth
        .mint_for(&identity, DEFAULT_TOKEN_TTL)
        .unwrap()
        .unwrap();
    let first = turnstone_runtime::auth::verify(&short, &secret, AUDIENCE_SERVER).unwrap();
    let second = turnstone_runtime::auth::verify(&renewed, &secret, AUDIENCE_SERVER).unwrap();
    assert!(second.exp <= first.exp, "{} > {}", second.exp, first.exp);
}

const API_TOKEN: &str = "ts_00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const EXPIRED_API_TOKEN: &str =
    "ts_ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";

fn store() -> FakeTokenStore {
    let mut rows = HashMap::new();
    rows.insert(
        hash_api_token(API_TOKEN),
        ApiTokenRecord {
            user_id: "u-api".into(),
            scopes: Scopes::parse("write"),
            expires_at: Some(SystemTime::now() + Duration::from_secs(3600)),
            permissions: Permissions::parse("read,write,workstreams.create"),
            generation: None,
        },
    );
    rows.insert(
        hash_api_token(EXPIRED_API_TOKEN),
        ApiTokenRecord {
            user_id: "u-old".into(),
            scopes: Scopes::full(),
            expires_at: Some(SystemTime::now() - Duration::from_secs(1)),
            permissions: Permissions::new(),
            generation: None,
        },
    );
    FakeTokenStore {
        rows,
        ..FakeTokenStore::default()
    }
}

fn config() -> AuthConfig {
    AuthConfig {
        enabled: true,
        jwt_secret: Some(SECRET.into()),
        tokens: vec![
            ConfigToken::new("reader-token", TokenRole::Read),
            ConfigToken::new("full-token", TokenRole::Full),
            ConfigToken::new("dotted.config.token", TokenRole::Read),
        ],
        token: None,
    }
}

fn authenticator() -> Authenticator {
    Authenticator::from_config(&config(), &AuthEnv::default(), AUDIENCE_SERVER).unwrap()
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn user_jwt(scopes: &str) -> String {
    let claims = NewClaims::new("u1", Scopes::parse(scopes), "password", AUDIENCE_SERVER)
        .with_permissions(Permissions::parse("conversation.modify"));
    mint(&claims, &JwtSecret::new(SECRET), DEFAULT_TOKEN_TTL).unwrap()
}

#[tokio::test]
async fn jwt_identity() {
    let auth = authenticator();
    let id = auth
        .authenticate(Some(&bearer(&user_jwt("write"))), None)
        .await
        .unwrap();
    assert_eq!(id.user_id, "u1");
    assert_eq!(id.kind, CredentialKind::Jwt);
    assert_eq!(id.source, "password");
    assert_eq!(id.scopes.to_string(), "read,write");
    assert!(id.has_permission("conversation.modify"));
}

#[tokio::test]
async fn service_jwt_identity() {
    let auth = authenticator();
    let token = mint(
        &NewClaims::bridge(),
        &JwtSecret::new(SECRET),
        Duration::from_secs(3600),
    )
    .unwrap();
    let id = auth
        .authenticate(Some(&bearer(&token)), None)
        .await
        .unwrap();
    assert_eq!(
        (id.user_id.as_str(), id.source.as_str()),
        ("bridge", "bridge")
    );
    assert!(id.may_act_for_other_users());
    assert_eq!(id.scopes, Scopes::full());
}

#[tokio::test]
async fn wrong_audience_jwt_is_unauthorized() {
    let auth = authenticator();
    let claims = NewClaims::new("u1", Scopes::full(), "password", AUDIENCE_CONSOLE);
    let token = mint(&claims, &JwtSecret::new(SECRET), DEFAULT_TOKEN_TTL).unwrap();
    let err = auth
        .authenticate(Some(&bearer(&token)), None)
        .await
        .unwrap_err();
    assert_eq!(err, AuthError::InvalidToken);
    assert_eq!(err.status(), 401);
    assert_eq!(err.body_message(), "Unauthorized: missing or invalid token");
}

#[tokio::test]
async fn header_beats_cookie() {
    let auth = authenticator();
    let cookie = "theme=dark; turnstone_auth=reader-token";
    let id = auth
        .authenticate(Some("bearer full-token"), Some(cookie))
        .await
        .unwrap();
    assert_eq!(id.scopes, Scopes::full(), "header token used");
    let id = auth.authenticate(None, Some(cookie)).await.unwrap();
    assert_eq!(id.scopes, Scopes::read_only(), "cookie token used");
    // An invalid header token is not rescued by a valid cookie.
    let err = auth
        .authenticate(Some("Bearer nope"), Some(cookie))
        .await
        .unwrap_err();
    assert_eq!(err, AuthError::InvalidToken);
    // A non-bearer header is ignored.
    let id = auth
        .authenticate(Some("Basic dXNlcjpwYXNz"), Some(cookie))
        .await
        .unwrap();
    assert_eq!(id.scopes, Scopes::read_only());
    assert_eq!(
        auth.authenticate(None, None).await.unwrap_err(),
        AuthError::MissingCredentials
    );
    // A JWT in the cookie works too.
    let id = auth
        .authenticate(None, Some(&format!("turnstone_auth={}", user_jwt("read"))))
        .await
        .unwrap();
    assert_eq!(id.kind, CredentialKind::Jwt);
}

#[tokio::test]
async fn config_token_roles_and_env_token() {
    let env = AuthEnv {
        auth_token: Some("env-token".into()),
        ..AuthEnv::default()
    };
    let auth = Authenticator::from_config(&config(), &env, AUDIENCE_SERVER).unwrap();
    let reader = auth.authenticate_token("reader-token").await.unwrap();
    assert_eq!(reader.kind, CredentialKind::ConfigToken);
    assert_eq!(reader.scopes, Scopes::read_only());
    assert_eq!(reader.user_id, "");
    assert_eq!(reader.source, "config");
    assert_eq!(reader.role(), TokenRole::Read);
    assert!(
        reader.has_permission("conversation.modify"),
        "identity-less passes"
    );
    let env_id = auth.authenticate_token("env-token").await.unwrap();
    assert_eq!(env_id.scopes, Scopes::full());
    assert_eq!(env_id.role(), TokenRole::Full);
    assert_eq!(
        auth.authenticate_token("reader-token-x").await.unwrap_err(),
        AuthError::InvalidToken
    );
}

#[tokio::test]
async fn failed_jwt_falls_through_to_config_tokens() {
    // Contains dots, so it is tried as a JWT first, fails, then matches a config token.
    let id = authenticator()
        .authenticate_token("dotted.config.token")
        .await
        .unwrap();
    assert_eq!(id.kind, CredentialKind::ConfigToken);
}

#[tokio::test]
async fn api_tokens_through_the_lookup() {
    let store = Arc::new(store());
    let auth = authenticator().with_api_tokens(store.clone());
    let id = auth
        .authenticate(Some(&bearer(API_TOKEN)), None)
        .await
        .unwrap();
    assert_eq!(id.kind, CredentialKind::ApiToken);
    assert_eq!(id.user_id, "u-api");
    assert_eq!(id.source, "database");
    assert_eq!(id.scopes.to_string(), "read,write", "expanded");
    assert!(id.has_permission("workstreams.create"));
    assert!(!id.has_permission("admin.users"));
    assert_eq!(
        store.seen.lock().unwrap().last().unwrap(),
        &hash_api_token(API_TOKEN),
        "looked up by SHA-256, never by the raw token"
    );

    assert_eq!(
        auth.authenticate_token(EXPIRED_API_TOKEN)
            .await
            .unwrap_err(),
        AuthError::InvalidToken
    );
    let unknown = format!("ts_{}", "0".repeat(64));
    assert_eq!(
        auth.authenticate_token(&unknown).await.unwrap_err(),
        AuthError::InvalidToken
    );
    // Without a lookup (no storage), ts_ tokens are not API tokens.
    assert_eq!(
        authenticator()
            .authenticate_token(API_TOKEN)
            .await
            .unwrap_err(),
        AuthError::InvalidToken
    );
}

#[tokio::test]
async fn api_token_lookup_failure_falls_through() {
    let failing = Arc::new(FakeTokenStore {
        fail: true,
        ..store()
    });
    let mut cfg = config();
    cfg.tokens
        .push(ConfigToken::new(API_TOKEN, TokenRole::Read));
    let auth = Authenticator::from_config(&cfg, &AuthEnv::default(), AUDIENCE_SERVER)
        .unwrap()
        .with_api_tokens(failing.clone());
    let id = auth.authenticate_token(API_TOKEN).await.unwrap();
    assert_eq!(id.kind, CredentialKind::ConfigToken);
    assert_eq!(failing.seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn check_access_enforces_scopes() {
    let auth = authenticator();
    let reader = Some("Bearer reader-token");
    assert!(
        auth.check_access(Access::Public, None, None)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        auth.check_access(R, None, None).await.unwrap_err(),
        AuthError::MissingCredentials
    );
    let id = auth.check_access(R, reader, None).await.unwrap().unwrap();
    assert_eq!(id.scopes, Scopes::read_only());
    let err = auth.check_access(W, reader, None).await.unwrap_err();
    assert_eq!(err.status(), 403);
    assert_eq!(err.body_message(), "Forbidden: token lacks 'write' scope");
    let writer = bearer(&user_jwt("write"));
    assert!(auth.check_access(W, Some(&writer), None).await.is_ok());
    let err = auth.check_access(A, Some(&writer), None).await.unwrap_err();
    assert_eq!(err.body_message(), "Forbidden: token lacks 'approve' scope");
    assert!(
        auth.check_access(A, Some("Bearer full-token"), None)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn disabled_auth_lets_everything_through_without_identity() {
    let mut cfg = config();
    cfg.enabled = false;
    let auth = Authenticator::from_config(&cfg, &AuthEnv::default(), AUDIENCE_SERVER).unwrap();
    assert!(!auth.is_enabled());
    assert!(auth.jwt_secret().is_none(), "no secret when disabled");
    let got = auth.check_access(A, None, None).await.unwrap();
    assert!(got.is_none());
    assert_eq!(
        auth.mint_for(
            &auth.authenticate_token("full-token").await.unwrap(),
            DEFAULT_TOKEN_TTL
        ),
        Ok(None)
    );

    // The environment beats the file, both ways.
    let env_off = AuthEnv {
        auth_enabled: Some("no".into()),
        ..AuthEnv::default()
    };
    assert!(
        !Authenticator::from_config(&config(), &env_off, AUDIENCE_SERVER)
            .unwrap()
            .is_enabled()
    );
    let env_on = AuthEnv {
        auth_enabled: Some("1".into()),
        ..AuthEnv::default()
    };
    assert!(
        Authenticator::from_config(&cfg, &env_on, AUDIENCE_SERVER)
            .unwrap()
            .is_enabled()
    );
}

#[tokio::test]
async fn login_jwt_round_trips() {
    let auth = authenticator();
    let id = auth.authenticate_token("full-token").await.unwrap();
    let jwt = auth.mint_for(&id, DEFAULT_TOKEN_TTL).unwrap().unwrap();
    let again = auth.authenticate_token(&jwt).await.unwrap();
    assert_eq!(again.kind, CredentialKind::Jwt);
    assert_eq!(again.scopes, Scopes::full());
    assert_eq!(again.source, "config");
    assert_eq!(again.user_id, "");
}

// ---------------------------------------------------------------------------------------
// Secret resolution and its warnings

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Runs `f` with a subscriber that records every log line, and returns them.
fn with_logs<T>(f: impl FnOnce() -> T) -> (T, String) {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::TRACE)
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    (out, text)
}

#[test]
fn ephemeral_secret_when_none_configured_warns() {
    let cfg = AuthConfig::default();
    let (auth, logs) =
        with_logs(|| Authenticator::from_config(&cfg, &AuthEnv::default(), AUDIENCE_SERVER));
    let auth = auth.unwrap();
    assert_eq!(auth.secret_source(), Some(SecretSource::Ephemeral));
    let secret = auth.jwt_secret().unwrap();
    assert_eq!(secret.expose().len(), 64);
    assert!(
        logs.contains("WARN") && logs.contains("ephemeral"),
        "{logs}"
    );
    assert!(!logs.contains(secret.expose()), "secret must not be logged");
    assert!(
        !logs.contains("shorter"),
        "a generated secret is not weak: {logs}"
    );
}

#[test]
fn env_secret_beats_config_and_weak_secret_warns() {
    let env = AuthEnv {
        jwt_secret: Some("short-env-secret".into()),
        ..AuthEnv::default()
    };
    let (auth, logs) = with_logs(|| Authenticator::from_config(&config(), &env, AUDIENCE_SERVER));
    let auth = auth.unwrap();
    assert_eq!(auth.secret_source(), Some(SecretSource::Env));
    assert_eq!(auth.jwt_secret().unwrap().expose(), "short-env-secret");
    assert!(logs.contains("WARN") && logs.contains("shorter"), "{logs}");
    assert!(
        !logs.contains("short-env-secret"),
        "secret must not be logged"
    );
    assert!(!logs.contains("ephemeral"), "{logs}");

    let (auth, logs) =
        with_logs(|| Authenticator::from_config(&config(), &AuthEnv::default(), AUDIENCE_SERVER));
    assert_eq!(auth.unwrap().secret_source(), Some(SecretSource::Config));
    assert!(
        !logs.contains("WARN"),
        "a long configured secret is fine: {logs}"
    );
}

#[test]
fn debug_output_redacts_everything_secret() {
    let env = AuthEnv {
        auth_token: Some("env-token-value".into()),
        jwt_secret: Some("env-secret-value-that-is-long-enough".into()),
        auth_enabled: None,
    };
    let auth = Authenticator::from_config(&config(), &env, AUDIENCE_SERVER).unwrap();
    let dbg = format!("{auth:?} {env:?} {:?}", config());
    for secret in [
        "env-token-value",
        "env-secret-value",
        SECRET,
        "reader-token",
        "full-token",
        "dotted.config.token",
    ] {
        assert!(!dbg.contains(secret), "{secret} leaked in {dbg}");
    }
}

#[test]
fn config_section_from_toml() {
    use figment::Figment;
    use figment::providers::{Format, Toml};

    #[derive(serde::Deserialize)]
    struct File {
        auth: AuthConfig,
    }
    let file: File = Figment::from(Toml::string(
        r#"
        [auth]
        jwt_secret = "s"
        [[auth.tokens]]
        value = "t1"
        role = "full"
        [[auth.tokens]]
        value = "t2"
        role = "read"
        "#,
    ))
    .extract()
    .unwrap();
    assert!(file.auth.enabled, "on by default");
    assert_eq!(
        file.auth.tokens,
        vec![
            ConfigToken::new("t1", TokenRole::Full),
            ConfigToken::new("t2", TokenRole::Read)
        ]
    );
    let bad = Figment::from(Toml::string(
        "[auth]\n[[auth.tokens]]\nvalue = \"t\"\nrole = \"root\"\n",
    ))
    .extract::<File>();
    assert!(bad.is_err());
}

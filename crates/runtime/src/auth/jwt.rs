//! HS256 JSON Web Tokens, wire-compatible with the PyJWT tokens of the original services
//! (spec §3.3, §3.6), on [`jsonwebtoken`] (with the aws-lc-rs backend rustls uses too).
//!
//! What `jsonwebtoken` checks: the header (only `"alg":"HS256"`, so `none` and every other
//! algorithm are refused before any signature work; an unknown `crit` extension is refused),
//! the signature (constant time, before the payload is parsed), and the audience (`aud`
//! required, a string or a list that must name ours).
//!
//! What this module adds around it, and why:
//! * **`exp` and `nbf` against the caller's clock** ([`verify_at`], used by tests and by
//!   [`ServiceToken`]): `jsonwebtoken` only reads the wall clock. The rules are PyJWT's:
//!   `exp` is required and a token is expired once `exp <= now - leeway`; a present `nbf`
//!   must be `<= now + leeway`; fractional NumericDates (PyJWT writes floats when given
//!   them) are truncated. `iss` is written but not checked (as the original).
//! * **Minting writes the header as PyJWT does** (`{"alg":"HS256","typ":"JWT"}`, in that
//!   order) so our tokens are byte-identical to the original's; `jsonwebtoken::encode` orders
//!   the header the other way round, so only its signer is used.
//! * **A size limit** ([`MAX_TOKEN_LEN`]) before any decoding, and errors that name the
//!   refused algorithm.
//!
//! Base64url segments must be unpadded (RFC 7515; PyJWT never pads).

use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::AuthError;
use super::scope::{Permissions, Scopes};

/// Audience of tokens a node accepts.
pub const AUDIENCE_SERVER: &str = "turnstone-server";
/// Audience of tokens the console accepts.
pub const AUDIENCE_CONSOLE: &str = "turnstone-console";
/// Audience of tokens the channel gateway accepts.
pub const AUDIENCE_CHANNEL: &str = "turnstone-channel";
/// The `iss` claim every token is minted with.
pub const ISSUER: &str = "turnstone";
/// Lifetime of login JWTs.
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);
/// Lifetime of service tokens (console, bridge).
pub const SERVICE_TOKEN_TTL: Duration = Duration::from_secs(3600);
/// Clock skew tolerated on `exp`/`nbf` when verifying.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);
/// Secrets shorter than this many characters are accepted with a warning.
pub const MIN_SECRET_LEN: usize = 32;
/// Tokens longer than this are refused without decoding.
pub const MAX_TOKEN_LEN: usize = 16 * 1024;

const HEADER_JSON: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

/// Why a JWT was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("malformed token")]
    Malformed,
    #[error("unsupported algorithm {0:?} (only HS256)")]
    UnsupportedAlgorithm(String),
    #[error("bad signature")]
    BadSignature,
    #[error("missing claim '{0}'")]
    MissingClaim(&'static str),
    #[error("invalid claim '{0}'")]
    InvalidClaim(&'static str),
    #[error("token expired")]
    Expired,
    #[error("token not yet valid")]
    NotYetValid,
    #[error("wrong audience")]
    WrongAudience,
    #[error("cannot encode token: {0}")]
    Encode(String),
}

/// The shared HMAC secret. Its `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct JwtSecret(String);

impl JwtSecret {
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// A random 256-bit secret (64 hex chars) for a process that was given none. Tokens signed
    /// with it die with the process.
    pub fn generate_ephemeral() -> Result<Self, AuthError> {
        let mut bytes = [0u8; 32];
        aws_lc_rs::rand::fill(&mut bytes).map_err(|_| AuthError::Random)?;
        Ok(Self(super::tokens::hex(&bytes)))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Shorter than [`MIN_SECRET_LEN`] characters.
    pub fn is_weak(&self) -> bool {
        self.0.chars().count() < MIN_SECRET_LEN
    }

    /// The raw value, for handing to a child process or a config writer. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for JwtSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JwtSecret(<redacted, {} chars>)", self.0.chars().count())
    }
}

/// What a new token says: everything but the times and the issuer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewClaims {
    /// User id; `""` for config-token logins, a service name for service tokens.
    pub sub: String,
    /// Written as given (not expanded), comma-joined and sorted.
    pub scopes: Scopes,
    /// Token source: `password`, `oidc`, `config`, `database`, `console`, `bridge`, …
    pub src: String,
    /// Written comma-joined and sorted; the claim is omitted when empty.
    pub permissions: Permissions,
    /// The `aud` claim, e.g. [`AUDIENCE_SERVER`].
    pub audience: String,
    /// The `gen` claim: the user's session generation when the token was minted (a node
    /// refuses the token once the user's generation moved on); omitted when `None`.
    pub generation: Option<i64>,
}

impl NewClaims {
    pub fn new(
        sub: impl Into<String>,
        scopes: Scopes,
        src: impl Into<String>,
        audience: impl Into<String>,
    ) -> Self {
        Self {
            sub: sub.into(),
            scopes,
            src: src.into(),
            permissions: Permissions::new(),
            audience: audience.into(),
            generation: None,
        }
    }

    pub fn with_generation(mut self, generation: Option<i64>) -> Self {
        self.generation = generation;
        self
    }

    pub fn with_permissions(mut self, permissions: Permissions) -> Self {
        self.permissions = permissions;
        self
    }

    /// The console's dashboard/health poller: `sub=console-collector`, `read`, `src=console`.
    pub fn console_collector() -> Self {
        Self::new(
            "console-collector",
            Scopes::read_only(),
            "console",
            AUDIENCE_SERVER,
        )
    }

    /// The console's UI proxy and admin fan-out: `sub=console-proxy`, `approve,read,write`,
    /// `src=console`.
    pub fn console_proxy() -> Self {
        Self::new("console-proxy", Scopes::full(), "console", AUDIENCE_SERVER)
    }

    /// The bridge: `sub=bridge`, `approve`, `src=bridge`.
    pub fn bridge() -> Self {
        Self::new(
            "bridge",
            Scopes::parse("approve"),
            "bridge",
            AUDIENCE_SERVER,
        )
    }

    /// The bridge when it is configured to relay producers' `auto_approve`: [`Self::bridge`]
    /// plus the `tools.approve` permission the node asks for before approvals are switched
    /// off.
    pub fn bridge_relaying_auto_approve() -> Self {
        Self::bridge().with_permissions(Permissions::parse(super::APPROVALS_OFF_PERMISSION))
    }
}

/// The claims of a verified token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    pub sub: String,
    /// Expanded through the hierarchy.
    pub scopes: Scopes,
    /// `jwt` when the token has no `src`.
    pub src: String,
    pub iss: Option<String>,
    pub iat: Option<i64>,
    pub exp: i64,
    pub aud: Vec<String>,
    pub permissions: Permissions,
    /// The `gen` claim (see [`NewClaims::generation`]).
    pub generation: Option<i64>,
}

#[derive(Serialize)]
struct WireClaims<'a> {
    sub: &'a str,
    scopes: String,
    src: &'a str,
    iss: &'static str,
    iat: i64,
    exp: i64,
    aud: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    permissions: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    r#gen: Option<i64>,
}

/// Seconds since the Unix epoch (0 for a clock before 1970).
pub fn unix_seconds(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Mints a token valid for `ttl` from now.
pub fn mint(claims: &NewClaims, secret: &JwtSecret, ttl: Duration) -> Result<String, AuthError> {
    mint_at(claims, secret, ttl, SystemTime::now())
}

/// Mints a token as if the clock read `now`.
pub fn mint_at(
    claims: &NewClaims,
    secret: &JwtSecret,
    ttl: Duration,
    now: SystemTime,
) -> Result<String, AuthError> {
    let iat = unix_seconds(now);
    let ttl = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
    let wire = WireClaims {
        sub: &claims.sub,
        scopes: claims.scopes.to_string(),
        src: &claims.src,
        iss: ISSUER,
        iat,
        exp: iat.saturating_add(ttl),
        aud: &claims.audience,
        permissions: (!claims.permissions.is_empty()).then(|| claims.permissions.to_string()),
        r#gen: claims.generation,
    };
    let payload =
        serde_json::to_vec(&wire).map_err(|e| AuthError::Jwt(JwtError::Encode(e.to_string())))?;
    let encode_error =
        |e: jsonwebtoken::errors::Error| AuthError::Jwt(JwtError::Encode(e.to_string()));
    let key = EncodingKey::from_secret(secret.expose().as_bytes()).map_err(encode_error)?;
    let mut token = URL_SAFE_NO_PAD.encode(HEADER_JSON);
    token.push('.');
    token.push_str(&URL_SAFE_NO_PAD.encode(payload));
    let signature = jsonwebtoken::crypto::sign(token.as_bytes(), &key, Algorithm::HS256)
        .map_err(encode_error)?;
    token.push('.');
    token.push_str(&signature);
    Ok(token)
}

/// Verifies a token for `audience` against the wall clock with [`DEFAULT_LEEWAY`].
pub fn verify(token: &str, secret: &JwtSecret, audience: &str) -> Result<Claims, AuthError> {
    verify_at(token, secret, audience, SystemTime::now(), DEFAULT_LEEWAY)
}

/// Verifies a token as if the clock read `now`.
pub fn verify_at(
    token: &str,
    secret: &JwtSecret,
    audience: &str,
    now: SystemTime,
    leeway: Duration,
) -> Result<Claims, AuthError> {
    Ok(verify_inner(token, secret, audience, now, leeway)?)
}

fn verify_inner(
    token: &str,
    secret: &JwtSecret,
    audience: &str,
    now: SystemTime,
    leeway: Duration,
) -> Result<Claims, JwtError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(JwtError::Malformed);
    }
    // An empty secret verifies nothing (the authenticator never configures one).
    let key =
        DecodingKey::from_secret(secret.expose().as_bytes()).map_err(|_| JwtError::BadSignature)?;
    let mut validation = Validation::new(Algorithm::HS256);
    // Checked below against `now`, not the wall clock.
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.set_required_spec_claims(&["aud"]);
    validation.set_audience(&[audience]);
    let payload = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
        .map_err(|e| refusal(token, &e))?
        .claims;

    let now_secs = unix_seconds(now);
    let leeway = i64::try_from(leeway.as_secs()).unwrap_or(i64::MAX);
    let exp = numeric_claim(&payload, "exp")?.ok_or(JwtError::MissingClaim("exp"))?;
    if exp <= now_secs.saturating_sub(leeway) {
        return Err(JwtError::Expired);
    }
    if let Some(nbf) = numeric_claim(&payload, "nbf")?
        && nbf > now_secs.saturating_add(leeway)
    {
        return Err(JwtError::NotYetValid);
    }
    let iat = numeric_claim(&payload, "iat")?;
    let aud = string_list_claim(&payload, "aud")?.ok_or(JwtError::MissingClaim("aud"))?;

    let scopes = string_list_claim(&payload, "scopes")?
        .map(|items| Scopes::parse(&items.join(",")))
        .unwrap_or_default()
        .expand();
    let permissions = string_list_claim(&payload, "permissions")?
        .map(|items| Permissions::parse(&items.join(",")))
        .unwrap_or_default();

    Ok(Claims {
        sub: string_claim(&payload, "sub")?.unwrap_or_default(),
        scopes,
        src: string_claim(&payload, "src")?.unwrap_or_else(|| "jwt".to_string()),
        iss: string_claim(&payload, "iss")?,
        iat,
        exp,
        aud,
        permissions,
        generation: numeric_claim(&payload, "gen")?,
    })
}

/// Our reason for a token `jsonwebtoken` refused. A header it could not read (`none` is no
/// algorithm it knows) or one naming another algorithm is reported with that algorithm.
fn refusal(token: &str, error: &jsonwebtoken::errors::Error) -> JwtError {
    match error.kind() {
        ErrorKind::InvalidSignature => JwtError::BadSignature,
        ErrorKind::InvalidAudience => JwtError::WrongAudience,
        ErrorKind::MissingRequiredClaim(claim) if claim == "aud" => JwtError::MissingClaim("aud"),
        ErrorKind::InvalidClaimFormat(claim) if claim == "aud" => JwtError::InvalidClaim("aud"),
        _ => match header_algorithm(token) {
            Some(alg) if alg != "HS256" => JwtError::UnsupportedAlgorithm(alg),
            _ => JwtError::Malformed,
        },
    }
}

/// The `alg` a token's header names, if it can be read.
fn header_algorithm(token: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Header {
        alg: String,
    }
    let segment = token.split('.').next()?;
    let bytes = URL_SAFE_NO_PAD.decode(segment).ok()?;
    serde_json::from_slice::<Header>(&bytes).ok().map(|h| h.alg)
}

/// A NumericDate claim; fractional seconds are truncated.
fn numeric_claim(claims: &Map<String, Value>, name: &'static str) -> Result<Option<i64>, JwtError> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(i) = n.as_i64() {
                Ok(Some(i))
            } else if let Some(f) = n.as_f64().filter(|f| f.is_finite()) {
                // Saturating float → int conversion; fine for a timestamp.
                Ok(Some(f.trunc() as i64))
            } else {
                Err(JwtError::InvalidClaim(name))
            }
        }
        Some(_) => Err(JwtError::InvalidClaim(name)),
    }
}

fn string_claim(
    claims: &Map<String, Value>,
    name: &'static str,
) -> Result<Option<String>, JwtError> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(JwtError::InvalidClaim(name)),
    }
}

/// A claim that is a string or an array of strings (`aud` may be either; `scopes` and
/// `permissions` are strings when we write them but tolerated as arrays).
fn string_list_claim(
    claims: &Map<String, Value>,
    name: &'static str,
) -> Result<Option<Vec<String>>, JwtError> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(vec![s.clone()])),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                _ => Err(JwtError::InvalidClaim(name)),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(JwtError::InvalidClaim(name)),
    }
}

/// A self-minted service token that is reused until 80 % of its lifetime has passed, then
/// re-minted. Safe to share between tasks.
pub struct ServiceToken {
    claims: NewClaims,
    secret: JwtSecret,
    lifetime: Duration,
    cached: Mutex<Option<CachedToken>>,
}

struct CachedToken {
    token: String,
    minted_at: SystemTime,
    refresh_at: SystemTime,
}

impl ServiceToken {
    /// A token manager with the standard 1 h lifetime ([`SERVICE_TOKEN_TTL`]).
    pub fn new(claims: NewClaims, secret: JwtSecret) -> Self {
        Self::with_lifetime(claims, secret, SERVICE_TOKEN_TTL)
    }

    pub fn with_lifetime(claims: NewClaims, secret: JwtSecret, lifetime: Duration) -> Self {
        Self {
            claims,
            secret,
            lifetime,
            cached: Mutex::new(None),
        }
    }

    pub fn claims(&self) -> &NewClaims {
        &self.claims
    }

    /// The current token, minting a new one when needed.
    pub fn token(&self) -> Result<String, AuthError> {
        self.token_at(SystemTime::now())
    }

    /// `Bearer <token>`, for an `Authorization` header.
    pub fn authorization_header(&self) -> Result<String, AuthError> {
        Ok(format!("Bearer {}", self.token()?))
    }

    /// The token as of `now`: the cached one until `now` reaches 80 % of its lifetime (or the
    /// clock moved back before it was minted), else a freshly minted one.
    pub fn token_at(&self, now: SystemTime) -> Result<String, AuthError> {
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = cached.as_ref()
            && now < c.refresh_at
            && now >= c.minted_at
        {
            return Ok(c.token.clone());
        }
        let token = mint_at(&self.claims, &self.secret, self.lifetime, now)?;
        *cached = Some(CachedToken {
            token: token.clone(),
            minted_at: now,
            refresh_at: now + self.lifetime.mul_f64(0.8),
        });
        Ok(token)
    }
}

impl fmt::Debug for ServiceToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceToken")
            .field("claims", &self.claims)
            .field("secret", &self.secret)
            .field("lifetime", &self.lifetime)
            .field("token", &"<redacted>")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::scope::Scope;

    fn secret() -> JwtSecret {
        JwtSecret::new("a-test-secret-that-is-long-enough-0123456789")
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    const T0: u64 = 1_800_000_000;

    /// Signs an arbitrary header and payload, for tokens `mint` would never produce.
    fn forge(header: &str, payload: &str, secret: &JwtSecret) -> String {
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(payload)
        );
        let key =
            aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret.expose().as_bytes());
        let tag = aws_lc_rs::hmac::sign(&key, input.as_bytes());
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    fn payload_of(token: &str) -> Value {
        let seg = token.split('.').nth(1).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(seg).unwrap()).unwrap()
    }

    #[test]
    fn round_trip_and_wire_claims() {
        let claims = NewClaims::new("u1", Scopes::parse("write"), "password", AUDIENCE_SERVER)
            .with_permissions(Permissions::parse("write,admin.users"));
        let token = mint_at(&claims, &secret(), Duration::from_secs(60), at(T0)).unwrap();

        let header = token.split('.').next().unwrap();
        assert_eq!(
            URL_SAFE_NO_PAD.decode(header).unwrap(),
            HEADER_JSON.as_bytes()
        );
        let p = payload_of(&token);
        assert_eq!(p["sub"], "u1");
        assert_eq!(p["scopes"], "write");
        assert_eq!(p["src"], "password");
        assert_eq!(p["iss"], "turnstone");
        assert_eq!(p["aud"], "turnstone-server");
        assert_eq!(p["iat"], T0);
        assert_eq!(p["exp"], T0 + 60);
        assert_eq!(p["permissions"], "admin.users,write");

        let got = verify_at(
            &token,
            &secret(),
            AUDIENCE_SERVER,
            at(T0 + 10),
            Duration::ZERO,
        )
        .unwrap();
        assert_eq!(got.sub, "u1");
        assert_eq!(got.scopes.to_string(), "read,write", "re-expanded");
        assert_eq!(got.src, "password");
        assert_eq!(got.iss.as_deref(), Some("turnstone"));
        assert_eq!(got.exp, i64::try_from(T0 + 60).unwrap());
        assert_eq!(got.aud, vec!["turnstone-server".to_string()]);
        assert!(got.permissions.contains("admin.users"));
    }

    #[test]
    fn permissions_claim_omitted_when_empty() {
        let token = mint_at(
            &NewClaims::console_collector(),
            &secret(),
            SERVICE_TOKEN_TTL,
            at(T0),
        )
        .unwrap();
        let p = payload_of(&token);
        assert!(p.get("permissions").is_none());
        assert_eq!(p["sub"], "console-collector");
        assert_eq!(p["scopes"], "read");
        assert_eq!(p["src"], "console");
    }

    #[test]
    fn service_identities() {
        let proxy = NewClaims::console_proxy();
        assert_eq!(
            (proxy.sub.as_str(), proxy.src.as_str()),
            ("console-proxy", "console")
        );
        assert_eq!(proxy.scopes.to_string(), "approve,read,write");
        let bridge = NewClaims::bridge();
        assert_eq!(
            (bridge.sub.as_str(), bridge.src.as_str()),
            ("bridge", "bridge")
        );
        assert_eq!(bridge.scopes.to_string(), "approve");
        for c in [NewClaims::console_collector(), proxy, bridge] {
            assert_eq!(c.audience, AUDIENCE_SERVER);
        }
    }

    #[test]
    fn rejects_wrong_and_missing_audience() {
        let console = NewClaims::new("u", Scopes::full(), "password", AUDIENCE_CONSOLE);
        let token = mint_at(&console, &secret(), DEFAULT_TOKEN_TTL, at(T0)).unwrap();
        assert_eq!(
            verify_at(&token, &secret(), AUDIENCE_SERVER, at(T0), DEFAULT_LEEWAY),
            Err(AuthError::Jwt(JwtError::WrongAudience))
        );
        let no_aud = forge(
            HEADER_JSON,
            &format!(r#"{{"sub":"u","scopes":"read","exp":{}}}"#, T0 + 100),
            &secret(),
        );
        assert_eq!(
            verify_at(&no_aud, &secret(), AUDIENCE_SERVER, at(T0), DEFAULT_LEEWAY),
            Err(AuthError::Jwt(JwtError::MissingClaim("aud")))
        );
        let list_aud = forge(
            HEADER_JSON,
            &format!(
                r#"{{"sub":"u","scopes":"read","exp":{},"aud":["x","turnstone-server"]}}"#,
                T0 + 100
            ),
            &secret(),
        );
        assert!(
            verify_at(
                &list_aud,
                &secret(),
                AUDIENCE_SERVER,
                at(T0),
                DEFAULT_LEEWAY
            )
            .is_ok()
        );
    }

    #[test]
    fn expiry_with_leeway() {
        let token = mint_at(
            &NewClaims::bridge(),
            &secret(),
            Duration::from_secs(100),
            at(T0),
        )
        .unwrap();
        let check = |now: u64, leeway: u64| {
            verify_at(
                &token,
                &secret(),
                AUDIENCE_SERVER,
                at(now),
                Duration::from_secs(leeway),
            )
        };
        assert!(check(T0 + 99, 0).is_ok());
        assert_eq!(check(T0 + 100, 0), Err(AuthError::Jwt(JwtError::Expired)));
        assert!(check(T0 + 120, 30).is_ok());
        assert_eq!(check(T0 + 130, 30), Err(AuthError::Jwt(JwtError::Expired)));
    }

    #[test]
    fn missing_exp_and_future_nbf_rejected() {
        let no_exp = forge(HEADER_JSON, r#"{"aud":"turnstone-server"}"#, &secret());
        assert_eq!(
            verify_at(&no_exp, &secret(), AUDIENCE_SERVER, at(T0), DEFAULT_LEEWAY),
            Err(AuthError::Jwt(JwtError::MissingClaim("exp")))
        );
        let nbf = forge(
            HEADER_JSON,
            &format!(
                r#"{{"aud":"turnstone-server","exp":{},"nbf":{}}}"#,
                T0 + 1000,
                T0 + 500
            ),
            &secret(),
        );
        assert_eq!(
            verify_at(&nbf, &secret(), AUDIENCE_SERVER, at(T0), DEFAULT_LEEWAY),
            Err(AuthError::Jwt(JwtError::NotYetValid))
        );
        assert!(
            verify_at(
                &nbf,
                &secret(),
                AUDIENCE_SERVER,
                at(T0 + 600),
                DEFAULT_LEEWAY
            )
            .is_ok()
        );
    }

    #[test]
    fn bad_signature_and_tampering_rejected() {
        let token = mint_at(
            &NewClaims::console_collector(),
            &secret(),
            DEFAULT_TOKEN_TTL,
            at(T0),
        )
        .unwrap();
        let other = JwtSecret::new("another-secret-another-secret-another");
        assert_eq!(
            verify_at(&token, &other, AUDIENCE_SERVER, at(T0), DEFAULT_LEEWAY),
            Err(AuthError::Jwt(JwtError::BadSignature))
        );

        // Swap in a payload claiming more scopes, keep the old signature.
        let mut parts: Vec<String> = token.split('.').map(str::to_string).collect();
        let mut p = payload_of(&token);
        p["scopes"] = Value::from("approve,read,write");
        parts[1] = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&p).unwrap());
        let tampered = parts.join(".");
        assert_eq!(
            verify_at(
                &tampered,
                &secret(),
                AUDIENCE_SERVER,
                at(T0),
                DEFAULT_LEEWAY
            ),
            Err(AuthError::Jwt(JwtError::BadSignature))
        );

        // Truncated signature.
        let short = &token[..token.len() - 4];
        assert!(verify_at(short, &secret(), AUDIENCE_SERVER, at(T0), DEFAULT_LEEWAY).is_err());
    }

    #[test]
    fn alg_none_and_other_algs_rejected() {
        let payload = format!(
            r#"{{"sub":"x","scopes":"approve","aud":"turnstone-server","exp":{}}}"#,
            T0 + 100
        );
        let unsigned = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#),
            URL_SAFE_NO_PAD.encode(&payload)
        );
        assert_eq!(
            verify_at(
                &unsigned,
                &secret(),
                AUDIENCE_SERVER,
                at(T0),
                DEFAULT_LEEWAY
            ),
            Err(AuthError::Jwt(JwtError::UnsupportedAlgorithm(
                "none".into()
            )))
        );
        // Even correctly HMAC-signed, a header naming another algorithm is refused.
        let hs512 = forge(r#"{"alg":"HS512","typ":"JWT"}"#, &payload, &secret());
        assert_eq!(
            verify_at(&hs512, &secret(), AUDIENCE_SERVER, at(T0), DEFAULT_LEEWAY),
            Err(AuthError::Jwt(JwtError::UnsupportedAlgorithm(
                "HS512".into()
            )))
        );
        let no_alg = forge(r#"{"typ":"JWT"}"#, &payload, &secret());
        assert_eq!(
            verify_at(&no_alg, &secret(), AUDIENCE_SERVER, at(T0), DEFAULT_LEEWAY),
            Err(AuthError::Jwt(JwtError::Malformed))
        );
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        for token in [
            "",
            ".",
            "..",
            "a.b.c",
            "a.b.c.d",
            "x.y",
            "e30.e30.",
            "🦀.🦀.🦀",
        ] {
            assert!(
                verify_at(token, &secret(), AUDIENCE_SERVER, at(T0), DEFAULT_LEEWAY).is_err(),
                "{token:?}"
            );
        }
        let huge = "a".repeat(MAX_TOKEN_LEN + 1);
        assert_eq!(
            verify_at(&huge, &secret(), AUDIENCE_SERVER, at(T0), DEFAULT_LEEWAY),
            Err(AuthError::Jwt(JwtError::Malformed))
        );
    }

    #[test]
    fn pyjwt_style_token_verifies() {
        // Claims shaped as the original writes them, float exp and a padded segment too.
        let token = forge(
            r#"{"alg":"HS256","typ":"JWT"}"#,
            &format!(
                r#"{{"sub":"","scopes":"approve","src":"config","iss":"turnstone","iat":{T0},"exp":{}.5,"aud":"turnstone-server"}}"#,
                T0 + 10
            ),
            &secret(),
        );
        let claims = verify_at(&token, &secret(), AUDIENCE_SERVER, at(T0), Duration::ZERO).unwrap();
        assert_eq!(claims.exp, i64::try_from(T0 + 10).unwrap());
        assert!(claims.scopes.has(Scope::Read));
        assert_eq!(claims.src, "config");
    }

    /// Minted by PyJWT 2.15.1 (`jwt.encode(claims, secret, algorithm="HS256")`) with the claims
    /// the original writes for an OIDC login.
    const PYJWT_VECTOR: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1NDIiLCJzY29wZXMiOiJhcHByb3ZlLHJlYWQsd3JpdGUiLCJzcmMiOiJvaWRjIiwiaXNzIjoidHVybnN0b25lIiwiaWF0IjoxODAwMDAwMDAwLCJleHAiOjE4MDAwODY0MDAsImF1ZCI6InR1cm5zdG9uZS1zZXJ2ZXIiLCJwZXJtaXNzaW9ucyI6ImFkbWluLnVzZXJzLHJlYWQifQ.KORylm2l9MYHuTWDOqbIgi8B2AheQ4kruwUoWwtbLRo";

    #[test]
    fn interoperates_with_pyjwt() {
        let claims = verify_at(
            PYJWT_VECTOR,
            &secret(),
            AUDIENCE_SERVER,
            at(T0 + 3600),
            Duration::ZERO,
        )
        .unwrap();
        assert_eq!(claims.sub, "u42");
        assert_eq!(claims.scopes, Scopes::full());
        assert_eq!(claims.src, "oidc");
        assert_eq!(claims.permissions.to_string(), "admin.users,read");
        // Our encoder produces the very same bytes for the same claims.
        let ours = NewClaims::new("u42", Scopes::full(), "oidc", AUDIENCE_SERVER)
            .with_permissions(Permissions::parse("read,admin.users"));
        assert_eq!(
            mint_at(&ours, &secret(), DEFAULT_TOKEN_TTL, at(T0)).unwrap(),
            PYJWT_VECTOR
        );
    }

    #[test]
    fn service_token_reuses_until_80_percent() {
        let st =
            ServiceToken::with_lifetime(NewClaims::bridge(), secret(), Duration::from_secs(100));
        let first = st.token_at(at(T0)).unwrap();
        assert_eq!(st.token_at(at(T0 + 79)).unwrap(), first);
        let second = st.token_at(at(T0 + 80)).unwrap();
        assert_ne!(second, first);
        assert_eq!(payload_of(&second)["iat"], T0 + 80);
        assert_eq!(st.token_at(at(T0 + 159)).unwrap(), second);
        // Clock moved backwards: re-mint rather than hand out a token from the future.
        assert_ne!(st.token_at(at(T0)).unwrap(), second);
        let header = st.authorization_header().unwrap();
        assert!(header.starts_with("Bearer "));
    }

    #[test]
    fn secrets_never_in_debug() {
        let s = secret();
        assert!(!format!("{s:?}").contains(s.expose()));
        let st = ServiceToken::new(NewClaims::bridge(), s.clone());
        let token = st.token().unwrap();
        let dbg = format!("{st:?}");
        assert!(!dbg.contains(s.expose()) && !dbg.contains(&token));
    }

    #[test]
    fn ephemeral_secret_is_random_and_strong() {
        let a = JwtSecret::generate_ephemeral().unwrap();
        let b = JwtSecret::generate_ephemeral().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.expose().len(), 64);
        assert!(!a.is_weak());
        assert!(JwtSecret::new("short").is_weak());
    }
}

//! Opaque tokens: config tokens (`[[auth.tokens]]`, `TURNSTONE_AUTH_TOKEN`) compared in constant
//! time, and `ts_` API tokens, which are stored only as their SHA-256 and looked up through
//! [`ApiTokenLookup`] (implemented by the store).

use std::fmt;
use std::time::SystemTime;

use aws_lc_rs::{constant_time, digest};
use serde::{Deserialize, Serialize};

use super::AuthError;
use super::scope::{Permissions, Scopes};

/// Prefix of API tokens (`ts_` + 64 hex).
pub const API_TOKEN_PREFIX: &str = "ts_";

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// The stored form of an API token: lowercase hex SHA-256 of the raw token (including `ts_`).
pub fn hash_api_token(raw: &str) -> String {
    hex(digest::digest(&digest::SHA256, raw.as_bytes()).as_ref())
}

/// `bytes` bytes from the system's secure random source as lowercase hex (`2 * bytes`
/// digits): the one generator of secrets (API tokens, a launched cluster's shared secret).
pub fn random_hex(bytes: usize) -> Result<String, AuthError> {
    let mut buf = vec![0u8; bytes];
    aws_lc_rs::rand::fill(&mut buf).map_err(|_| AuthError::Random)?;
    Ok(hex(&buf))
}

/// A fresh random API token, `ts_` + 64 hex. Store only [`hash_api_token`] of it.
pub fn generate_api_token() -> Result<String, AuthError> {
    Ok(format!("{API_TOKEN_PREFIX}{}", random_hex(32)?))
}

/// True if `token` has the API token shape (`ts_` + 64 lowercase or uppercase hex).
pub fn looks_like_api_token(token: &str) -> bool {
    token
        .strip_prefix(API_TOKEN_PREFIX)
        .is_some_and(|rest| rest.len() == 64 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Constant-time equality of two secrets. Both sides are hashed first, so neither the content
/// nor the length of the expected value leaks through timing.
pub fn secrets_equal(presented: &str, expected: &str) -> bool {
    let a = digest::digest(&digest::SHA256, presented.as_bytes());
    let b = digest::digest(&digest::SHA256, expected.as_bytes());
    constant_time::verify_slices_are_equal(a.as_ref(), b.as_ref()).is_ok()
}

/// Role of a config token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenRole {
    /// `{read}`.
    Read,
    /// `{read, write, approve}`.
    Full,
}

impl TokenRole {
    pub fn scopes(self) -> Scopes {
        match self {
            TokenRole::Read => Scopes::read_only(),
            TokenRole::Full => Scopes::full(),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TokenRole::Read => "read",
            TokenRole::Full => "full",
        }
    }

    /// `full` iff the scopes include `write` (how the login response names a role).
    pub fn for_scopes(scopes: &Scopes) -> Self {
        if scopes.has(super::scope::Scope::Write) {
            TokenRole::Full
        } else {
            TokenRole::Read
        }
    }
}

/// One `[[auth.tokens]]` entry. Its `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigToken {
    pub value: String,
    pub role: TokenRole,
}

impl ConfigToken {
    pub fn new(value: impl Into<String>, role: TokenRole) -> Self {
        Self {
            value: value.into(),
            role,
        }
    }
}

impl fmt::Debug for ConfigToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigToken")
            .field("value", &"<redacted>")
            .field("role", &self.role)
            .finish()
    }
}

/// The role of the config token equal to `presented`, if any. Every entry is compared (no
/// early exit) and each comparison is constant-time; empty entries never match.
pub fn match_config_token(presented: &str, tokens: &[ConfigToken]) -> Option<TokenRole> {
    let mut found = None;
    for token in tokens {
        let equal = secrets_equal(presented, &token.value);
        if equal && !token.value.is_empty() && found.is_none() {
            found = Some(token.role);
        }
    }
    found
}

/// What the store knows about an API token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiTokenRecord {
    /// The owning user.
    pub user_id: String,
    /// Scopes of the token row (expanded by the authenticator).
    pub scopes: Scopes,
    /// `None` = never expires.
    pub expires_at: Option<SystemTime>,
    /// Union of the owner's roles' permissions.
    pub permissions: Permissions,
    /// The owner's session generation (carried by JWTs minted from this token).
    pub generation: Option<i64>,
}

/// A lookup backend that failed (as opposed to a token that does not exist).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("API token lookup failed: {0}")]
pub struct ApiTokenLookupError(pub String);

/// Finds an API token by its hash ([`hash_api_token`]) and a user's session generation; the
/// store implements it.
#[async_trait::async_trait]
pub trait ApiTokenLookup: Send + Sync {
    /// `Ok(None)` if no row has this hash.
    async fn lookup_api_token(
        &self,
        token_hash: &str,
    ) -> Result<Option<ApiTokenRecord>, ApiTokenLookupError>;

    /// The current session generation of `user_id`; `Ok(None)` when the user does not exist
    /// (a JWT carrying a generation is then refused). The default knows no users.
    async fn session_generation(&self, _user_id: &str) -> Result<Option<i64>, ApiTokenLookupError> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_hex_of_the_raw_token() {
        // SHA-256("abc"), FIPS 180-2 test vector.
        assert_eq!(
            hash_api_token("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hash_api_token("ts_x").len(), 64);
    }

    #[test]
    fn generated_api_tokens_have_the_shape() {
        let t = generate_api_token().unwrap();
        assert!(looks_like_api_token(&t), "{t}");
        assert_ne!(t, generate_api_token().unwrap());
        assert!(!looks_like_api_token("ts_abc"));
        assert!(!looks_like_api_token(&format!("xx_{}", "a".repeat(64))));
    }

    #[test]
    fn config_token_roles() {
        let tokens = vec![
            ConfigToken::new("reader-token", TokenRole::Read),
            ConfigToken::new("admin-token", TokenRole::Full),
            ConfigToken::new("", TokenRole::Full),
        ];
        assert_eq!(
            match_config_token("reader-token", &tokens),
            Some(TokenRole::Read)
        );
        assert_eq!(
            match_config_token("admin-token", &tokens),
            Some(TokenRole::Full)
        );
        assert_eq!(match_config_token("admin-toke", &tokens), None);
        assert_eq!(match_config_token("", &tokens), None, "empty never matches");
        assert_eq!(TokenRole::Read.scopes().to_string(), "read");
        assert_eq!(TokenRole::Full.scopes().to_string(), "approve,read,write");
    }

    #[test]
    fn constant_time_compare() {
        assert!(secrets_equal("same", "same"));
        assert!(!secrets_equal("same", "Same"));
        assert!(!secrets_equal("same", "same-but-longer"));
    }

    #[test]
    fn role_parsing_is_strict() {
        let ok: ConfigToken =
            serde_json::from_str(r#"{"value":"sekrit-value","role":"read"}"#).unwrap();
        assert_eq!(ok.role, TokenRole::Read);
        assert!(serde_json::from_str::<ConfigToken>(r#"{"value":"v","role":"admin"}"#).is_err());
        assert!(!format!("{ok:?}").contains("sekrit"));
    }
}

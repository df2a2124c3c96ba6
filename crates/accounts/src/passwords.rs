//! Passwords: bcrypt hashing off the async runtime, and the check of a stored user's
//! password that yields their identity (permissions from their roles, scopes derived from
//! them, spec §3.4). Unknown users take as long as wrong passwords (a dummy hash is checked).

use std::sync::Arc;

use turnstone_runtime::auth::{CredentialKind, Identity, Permissions, Scopes, generate_api_token};
use turnstone_store::Store;

use crate::error::AccountsError;

/// bcrypt work factor of new password hashes (the Python original's default).
pub const BCRYPT_COST: u32 = 12;
/// Longest password accepted (bcrypt reads at most 72 bytes; longer ones are refused rather
/// than silently truncated).
pub const MAX_PASSWORD_BYTES: usize = 72;
/// Shortest password accepted, in characters.
pub const MIN_PASSWORD_CHARS: usize = 8;

/// Checks a new password's length; the error is the 400 message.
pub fn validate_password(password: &str) -> Result<(), AccountsError> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(AccountsError::BadRequest(format!(
            "Password must be at least {MIN_PASSWORD_CHARS} characters"
        )));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(AccountsError::BadRequest(format!(
            "Password must be at most {MAX_PASSWORD_BYTES} bytes"
        )));
    }
    Ok(())
}

/// Hashes a password off the async runtime (bcrypt is deliberately slow).
pub async fn hash_password(password: String) -> Result<String, AccountsError> {
    tokio::task::spawn_blocking(move || bcrypt::hash(password, BCRYPT_COST))
        .await
        .map_err(|e| AccountsError::Internal(format!("password hashing failed: {e}")))?
        .map_err(|e| AccountsError::Internal(format!("password hashing failed: {e}")))
}

/// A bcrypt hash of a random secret nobody knows, verified when the username does not
/// exist so that both failures take as long. Made once, on first use.
fn dummy_hash() -> String {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY
        .get_or_init(|| {
            let secret = generate_api_token().unwrap_or_else(|_| "unguessable".into());
            bcrypt::hash(secret, BCRYPT_COST).unwrap_or_default()
        })
        .clone()
}

/// The identity of `username` if `password` is theirs. Unknown users, SSO-only users (the
/// `!oidc` hash sentinel) and wrong passwords are all `None`.
pub async fn password_identity(
    store: &Arc<dyn Store>,
    username: &str,
    password: &str,
) -> Result<Option<Identity>, AccountsError> {
    let creds = store
        .user_credentials(username)
        .await
        .map_err(|e| AccountsError::Internal(format!("user lookup failed: {e}")))?;
    let stored = creds
        .as_ref()
        .map(|c| c.password_hash.clone())
        .filter(|h| h.starts_with("$2"));
    let password = password.to_string();
    let matches = tokio::task::spawn_blocking(move || {
        let hash = stored.unwrap_or_else(dummy_hash);
        bcrypt::verify(password, &hash)
    })
    .await
    .ok()
    .and_then(Result::ok)
    .unwrap_or(false);
    match creds {
        Some(c) if matches && c.password_hash.starts_with("$2") => {
            identity_of_user(store, &c.user.user_id).await.map(Some)
        }
        _ => Ok(None),
    }
}

/// A password identity for a stored user: permissions from their roles, scopes derived from
/// them (spec §3.4).
pub async fn identity_of_user(
    store: &Arc<dyn Store>,
    user_id: &str,
) -> Result<Identity, AccountsError> {
    let permissions = store
        .user_permissions(user_id)
        .await
        .map_err(|e| AccountsError::Internal(format!("role lookup failed: {e}")))?;
    let generation = store
        .session_generation(user_id)
        .await
        .map_err(|e| AccountsError::Internal(format!("session lookup failed: {e}")))?;
    Ok(Identity {
        user_id: user_id.to_string(),
        scopes: Scopes::from_permissions(permissions.iter().map(String::as_str)),
        source: "password".to_string(),
        permissions: Permissions::parse(&permissions.join(",")),
        kind: CredentialKind::Password,
        generation,
        expires_at: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dummy_hash_is_a_valid_bcrypt_hash() {
        assert!(matches!(
            bcrypt::verify("anything", &dummy_hash()),
            Ok(false)
        ));
    }

    #[test]
    fn passwords_are_checked_for_length() {
        assert!(validate_password("correct horse").is_ok());
        assert!(
            matches!(validate_password("short"), Err(AccountsError::BadRequest(m)) if m.contains("at least 8"))
        );
        assert!(validate_password(&"x".repeat(73)).is_err());
    }
}

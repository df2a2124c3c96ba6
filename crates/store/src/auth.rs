//! Users, roles and API tokens (spec §6.1 `users`, `roles`, `user_roles`, `api_tokens`).
//!
//! The store keeps hashes only: password hashes (bcrypt, made by the caller) and SHA-256 hex
//! of API tokens (made by `turnstone-runtime`'s `hash_api_token`). A raw token or password
//! never reaches this module. The three built-in roles are seeded by the migration.

use async_trait::async_trait;

use crate::error::Result;

/// The built-in role with every permission (given to the first user by setup).
pub const ROLE_ADMIN: &str = "builtin-admin";
/// The built-in role of people who run workstreams.
pub const ROLE_OPERATOR: &str = "builtin-operator";
/// The built-in read-only role.
pub const ROLE_VIEWER: &str = "builtin-viewer";

/// A user row (without its password hash).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct User {
    pub user_id: String,
    pub username: String,
    pub display_name: String,
    pub org_id: String,
    pub created: String,
}

/// A user with the stored password hash, for password login only.
#[derive(Clone, PartialEq, Eq)]
pub struct UserCredentials {
    pub user: User,
    pub password_hash: String,
}

impl std::fmt::Debug for UserCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserCredentials")
            .field("user", &self.user)
            .field("password_hash", &"<redacted>")
            .finish()
    }
}

/// A user to create.
#[derive(Clone)]
pub struct NewUser {
    pub username: String,
    pub display_name: String,
    /// bcrypt hash (the caller hashes).
    pub password_hash: String,
    /// Role ids to assign (e.g. [`ROLE_ADMIN`]); unknown ids are an error.
    pub roles: Vec<String>,
}

/// An API token row (the hash is never returned).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ApiToken {
    pub token_id: String,
    /// The first 8 characters of the raw token, to recognise it in lists.
    pub token_prefix: String,
    pub user_id: String,
    pub name: String,
    /// Comma list (`read`, `write`, `approve`).
    pub scopes: String,
    pub created: String,
    /// ISO-8601; `None` = never expires.
    pub expires: Option<String>,
}

/// A token to store.
#[derive(Clone)]
pub struct NewApiToken {
    /// SHA-256 hex of the raw token.
    pub token_hash: String,
    pub token_prefix: String,
    pub user_id: String,
    pub name: String,
    pub scopes: String,
    pub expires: Option<String>,
}

/// Users, roles and API tokens.
#[async_trait]
pub trait AuthStore: Send + Sync {
    /// How many users exist (setup is required while there are none).
    async fn count_users(&self) -> Result<i64>;
    /// Creates a user with its roles. A taken username is [`crate::StoreError::InvalidInput`].
    async fn create_user(&self, user: NewUser) -> Result<User>;
    /// Creates the user only if no user exists yet (one-time setup); `None` when one does.
    async fn create_first_user(&self, user: NewUser) -> Result<Option<User>>;
    /// The user and password hash for a username.
    async fn user_credentials(&self, username: &str) -> Result<Option<UserCredentials>>;
    async fn get_user(&self, user_id: &str) -> Result<Option<User>>;
    async fn list_users(&self) -> Result<Vec<User>>;
    /// Deletes a user with its role assignments and API tokens.
    async fn delete_user(&self, user_id: &str) -> Result<bool>;
    /// The union of the user's roles' permissions, sorted and deduplicated.
    async fn user_permissions(&self, user_id: &str) -> Result<Vec<String>>;
    /// The user's session generation (the `gen` claim of the JWTs minted for them); `None`
    /// when the user does not exist.
    async fn session_generation(&self, user_id: &str) -> Result<Option<i64>>;
    /// Ends every session of the user (their JWTs carry an older generation from now on);
    /// the new generation, `None` when the user does not exist.
    async fn bump_session_generation(&self, user_id: &str) -> Result<Option<i64>>;
    async fn create_api_token(&self, token: NewApiToken) -> Result<ApiToken>;
    /// The token whose hash this is (expired ones too: the caller judges `expires`).
    async fn api_token_by_hash(&self, token_hash: &str) -> Result<Option<ApiToken>>;
    /// Tokens of one user, or of everyone; newest first.
    async fn list_api_tokens(&self, user_id: Option<&str>) -> Result<Vec<ApiToken>>;
    /// Deletes the token and ends the sessions of its owner (JWTs minted from it included).
    async fn delete_api_token(&self, token_id: &str) -> Result<bool>;
}

pub(crate) fn validate_new_user(user: &NewUser) -> Result<()> {
    use crate::error::StoreError;
    if user.username.trim().is_empty() {
        return Err(StoreError::InvalidInput("username is empty".into()));
    }
    if user.password_hash.is_empty() {
        return Err(StoreError::InvalidInput("password hash is empty".into()));
    }
    Ok(())
}

/// Merges comma lists of permissions into one sorted, deduplicated list.
pub(crate) fn merge_permissions(lists: &[String]) -> Vec<String> {
    let set: std::collections::BTreeSet<String> = lists
        .iter()
        .flat_map(|l| l.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    set.into_iter().collect()
}

/// Ends every session of the user `$1` (their JWTs carry an older generation from now on).
pub(crate) const BUMP_GENERATION: &str =
    "UPDATE users SET session_generation = session_generation + 1 WHERE user_id = $1";

macro_rules! user_columns {
    () => {
        "user_id, username, display_name, org_id, created"
    };
}
macro_rules! token_columns {
    () => {
        "token_id, token_prefix, user_id, name, scopes, created, expires"
    };
}
pub(crate) use {token_columns, user_columns};

/// [`AuthStore`] for a backend type with a `pool` field; the SQL is the same for both.
macro_rules! impl_auth_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn user_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::auth::User> {
                use sqlx::Row as _;
                Ok($crate::auth::User {
                    user_id: row.try_get("user_id")?,
                    username: row.try_get("username")?,
                    display_name: row.try_get("display_name")?,
                    org_id: row.try_get("org_id")?,
                    created: row.try_get("created")?,
                })
            }

            fn token_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::auth::ApiToken> {
                use sqlx::Row as _;
                Ok($crate::auth::ApiToken {
                    token_id: row.try_get("token_id")?,
                    token_prefix: row.try_get("token_prefix")?,
                    user_id: row.try_get("user_id")?,
                    name: row.try_get("name")?,
                    scopes: row.try_get("scopes")?,
                    created: row.try_get("created")?,
                    expires: row.try_get("expires")?,
                })
            }

            /// Gives `user_id` the role inside `tx`; an unknown role is
            /// [`crate::StoreError::InvalidInput`].
            async fn assign_role(
                tx: &mut sqlx::Transaction<'_, $db>,
                user_id: &str,
                role: &str,
                assigned_by: &str,
                created: &str,
            ) -> $crate::error::Result<()> {
                let known: Option<String> =
                    sqlx::query_scalar("SELECT role_id FROM roles WHERE role_id = $1")
                        .bind(role)
                        .fetch_optional(&mut **tx)
                        .await?;
                if known.is_none() {
                    return Err($crate::error::StoreError::InvalidInput(format!(
                        "unknown role {role:?}"
                    )));
                }
                sqlx::query(
                    "INSERT INTO user_roles (user_id, role_id, assigned_by, created) \
                     VALUES ($1, $2, $3, $4)",
                )
                .bind(user_id)
                .bind(role)
                .bind(assigned_by)
                .bind(created)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            /// Inserts the user (only when `first_only` holds: no user exists) and its roles
            /// in one transaction.
            async fn insert_user(
                &self,
                user: $crate::auth::NewUser,
                first_only: bool,
            ) -> $crate::error::Result<Option<$crate::auth::User>> {
                use $crate::error::StoreError;
                $crate::auth::validate_new_user(&user)?;
                let record = $crate::auth::User {
                    user_id: $crate::ids::new_ws_id(),
                    username: user.username.trim().to_string(),
                    display_name: user.display_name.trim().to_string(),
                    org_id: String::new(),
                    created: $crate::timestamp::now(),
                };
                let mut tx = self.pool.begin().await?;
                const INSERT: &str = "INSERT INTO users \
                     (user_id, username, display_name, password_hash, org_id, created) \
                     SELECT $1, $2, $3, $4, $5, $6";
                const INSERT_FIRST: &str = "INSERT INTO users \
                     (user_id, username, display_name, password_hash, org_id, created) \
                     SELECT $1, $2, $3, $4, $5, $6 WHERE NOT EXISTS (SELECT 1 FROM users)";
                let inserted = sqlx::query(if first_only { INSERT_FIRST } else { INSERT })
                    .bind(&record.user_id)
                    .bind(&record.username)
                    .bind(&record.display_name)
                    .bind(&user.password_hash)
                    .bind(&record.org_id)
                    .bind(&record.created)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::from)
                    .map_err(|e| {
                        if e.is_unique_violation() {
                            StoreError::InvalidInput(format!(
                                "username {:?} is taken",
                                record.username
                            ))
                        } else {
                            e
                        }
                    })?;
                if inserted.rows_affected() == 0 {
                    return Ok(None);
                }
                for role in &user.roles {
                    Self::assign_role(&mut tx, &record.user_id, role, "", &record.created).await?;
                }
                tx.commit().await?;
                Ok(Some(record))
            }
        }

        #[async_trait::async_trait]
        impl $crate::auth::AuthStore for $store {
            async fn count_users(&self) -> $crate::error::Result<i64> {
                Ok(sqlx::query_scalar("SELECT COUNT(*) FROM users")
                    .fetch_one(&self.pool)
                    .await?)
            }

            async fn create_user(
                &self,
                user: $crate::auth::NewUser,
            ) -> $crate::error::Result<$crate::auth::User> {
                self.insert_user(user, false).await?.ok_or_else(|| {
                    $crate::error::StoreError::Corrupt("user insert affected no row".into())
                })
            }

            async fn create_first_user(
                &self,
                user: $crate::auth::NewUser,
            ) -> $crate::error::Result<Option<$crate::auth::User>> {
                self.insert_user(user, true).await
            }

            async fn user_credentials(
                &self,
                username: &str,
            ) -> $crate::error::Result<Option<$crate::auth::UserCredentials>> {
                use sqlx::Row as _;
                const SQL: &str = concat!(
                    "SELECT password_hash, ",
                    $crate::auth::user_columns!(),
                    " FROM users WHERE username = $1"
                );
                let row = sqlx::query(SQL)
                    .bind(username.trim())
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(|r| {
                    Ok($crate::auth::UserCredentials {
                        password_hash: r.try_get("password_hash")?,
                        user: Self::user_from_row(&r)?,
                    })
                })
                .transpose()
            }

            async fn get_user(
                &self,
                user_id: &str,
            ) -> $crate::error::Result<Option<$crate::auth::User>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::auth::user_columns!(),
                    " FROM users WHERE user_id = $1"
                );
                let row = sqlx::query(SQL)
                    .bind(user_id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::user_from_row).transpose()
            }

            async fn list_users(&self) -> $crate::error::Result<Vec<$crate::auth::User>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::auth::user_columns!(),
                    " FROM users ORDER BY username"
                );
                let rows = sqlx::query(SQL).fetch_all(&self.pool).await?;
                rows.iter().map(Self::user_from_row).collect()
            }

            async fn delete_user(&self, user_id: &str) -> $crate::error::Result<bool> {
                let mut tx = self.pool.begin().await?;
                for sql in [
                    "DELETE FROM api_tokens WHERE user_id = $1",
                    "DELETE FROM user_roles WHERE user_id = $1",
                ] {
                    sqlx::query(sql).bind(user_id).execute(&mut *tx).await?;
                }
                let deleted = sqlx::query("DELETE FROM users WHERE user_id = $1")
                    .bind(user_id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(deleted.rows_affected() > 0)
            }

            async fn user_permissions(&self, user_id: &str) -> $crate::error::Result<Vec<String>> {
                let lists: Vec<String> = sqlx::query_scalar(
                    "SELECT r.permissions FROM user_roles ur \
                     JOIN roles r ON r.role_id = ur.role_id WHERE ur.user_id = $1",
                )
                .bind(user_id)
                .fetch_all(&self.pool)
                .await?;
                Ok($crate::auth::merge_permissions(&lists))
            }

            async fn session_generation(
                &self,
                user_id: &str,
            ) -> $crate::error::Result<Option<i64>> {
                Ok(sqlx::query_scalar(
                    "SELECT session_generation FROM users WHERE user_id = $1",
                )
                .bind(user_id)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn bump_session_generation(
                &self,
                user_id: &str,
            ) -> $crate::error::Result<Option<i64>> {
                Ok(sqlx::query_scalar(
                    "UPDATE users SET session_generation = session_generation + 1 \
                     WHERE user_id = $1 RETURNING session_generation",
                )
                .bind(user_id)
                .fetch_optional(&self.pool)
                .await?)
            }

            async fn create_api_token(
                &self,
                token: $crate::auth::NewApiToken,
            ) -> $crate::error::Result<$crate::auth::ApiToken> {
                use $crate::error::StoreError;
                if token.token_hash.len() != 64 {
                    return Err(StoreError::InvalidInput(
                        "token hash must be 64 hex digits".into(),
                    ));
                }
                if self.get_user(&token.user_id).await?.is_none() {
                    return Err(StoreError::NotFound(format!("user {}", token.user_id)));
                }
                let record = $crate::auth::ApiToken {
                    token_id: $crate::ids::new_uuid(),
                    token_prefix: token.token_prefix,
                    user_id: token.user_id,
                    name: token.name,
                    scopes: token.scopes,
                    created: $crate::timestamp::now(),
                    expires: token.expires,
                };
                sqlx::query(
                    "INSERT INTO api_tokens (token_id, token_hash, token_prefix, user_id, name, \
                     scopes, created, expires) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                )
                .bind(&record.token_id)
                .bind(&token.token_hash)
                .bind(&record.token_prefix)
                .bind(&record.user_id)
                .bind(&record.name)
                .bind(&record.scopes)
                .bind(&record.created)
                .bind(&record.expires)
                .execute(&self.pool)
                .await?;
                Ok(record)
            }

            async fn api_token_by_hash(
                &self,
                token_hash: &str,
            ) -> $crate::error::Result<Option<$crate::auth::ApiToken>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::auth::token_columns!(),
                    " FROM api_tokens WHERE token_hash = $1"
                );
                let row = sqlx::query(SQL)
                    .bind(token_hash)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::token_from_row).transpose()
            }

            async fn list_api_tokens(
                &self,
                user_id: Option<&str>,
            ) -> $crate::error::Result<Vec<$crate::auth::ApiToken>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::auth::token_columns!(),
                    " FROM api_tokens WHERE ($1 = '' OR user_id = $1) ORDER BY created DESC, token_id"
                );
                let rows = sqlx::query(SQL)
                    .bind(user_id.unwrap_or_default())
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::token_from_row).collect()
            }

            async fn delete_api_token(&self, token_id: &str) -> $crate::error::Result<bool> {
                let mut tx = self.pool.begin().await?;
                sqlx::query(
                    "UPDATE users SET session_generation = session_generation + 1 \
                     WHERE user_id = (SELECT user_id FROM api_tokens WHERE token_id = $1)",
                )
                .bind(token_id)
                .execute(&mut *tx)
                .await?;
                let done = sqlx::query("DELETE FROM api_tokens WHERE token_id = $1")
                    .bind(token_id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(done.rows_affected() > 0)
            }
        }
    };
}
pub(crate) use impl_auth_store;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_merge_sorted_and_unique() {
        let lists = vec!["write,read".to_string(), "read, approve,".to_string()];
        assert_eq!(merge_permissions(&lists), ["approve", "read", "write"]);
        assert!(merge_permissions(&[]).is_empty());
    }
}

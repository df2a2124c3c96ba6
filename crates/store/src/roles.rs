//! Roles and who holds them (spec §6.1 `roles`, `user_roles`), and changes to a user
//! ([`RoleStore`]).
//!
//! The three built-in roles (seeded by migration 0004) cannot be changed or deleted; custom
//! roles carry any comma list of permissions (the caller checks the vocabulary). Deleting a
//! role takes it from every user. Assigning roles replaces a user's set in one transaction;
//! an unknown role id is [`crate::StoreError::InvalidInput`] and changes nothing. The SQL is
//! written once, in `impl_role_store!`, for both backends.

use async_trait::async_trait;

use crate::auth::User;
use crate::error::Result;

/// A role row.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Role {
    pub role_id: String,
    pub name: String,
    pub display_name: String,
    /// Comma list, as stored.
    pub permissions: String,
    pub builtin: bool,
    pub org_id: String,
    pub created: String,
    pub updated: String,
}

/// A role to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRole {
    pub name: String,
    pub display_name: String,
    pub permissions: String,
}

/// Changes to a role; `None` leaves a column as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleUpdate {
    pub display_name: Option<String>,
    pub permissions: Option<String>,
}

/// Changes to a user; `None` leaves a column as it is.
#[derive(Clone, Default)]
pub struct UserUpdate {
    pub display_name: Option<String>,
    /// A new bcrypt hash (the caller hashes); setting one ends the user's sessions.
    pub password_hash: Option<String>,
}

impl std::fmt::Debug for UserUpdate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserUpdate")
            .field("display_name", &self.display_name)
            .field(
                "password_hash",
                &self.password_hash.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Roles, role assignments and user changes.
#[async_trait]
pub trait RoleStore: Send + Sync {
    /// Every role, built-in ones first, then by name.
    async fn list_roles(&self) -> Result<Vec<Role>>;
    async fn get_role(&self, role_id: &str) -> Result<Option<Role>>;
    /// A taken name is [`crate::StoreError::InvalidInput`].
    async fn create_role(&self, new: NewRole) -> Result<Role>;
    /// `None` when there is no such role; a built-in role is
    /// [`crate::StoreError::InvalidInput`].
    async fn update_role(&self, role_id: &str, update: RoleUpdate) -> Result<Option<Role>>;
    /// Deletes a custom role and its assignments; a built-in role is
    /// [`crate::StoreError::InvalidInput`].
    async fn delete_role(&self, role_id: &str) -> Result<bool>;
    /// The role ids a user holds, sorted.
    async fn user_role_ids(&self, user_id: &str) -> Result<Vec<String>>;
    /// Replaces the user's roles; `false` when the user does not exist. Ends the user's
    /// sessions (their JWTs carry the old permissions).
    async fn set_user_roles(
        &self,
        user_id: &str,
        roles: &[String],
        assigned_by: &str,
    ) -> Result<bool>;
    /// `None` when the user does not exist.
    async fn update_user(&self, user_id: &str, update: UserUpdate) -> Result<Option<User>>;
}

pub(crate) fn validate_role_fields(
    name: Option<&str>,
    display_name: Option<&str>,
    permissions: Option<&str>,
) -> Result<()> {
    use crate::error::StoreError;
    if name.is_some_and(|n| n.trim().is_empty()) {
        return Err(StoreError::InvalidInput("role name is empty".into()));
    }
    if display_name.is_some_and(|n| n.trim().is_empty()) {
        return Err(StoreError::InvalidInput(
            "role display_name is empty".into(),
        ));
    }
    if permissions.is_some_and(|p| p.split(',').all(|x| x.trim().is_empty())) {
        return Err(StoreError::InvalidInput(
            "role permissions are empty".into(),
        ));
    }
    Ok(())
}

/// A comma list written back trimmed, sorted and without repeats.
pub(crate) fn normal_permissions(list: &str) -> String {
    crate::auth::merge_permissions(&[list.to_string()]).join(",")
}

macro_rules! role_columns {
    () => {
        "role_id, name, display_name, permissions, builtin, org_id, created, updated"
    };
}
pub(crate) use role_columns;

/// Implements [`RoleStore`] for a backend type with a `pool` field.
macro_rules! impl_role_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn role_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::roles::Role> {
                use sqlx::Row as _;
                let builtin: i64 = row.try_get("builtin")?;
                Ok($crate::roles::Role {
                    role_id: row.try_get("role_id")?,
                    name: row.try_get("name")?,
                    display_name: row.try_get("display_name")?,
                    permissions: row.try_get("permissions")?,
                    builtin: builtin != 0,
                    org_id: row.try_get("org_id")?,
                    created: row.try_get("created")?,
                    updated: row.try_get("updated")?,
                })
            }

            async fn refuse_builtin(&self, role_id: &str) -> $crate::error::Result<bool> {
                let builtin: Option<i64> =
                    sqlx::query_scalar("SELECT builtin FROM roles WHERE role_id = $1")
                        .bind(role_id)
                        .fetch_optional(&self.pool)
                        .await?;
                match builtin {
                    Some(b) if b != 0 => Err($crate::error::StoreError::InvalidInput(format!(
                        "role {role_id:?} is built in and cannot be changed"
                    ))),
                    Some(_) => Ok(true),
                    None => Ok(false),
                }
            }
        }

        #[async_trait::async_trait]
        impl $crate::roles::RoleStore for $store {
            async fn list_roles(&self) -> $crate::error::Result<Vec<$crate::roles::Role>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::roles::role_columns!(),
                    " FROM roles ORDER BY builtin DESC, name"
                );
                let rows = sqlx::query(SQL).fetch_all(&self.pool).await?;
                rows.iter().map(Self::role_from_row).collect()
            }

            async fn get_role(
                &self,
                role_id: &str,
            ) -> $crate::error::Result<Option<$crate::roles::Role>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::roles::role_columns!(),
                    " FROM roles WHERE role_id = $1"
                );
                let row = sqlx::query(SQL).bind(role_id).fetch_optional(&self.pool).await?;
                row.as_ref().map(Self::role_from_row).transpose()
            }

            async fn create_role(
                &self,
                new: $crate::roles::NewRole,
            ) -> $crate::error::Result<$crate::roles::Role> {
                use $crate::error::StoreError;
                $crate::roles::validate_role_fields(
                    Some(&new.name),
                    Some(&new.display_name),
                    Some(&new.permissions),
                )?;
                let now = $crate::timestamp::now();
                const SQL: &str = concat!(
                    "INSERT INTO roles (role_id, name, display_name, permissions, builtin, \
                     org_id, created, updated) VALUES ($1, $2, $3, $4, 0, '', $5, $5) RETURNING ",
                    $crate::roles::role_columns!()
                );
                let name = new.name.trim().to_string();
                let result = sqlx::query(SQL)
                    .bind($crate::ids::new_ws_id())
                    .bind(&name)
                    .bind(new.display_name.trim())
                    .bind($crate::roles::normal_permissions(&new.permissions))
                    .bind(&now)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(StoreError::from);
                match result {
                    Ok(row) => Self::role_from_row(&row),
                    Err(e) if e.is_unique_violation() => Err(StoreError::InvalidInput(format!(
                        "role name {name:?} is taken"
                    ))),
                    Err(e) => Err(e),
                }
            }

            async fn update_role(
                &self,
                role_id: &str,
                update: $crate::roles::RoleUpdate,
            ) -> $crate::error::Result<Option<$crate::roles::Role>> {
                $crate::roles::validate_role_fields(
                    None,
                    update.display_name.as_deref(),
                    update.permissions.as_deref(),
                )?;
                if !self.refuse_builtin(role_id).await? {
                    return Ok(None);
                }
                const SQL: &str = concat!(
                    "UPDATE roles SET display_name = COALESCE($2, display_name), \
                     permissions = COALESCE($3, permissions), updated = $4 \
                     WHERE role_id = $1 AND builtin = 0 RETURNING ",
                    $crate::roles::role_columns!()
                );
                let row = sqlx::query(SQL)
                    .bind(role_id)
                    .bind(update.display_name.as_deref().map(str::trim))
                    .bind(update.permissions.as_deref().map($crate::roles::normal_permissions))
                    .bind($crate::timestamp::now())
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::role_from_row).transpose()
            }

            async fn delete_role(&self, role_id: &str) -> $crate::error::Result<bool> {
                if !self.refuse_builtin(role_id).await? {
                    return Ok(false);
                }
                let mut tx = self.pool.begin().await?;
                sqlx::query(
                    "UPDATE users SET session_generation = session_generation + 1 \
                     WHERE user_id IN (SELECT user_id FROM user_roles WHERE role_id = $1)",
                )
                .bind(role_id)
                .execute(&mut *tx)
                .await?;
                sqlx::query("DELETE FROM user_roles WHERE role_id = $1")
                    .bind(role_id)
                    .execute(&mut *tx)
                    .await?;
                let done = sqlx::query("DELETE FROM roles WHERE role_id = $1 AND builtin = 0")
                    .bind(role_id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(done.rows_affected() > 0)
            }

            async fn user_role_ids(&self, user_id: &str) -> $crate::error::Result<Vec<String>> {
                Ok(sqlx::query_scalar(
                    "SELECT role_id FROM user_roles WHERE user_id = $1 ORDER BY role_id",
                )
                .bind(user_id)
                .fetch_all(&self.pool)
                .await?)
            }

            async fn set_user_roles(
                &self,
                user_id: &str,
                roles: &[String],
                assigned_by: &str,
            ) -> $crate::error::Result<bool> {
                let mut tx = self.pool.begin().await?;
                let bumped = sqlx::query($crate::auth::BUMP_GENERATION)
                    .bind(user_id)
                    .execute(&mut *tx)
                    .await?;
                if bumped.rows_affected() == 0 {
                    return Ok(false);
                }
                sqlx::query("DELETE FROM user_roles WHERE user_id = $1")
                    .bind(user_id)
                    .execute(&mut *tx)
                    .await?;
                let now = $crate::timestamp::now();
                let mut seen = std::collections::BTreeSet::new();
                for role in roles.iter().map(|r| r.trim()) {
                    if seen.insert(role) {
                        Self::assign_role(&mut tx, user_id, role, assigned_by, &now).await?;
                    }
                }
                tx.commit().await?;
                Ok(true)
            }

            async fn update_user(
                &self,
                user_id: &str,
                update: $crate::roles::UserUpdate,
            ) -> $crate::error::Result<Option<$crate::auth::User>> {
                use $crate::error::StoreError;
                if update.display_name.as_deref().is_some_and(|d| d.trim().is_empty()) {
                    return Err(StoreError::InvalidInput("display_name is empty".into()));
                }
                if update.password_hash.as_deref().is_some_and(str::is_empty) {
                    return Err(StoreError::InvalidInput("password hash is empty".into()));
                }
                let mut tx = self.pool.begin().await?;
                let done = sqlx::query(
                    "UPDATE users SET display_name = COALESCE($2, display_name), \
                     password_hash = COALESCE($3, password_hash) WHERE user_id = $1",
                )
                .bind(user_id)
                .bind(update.display_name.as_deref().map(str::trim))
                .bind(update.password_hash.as_deref())
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() == 0 {
                    return Ok(None);
                }
                if update.password_hash.is_some() {
                    sqlx::query($crate::auth::BUMP_GENERATION)
                        .bind(user_id)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                $crate::auth::AuthStore::get_user(self, user_id).await
            }
        }
    };
}
pub(crate) use impl_role_store;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_fields_are_checked_and_permissions_normalised() {
        assert!(validate_role_fields(Some("ops"), Some("Ops"), Some("read")).is_ok());
        assert!(validate_role_fields(Some(" "), None, None).is_err());
        assert!(validate_role_fields(None, None, Some(" , ")).is_err());
        assert_eq!(normal_permissions("write, read,read"), "read,write");
    }
}

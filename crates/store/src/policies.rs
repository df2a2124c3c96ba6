//! Tool policies: the `tool_policies` table (node spec §6.1) and [`ToolPolicyStore`].
//!
//! A policy is an admin rule: `tool_pattern` (an fnmatch pattern on the approval label or
//! function name), `action` (`allow` | `deny` | `ask`), `priority` (highest first), an
//! `org_id` (`''` = every org) and `enabled`. Evaluating them is `turnstone-governance`'s
//! job; this module only stores rows, listed in evaluation order: priority descending, then
//! creation order. The SQL is written once, in `impl_tool_policy_store!`, for both
//! backends.

use async_trait::async_trait;

use crate::error::{Result, StoreError};

/// The actions a policy may have.
pub const POLICY_ACTIONS: [&str; 3] = ["allow", "deny", "ask"];

/// A policy to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToolPolicy {
    /// A fixed id (tests, config-file policies); default a fresh 32-hex id.
    pub policy_id: Option<String>,
    pub name: String,
    pub tool_pattern: String,
    /// `allow`, `deny` or `ask`.
    pub action: String,
    pub priority: i64,
    pub org_id: String,
    pub enabled: bool,
    pub created_by: String,
}

/// Changes to a policy; `None` leaves a column as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolPolicyUpdate {
    pub name: Option<String>,
    pub tool_pattern: Option<String>,
    pub action: Option<String>,
    pub priority: Option<i64>,
    pub enabled: Option<bool>,
}

/// One row of `tool_policies`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ToolPolicyRecord {
    pub policy_id: String,
    pub name: String,
    pub tool_pattern: String,
    pub action: String,
    pub priority: i64,
    pub org_id: String,
    pub enabled: bool,
    pub created_by: String,
    pub created: String,
    pub updated: String,
}

/// Storage of tool policies; implemented by both backends (see the module docs).
#[async_trait]
pub trait ToolPolicyStore: Send + Sync {
    /// Inserts a policy. An empty name or pattern, or an unknown action, is
    /// [`StoreError::InvalidInput`]; so is an id already used.
    async fn create_tool_policy(&self, new: NewToolPolicy) -> Result<ToolPolicyRecord>;
    async fn get_tool_policy(&self, policy_id: &str) -> Result<Option<ToolPolicyRecord>>;
    /// Policies in evaluation order (priority descending, then oldest first); all of them,
    /// or only those of one `org_id`.
    async fn list_tool_policies(&self, org_id: Option<&str>) -> Result<Vec<ToolPolicyRecord>>;
    /// Applies `update` and stamps `updated`; `None` when there is no such policy. Invalid
    /// values are [`StoreError::InvalidInput`].
    async fn update_tool_policy(
        &self,
        policy_id: &str,
        update: ToolPolicyUpdate,
    ) -> Result<Option<ToolPolicyRecord>>;
    /// `false` when there was no such policy.
    async fn delete_tool_policy(&self, policy_id: &str) -> Result<bool>;
}

pub(crate) fn validate_policy_fields(
    name: Option<&str>,
    tool_pattern: Option<&str>,
    action: Option<&str>,
) -> Result<()> {
    if name.is_some_and(|n| n.trim().is_empty()) {
        return Err(StoreError::InvalidInput(
            "a tool policy needs a name".into(),
        ));
    }
    if tool_pattern.is_some_and(|p| p.trim().is_empty()) {
        return Err(StoreError::InvalidInput(
            "a tool policy needs a tool_pattern".into(),
        ));
    }
    if let Some(action) = action
        && !POLICY_ACTIONS.contains(&action)
    {
        return Err(StoreError::InvalidInput(format!(
            "tool policy action must be allow, deny or ask, not {action:?}"
        )));
    }
    Ok(())
}

macro_rules! policy_columns {
    () => {
        "policy_id, name, tool_pattern, action, priority, org_id, enabled, created_by, created, \
         updated"
    };
}
pub(crate) use policy_columns;

/// Implements [`ToolPolicyStore`] for a backend type with a `pool` field (see
/// `sql_common.rs` for why a macro rather than a generic).
macro_rules! impl_tool_policy_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn tool_policy_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::policies::ToolPolicyRecord> {
                use sqlx::Row as _;
                let enabled: i64 = row.try_get("enabled")?;
                Ok($crate::policies::ToolPolicyRecord {
                    policy_id: row.try_get("policy_id")?,
                    name: row.try_get("name")?,
                    tool_pattern: row.try_get("tool_pattern")?,
                    action: row.try_get("action")?,
                    priority: row.try_get("priority")?,
                    org_id: row.try_get("org_id")?,
                    enabled: enabled != 0,
                    created_by: row.try_get("created_by")?,
                    created: row.try_get("created")?,
                    updated: row.try_get("updated")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::policies::ToolPolicyStore for $store {
            async fn create_tool_policy(
                &self,
                new: $crate::policies::NewToolPolicy,
            ) -> $crate::error::Result<$crate::policies::ToolPolicyRecord> {
                use $crate::error::StoreError;
                $crate::policies::validate_policy_fields(
                    Some(&new.name),
                    Some(&new.tool_pattern),
                    Some(&new.action),
                )?;
                let policy_id = new.policy_id.clone().unwrap_or_else($crate::ids::new_ws_id);
                let now = $crate::timestamp::now();
                const SQL: &str = concat!(
                    "INSERT INTO tool_policies (policy_id, name, tool_pattern, action, priority, \
                     org_id, enabled, created_by, created, updated) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING ",
                    $crate::policies::policy_columns!()
                );
                let result = sqlx::query(SQL)
                    .bind(&policy_id)
                    .bind(new.name.trim())
                    .bind(new.tool_pattern.trim())
                    .bind(&new.action)
                    .bind(new.priority)
                    .bind(&new.org_id)
                    .bind(i64::from(new.enabled))
                    .bind(&new.created_by)
                    .bind(&now)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(StoreError::from);
                match result {
                    Ok(row) => Self::tool_policy_from_row(&row),
                    Err(e) if e.is_unique_violation() => Err(StoreError::InvalidInput(format!(
                        "tool policy {policy_id} exists"
                    ))),
                    Err(e) => Err(e),
                }
            }

            async fn get_tool_policy(
                &self,
                policy_id: &str,
            ) -> $crate::error::Result<Option<$crate::policies::ToolPolicyRecord>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::policies::policy_columns!(),
                    " FROM tool_policies WHERE policy_id = $1"
                );
                let row = sqlx::query(SQL).bind(policy_id).fetch_optional(&self.pool).await?;
                row.as_ref().map(Self::tool_policy_from_row).transpose()
            }

            async fn list_tool_policies(
                &self,
                org_id: Option<&str>,
            ) -> $crate::error::Result<Vec<$crate::policies::ToolPolicyRecord>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::policies::policy_columns!(),
                    " FROM tool_policies WHERE ($1 IS NULL OR org_id = $1) \
                     ORDER BY priority DESC, created, policy_id"
                );
                let rows = sqlx::query(SQL).bind(org_id).fetch_all(&self.pool).await?;
                rows.iter().map(Self::tool_policy_from_row).collect()
            }

            async fn update_tool_policy(
                &self,
                policy_id: &str,
                update: $crate::policies::ToolPolicyUpdate,
            ) -> $crate::error::Result<Option<$crate::policies::ToolPolicyRecord>> {
                $crate::policies::validate_policy_fields(
                    update.name.as_deref(),
                    update.tool_pattern.as_deref(),
                    update.action.as_deref(),
                )?;
                const SQL: &str = concat!(
                    "UPDATE tool_policies SET name = COALESCE($2, name), \
                     tool_pattern = COALESCE($3, tool_pattern), action = COALESCE($4, action), \
                     priority = COALESCE($5, priority), enabled = COALESCE($6, enabled), \
                     updated = $7 WHERE policy_id = $1 RETURNING ",
                    $crate::policies::policy_columns!()
                );
                let row = sqlx::query(SQL)
                    .bind(policy_id)
                    .bind(update.name.as_deref().map(str::trim))
                    .bind(update.tool_pattern.as_deref().map(str::trim))
                    .bind(update.action.as_deref())
                    .bind(update.priority)
                    .bind(update.enabled.map(i64::from))
                    .bind($crate::timestamp::now())
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::tool_policy_from_row).transpose()
            }

            async fn delete_tool_policy(&self, policy_id: &str) -> $crate::error::Result<bool> {
                let done = sqlx::query("DELETE FROM tool_policies WHERE policy_id = $1")
                    .bind(policy_id)
                    .execute(&self.pool)
                    .await?;
                Ok(done.rows_affected() > 0)
            }
        }
    };
}

pub(crate) use impl_tool_policy_store;

#[cfg(test)]
mod tests {
    use super::validate_policy_fields;

    #[test]
    fn validation_names_the_problem() {
        assert!(validate_policy_fields(Some("n"), Some("bash"), Some("deny")).is_ok());
        assert!(validate_policy_fields(None, None, None).is_ok());
        let err = validate_policy_fields(Some(" "), Some("bash"), Some("deny")).unwrap_err();
        assert!(err.to_string().contains("name"), "{err}");
        let err = validate_policy_fields(Some("n"), Some(""), None).unwrap_err();
        assert!(err.to_string().contains("tool_pattern"), "{err}");
        let err = validate_policy_fields(None, None, Some("block")).unwrap_err();
        assert!(err.to_string().contains("block"), "{err}");
    }
}

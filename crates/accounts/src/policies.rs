//! Tool policies as both services administer them (`/v1/api/admin/policies`, permission
//! `admin.policies`): the wire types, the field checks and the store operations behind the
//! create, update and delete. The node's handlers then rebuild its engine's policy set; the
//! console's record the change in the audit log and push the policies to every node.
//!
//! Config-file policies (`[[policies]]` of a node's `config.toml`) carry ids starting with
//! [`CONFIG_POLICY_PREFIX`] and are read-only here (403).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnstone_store::{
    NewToolPolicy, POLICY_ACTIONS, Store, StoreError, ToolPolicyRecord, ToolPolicyUpdate,
};

use crate::error::AccountsError;

/// The id prefix of config-file policies (`config:<name>`).
pub const CONFIG_POLICY_PREFIX: &str = "config:";
/// Priorities are bounded so that an order is always expressible and nothing overflows.
pub const MAX_PRIORITY: i64 = 1_000_000;
/// Longest accepted name or pattern.
const MAX_TEXT: usize = 256;

/// One policy as the admin API returns it (and as the console pushes it to the nodes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PolicyRow {
    /// 32 hex digits; `config:<name>` for a config-file policy.
    pub policy_id: String,
    pub name: String,
    /// An fnmatch pattern on the approval label (`allow`) or the label or function name
    /// (`deny`, `ask`).
    pub tool_pattern: String,
    /// `allow`, `deny` or `ask`.
    pub action: String,
    /// Highest first; equal priorities keep creation order (config-file policies first).
    pub priority: i64,
    /// `""` = every org.
    pub org_id: String,
    pub enabled: bool,
    pub created_by: String,
    /// ISO timestamps (`""` for config-file policies).
    pub created: String,
    pub updated: String,
    /// `admin` (stored, editable here) or `config` (`config.toml`, read-only).
    pub source: String,
}

impl From<ToolPolicyRecord> for PolicyRow {
    fn from(r: ToolPolicyRecord) -> Self {
        Self {
            policy_id: r.policy_id,
            name: r.name,
            tool_pattern: r.tool_pattern,
            action: r.action,
            priority: r.priority,
            org_id: r.org_id,
            enabled: r.enabled,
            created_by: r.created_by,
            created: r.created,
            updated: r.updated,
            source: "admin".into(),
        }
    }
}

/// `GET /v1/api/admin/policies`: every policy in evaluation order.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PolicyList {
    pub policies: Vec<PolicyRow>,
}

/// The body of the create (`name`, `tool_pattern`, `action` required) and of the update
/// (any subset). Unknown keys are refused.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyBody {
    pub name: Option<String>,
    pub tool_pattern: Option<String>,
    /// `allow`, `deny` or `ask`.
    pub action: Option<String>,
    /// An integer in ±1 000 000; default 0.
    pub priority: Option<i64>,
    /// Default `true`.
    pub enabled: Option<bool>,
    /// Create only; default `""` (every org).
    pub org_id: Option<String>,
}

/// `DELETE /v1/api/admin/policies/{policy_id}`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DeletePolicyReply {
    /// `"ok"`.
    pub status: String,
    pub policy_id: String,
}

/// The admin API's checks of a policy's fields (`None`: not given).
pub fn check_fields(
    name: Option<&str>,
    tool_pattern: Option<&str>,
    action: Option<&str>,
    priority: Option<i64>,
) -> Result<(), String> {
    for (field, value) in [("name", name), ("tool_pattern", tool_pattern)] {
        let Some(value) = value else { continue };
        if value.trim().is_empty() {
            return Err(format!("{field} must not be empty"));
        }
        if value.chars().count() > MAX_TEXT {
            return Err(format!("{field} is longer than {MAX_TEXT} characters"));
        }
        if value.chars().any(char::is_control) {
            return Err(format!("{field} must not contain control characters"));
        }
    }
    if let Some(action) = action
        && !POLICY_ACTIONS.contains(&action.trim())
    {
        return Err(format!(
            "action must be \"allow\", \"deny\" or \"ask\", not {action:?}"
        ));
    }
    if let Some(priority) = priority
        && !(-MAX_PRIORITY..=MAX_PRIORITY).contains(&priority)
    {
        return Err(format!(
            "priority must be between -{MAX_PRIORITY} and {MAX_PRIORITY}, not {priority}"
        ));
    }
    Ok(())
}

/// [`check_fields`] of a body, as a 400.
pub fn checked(body: &PolicyBody) -> Result<(), AccountsError> {
    check_fields(
        body.name.as_deref(),
        body.tool_pattern.as_deref(),
        body.action.as_deref(),
        body.priority,
    )
    .map_err(AccountsError::BadRequest)
}

fn trimmed(s: &Option<String>) -> Option<String> {
    s.as_deref().map(|s| s.trim().to_owned())
}

fn storage_failed(e: StoreError) -> AccountsError {
    tracing::warn!(error = %e, "policy storage failed");
    AccountsError::Internal("Storage error".to_string())
}

fn store_error(e: StoreError) -> AccountsError {
    match e {
        StoreError::InvalidInput(m) => AccountsError::BadRequest(format!("Invalid policy: {m}")),
        other => storage_failed(other),
    }
}

/// 403 for a config-file policy.
pub fn read_only(policy_id: &str) -> Result<(), AccountsError> {
    if policy_id.starts_with(CONFIG_POLICY_PREFIX) {
        return Err(AccountsError::Forbidden(format!(
            "Policy '{policy_id}' comes from config.toml and is read-only here"
        )));
    }
    Ok(())
}

fn not_found(policy_id: &str) -> AccountsError {
    AccountsError::NotFound(format!("Policy '{policy_id}' not found"))
}

/// The stored policies, in evaluation order.
pub async fn list_stored(store: &Arc<dyn Store>) -> Result<Vec<PolicyRow>, AccountsError> {
    let stored = store
        .list_tool_policies(None)
        .await
        .map_err(storage_failed)?;
    Ok(stored.into_iter().map(PolicyRow::from).collect())
}

/// Checks `body` and stores the new policy.
pub async fn create(
    store: &Arc<dyn Store>,
    body: &PolicyBody,
    created_by: String,
) -> Result<PolicyRow, AccountsError> {
    checked(body)?;
    let (Some(name), Some(tool_pattern), Some(action)) = (
        trimmed(&body.name),
        trimmed(&body.tool_pattern),
        trimmed(&body.action),
    ) else {
        return Err(AccountsError::BadRequest(
            "name, tool_pattern and action are required".into(),
        ));
    };
    let record = store
        .create_tool_policy(NewToolPolicy {
            policy_id: None,
            name,
            tool_pattern,
            action,
            priority: body.priority.unwrap_or(0),
            org_id: body.org_id.clone().unwrap_or_default(),
            enabled: body.enabled.unwrap_or(true),
            created_by,
        })
        .await
        .map_err(store_error)?;
    tracing::info!(policy_id = %record.policy_id, pattern = %record.tool_pattern, action = %record.action, "tool policy created");
    Ok(record.into())
}

/// Changes the given fields; 404 unknown, 403 for a config-file policy.
pub async fn update(
    store: &Arc<dyn Store>,
    policy_id: &str,
    body: &PolicyBody,
) -> Result<PolicyRow, AccountsError> {
    read_only(policy_id)?;
    checked(body)?;
    if body.org_id.is_some() {
        return Err(AccountsError::BadRequest(
            "org_id cannot be changed (delete the policy and create it again)".into(),
        ));
    }
    let update = ToolPolicyUpdate {
        name: trimmed(&body.name),
        tool_pattern: trimmed(&body.tool_pattern),
        action: trimmed(&body.action),
        priority: body.priority,
        enabled: body.enabled,
    };
    let record = store
        .update_tool_policy(policy_id, update)
        .await
        .map_err(store_error)?
        .ok_or_else(|| not_found(policy_id))?;
    tracing::info!(%policy_id, "tool policy updated");
    Ok(record.into())
}

/// Deletes the policy; 404 unknown, 403 for a config-file policy.
pub async fn delete(
    store: &Arc<dyn Store>,
    policy_id: &str,
) -> Result<DeletePolicyReply, AccountsError> {
    read_only(policy_id)?;
    if !store
        .delete_tool_policy(policy_id)
        .await
        .map_err(storage_failed)?
    {
        return Err(not_found(policy_id));
    }
    tracing::info!(%policy_id, "tool policy deleted");
    Ok(DeletePolicyReply {
        status: "ok".into(),
        policy_id: policy_id.to_string(),
    })
}

/// Makes the stored policies exactly `wanted` (a node on its own store taking the console's
/// policies): deletes the others, creates the missing ones under their ids, updates the
/// changed ones. Nothing is written when they already match (a shared database).
/// Returns whether anything changed.
pub async fn replace_stored(
    store: &Arc<dyn Store>,
    wanted: &[PolicyRow],
) -> Result<bool, AccountsError> {
    for w in wanted {
        if w.policy_id.trim().is_empty() || w.policy_id.starts_with(CONFIG_POLICY_PREFIX) {
            return Err(AccountsError::BadRequest(format!(
                "Invalid policy: id {:?}",
                w.policy_id
            )));
        }
        check_fields(
            Some(&w.name),
            Some(&w.tool_pattern),
            Some(&w.action),
            Some(w.priority),
        )
        .map_err(|m| AccountsError::BadRequest(format!("Invalid policy {:?}: {m}", w.name)))?;
    }
    let current = store
        .list_tool_policies(None)
        .await
        .map_err(storage_failed)?;
    let mut changed = false;
    for c in &current {
        if !wanted.iter().any(|w| w.policy_id == c.policy_id) {
            store
                .delete_tool_policy(&c.policy_id)
                .await
                .map_err(storage_failed)?;
            changed = true;
        }
    }
    for w in wanted {
        match current.iter().find(|c| c.policy_id == w.policy_id) {
            None => {
                store
                    .create_tool_policy(NewToolPolicy {
                        policy_id: Some(w.policy_id.clone()),
                        name: w.name.clone(),
                        tool_pattern: w.tool_pattern.clone(),
                        action: w.action.clone(),
                        priority: w.priority,
                        org_id: w.org_id.clone(),
                        enabled: w.enabled,
                        created_by: w.created_by.clone(),
                    })
                    .await
                    .map_err(store_error)?;
                changed = true;
            }
            Some(c) => {
                let same = (&c.name, &c.tool_pattern, &c.action, c.priority, c.enabled)
                    == (&w.name, &w.tool_pattern, &w.action, w.priority, w.enabled);
                if !same {
                    store
                        .update_tool_policy(
                            &w.policy_id,
                            ToolPolicyUpdate {
                                name: Some(w.name.clone()),
                                tool_pattern: Some(w.tool_pattern.clone()),
                                action: Some(w.action.clone()),
                                priority: Some(w.priority),
                                enabled: Some(w.enabled),
                            },
                        )
                        .await
                        .map_err(store_error)?;
                    changed = true;
                }
            }
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_checks_name_what_is_wrong() {
        assert!(check_fields(Some("n"), Some("bash"), Some("deny"), Some(5)).is_ok());
        let err = |n, p, a, pr| check_fields(n, p, a, pr).unwrap_err();
        assert!(err(Some(" "), None, None, None).contains("name must not be empty"));
        assert!(err(None, Some(""), None, None).contains("tool_pattern must not be empty"));
        assert!(err(None, Some("a\nb"), None, None).contains("control characters"));
        assert!(err(None, None, Some("block"), None).contains("action must be"));
        assert!(err(None, None, None, Some(MAX_PRIORITY + 1)).contains("priority must be"));
        // (`abs` of the smallest i64 overflows: found by schemathesis.)
        assert!(err(None, None, None, Some(i64::MIN)).contains("priority must be"));
        let long = "x".repeat(MAX_TEXT + 1);
        assert!(err(Some(&long), None, None, None).contains("longer than"));
    }

    #[test]
    fn config_policies_are_read_only() {
        assert!(read_only("config:no-mcp").is_err());
        assert!(read_only("0123abcd").is_ok());
    }
}

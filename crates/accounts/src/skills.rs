//! Skills as both services administer them (`/v1/api/admin/skills`, permission
//! `admin.skills`): the store operations behind the create, update and delete, with their
//! checks. MCP-synced skills (`readonly`) are refused with 403, as the original; creating a
//! manual skill with the name of an MCP-synced one replaces it (the manual skill wins).
//! The console pushes its manual skills to every node ([`replace_manual`]).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use turnstone_store::{Skill, SkillSpec, Store, StoreError};

use crate::error::AccountsError;

/// The origin of skills a node syncs from its MCP servers (node-local, never pushed).
pub const MCP_ORIGIN: &str = "mcp";

/// `DELETE /v1/api/admin/skills/{name}`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DeleteSkillReply {
    /// `"ok"`.
    pub status: String,
    pub name: String,
}

fn storage_failed(e: StoreError) -> AccountsError {
    tracing::warn!(error = %e, "skill storage failed");
    AccountsError::Internal("Storage error".to_string())
}

fn invalid(e: StoreError) -> AccountsError {
    match e {
        StoreError::InvalidInput(m) => AccountsError::BadRequest(format!("Invalid skill: {m}")),
        other => storage_failed(other),
    }
}

fn already_exists(name: &str) -> AccountsError {
    AccountsError::Conflict(format!("Skill '{name}' already exists"))
}

fn not_found(name: &str) -> AccountsError {
    AccountsError::NotFound(format!("Skill '{name}' not found"))
}

/// Every skill, enabled or not.
pub async fn list_all(store: &Arc<dyn Store>) -> Result<Vec<Skill>, AccountsError> {
    store.list_skills(false).await.map_err(storage_failed)
}

/// The skill of this name, when the admin API may change it (404 unknown, 403 read-only).
pub async fn editable(store: &dyn Store, name: &str) -> Result<Skill, AccountsError> {
    let skill = store
        .get_skill(name)
        .await
        .map_err(storage_failed)?
        .ok_or_else(|| not_found(name))?;
    if skill.spec.readonly {
        return Err(AccountsError::Forbidden(format!(
            "Skill '{name}' is read-only (origin {}{})",
            skill.spec.origin,
            if skill.spec.mcp_server.is_empty() {
                String::new()
            } else {
                format!(", MCP server '{}'", skill.spec.mcp_server)
            }
        )));
    }
    Ok(skill)
}

/// `base` with the fields of the JSON object `body` applied (not yet validated). Unknown keys
/// and values of the wrong type are a 400 naming them; `template_id`, `created` and
/// `updated` are ignored (so a row read from the list can be sent back).
pub fn merged(base: &SkillSpec, body: &Value) -> Result<SkillSpec, AccountsError> {
    let Value::Object(changes) = body else {
        return Err(AccountsError::BadRequest(
            "request body must be a JSON object".into(),
        ));
    };
    let mut value = serde_json::to_value(base)
        .map_err(|e| AccountsError::Internal(format!("skill not serialisable: {e}")))?;
    let Some(fields) = value.as_object_mut() else {
        return Err(AccountsError::Internal("skill is not an object".into()));
    };
    for (key, v) in changes {
        if matches!(key.as_str(), "template_id" | "created" | "updated") {
            continue;
        }
        if !fields.contains_key(key) {
            return Err(AccountsError::BadRequest(format!(
                "Unknown skill field: {key}"
            )));
        }
        fields.insert(key.clone(), v.clone());
    }
    serde_json::from_value(value)
        .map_err(|e| AccountsError::BadRequest(format!("Invalid skill: {e}")))
}

/// The store's checks (name, content, activation) as a 400.
pub fn validated(spec: SkillSpec) -> Result<SkillSpec, AccountsError> {
    spec.validate().map_err(|e| match e {
        StoreError::InvalidInput(m) => AccountsError::BadRequest(format!("Invalid skill: {m}")),
        other => AccountsError::BadRequest(format!("Invalid skill: {other}")),
    })?;
    Ok(spec)
}

/// Creates the skill `body` describes (`name` and `content` required); 409 when the name
/// is taken — except by an MCP-synced skill, which a manual skill replaces.
pub async fn create(
    store: &Arc<dyn Store>,
    body: &Value,
    created_by: Option<&str>,
) -> Result<Skill, AccountsError> {
    let mut spec = merged(&SkillSpec::default(), body)?;
    spec.name = spec.name.trim().to_string();
    if spec.name.is_empty() {
        return Err(AccountsError::BadRequest("name is required".into()));
    }
    if spec.content.trim().is_empty() {
        return Err(AccountsError::BadRequest("content is required".into()));
    }
    if spec.created_by.is_empty()
        && let Some(user) = created_by
    {
        spec.created_by = user.to_string();
    }
    let spec = validated(spec)?;
    if let Some(existing) = store.get_skill(&spec.name).await.map_err(storage_failed)? {
        if existing.spec.origin == MCP_ORIGIN && spec.origin != MCP_ORIGIN {
            let skill = store.upsert_skill(spec).await.map_err(invalid)?;
            tracing::info!(skill = %skill.spec.name, mcp_server = %existing.spec.mcp_server, "manual skill replaces the MCP-synced skill of the same name");
            return Ok(skill);
        }
        return Err(already_exists(&spec.name));
    }
    let name = spec.name.clone();
    let skill = store.create_skill(spec).await.map_err(|e| match e {
        StoreError::InvalidInput(m) if m.contains("already exists") => already_exists(&name),
        other => invalid(other),
    })?;
    tracing::info!(skill = %skill.spec.name, "skill created");
    Ok(skill)
}

/// Changes the given fields of the skill `name`; 404 unknown, 403 read-only, 400 for a
/// changed name.
pub async fn update(
    store: &Arc<dyn Store>,
    name: &str,
    body: &Value,
) -> Result<Skill, AccountsError> {
    let existing = editable(store.as_ref(), name).await?;
    let spec = validated(merged(&existing.spec, body)?)?;
    if spec.name != existing.spec.name {
        return Err(AccountsError::BadRequest(
            "name cannot be changed (delete the skill and create it again)".into(),
        ));
    }
    let skill = store.upsert_skill(spec).await.map_err(invalid)?;
    tracing::info!(skill = %skill.spec.name, "skill updated");
    Ok(skill)
}

/// Deletes the skill `name`; 404 unknown, 403 read-only.
pub async fn delete(store: &Arc<dyn Store>, name: &str) -> Result<DeleteSkillReply, AccountsError> {
    let existing = editable(store.as_ref(), name).await?;
    if !store
        .delete_skill(&existing.spec.name)
        .await
        .map_err(storage_failed)?
    {
        return Err(not_found(name));
    }
    tracing::info!(skill = %name, "skill deleted");
    Ok(DeleteSkillReply {
        status: "ok".into(),
        name: existing.spec.name,
    })
}

/// Makes the stored manual skills (every origin but [`MCP_ORIGIN`]) exactly `wanted` (a
/// node on its own store taking the console's skills); the node's MCP-synced skills stay,
/// unless a wanted skill takes the name. Nothing is written when they already match (a
/// shared database). Returns whether anything changed.
pub async fn replace_manual(
    store: &Arc<dyn Store>,
    wanted: &[SkillSpec],
) -> Result<bool, AccountsError> {
    for w in wanted {
        if w.origin == MCP_ORIGIN {
            return Err(AccountsError::BadRequest(format!(
                "Invalid skill {:?}: MCP-synced skills are not pushed",
                w.name
            )));
        }
        w.validate().map_err(invalid)?;
    }
    let current = list_all(store).await?;
    let mut changed = false;
    for c in current.iter().filter(|c| c.spec.origin != MCP_ORIGIN) {
        if !wanted.iter().any(|w| w.name == c.spec.name) {
            store
                .delete_skill(&c.spec.name)
                .await
                .map_err(storage_failed)?;
            changed = true;
        }
    }
    for w in wanted {
        let same = current.iter().any(|c| &c.spec == w);
        if !same {
            store.upsert_skill(w.clone()).await.map_err(invalid)?;
            changed = true;
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_applies_known_fields_and_names_bad_ones() {
        let base = SkillSpec::new("a", "x");
        let spec = merged(
            &base,
            &json!({"description": "d", "tags": ["t"], "template_id": "ignored", "enabled": false}),
        )
        .unwrap();
        assert_eq!(spec.description, "d");
        assert_eq!(spec.tags, ["t"]);
        assert!(!spec.enabled);
        assert_eq!(spec.content, "x");

        let err = |body: Value| merged(&base, &body).unwrap_err().to_string();
        assert_eq!(err(json!({"bogus": 1})), "Unknown skill field: bogus");
        assert!(err(json!({"tags": "a,b"})).starts_with("Invalid skill:"));
        let bad = merged(&base, &json!({"activation": "always"})).unwrap();
        let e = validated(bad).unwrap_err().to_string();
        assert!(e.contains("activation"), "{e}");
        assert!(err(json!([1])).contains("JSON object"));
    }
}

//! Skills: the `prompt_templates` table (node spec §6.1) and the [`SkillStore`] trait every
//! [`crate::Store`] implements.
//!
//! A skill is a named prompt (`content`, a template with `{{model}}`, `{{ws_id}}` and
//! `{{node_id}}` variables) plus its metadata: category, description, tags, activation
//! (`named` | `default` | `search`), origin (`manual` | `mcp`), scan status (the risk level
//! the `skill` tool reports) and the session overrides a skill may carry. Rendering and
//! activation belong to the engine and the node; this module only stores rows.
//!
//! The SQL is written once in `impl_skill_store!` and expanded for each backend with one
//! line in `sqlite.rs` / `postgres.rs`, like `sql_common`'s `impl_store!`. Flags are
//! `INTEGER` 0/1 and JSON columns are JSON text on both backends, so one decoding serves both.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Result, StoreError};

/// Longest accepted skill name (characters).
pub const MAX_SKILL_NAME_CHARS: usize = 256;
/// The `activation` values: by name only, active by default, or offered by search.
pub const ACTIVATIONS: [&str; 3] = ["named", "default", "search"];

/// What a caller sets on a skill: every column but the id and the timestamps. `Default`
/// gives the table's defaults (an empty name and content, which [`SkillStore`] refuses).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SkillSpec {
    /// Unique; 1–256 characters, no `/`, no control characters.
    pub name: String,
    pub category: String,
    /// The prompt template added to the system prompt when the skill is active.
    pub content: String,
    /// Declared template variables (a JSON array).
    pub variables: Value,
    pub is_default: bool,
    pub org_id: String,
    pub created_by: String,
    /// `manual` or `mcp`.
    pub origin: String,
    pub mcp_server: String,
    /// MCP-synced skills are read-only: the admin API refuses to change them.
    pub readonly: bool,
    pub description: String,
    pub tags: Vec<String>,
    pub source_url: String,
    pub version: String,
    pub author: String,
    /// `named`, `default` or `search`.
    pub activation: String,
    pub token_estimate: i64,
    pub allowed_tools: Vec<String>,
    pub license: String,
    pub compatibility: String,
    /// The security scan's risk level (`safe`, `low`, `medium`, `high`, `critical`); empty
    /// when never scanned.
    pub scan_status: String,
    pub scan_report: Value,
    pub installed_at: String,
    pub installed_by: String,
    pub scan_version: String,
    pub model: String,
    pub auto_approve: bool,
    pub temperature: Option<f64>,
    pub reasoning_effort: String,
    pub max_tokens: Option<i64>,
    pub token_budget: i64,
    pub agent_max_turns: Option<i64>,
    pub notify_on_complete: Value,
    pub enabled: bool,
    pub priority: i64,
}

impl Default for SkillSpec {
    fn default() -> Self {
        Self {
            name: String::new(),
            category: "general".into(),
            content: String::new(),
            variables: Value::Array(Vec::new()),
            is_default: false,
            org_id: String::new(),
            created_by: String::new(),
            origin: "manual".into(),
            mcp_server: String::new(),
            readonly: false,
            description: String::new(),
            tags: Vec::new(),
            source_url: String::new(),
            version: "1.0.0".into(),
            author: String::new(),
            activation: "named".into(),
            token_estimate: 0,
            allowed_tools: Vec::new(),
            license: String::new(),
            compatibility: String::new(),
            scan_status: String::new(),
            scan_report: Value::Object(serde_json::Map::new()),
            installed_at: String::new(),
            installed_by: String::new(),
            scan_version: String::new(),
            model: String::new(),
            auto_approve: false,
            temperature: None,
            reasoning_effort: String::new(),
            max_tokens: None,
            token_budget: 0,
            agent_max_turns: None,
            notify_on_complete: Value::Object(serde_json::Map::new()),
            enabled: true,
            priority: 0,
        }
    }
}

impl SkillSpec {
    /// A skill with this name and content and every other column at its default.
    pub fn new(name: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            content: content.into(),
            ..Self::default()
        }
    }

    /// Checks what the table's constraints do not: a usable name, content, activation.
    pub fn validate(&self) -> Result<()> {
        validate_name(&self.name)?;
        if self.content.trim().is_empty() {
            return Err(StoreError::InvalidInput("skill content is empty".into()));
        }
        if !ACTIVATIONS.contains(&self.activation.as_str()) {
            return Err(StoreError::InvalidInput(format!(
                "unknown skill activation {:?} (expected one of: {})",
                self.activation,
                ACTIVATIONS.join(", ")
            )));
        }
        Ok(())
    }
}

/// A stored skill (one `prompt_templates` row).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skill {
    /// UUIDv4 with dashes.
    pub template_id: String,
    #[serde(flatten)]
    pub spec: SkillSpec,
    pub created: String,
    pub updated: String,
}

/// Skill rows by name, and candidates for a search.
#[async_trait]
pub trait SkillStore: Send + Sync {
    /// Inserts a new skill; [`StoreError::InvalidInput`] when the name is taken or the spec
    /// is invalid.
    async fn create_skill(&self, spec: SkillSpec) -> Result<Skill>;
    /// Inserts, or replaces every column of the skill of this name (keeping its id and
    /// `created`).
    async fn upsert_skill(&self, spec: SkillSpec) -> Result<Skill>;
    /// The skill of exactly this name (enabled or not).
    async fn get_skill(&self, name: &str) -> Result<Option<Skill>>;
    /// Every skill (only enabled ones with `enabled_only`), highest `priority` first, then
    /// by name.
    async fn list_skills(&self, enabled_only: bool) -> Result<Vec<Skill>>;
    /// Deletes the skill of this name; `false` when there was none.
    async fn delete_skill(&self, name: &str) -> Result<bool>;
    /// Inserts, or replaces every column of, the MCP-synced skill `spec` (origin `mcp`, its
    /// `mcp_server` set) — in one statement, so a skill of the same name that is not the
    /// `mcp` skill of the same server (a manual one) is never overwritten: then nothing
    /// changes and `None` is returned.
    async fn upsert_mcp_skill(&self, spec: SkillSpec) -> Result<Option<Skill>>;
    /// Deletes the skill of this name only when it is the `mcp` skill of `server`; `false`
    /// otherwise (no such skill, or another origin or server holds the name).
    async fn delete_mcp_skill(&self, name: &str, server: &str) -> Result<bool>;
    /// Enabled skills whose name, description, tags or category contain any word of
    /// `query` (case-insensitive), at most `limit`, highest `priority` first; every enabled
    /// skill (up to `limit`) for a query without words. The caller ranks them (BM25).
    async fn skill_candidates(&self, query: &str, limit: usize) -> Result<Vec<Skill>>;
}

fn validate_name(name: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(StoreError::InvalidInput(format!(
            "skill name {name:?} {why}"
        )))
    };
    if name.trim().is_empty() {
        return bad("is empty");
    }
    if name.trim() != name {
        return bad("has leading or trailing spaces");
    }
    if name.chars().count() > MAX_SKILL_NAME_CHARS {
        return bad("is longer than 256 characters");
    }
    if name.chars().any(|c| c == '/' || c.is_control()) {
        return bad("contains '/' or a control character");
    }
    Ok(())
}

/// The lower-cased words of a candidate query (at most 32; no LIKE syntax survives).
pub(crate) fn candidate_patterns(query: &str) -> Vec<String> {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(32)
        .map(|w| {
            let mut p = String::from("%");
            for c in w.to_lowercase().chars() {
                if matches!(c, '%' | '_' | '\\') {
                    p.push('\\');
                }
                p.push(c);
            }
            p.push('%');
            p
        })
        .collect()
}

pub(crate) fn json_text<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

pub(crate) fn parse_json<T: for<'de> Deserialize<'de>>(column: &str, text: &str) -> Result<T> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Corrupt(format!("prompt_templates.{column}: {e}")))
}

macro_rules! skill_columns {
    () => {
        "template_id, name, category, content, variables, is_default, org_id, created_by, \
         origin, mcp_server, readonly, description, tags, source_url, version, author, \
         activation, token_estimate, allowed_tools, license, compatibility, scan_status, \
         scan_report, installed_at, installed_by, scan_version, model, auto_approve, \
         temperature, reasoning_effort, max_tokens, token_budget, agent_max_turns, \
         notify_on_complete, enabled, priority, created, updated"
    };
}

/// `INSERT INTO prompt_templates (...) VALUES ($1 … $38)`: the id, the 35 spec columns in
/// [`skill_columns!`] order, `created`, `updated`.
macro_rules! skill_insert {
    () => {
        concat!(
            "INSERT INTO prompt_templates (",
            $crate::skills::skill_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, \
             $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, \
             $33, $34, $35, $36, $37, $38)"
        )
    };
}
/// The `SET` list of an upsert: every column but the id, the name and `created`.
macro_rules! skill_update_set {
    () => {
        "category = excluded.category, \
         content = excluded.content, variables = excluded.variables, \
         is_default = excluded.is_default, org_id = excluded.org_id, \
         created_by = excluded.created_by, origin = excluded.origin, \
         mcp_server = excluded.mcp_server, readonly = excluded.readonly, \
         description = excluded.description, tags = excluded.tags, \
         source_url = excluded.source_url, version = excluded.version, \
         author = excluded.author, activation = excluded.activation, \
         token_estimate = excluded.token_estimate, \
         allowed_tools = excluded.allowed_tools, license = excluded.license, \
         compatibility = excluded.compatibility, scan_status = excluded.scan_status, \
         scan_report = excluded.scan_report, installed_at = excluded.installed_at, \
         installed_by = excluded.installed_by, scan_version = excluded.scan_version, \
         model = excluded.model, auto_approve = excluded.auto_approve, \
         temperature = excluded.temperature, \
         reasoning_effort = excluded.reasoning_effort, \
         max_tokens = excluded.max_tokens, token_budget = excluded.token_budget, \
         agent_max_turns = excluded.agent_max_turns, \
         notify_on_complete = excluded.notify_on_complete, \
         enabled = excluded.enabled, priority = excluded.priority, \
         updated = excluded.updated"
    };
}
pub(crate) use {skill_columns, skill_insert, skill_update_set};

/// Implements [`SkillStore`] for a backend type with a `pool` field of database `$db`.
macro_rules! impl_skill_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn skill_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::skills::Skill> {
                use sqlx::Row as _;
                use $crate::skills::parse_json;
                let flag =
                    |c: &str| -> $crate::error::Result<bool> { Ok(row.try_get::<i32, _>(c)? != 0) };
                let int = |c: &str| -> $crate::error::Result<i64> {
                    Ok(i64::from(row.try_get::<i32, _>(c)?))
                };
                let opt_int = |c: &str| -> $crate::error::Result<Option<i64>> {
                    Ok(row.try_get::<Option<i32>, _>(c)?.map(i64::from))
                };
                let text = |c: &str| -> $crate::error::Result<String> { Ok(row.try_get(c)?) };
                Ok($crate::skills::Skill {
                    template_id: text("template_id")?,
                    spec: $crate::skills::SkillSpec {
                        name: text("name")?,
                        category: text("category")?,
                        content: text("content")?,
                        variables: parse_json("variables", &text("variables")?)?,
                        is_default: flag("is_default")?,
                        org_id: text("org_id")?,
                        created_by: text("created_by")?,
                        origin: text("origin")?,
                        mcp_server: text("mcp_server")?,
                        readonly: flag("readonly")?,
                        description: text("description")?,
                        tags: parse_json("tags", &text("tags")?)?,
                        source_url: text("source_url")?,
                        version: text("version")?,
                        author: text("author")?,
                        activation: text("activation")?,
                        token_estimate: int("token_estimate")?,
                        allowed_tools: parse_json("allowed_tools", &text("allowed_tools")?)?,
                        license: text("license")?,
                        compatibility: text("compatibility")?,
                        scan_status: text("scan_status")?,
                        scan_report: parse_json("scan_report", &text("scan_report")?)?,
                        installed_at: text("installed_at")?,
                        installed_by: text("installed_by")?,
                        scan_version: text("scan_version")?,
                        model: text("model")?,
                        auto_approve: flag("auto_approve")?,
                        temperature: row.try_get("temperature")?,
                        reasoning_effort: text("reasoning_effort")?,
                        max_tokens: opt_int("max_tokens")?,
                        token_budget: int("token_budget")?,
                        agent_max_turns: opt_int("agent_max_turns")?,
                        notify_on_complete: parse_json(
                            "notify_on_complete",
                            &text("notify_on_complete")?,
                        )?,
                        enabled: flag("enabled")?,
                        priority: int("priority")?,
                    },
                    created: text("created")?,
                    updated: text("updated")?,
                })
            }

            /// Binds the id, the spec columns and the timestamps in [`skill_insert!`] order.
            fn bind_skill<'q>(
                query: sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments>,
                id: String,
                s: &'q $crate::skills::SkillSpec,
                now: String,
            ) -> sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments> {
                use $crate::skills::json_text;
                // Integer columns are INTEGER (32-bit on PostgreSQL): clamp what does not fit.
                let int =
                    |v: i64| i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX });
                query
                    .bind(id)
                    .bind(s.name.as_str())
                    .bind(s.category.as_str())
                    .bind(s.content.as_str())
                    .bind(json_text(&s.variables))
                    .bind(i32::from(s.is_default))
                    .bind(s.org_id.as_str())
                    .bind(s.created_by.as_str())
                    .bind(s.origin.as_str())
                    .bind(s.mcp_server.as_str())
                    .bind(i32::from(s.readonly))
                    .bind(s.description.as_str())
                    .bind(json_text(&s.tags))
                    .bind(s.source_url.as_str())
                    .bind(s.version.as_str())
                    .bind(s.author.as_str())
                    .bind(s.activation.as_str())
                    .bind(int(s.token_estimate))
                    .bind(json_text(&s.allowed_tools))
                    .bind(s.license.as_str())
                    .bind(s.compatibility.as_str())
                    .bind(s.scan_status.as_str())
                    .bind(json_text(&s.scan_report))
                    .bind(s.installed_at.as_str())
                    .bind(s.installed_by.as_str())
                    .bind(s.scan_version.as_str())
                    .bind(s.model.as_str())
                    .bind(i32::from(s.auto_approve))
                    .bind(s.temperature)
                    .bind(s.reasoning_effort.as_str())
                    .bind(s.max_tokens.map(int))
                    .bind(int(s.token_budget))
                    .bind(s.agent_max_turns.map(int))
                    .bind(json_text(&s.notify_on_complete))
                    .bind(i32::from(s.enabled))
                    .bind(int(s.priority))
                    .bind(now.clone())
                    .bind(now)
            }
        }

        #[async_trait::async_trait]
        impl $crate::skills::SkillStore for $store {
            async fn create_skill(
                &self,
                spec: $crate::skills::SkillSpec,
            ) -> $crate::error::Result<$crate::skills::Skill> {
                spec.validate()?;
                const SQL: &str = concat!(
                    $crate::skills::skill_insert!(),
                    " RETURNING ",
                    $crate::skills::skill_columns!()
                );
                let query = Self::bind_skill(
                    sqlx::query(SQL),
                    $crate::ids::new_uuid(),
                    &spec,
                    $crate::timestamp::now(),
                );
                match query
                    .fetch_one(&self.pool)
                    .await
                    .map_err($crate::error::StoreError::from)
                {
                    Ok(row) => Self::skill_from_row(&row),
                    Err(e) if e.is_unique_violation() => {
                        Err($crate::error::StoreError::InvalidInput(format!(
                            "skill {:?} already exists",
                            spec.name
                        )))
                    }
                    Err(e) => Err(e),
                }
            }

            async fn upsert_skill(
                &self,
                spec: $crate::skills::SkillSpec,
            ) -> $crate::error::Result<$crate::skills::Skill> {
                spec.validate()?;
                const SQL: &str = concat!(
                    $crate::skills::skill_insert!(),
                    " ON CONFLICT (name) DO UPDATE SET ",
                    $crate::skills::skill_update_set!(),
                    " RETURNING ",
                    $crate::skills::skill_columns!()
                );
                let row = Self::bind_skill(
                    sqlx::query(SQL),
                    $crate::ids::new_uuid(),
                    &spec,
                    $crate::timestamp::now(),
                )
                .fetch_one(&self.pool)
                .await?;
                Self::skill_from_row(&row)
            }

            async fn get_skill(
                &self,
                name: &str,
            ) -> $crate::error::Result<Option<$crate::skills::Skill>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::skills::skill_columns!(),
                    " FROM prompt_templates WHERE name = $1"
                );
                let row = sqlx::query(SQL)
                    .bind(name)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::skill_from_row).transpose()
            }

            async fn list_skills(
                &self,
                enabled_only: bool,
            ) -> $crate::error::Result<Vec<$crate::skills::Skill>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::skills::skill_columns!(),
                    " FROM prompt_templates WHERE ($1 = 0 OR enabled <> 0) \
                     ORDER BY priority DESC, name"
                );
                let rows = sqlx::query(SQL)
                    .bind(i32::from(enabled_only))
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::skill_from_row).collect()
            }

            async fn delete_skill(&self, name: &str) -> $crate::error::Result<bool> {
                let done = sqlx::query("DELETE FROM prompt_templates WHERE name = $1")
                    .bind(name)
                    .execute(&self.pool)
                    .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn upsert_mcp_skill(
                &self,
                spec: $crate::skills::SkillSpec,
            ) -> $crate::error::Result<Option<$crate::skills::Skill>> {
                spec.validate()?;
                if spec.origin != "mcp" || spec.mcp_server.is_empty() {
                    return Err($crate::error::StoreError::InvalidInput(format!(
                        "skill {:?} is not an MCP skill (origin {:?}, server {:?})",
                        spec.name, spec.origin, spec.mcp_server
                    )));
                }
                const SQL: &str = concat!(
                    $crate::skills::skill_insert!(),
                    " ON CONFLICT (name) DO UPDATE SET ",
                    $crate::skills::skill_update_set!(),
                    " WHERE prompt_templates.origin = 'mcp' \
                     AND prompt_templates.mcp_server = excluded.mcp_server RETURNING ",
                    $crate::skills::skill_columns!()
                );
                let row = Self::bind_skill(
                    sqlx::query(SQL),
                    $crate::ids::new_uuid(),
                    &spec,
                    $crate::timestamp::now(),
                )
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(Self::skill_from_row).transpose()
            }

            async fn delete_mcp_skill(
                &self,
                name: &str,
                server: &str,
            ) -> $crate::error::Result<bool> {
                let done = sqlx::query(
                    "DELETE FROM prompt_templates \
                     WHERE name = $1 AND origin = 'mcp' AND mcp_server = $2",
                )
                .bind(name)
                .bind(server)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn skill_candidates(
                &self,
                query: &str,
                limit: usize,
            ) -> $crate::error::Result<Vec<$crate::skills::Skill>> {
                let patterns = $crate::skills::candidate_patterns(query);
                let mut sql = sqlx::QueryBuilder::<$db>::new(concat!(
                    "SELECT ",
                    $crate::skills::skill_columns!(),
                    " FROM prompt_templates WHERE enabled <> 0"
                ));
                if !patterns.is_empty() {
                    sql.push(" AND (");
                    for (i, pattern) in patterns.into_iter().enumerate() {
                        if i > 0 {
                            sql.push(" OR ");
                        }
                        sql.push(
                            "LOWER(name || ' ' || description || ' ' || tags || ' ' || category) \
                             LIKE ",
                        );
                        sql.push_bind(pattern);
                        sql.push(" ESCAPE '\\'");
                    }
                    sql.push(")");
                }
                sql.push(" ORDER BY priority DESC, name LIMIT ");
                sql.push_bind($crate::store::limit_i64(limit));
                let rows = sql.build().fetch_all(&self.pool).await?;
                rows.iter().map(Self::skill_from_row).collect()
            }
        }
    };
}

pub(crate) use impl_skill_store;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_tables() {
        let s = SkillSpec::default();
        assert_eq!(s.category, "general");
        assert_eq!(s.version, "1.0.0");
        assert_eq!(s.activation, "named");
        assert_eq!(s.origin, "manual");
        assert!(s.enabled && !s.readonly && !s.is_default);
        assert_eq!(json_text(&s.variables), "[]");
        assert_eq!(json_text(&s.scan_report), "{}");
    }

    #[test]
    fn validation_names_the_problem() {
        assert!(
            SkillSpec::new("reviewer", "Review code.")
                .validate()
                .is_ok()
        );
        let err = |s: SkillSpec| s.validate().unwrap_err().to_string();
        assert!(err(SkillSpec::new("", "x")).contains("is empty"));
        assert!(err(SkillSpec::new(" a", "x")).contains("spaces"));
        assert!(err(SkillSpec::new("a/b", "x")).contains("'/'"));
        assert!(err(SkillSpec::new("n".repeat(257), "x")).contains("256"));
        assert!(err(SkillSpec::new("a", "  ")).contains("content is empty"));
        let mut bad = SkillSpec::new("a", "x");
        bad.activation = "always".into();
        assert!(err(bad).contains("activation"));
    }

    #[test]
    fn patterns_escape_like_syntax() {
        assert_eq!(
            candidate_patterns("Code_Review 100% \\x"),
            ["%code%", "%review%", "%100%", "%x%"]
        );
        assert!(candidate_patterns(" -- ").is_empty());
    }
}

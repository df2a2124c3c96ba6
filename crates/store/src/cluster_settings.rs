//! Cluster-wide runtime settings and model definitions (node spec §6.1 `system_settings`,
//! `model_definitions`), through [`SettingsStore`].
//!
//! The store keeps rows; which keys exist and what their values mean is the contract's
//! (`turnstone_proto::settings`) and the node's. A setting's value is JSON text; a row with
//! `node_id = ''` is global, a row with a node id overrides it on that node. A model
//! definition's `api_key` is a secret: the store returns it (the node needs it to build the
//! client), the admin API never does. The SQL is written once, in
//! `impl_settings_store!`, for both backends.

use async_trait::async_trait;

use crate::error::{Result, StoreError};

/// One row of `system_settings`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SettingRow {
    pub key: String,
    /// JSON text.
    pub value: String,
    /// `''`: global; else the node it applies to.
    #[serde(default)]
    pub node_id: String,
    #[serde(default)]
    pub is_secret: bool,
    #[serde(default)]
    pub changed_by: String,
    #[serde(default)]
    pub created: String,
    #[serde(default)]
    pub updated: String,
}

/// One row of `model_definitions`.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelDefinition {
    pub definition_id: String,
    pub alias: String,
    pub model: String,
    /// `openai` or `anthropic`.
    pub provider: String,
    #[serde(default)]
    pub base_url: String,
    /// A secret (see the module docs).
    #[serde(default)]
    pub api_key: String,
    pub context_window: i64,
    /// JSON object text.
    #[serde(default = "empty_object")]
    pub capabilities: String,
    pub enabled: bool,
    #[serde(default)]
    pub created_by: String,
    #[serde(default)]
    pub created: String,
    #[serde(default)]
    pub updated: String,
}

fn empty_object() -> String {
    "{}".into()
}

impl std::fmt::Debug for ModelDefinition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelDefinition")
            .field("definition_id", &self.definition_id)
            .field("alias", &self.alias)
            .field("model", &self.model)
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field(
                "api_key",
                &(!self.api_key.is_empty()).then_some("<redacted>"),
            )
            .field("context_window", &self.context_window)
            .field("enabled", &self.enabled)
            .finish()
    }
}

/// A model definition to create (its id is fresh unless given, its times the store's).
#[derive(Clone, PartialEq, Eq, Default)]
pub struct NewModelDefinition {
    pub definition_id: Option<String>,
    pub alias: String,
    pub model: String,
    pub provider: String,
    pub base_url: String,
    pub api_key: String,
    pub context_window: i64,
    pub capabilities: String,
    pub enabled: bool,
    pub created_by: String,
}

/// Changes to a model definition; `None` leaves a column as it is.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ModelDefinitionUpdate {
    pub alias: Option<String>,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    pub context_window: Option<i64>,
    pub capabilities: Option<String>,
    pub enabled: Option<bool>,
}

/// Settings and model definitions; implemented by both backends (see the module docs).
#[async_trait]
pub trait SettingsStore: Send + Sync {
    /// Every row, global and per node, by key then node id.
    async fn list_settings(&self) -> Result<Vec<SettingRow>>;
    /// Inserts or replaces the row `(key, node_id)` (its `created` is kept on replace).
    async fn put_setting(&self, row: SettingRow) -> Result<SettingRow>;
    /// `false` when there was no such row.
    async fn delete_setting(&self, key: &str, node_id: &str) -> Result<bool>;
    /// Makes the global rows and `node_id`'s rows exactly `rows` (one transaction); other
    /// nodes' rows stay. A node given the console's settings stores them so.
    async fn replace_settings(&self, node_id: &str, rows: &[SettingRow]) -> Result<()>;

    /// Every definition, by alias.
    async fn list_model_definitions(&self) -> Result<Vec<ModelDefinition>>;
    async fn get_model_definition(&self, definition_id: &str) -> Result<Option<ModelDefinition>>;
    /// An alias already used is [`StoreError::InvalidInput`].
    async fn create_model_definition(&self, new: NewModelDefinition) -> Result<ModelDefinition>;
    /// `None` when there is no such definition; an alias already used is
    /// [`StoreError::InvalidInput`].
    async fn update_model_definition(
        &self,
        definition_id: &str,
        update: ModelDefinitionUpdate,
    ) -> Result<Option<ModelDefinition>>;
    async fn delete_model_definition(&self, definition_id: &str) -> Result<bool>;
    /// Makes the table exactly `definitions` (one transaction).
    async fn replace_model_definitions(&self, definitions: &[ModelDefinition]) -> Result<()>;
}

/// A pushed row's timestamp, or `now` when it came without one.
pub(crate) fn stamp_or(t: &str, now: &str) -> String {
    if t.is_empty() { now } else { t }.to_string()
}

pub(crate) fn alias_taken(alias: &str) -> StoreError {
    StoreError::InvalidInput(format!("model alias {alias:?} is taken"))
}

macro_rules! model_columns {
    () => {
        "definition_id, alias, model, provider, base_url, api_key, context_window, \
         capabilities, enabled, created_by, created, updated"
    };
}
macro_rules! setting_columns {
    () => {
        "key, value, node_id, is_secret, changed_by, created, updated"
    };
}
pub(crate) use {model_columns, setting_columns};

/// Implements [`SettingsStore`] for a backend type with a `pool` field.
macro_rules! impl_settings_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn setting_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::cluster_settings::SettingRow> {
                use sqlx::Row as _;
                let secret: i64 = row.try_get("is_secret")?;
                Ok($crate::cluster_settings::SettingRow {
                    key: row.try_get("key")?,
                    value: row.try_get("value")?,
                    node_id: row.try_get("node_id")?,
                    is_secret: secret != 0,
                    changed_by: row.try_get("changed_by")?,
                    created: row.try_get("created")?,
                    updated: row.try_get("updated")?,
                })
            }

            fn model_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::cluster_settings::ModelDefinition> {
                use sqlx::Row as _;
                let enabled: i64 = row.try_get("enabled")?;
                Ok($crate::cluster_settings::ModelDefinition {
                    definition_id: row.try_get("definition_id")?,
                    alias: row.try_get("alias")?,
                    model: row.try_get("model")?,
                    provider: row.try_get("provider")?,
                    base_url: row.try_get("base_url")?,
                    api_key: row.try_get("api_key")?,
                    context_window: row.try_get("context_window")?,
                    capabilities: row.try_get("capabilities")?,
                    enabled: enabled != 0,
                    created_by: row.try_get("created_by")?,
                    created: row.try_get("created")?,
                    updated: row.try_get("updated")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::cluster_settings::SettingsStore for $store {
            async fn list_settings(
                &self,
            ) -> $crate::error::Result<Vec<$crate::cluster_settings::SettingRow>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::cluster_settings::setting_columns!(),
                    " FROM system_settings ORDER BY key, node_id"
                );
                let rows = sqlx::query(SQL).fetch_all(&self.pool).await?;
                rows.iter().map(Self::setting_from_row).collect()
            }

            async fn put_setting(
                &self,
                row: $crate::cluster_settings::SettingRow,
            ) -> $crate::error::Result<$crate::cluster_settings::SettingRow> {
                const SQL: &str = concat!(
                    "INSERT INTO system_settings (",
                    $crate::cluster_settings::setting_columns!(),
                    ") VALUES ($1, $2, $3, $4, $5, $6, $6) \
                     ON CONFLICT (key, node_id) DO UPDATE SET value = excluded.value, \
                     is_secret = excluded.is_secret, changed_by = excluded.changed_by, \
                     updated = excluded.updated RETURNING ",
                    $crate::cluster_settings::setting_columns!()
                );
                let row = sqlx::query(SQL)
                    .bind(&row.key)
                    .bind(&row.value)
                    .bind(&row.node_id)
                    .bind(i64::from(row.is_secret))
                    .bind(&row.changed_by)
                    .bind($crate::timestamp::now())
                    .fetch_one(&self.pool)
                    .await?;
                Self::setting_from_row(&row)
            }

            async fn delete_setting(
                &self,
                key: &str,
                node_id: &str,
            ) -> $crate::error::Result<bool> {
                let done =
                    sqlx::query("DELETE FROM system_settings WHERE key = $1 AND node_id = $2")
                        .bind(key)
                        .bind(node_id)
                        .execute(&self.pool)
                        .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn replace_settings(
                &self,
                node_id: &str,
                rows: &[$crate::cluster_settings::SettingRow],
            ) -> $crate::error::Result<()> {
                let mut tx = self.pool.begin().await?;
                sqlx::query("DELETE FROM system_settings WHERE node_id = '' OR node_id = $1")
                    .bind(node_id)
                    .execute(&mut *tx)
                    .await?;
                let now = $crate::timestamp::now();
                for r in rows
                    .iter()
                    .filter(|r| r.node_id.is_empty() || r.node_id == node_id)
                {
                    const SQL: &str = concat!(
                        "INSERT INTO system_settings (",
                        $crate::cluster_settings::setting_columns!(),
                        ") VALUES ($1, $2, $3, $4, $5, $6, $7)"
                    );
                    sqlx::query(SQL)
                        .bind(&r.key)
                        .bind(&r.value)
                        .bind(&r.node_id)
                        .bind(i64::from(r.is_secret))
                        .bind(&r.changed_by)
                        .bind($crate::cluster_settings::stamp_or(&r.created, &now))
                        .bind($crate::cluster_settings::stamp_or(&r.updated, &now))
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(())
            }

            async fn list_model_definitions(
                &self,
            ) -> $crate::error::Result<Vec<$crate::cluster_settings::ModelDefinition>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::cluster_settings::model_columns!(),
                    " FROM model_definitions ORDER BY alias"
                );
                let rows = sqlx::query(SQL).fetch_all(&self.pool).await?;
                rows.iter().map(Self::model_from_row).collect()
            }

            async fn get_model_definition(
                &self,
                definition_id: &str,
            ) -> $crate::error::Result<Option<$crate::cluster_settings::ModelDefinition>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::cluster_settings::model_columns!(),
                    " FROM model_definitions WHERE definition_id = $1"
                );
                let row = sqlx::query(SQL)
                    .bind(definition_id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::model_from_row).transpose()
            }

            async fn create_model_definition(
                &self,
                new: $crate::cluster_settings::NewModelDefinition,
            ) -> $crate::error::Result<$crate::cluster_settings::ModelDefinition> {
                use $crate::error::StoreError;
                const SQL: &str = concat!(
                    "INSERT INTO model_definitions (",
                    $crate::cluster_settings::model_columns!(),
                    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) RETURNING ",
                    $crate::cluster_settings::model_columns!()
                );
                let capabilities = if new.capabilities.trim().is_empty() {
                    "{}".to_string()
                } else {
                    new.capabilities.clone()
                };
                let result = sqlx::query(SQL)
                    .bind(
                        new.definition_id
                            .clone()
                            .unwrap_or_else($crate::ids::new_ws_id),
                    )
                    .bind(&new.alias)
                    .bind(&new.model)
                    .bind(&new.provider)
                    .bind(&new.base_url)
                    .bind(&new.api_key)
                    .bind(new.context_window)
                    .bind(&capabilities)
                    .bind(i64::from(new.enabled))
                    .bind(&new.created_by)
                    .bind($crate::timestamp::now())
                    .fetch_one(&self.pool)
                    .await
                    .map_err(StoreError::from);
                match result {
                    Ok(row) => Self::model_from_row(&row),
                    Err(e) if e.is_unique_violation() => {
                        Err($crate::cluster_settings::alias_taken(&new.alias))
                    }
                    Err(e) => Err(e),
                }
            }

            async fn update_model_definition(
                &self,
                definition_id: &str,
                update: $crate::cluster_settings::ModelDefinitionUpdate,
            ) -> $crate::error::Result<Option<$crate::cluster_settings::ModelDefinition>> {
                use $crate::error::StoreError;
                let Some(mut d) = self.get_model_definition(definition_id).await? else {
                    return Ok(None);
                };
                if let Some(v) = update.alias {
                    d.alias = v;
                }
                if let Some(v) = update.model {
                    d.model = v;
                }
                if let Some(v) = update.provider {
                    d.provider = v;
                }
                if let Some(v) = update.base_url {
                    d.base_url = v;
                }
                if let Some(v) = update.api_key {
                    d.api_key = v;
                }
                if let Some(v) = update.context_window {
                    d.context_window = v;
                }
                if let Some(v) = update.capabilities {
                    d.capabilities = v;
                }
                if let Some(v) = update.enabled {
                    d.enabled = v;
                }
                const SQL: &str = concat!(
                    "UPDATE model_definitions SET alias = $2, model = $3, provider = $4, \
                     base_url = $5, api_key = $6, context_window = $7, capabilities = $8, \
                     enabled = $9, updated = $10 WHERE definition_id = $1 RETURNING ",
                    $crate::cluster_settings::model_columns!()
                );
                let result = sqlx::query(SQL)
                    .bind(definition_id)
                    .bind(&d.alias)
                    .bind(&d.model)
                    .bind(&d.provider)
                    .bind(&d.base_url)
                    .bind(&d.api_key)
                    .bind(d.context_window)
                    .bind(&d.capabilities)
                    .bind(i64::from(d.enabled))
                    .bind($crate::timestamp::now())
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(StoreError::from);
                match result {
                    Ok(row) => row.as_ref().map(Self::model_from_row).transpose(),
                    Err(e) if e.is_unique_violation() => {
                        Err($crate::cluster_settings::alias_taken(&d.alias))
                    }
                    Err(e) => Err(e),
                }
            }

            async fn delete_model_definition(
                &self,
                definition_id: &str,
            ) -> $crate::error::Result<bool> {
                let done = sqlx::query("DELETE FROM model_definitions WHERE definition_id = $1")
                    .bind(definition_id)
                    .execute(&self.pool)
                    .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn replace_model_definitions(
                &self,
                definitions: &[$crate::cluster_settings::ModelDefinition],
            ) -> $crate::error::Result<()> {
                let mut tx = self.pool.begin().await?;
                sqlx::query("DELETE FROM model_definitions")
                    .execute(&mut *tx)
                    .await?;
                let now = $crate::timestamp::now();
                for d in definitions {
                    const SQL: &str = concat!(
                        "INSERT INTO model_definitions (",
                        $crate::cluster_settings::model_columns!(),
                        ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
                    );
                    sqlx::query(SQL)
                        .bind(&d.definition_id)
                        .bind(&d.alias)
                        .bind(&d.model)
                        .bind(&d.provider)
                        .bind(&d.base_url)
                        .bind(&d.api_key)
                        .bind(d.context_window)
                        .bind(&d.capabilities)
                        .bind(i64::from(d.enabled))
                        .bind(&d.created_by)
                        .bind($crate::cluster_settings::stamp_or(&d.created, &now))
                        .bind($crate::cluster_settings::stamp_or(&d.updated, &now))
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(())
            }
        }
    };
}
pub(crate) use impl_settings_store;

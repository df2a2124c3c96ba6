//! The SQL both backends share.
//!
//! Both dialects accept `$N` placeholders, `ON CONFLICT ... DO UPDATE`, `RETURNING` and
//! `LIKE ... ESCAPE`, so everything but search and schema introspection is written once here
//! and expanded for each backend by [`impl_store!`] (a macro rather than a generic over
//! `sqlx::Database`, whose bounds would drown the logic). Backend types provide
//! `fts_search`, `schema_impl` and `search_backlog_impl` as inherent methods, and two hooks: `messages_committed`
//! (called after a `write_batch` that stored messages commits) and `stop_background_tasks`
//! (awaited by `close` before the pool closes).

macro_rules! ws_columns {
    () => {
        "ws_id, node_id, user_id, alias, title, name, state, created, updated"
    };
}
macro_rules! msg_columns {
    () => {
        "id, ws_id, timestamp, role, content, tool_name, tool_args, tool_call_id, provider_data"
    };
}
macro_rules! mem_columns {
    () => {
        "memory_id, name, description, type, scope, scope_id, content, created, updated, \
         last_accessed, access_count"
    };
}
macro_rules! approval_columns {
    () => {
        "request_id, ws_id, payload, state, verdict, feedback, decided_by, created, decided"
    };
}
pub(crate) use {approval_columns, mem_columns, msg_columns, ws_columns};

/// Tables keyed by `ws_id`, cleared when a workstream is deleted.
pub(crate) const WS_TABLES_DELETE: [&str; 6] = [
    "DELETE FROM conversations WHERE ws_id = $1",
    "DELETE FROM workstream_config WHERE ws_id = $1",
    "DELETE FROM workstream_events WHERE ws_id = $1",
    "DELETE FROM approvals WHERE ws_id = $1",
    "DELETE FROM watches WHERE ws_id = $1",
    "DELETE FROM workstreams WHERE ws_id = $1",
];

/// Rows per multi-row `INSERT` of conversation rows.
pub(crate) const INSERT_CHUNK_ROWS: usize = 256;

/// Retries of `append_event` when a concurrent writer took the same `seq`.
pub(crate) const EVENT_SEQ_RETRIES: usize = 8;

pub(crate) fn validate_memory(input: &crate::model::MemoryInput) -> crate::error::Result<()> {
    use crate::error::StoreError;
    if input.name.trim().is_empty() {
        return Err(StoreError::InvalidInput("memory name is empty".into()));
    }
    if input.content.is_empty() {
        return Err(StoreError::InvalidInput("memory content is empty".into()));
    }
    validate_scope(&input.scope)
}

pub(crate) fn validate_scope(scope: &crate::model::ScopeRef) -> crate::error::Result<()> {
    use crate::error::StoreError;
    use crate::model::MemoryScope;
    match (scope.scope, scope.scope_id.is_empty()) {
        (MemoryScope::Global, false) => Err(StoreError::InvalidInput(
            "global memories take no scope_id".into(),
        )),
        (MemoryScope::Global, true) | (_, false) => Ok(()),
        (other, true) => Err(StoreError::InvalidInput(format!(
            "{other} memories need a scope_id"
        ))),
    }
}

/// Scores a memory against lower-cased words: how many appear in name/description/content.
pub(crate) fn memory_score(m: &crate::model::Memory, words: &[String]) -> usize {
    let hay = format!("{}\n{}\n{}", m.name, m.description, m.content).to_lowercase();
    words.iter().filter(|w| hay.contains(w.as_str())).count()
}

macro_rules! impl_store {
    ($store:ty, $db:ty, $name:literal) => {
        impl $store {
            fn workstream_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::model::Workstream> {
                use sqlx::Row as _;
                Ok($crate::model::Workstream {
                    ws_id: row.try_get("ws_id")?,
                    node_id: row.try_get("node_id")?,
                    user_id: row.try_get("user_id")?,
                    alias: row.try_get("alias")?,
                    title: row.try_get("title")?,
                    name: row.try_get("name")?,
                    state: row.try_get("state")?,
                    created: row.try_get("created")?,
                    updated: row.try_get("updated")?,
                })
            }

            fn message_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::model::StoredMessage> {
                use sqlx::Row as _;
                Ok($crate::model::StoredMessage {
                    id: row.try_get("id")?,
                    ws_id: row.try_get("ws_id")?,
                    timestamp: row.try_get("timestamp")?,
                    role: row.try_get("role")?,
                    content: row.try_get("content")?,
                    tool_name: row.try_get("tool_name")?,
                    tool_args: row.try_get("tool_args")?,
                    tool_call_id: row.try_get("tool_call_id")?,
                    provider_data: row.try_get("provider_data")?,
                })
            }

            fn hit_from_row(
                row: &<$db as sqlx::Database>::Row,
                snippet_column: bool,
            ) -> $crate::error::Result<$crate::model::SearchHit> {
                use sqlx::Row as _;
                let content: Option<String> = row.try_get("content")?;
                let snippet = if snippet_column {
                    row.try_get("snippet")?
                } else {
                    content.clone().unwrap_or_default()
                };
                Ok($crate::model::SearchHit {
                    message_id: row.try_get("id")?,
                    ws_id: row.try_get("ws_id")?,
                    role: row.try_get("role")?,
                    tool_name: row.try_get("tool_name")?,
                    snippet,
                    content,
                    timestamp: row.try_get("timestamp")?,
                })
            }

            fn memory_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::model::Memory> {
                use sqlx::Row as _;
                let mem_type: String = row.try_get("type")?;
                let scope: String = row.try_get("scope")?;
                Ok($crate::model::Memory {
                    memory_id: row.try_get("memory_id")?,
                    name: row.try_get("name")?,
                    description: row.try_get("description")?,
                    mem_type: mem_type
                        .parse()
                        .map_err(|e| $crate::error::StoreError::Corrupt(format!("{e}")))?,
                    scope: scope
                        .parse()
                        .map_err(|e| $crate::error::StoreError::Corrupt(format!("{e}")))?,
                    scope_id: row.try_get("scope_id")?,
                    content: row.try_get("content")?,
                    created: row.try_get("created")?,
                    updated: row.try_get("updated")?,
                    last_accessed: row.try_get("last_accessed")?,
                    access_count: row.try_get("access_count")?,
                })
            }

            fn approval_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::model::ApprovalRecord> {
                use sqlx::Row as _;
                let payload: String = row.try_get("payload")?;
                let state: String = row.try_get("state")?;
                Ok($crate::model::ApprovalRecord {
                    request_id: row.try_get("request_id")?,
                    ws_id: row.try_get("ws_id")?,
                    payload: serde_json::from_str(&payload).map_err(|e| {
                        $crate::error::StoreError::Corrupt(format!("approval payload: {e}"))
                    })?,
                    state: state
                        .parse()
                        .map_err(|e| $crate::error::StoreError::Corrupt(format!("{e}")))?,
                    verdict: row.try_get("verdict")?,
                    feedback: row.try_get("feedback")?,
                    decided_by: row.try_get("decided_by")?,
                    created: row.try_get("created")?,
                    decided: row.try_get("decided")?,
                })
            }

            async fn memories_of_type(
                &self,
                filter: &$crate::model::MemoryFilter,
            ) -> $crate::error::Result<Vec<$crate::model::Memory>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::sql_common::mem_columns!(),
                    " FROM structured_memories WHERE ($1 IS NULL OR type = $1) ORDER BY updated DESC, name"
                );
                let rows = sqlx::query(SQL)
                    .bind(filter.mem_type.map(|t| t.as_str().to_string()))
                    .fetch_all(&self.pool)
                    .await?;
                let mut out = Vec::with_capacity(rows.len());
                for row in &rows {
                    let m = Self::memory_from_row(row)?;
                    if filter.admits(&m) {
                        out.push(m);
                    }
                }
                Ok(out)
            }

            async fn try_append_event(
                &self,
                ws_id: &str,
                event_type: &str,
                payload: &str,
            ) -> $crate::error::Result<i64> {
                let seq: i64 = sqlx::query_scalar(
                    "INSERT INTO workstream_events (ws_id, seq, type, payload, created) \
                     SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3, $4 \
                     FROM workstream_events WHERE ws_id = $1 RETURNING seq",
                )
                .bind(ws_id)
                .bind(event_type)
                .bind(payload)
                .bind($crate::timestamp::now())
                .fetch_one(&self.pool)
                .await?;
                Ok(seq)
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            fn backend_name(&self) -> &'static str {
                $name
            }

            async fn create_workstream(
                &self,
                new: $crate::model::NewWorkstream,
            ) -> $crate::error::Result<$crate::model::Workstream> {
                let ws_id = new.ws_id.unwrap_or_else($crate::ids::new_ws_id);
                if ws_id.is_empty() {
                    return Err($crate::error::StoreError::InvalidInput("empty ws_id".into()));
                }
                if let Some(alias) = &new.alias {
                    $crate::sql_common::validate_alias(alias)?;
                }
                let now = $crate::timestamp::now();
                const SQL: &str = concat!(
                    "INSERT INTO workstreams (ws_id, node_id, user_id, alias, title, name, state, created, updated) \
                     VALUES ($1, $2, $3, $4, $5, $6, 'idle', $7, $7) RETURNING ",
                    $crate::sql_common::ws_columns!()
                );
                let result = sqlx::query(SQL)
                    .bind(&ws_id)
                    .bind(&new.node_id)
                    .bind(&new.user_id)
                    .bind(&new.alias)
                    .bind(&new.title)
                    .bind(&new.name)
                    .bind(&now)
                    .fetch_one(&self.pool)
                    .await
                    .map_err($crate::error::StoreError::from);
                match result {
                    Ok(row) => Self::workstream_from_row(&row),
                    Err(e) if e.is_unique_violation() => match &new.alias {
                        Some(alias) if self.resolve_alias(alias).await?.is_some() => {
                            Err($crate::error::StoreError::AliasTaken(alias.clone()))
                        }
                        _ => Err($crate::error::StoreError::InvalidInput(format!(
                            "workstream {ws_id} already exists"
                        ))),
                    },
                    Err(e) => Err(e),
                }
            }

            async fn get_workstream(
                &self,
                ws_id: &str,
            ) -> $crate::error::Result<Option<$crate::model::Workstream>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::sql_common::ws_columns!(),
                    " FROM workstreams WHERE ws_id = $1"
                );
                let row = sqlx::query(SQL).bind(ws_id).fetch_optional(&self.pool).await?;
                row.as_ref().map(Self::workstream_from_row).transpose()
            }

            async fn set_alias(
                &self,
                ws_id: &str,
                alias: Option<&str>,
            ) -> $crate::error::Result<()> {
                if let Some(alias) = alias {
                    $crate::sql_common::validate_alias(alias)?;
                }
                // Naming is not activity: `updated` stays, so naming never resets the age.
                let result = sqlx::query("UPDATE workstreams SET alias = $2 WHERE ws_id = $1")
                .bind(ws_id)
                .bind(alias)
                .execute(&self.pool)
                .await
                .map_err($crate::error::StoreError::from);
                match result {
                    Ok(done) if done.rows_affected() == 0 => Err(
                        $crate::error::StoreError::NotFound(format!("session {ws_id}")),
                    ),
                    Ok(_) => Ok(()),
                    Err(e) if e.is_unique_violation() => Err(
                        $crate::error::StoreError::AliasTaken(alias.unwrap_or_default().into()),
                    ),
                    Err(e) => Err(e),
                }
            }

            async fn set_title(&self, ws_id: &str, title: &str) -> $crate::error::Result<()> {
                let done = sqlx::query("UPDATE workstreams SET title = $2 WHERE ws_id = $1")
                    .bind(ws_id)
                    .bind(title)
                    .execute(&self.pool)
                    .await?;
                if done.rows_affected() == 0 {
                    return Err($crate::error::StoreError::NotFound(format!("session {ws_id}")));
                }
                Ok(())
            }

            async fn set_state(&self, ws_id: &str, state: &str) -> $crate::error::Result<()> {
                let done = sqlx::query("UPDATE workstreams SET state = $2 WHERE ws_id = $1")
                    .bind(ws_id)
                    .bind(state)
                    .execute(&self.pool)
                    .await?;
                if done.rows_affected() == 0 {
                    return Err($crate::error::StoreError::NotFound(format!("session {ws_id}")));
                }
                Ok(())
            }

            async fn open_workstreams(
                &self,
                node_id: &str,
            ) -> $crate::error::Result<Vec<$crate::model::Workstream>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::sql_common::ws_columns!(),
                    " FROM workstreams WHERE node_id = $1 AND state <> 'closed' \
                     ORDER BY created, ws_id"
                );
                let rows = sqlx::query(SQL)
                    .bind(node_id)
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::workstream_from_row).collect()
            }

            async fn adopt_workstream(
                &self,
                ws_id: &str,
                node_id: &str,
            ) -> $crate::error::Result<()> {
                let done = sqlx::query("UPDATE workstreams SET node_id = $2 WHERE ws_id = $1")
                    .bind(ws_id)
                    .bind(node_id)
                    .execute(&self.pool)
                    .await?;
                if done.rows_affected() == 0 {
                    return Err($crate::error::StoreError::NotFound(format!("session {ws_id}")));
                }
                Ok(())
            }

            async fn delete_workstream(&self, ws_id: &str) -> $crate::error::Result<bool> {
                let mut tx = self.pool.begin().await?;
                let mut existed = false;
                for sql in $crate::sql_common::WS_TABLES_DELETE {
                    let done = sqlx::query(sql).bind(ws_id).execute(&mut *tx).await?;
                    existed = done.rows_affected() > 0 || existed;
                }
                tx.commit().await?;
                Ok(existed)
            }

            async fn write_batch(
                &self,
                ops: &[$crate::model::WriteOp],
            ) -> $crate::error::Result<()> {
                use $crate::model::WriteOp;
                if ops.is_empty() {
                    return Ok(());
                }
                // Latest message timestamp per touched workstream.
                let mut touched: std::collections::BTreeMap<&str, &str> =
                    std::collections::BTreeMap::new();
                let mut tx = self.pool.begin().await?;
                let messages: Vec<&$crate::model::NewMessage> = ops
                    .iter()
                    .filter_map(|op| match op {
                        WriteOp::Message(m) => Some(m),
                        _ => None,
                    })
                    .collect();
                // Multi-row inserts: far fewer statements per batch (8 binds per row stays
                // well under both backends' parameter limits).
                for chunk in messages.chunks($crate::sql_common::INSERT_CHUNK_ROWS) {
                    let mut insert = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO conversations (ws_id, timestamp, role, content, tool_name, \
                         tool_args, tool_call_id, provider_data) ",
                    );
                    insert.push_values(chunk, |mut row, m| {
                        row.push_bind(&m.ws_id)
                            .push_bind(&m.timestamp)
                            .push_bind(m.role.as_str())
                            .push_bind(&m.content)
                            .push_bind(&m.tool_name)
                            .push_bind(&m.tool_args)
                            .push_bind(&m.tool_call_id)
                            .push_bind(&m.provider_data);
                    });
                    insert.build().execute(&mut *tx).await?;
                    for m in chunk {
                        let entry = touched.entry(m.ws_id.as_str()).or_insert(m.timestamp.as_str());
                        if m.timestamp.as_str() > *entry {
                            *entry = m.timestamp.as_str();
                        }
                    }
                }
                for op in ops {
                    match op {
                        WriteOp::Message(_) => {}
                        WriteOp::Usage(event) => {
                            $crate::usage::insert_usage!(&mut *tx, event);
                        }
                        WriteOp::QueueSend(_)
                        | WriteOp::QueueState { .. }
                        | WriteOp::QueueOutcome { .. } => {
                            $crate::queued::write_queue_op!(tx, op);
                        }
                        WriteOp::Config { ws_id, key, value: Some(value) } => {
                            sqlx::query(
                                "INSERT INTO workstream_config (ws_id, key, value) VALUES ($1, $2, $3) \
                                 ON CONFLICT (ws_id, key) DO UPDATE SET value = excluded.value",
                            )
                            .bind(ws_id)
                            .bind(key)
                            .bind(value)
                            .execute(&mut *tx)
                            .await?;
                        }
                        WriteOp::Config { ws_id, key, value: None } => {
                            sqlx::query("DELETE FROM workstream_config WHERE ws_id = $1 AND key = $2")
                                .bind(ws_id)
                                .bind(key)
                                .execute(&mut *tx)
                                .await?;
                        }
                    }
                }
                for (ws_id, ts) in touched {
                    sqlx::query(
                        "INSERT INTO workstreams (ws_id, name, state, created, updated) \
                         VALUES ($1, '', 'idle', $2, $2) \
                         ON CONFLICT (ws_id) DO UPDATE SET updated = CASE \
                         WHEN excluded.updated > workstreams.updated THEN excluded.updated \
                         ELSE workstreams.updated END",
                    )
                    .bind(ws_id)
                    .bind(ts)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                if !messages.is_empty() {
                    self.messages_committed();
                }
                Ok(())
            }

            async fn load_messages(
                &self,
                ws_id: &str,
            ) -> $crate::error::Result<Vec<$crate::model::StoredMessage>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::sql_common::msg_columns!(),
                    " FROM conversations WHERE ws_id = $1 ORDER BY id"
                );
                let rows = sqlx::query(SQL).bind(ws_id).fetch_all(&self.pool).await?;
                rows.iter().map(Self::message_from_row).collect()
            }

            async fn load_config(
                &self,
                ws_id: &str,
            ) -> $crate::error::Result<std::collections::BTreeMap<String, String>> {
                let rows: Vec<(String, Option<String>)> = sqlx::query_as(
                    "SELECT key, value FROM workstream_config WHERE ws_id = $1",
                )
                .bind(ws_id)
                .fetch_all(&self.pool)
                .await?;
                Ok(rows
                    .into_iter()
                    .filter_map(|(k, v)| v.map(|v| (k, v)))
                    .collect())
            }

            async fn resolve_session(&self, key: &str) -> $crate::error::Result<String> {
                use $crate::error::StoreError;
                let key = key.trim();
                if key.is_empty() {
                    return Err(StoreError::InvalidInput("empty session key".into()));
                }
                if let Some(ws_id) = self.resolve_alias(key).await? {
                    return Ok(ws_id);
                }
                let exact: Option<String> =
                    sqlx::query_scalar("SELECT ws_id FROM workstreams WHERE ws_id = $1")
                        .bind(key)
                        .fetch_optional(&self.pool)
                        .await?;
                if let Some(ws_id) = exact {
                    return Ok(ws_id);
                }
                let pattern = $crate::store::like_prefix(key);
                let matches: Vec<String> = sqlx::query_scalar(
                    "SELECT ws_id FROM workstreams WHERE ws_id LIKE $1 ESCAPE '\\' ORDER BY ws_id LIMIT 2",
                )
                .bind(&pattern)
                .fetch_all(&self.pool)
                .await?;
                match matches.len() {
                    0 => Err(StoreError::NotFound(format!("no session matches {key:?}"))),
                    1 => Ok(matches.into_iter().next().unwrap_or_default()),
                    _ => {
                        let count: i64 = sqlx::query_scalar(
                            "SELECT COUNT(*) FROM workstreams WHERE ws_id LIKE $1 ESCAPE '\\'",
                        )
                        .bind(&pattern)
                        .fetch_one(&self.pool)
                        .await?;
                        Err(StoreError::Ambiguous { prefix: key.to_string(), matches: count })
                    }
                }
            }

            async fn list_sessions(
                &self,
                limit: usize,
            ) -> $crate::error::Result<Vec<$crate::model::SessionSummary>> {
                use sqlx::Row as _;
                let rows = sqlx::query(
                    "SELECT w.ws_id, w.node_id, w.user_id, w.alias, w.title, w.name, w.state, \
                     w.created, w.updated, \
                     (SELECT COUNT(*) FROM conversations c WHERE c.ws_id = w.ws_id) AS message_count \
                     FROM workstreams w \
                     WHERE EXISTS (SELECT 1 FROM conversations c WHERE c.ws_id = w.ws_id) \
                     ORDER BY w.updated DESC, w.ws_id LIMIT $1",
                )
                .bind($crate::store::limit_i64(limit))
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|row| {
                        Ok($crate::model::SessionSummary {
                            workstream: Self::workstream_from_row(row)?,
                            message_count: row.try_get("message_count")?,
                        })
                    })
                    .collect()
            }

            async fn prune_sessions(
                &self,
                node_id: &str,
                retention_days: u32,
            ) -> $crate::error::Result<u64> {
                // An empty cut-off sorts before every timestamp: no age pruning.
                let cutoff = if retention_days == 0 {
                    String::new()
                } else {
                    $crate::timestamp::days_ago(retention_days)
                };
                let mut tx = self.pool.begin().await?;
                let doomed: Vec<String> = sqlx::query_scalar(
                    "SELECT w.ws_id FROM workstreams w \
                     WHERE (w.node_id = $2 OR w.node_id IS NULL) \
                     AND (NOT EXISTS (SELECT 1 FROM conversations c WHERE c.ws_id = w.ws_id) \
                     OR (w.alias IS NULL AND w.updated < $1))",
                )
                .bind(&cutoff)
                .bind(node_id)
                .fetch_all(&mut *tx)
                .await?;
                for ws_id in &doomed {
                    for sql in $crate::sql_common::WS_TABLES_DELETE {
                        sqlx::query(sql).bind(ws_id).execute(&mut *tx).await?;
                    }
                }
                tx.commit().await?;
                Ok(doomed.len() as u64)
            }

            async fn search(
                &self,
                query: &str,
                limit: usize,
            ) -> $crate::error::Result<Vec<$crate::model::SearchHit>> {
                let terms = $crate::store::search_terms(query)?;
                self.fts_search(&terms, $crate::store::limit_i64(limit)).await
            }

            async fn recent_messages(
                &self,
                limit: usize,
            ) -> $crate::error::Result<Vec<$crate::model::SearchHit>> {
                let rows = sqlx::query(
                    "SELECT id, ws_id, role, tool_name, content, timestamp FROM conversations \
                     ORDER BY id DESC LIMIT $1",
                )
                .bind($crate::store::limit_i64(limit))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(|r| Self::hit_from_row(r, false)).collect()
            }

            async fn save_memory(
                &self,
                input: $crate::model::MemoryInput,
            ) -> $crate::error::Result<$crate::model::Memory> {
                $crate::sql_common::validate_memory(&input)?;
                const SQL: &str = concat!(
                    "INSERT INTO structured_memories (memory_id, name, description, type, scope, \
                     scope_id, content, created, updated) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) \
                     ON CONFLICT (name, scope, scope_id) DO UPDATE SET \
                     description = excluded.description, type = excluded.type, \
                     content = excluded.content, updated = excluded.updated RETURNING ",
                    $crate::sql_common::mem_columns!()
                );
                let row = sqlx::query(SQL)
                    .bind($crate::ids::new_uuid())
                    .bind(input.name.trim())
                    .bind(&input.description)
                    .bind(input.mem_type.as_str())
                    .bind(input.scope.scope.as_str())
                    .bind(&input.scope.scope_id)
                    .bind(&input.content)
                    .bind($crate::timestamp::now())
                    .fetch_one(&self.pool)
                    .await?;
                Self::memory_from_row(&row)
            }

            async fn get_memory(
                &self,
                name: &str,
                scope: &$crate::model::ScopeRef,
            ) -> $crate::error::Result<Option<$crate::model::Memory>> {
                const SQL: &str = concat!(
                    "UPDATE structured_memories SET access_count = access_count + 1, last_accessed = $4 \
                     WHERE name = $1 AND scope = $2 AND scope_id = $3 RETURNING ",
                    $crate::sql_common::mem_columns!()
                );
                let row = sqlx::query(SQL)
                    .bind(name.trim())
                    .bind(scope.scope.as_str())
                    .bind(&scope.scope_id)
                    .bind($crate::timestamp::now())
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::memory_from_row).transpose()
            }

            async fn search_memories(
                &self,
                query: &str,
                filter: &$crate::model::MemoryFilter,
                limit: usize,
            ) -> $crate::error::Result<Vec<$crate::model::Memory>> {
                let words: Vec<String> = $crate::store::search_terms(query)?
                    .into_iter()
                    .map(|w| w.to_lowercase())
                    .collect();
                let mut scored: Vec<(usize, $crate::model::Memory)> = self
                    .memories_of_type(filter)
                    .await?
                    .into_iter()
                    .map(|m| ($crate::sql_common::memory_score(&m, &words), m))
                    .filter(|(score, _)| *score == words.len())
                    .collect();
                // Already newest first; a stable sort keeps that order among equals.
                scored.sort_by(|a, b| b.0.cmp(&a.0));
                Ok(scored.into_iter().take(limit).map(|(_, m)| m).collect())
            }

            async fn delete_memory(
                &self,
                name: &str,
                scope: &$crate::model::ScopeRef,
            ) -> $crate::error::Result<bool> {
                let done = sqlx::query(
                    "DELETE FROM structured_memories WHERE name = $1 AND scope = $2 AND scope_id = $3",
                )
                .bind(name.trim())
                .bind(scope.scope.as_str())
                .bind(&scope.scope_id)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn list_memories(
                &self,
                filter: &$crate::model::MemoryFilter,
                limit: usize,
            ) -> $crate::error::Result<Vec<$crate::model::Memory>> {
                let mut all = self.memories_of_type(filter).await?;
                all.truncate(limit);
                Ok(all)
            }

            async fn append_event(
                &self,
                ws_id: &str,
                event_type: &str,
                payload: &serde_json::Value,
            ) -> $crate::error::Result<i64> {
                let payload = payload.to_string();
                let mut attempt = 0;
                loop {
                    match self.try_append_event(ws_id, event_type, &payload).await {
                        Err(e)
                            if e.is_unique_violation()
                                && attempt < $crate::sql_common::EVENT_SEQ_RETRIES =>
                        {
                            attempt += 1;
                            tokio::task::yield_now().await;
                        }
                        other => return other,
                    }
                }
            }

            async fn events_after(
                &self,
                ws_id: &str,
                after_seq: i64,
                limit: usize,
            ) -> $crate::error::Result<Vec<$crate::model::EventRecord>> {
                let rows: Vec<(String, i64, String, String, String)> = sqlx::query_as(
                    "SELECT ws_id, seq, type, payload, created FROM workstream_events \
                     WHERE ws_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                )
                .bind(ws_id)
                .bind(after_seq)
                .bind($crate::store::limit_i64(limit))
                .fetch_all(&self.pool)
                .await?;
                rows.into_iter()
                    .map(|(ws_id, seq, event_type, payload, created)| {
                        Ok($crate::model::EventRecord {
                            payload: serde_json::from_str(&payload).map_err(|e| {
                                $crate::error::StoreError::Corrupt(format!("event payload: {e}"))
                            })?,
                            ws_id,
                            seq,
                            event_type,
                            created,
                        })
                    })
                    .collect()
            }

            async fn create_approval(
                &self,
                request_id: &str,
                ws_id: &str,
                payload: &serde_json::Value,
            ) -> $crate::error::Result<$crate::model::ApprovalRecord> {
                if request_id.is_empty() {
                    return Err($crate::error::StoreError::InvalidInput("empty request_id".into()));
                }
                const SQL: &str = concat!(
                    "INSERT INTO approvals (request_id, ws_id, payload, state, created) \
                     VALUES ($1, $2, $3, 'pending', $4) RETURNING ",
                    $crate::sql_common::approval_columns!()
                );
                let result = sqlx::query(SQL)
                    .bind(request_id)
                    .bind(ws_id)
                    .bind(payload.to_string())
                    .bind($crate::timestamp::now())
                    .fetch_one(&self.pool)
                    .await
                    .map_err($crate::error::StoreError::from);
                match result {
                    Ok(row) => Self::approval_from_row(&row),
                    Err(e) if e.is_unique_violation() => Err($crate::error::StoreError::InvalidInput(
                        format!("approval {request_id} already exists"),
                    )),
                    Err(e) => Err(e),
                }
            }

            async fn decide_approval(
                &self,
                request_id: &str,
                decision: $crate::model::ApprovalDecision,
            ) -> $crate::error::Result<$crate::model::DecideOutcome> {
                use $crate::error::StoreError;
                if decision.state == $crate::model::ApprovalState::Pending {
                    return Err(StoreError::InvalidInput("a decision cannot be 'pending'".into()));
                }
                let done = sqlx::query(
                    "UPDATE approvals SET state = $2, verdict = $3, feedback = $4, decided_by = $5, \
                     decided = $6 WHERE request_id = $1 AND state = 'pending'",
                )
                .bind(request_id)
                .bind(decision.state.as_str())
                .bind(&decision.verdict)
                .bind(&decision.feedback)
                .bind(&decision.decided_by)
                .bind($crate::timestamp::now())
                .execute(&self.pool)
                .await?;
                let record = self
                    .get_approval(request_id)
                    .await?
                    .ok_or_else(|| StoreError::NotFound(format!("approval {request_id}")))?;
                Ok($crate::model::DecideOutcome { record, applied: done.rows_affected() == 1 })
            }

            async fn get_approval(
                &self,
                request_id: &str,
            ) -> $crate::error::Result<Option<$crate::model::ApprovalRecord>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::sql_common::approval_columns!(),
                    " FROM approvals WHERE request_id = $1"
                );
                let row = sqlx::query(SQL).bind(request_id).fetch_optional(&self.pool).await?;
                row.as_ref().map(Self::approval_from_row).transpose()
            }

            async fn pending_approvals(
                &self,
                ws_id: &str,
            ) -> $crate::error::Result<Vec<$crate::model::ApprovalRecord>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::sql_common::approval_columns!(),
                    " FROM approvals WHERE ws_id = $1 AND state = 'pending' ORDER BY created, request_id"
                );
                let rows = sqlx::query(SQL).bind(ws_id).fetch_all(&self.pool).await?;
                rows.iter().map(Self::approval_from_row).collect()
            }

            async fn describe_schema(
                &self,
            ) -> $crate::error::Result<$crate::model::SchemaDescription> {
                self.schema_impl().await
            }

            async fn search_backlog(&self) -> $crate::error::Result<u64> {
                self.search_backlog_impl().await
            }

            async fn close(&self) {
                self.stop_background_tasks().await;
                self.pool.close().await;
            }
        }

        impl $store {
            async fn resolve_alias(&self, alias: &str) -> $crate::error::Result<Option<String>> {
                Ok(sqlx::query_scalar("SELECT ws_id FROM workstreams WHERE alias = $1")
                    .bind(alias)
                    .fetch_optional(&self.pool)
                    .await?)
            }
        }
    };
}

pub(crate) use impl_store;

pub(crate) fn validate_alias(alias: &str) -> crate::error::Result<()> {
    if alias.trim().is_empty() {
        return Err(crate::error::StoreError::InvalidInput("empty alias".into()));
    }
    Ok(())
}

//! The console scheduler's tasks and their runs (spec §6.1 `scheduled_tasks`,
//! `scheduled_task_runs`), through [`ScheduleStore`].
//!
//! The store keeps rows; what a schedule means (cron parsing, the next run, dispatch) is the
//! console's. `next_run` is a store timestamp ([`crate::timestamp`]), so "due" is a text
//! comparison: enabled tasks whose `next_run` is at or before now. The SQL is written once,
//! in `impl_schedule_store!`, for both backends.

use async_trait::async_trait;

use crate::error::Result;

/// A task row.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ScheduledTask {
    pub task_id: String,
    pub name: String,
    pub description: String,
    /// `cron` or `at`.
    pub schedule_type: String,
    pub cron_expr: String,
    /// A store timestamp, for `at` tasks.
    pub at_time: String,
    /// `auto`, `pool`, `all` or a node id.
    pub target_mode: String,
    pub model: String,
    pub initial_message: String,
    pub auto_approve: bool,
    /// Comma list of tool names.
    pub auto_approve_tools: String,
    pub skill: String,
    pub enabled: bool,
    pub created_by: String,
    pub last_run: Option<String>,
    pub next_run: Option<String>,
    pub created: String,
    pub updated: String,
}

/// A run row: one firing of a task.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TaskRun {
    pub run_id: String,
    pub task_id: String,
    pub node_id: String,
    pub ws_id: String,
    pub correlation_id: String,
    pub started: String,
    /// `dispatched` or `failed`.
    pub status: String,
    pub error: String,
}

/// A run to record (its id and `started` are the store's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewTaskRun {
    pub task_id: String,
    pub node_id: String,
    pub ws_id: String,
    pub correlation_id: String,
    pub status: String,
    pub error: String,
}

/// Scheduled tasks and their runs.
#[async_trait]
pub trait ScheduleStore: Send + Sync {
    /// Inserts the task as given, with a fresh id and `created`/`updated` (the id and times
    /// of `task` are ignored).
    async fn create_task(&self, task: ScheduledTask) -> Result<ScheduledTask>;
    async fn get_task(&self, task_id: &str) -> Result<Option<ScheduledTask>>;
    /// Every task, by name.
    async fn list_tasks(&self) -> Result<Vec<ScheduledTask>>;
    /// Writes every changeable column of `task` (not its id, `created_by`, `created`);
    /// `None` when there is no such task.
    async fn save_task(&self, task: &ScheduledTask) -> Result<Option<ScheduledTask>>;
    /// Deletes the task and its runs.
    async fn delete_task(&self, task_id: &str) -> Result<bool>;
    /// Enabled tasks whose `next_run` is at or before `now`, earliest first.
    async fn due_tasks(&self, now: &str) -> Result<Vec<ScheduledTask>>;
    /// After a dispatched firing: `last_run`, the next run (`None`: no more) and whether the
    /// task stays enabled.
    async fn task_fired(
        &self,
        task_id: &str,
        last_run: &str,
        next_run: Option<&str>,
        enabled: bool,
    ) -> Result<()>;
    async fn record_run(&self, run: NewTaskRun) -> Result<TaskRun>;
    /// The task's runs, newest first.
    async fn list_runs(&self, task_id: &str, limit: usize) -> Result<Vec<TaskRun>>;
    /// Keeps the newest `keep` runs of every task; how many were deleted.
    async fn prune_runs(&self, keep: usize) -> Result<u64>;
}

macro_rules! task_columns {
    () => {
        "task_id, name, description, schedule_type, cron_expr, at_time, target_mode, model, \
         initial_message, auto_approve, auto_approve_tools, skill, enabled, created_by, \
         last_run, next_run, created, updated"
    };
}
macro_rules! run_columns {
    () => {
        "run_id, task_id, node_id, ws_id, correlation_id, started, status, error"
    };
}
pub(crate) use {run_columns, task_columns};

/// Binds the changeable columns `name` … `enabled` of a task, in `task_columns!` order.
macro_rules! bind_task_fields {
    ($query:expr, $task:expr) => {
        $query
            .bind(&$task.name)
            .bind(&$task.description)
            .bind(&$task.schedule_type)
            .bind(&$task.cron_expr)
            .bind(&$task.at_time)
            .bind(&$task.target_mode)
            .bind(&$task.model)
            .bind(&$task.initial_message)
            .bind(i64::from($task.auto_approve))
            .bind(&$task.auto_approve_tools)
            .bind(&$task.skill)
            .bind(i64::from($task.enabled))
    };
}
pub(crate) use bind_task_fields;

/// Implements [`ScheduleStore`] for a backend type with a `pool` field.
macro_rules! impl_schedule_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn task_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::schedules::ScheduledTask> {
                use sqlx::Row as _;
                let auto_approve: i64 = row.try_get("auto_approve")?;
                let enabled: i64 = row.try_get("enabled")?;
                Ok($crate::schedules::ScheduledTask {
                    task_id: row.try_get("task_id")?,
                    name: row.try_get("name")?,
                    description: row.try_get("description")?,
                    schedule_type: row.try_get("schedule_type")?,
                    cron_expr: row.try_get("cron_expr")?,
                    at_time: row.try_get("at_time")?,
                    target_mode: row.try_get("target_mode")?,
                    model: row.try_get("model")?,
                    initial_message: row.try_get("initial_message")?,
                    auto_approve: auto_approve != 0,
                    auto_approve_tools: row.try_get("auto_approve_tools")?,
                    skill: row.try_get("skill")?,
                    enabled: enabled != 0,
                    created_by: row.try_get("created_by")?,
                    last_run: row.try_get("last_run")?,
                    next_run: row.try_get("next_run")?,
                    created: row.try_get("created")?,
                    updated: row.try_get("updated")?,
                })
            }

            fn run_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::schedules::TaskRun> {
                use sqlx::Row as _;
                Ok($crate::schedules::TaskRun {
                    run_id: row.try_get("run_id")?,
                    task_id: row.try_get("task_id")?,
                    node_id: row.try_get("node_id")?,
                    ws_id: row.try_get("ws_id")?,
                    correlation_id: row.try_get("correlation_id")?,
                    started: row.try_get("started")?,
                    status: row.try_get("status")?,
                    error: row.try_get("error")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::schedules::ScheduleStore for $store {
            async fn create_task(
                &self,
                task: $crate::schedules::ScheduledTask,
            ) -> $crate::error::Result<$crate::schedules::ScheduledTask> {
                let now = $crate::timestamp::now();
                const SQL: &str = concat!(
                    "INSERT INTO scheduled_tasks (",
                    $crate::schedules::task_columns!(),
                    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, \
                     $15, $16, $17, $17) RETURNING ",
                    $crate::schedules::task_columns!()
                );
                let query = sqlx::query(SQL).bind($crate::ids::new_ws_id());
                let row = $crate::schedules::bind_task_fields!(query, task)
                    .bind(&task.created_by)
                    .bind(&task.last_run)
                    .bind(&task.next_run)
                    .bind(&now)
                    .fetch_one(&self.pool)
                    .await?;
                Self::task_from_row(&row)
            }

            async fn get_task(
                &self,
                task_id: &str,
            ) -> $crate::error::Result<Option<$crate::schedules::ScheduledTask>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::schedules::task_columns!(),
                    " FROM scheduled_tasks WHERE task_id = $1"
                );
                let row = sqlx::query(SQL).bind(task_id).fetch_optional(&self.pool).await?;
                row.as_ref().map(Self::task_from_row).transpose()
            }

            async fn list_tasks(
                &self,
            ) -> $crate::error::Result<Vec<$crate::schedules::ScheduledTask>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::schedules::task_columns!(),
                    " FROM scheduled_tasks ORDER BY name, task_id"
                );
                let rows = sqlx::query(SQL).fetch_all(&self.pool).await?;
                rows.iter().map(Self::task_from_row).collect()
            }

            async fn save_task(
                &self,
                task: &$crate::schedules::ScheduledTask,
            ) -> $crate::error::Result<Option<$crate::schedules::ScheduledTask>> {
                const SQL: &str = concat!(
                    "UPDATE scheduled_tasks SET name = $2, description = $3, schedule_type = $4, \
                     cron_expr = $5, at_time = $6, target_mode = $7, model = $8, \
                     initial_message = $9, auto_approve = $10, auto_approve_tools = $11, \
                     skill = $12, enabled = $13, last_run = $14, next_run = $15, updated = $16 \
                     WHERE task_id = $1 RETURNING ",
                    $crate::schedules::task_columns!()
                );
                let query = sqlx::query(SQL).bind(&task.task_id);
                let row = $crate::schedules::bind_task_fields!(query, task)
                    .bind(&task.last_run)
                    .bind(&task.next_run)
                    .bind($crate::timestamp::now())
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(Self::task_from_row).transpose()
            }

            async fn delete_task(&self, task_id: &str) -> $crate::error::Result<bool> {
                let mut tx = self.pool.begin().await?;
                sqlx::query("DELETE FROM scheduled_task_runs WHERE task_id = $1")
                    .bind(task_id)
                    .execute(&mut *tx)
                    .await?;
                let done = sqlx::query("DELETE FROM scheduled_tasks WHERE task_id = $1")
                    .bind(task_id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(done.rows_affected() > 0)
            }

            async fn due_tasks(
                &self,
                now: &str,
            ) -> $crate::error::Result<Vec<$crate::schedules::ScheduledTask>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::schedules::task_columns!(),
                    " FROM scheduled_tasks WHERE enabled = 1 AND next_run IS NOT NULL \
                     AND next_run <> '' AND next_run <= $1 ORDER BY next_run, task_id"
                );
                let rows = sqlx::query(SQL).bind(now).fetch_all(&self.pool).await?;
                rows.iter().map(Self::task_from_row).collect()
            }

            async fn task_fired(
                &self,
                task_id: &str,
                last_run: &str,
                next_run: Option<&str>,
                enabled: bool,
            ) -> $crate::error::Result<()> {
                sqlx::query(
                    "UPDATE scheduled_tasks SET last_run = $2, next_run = $3, enabled = $4, \
                     updated = $5 WHERE task_id = $1",
                )
                .bind(task_id)
                .bind(last_run)
                .bind(next_run)
                .bind(i64::from(enabled))
                .bind($crate::timestamp::now())
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn record_run(
                &self,
                run: $crate::schedules::NewTaskRun,
            ) -> $crate::error::Result<$crate::schedules::TaskRun> {
                const SQL: &str = concat!(
                    "INSERT INTO scheduled_task_runs (",
                    $crate::schedules::run_columns!(),
                    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ",
                    $crate::schedules::run_columns!()
                );
                let row = sqlx::query(SQL)
                    .bind($crate::ids::new_ws_id())
                    .bind(&run.task_id)
                    .bind(&run.node_id)
                    .bind(&run.ws_id)
                    .bind(&run.correlation_id)
                    .bind($crate::timestamp::now())
                    .bind(&run.status)
                    .bind(&run.error)
                    .fetch_one(&self.pool)
                    .await?;
                Self::run_from_row(&row)
            }

            async fn list_runs(
                &self,
                task_id: &str,
                limit: usize,
            ) -> $crate::error::Result<Vec<$crate::schedules::TaskRun>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::schedules::run_columns!(),
                    " FROM scheduled_task_runs WHERE task_id = $1 \
                     ORDER BY started DESC, run_id LIMIT $2"
                );
                let rows = sqlx::query(SQL)
                    .bind(task_id)
                    .bind($crate::store::limit_i64(limit))
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::run_from_row).collect()
            }

            async fn prune_runs(&self, keep: usize) -> $crate::error::Result<u64> {
                let done = sqlx::query(
                    "DELETE FROM scheduled_task_runs WHERE run_id NOT IN (\
                     SELECT r.run_id FROM scheduled_task_runs r \
                     WHERE r.task_id = scheduled_task_runs.task_id \
                     ORDER BY r.started DESC, r.run_id LIMIT $1)",
                )
                .bind($crate::store::limit_i64(keep))
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected())
            }
        }
    };
}
pub(crate) use impl_schedule_store;

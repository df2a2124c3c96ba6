//! Scheduled tasks in the console's store: their admin routes under
//! `/v1/api/admin/schedules` (scope approve, permission `admin.schedules`) and the rules of a
//! schedule — which the scheduler ([`crate::scheduler`]) fires.
//!
//! A task is `cron` (`cron_expr`: five fields, or six with seconds first; UTC) or `at`
//! (`at_time`: ISO-8601, UTC when it has no offset). `target_mode` is `auto`, `pool`, `all`
//! or a node id. `next_run` is worked out when a task is created or changed: the next cron
//! occurrence after now, or the `at` time (one in the past fires at the next tick). Switching
//! approvals off (`auto_approve`, `auto_approve_tools`) needs what it needs everywhere: the
//! approve scope and the `tools.approve` permission (docs/security.md).

use std::str::FromStr;
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};
use turnstone_accounts::audit::Actor;
use turnstone_accounts::body::AccountsJson;
use turnstone_runtime::auth::Identity;
use turnstone_store::{ScheduledTask, Store};

use crate::error::ApiError;
use crate::state::Console;

/// Longest task name, model, skill and first message (as workstream creation truncates).
const MAX_NAME: usize = 256;
const MAX_MODEL: usize = 128;
const MAX_SKILL: usize = 256;
const MAX_MESSAGE: usize = 4096;
/// Runs listed by default.
const DEFAULT_RUNS: usize = 50;

/// A parsed cron expression.
#[derive(Debug, Clone)]
pub struct CronSchedule(croner::Cron);

impl CronSchedule {
    /// Five fields (minute hour day-of-month month day-of-week) or six (seconds first).
    pub fn parse(expr: &str) -> Result<Self, String> {
        let expr = expr.trim();
        if expr.is_empty() {
            return Err("cron_expr is required for a cron task".into());
        }
        // Seconds are optional in croner's default parser.
        croner::Cron::from_str(expr)
            .map(Self)
            .map_err(|e| format!("Invalid cron_expr '{expr}': {e}"))
    }

    /// The first occurrence strictly after `after`.
    pub fn next_after(&self, after: SystemTime) -> Option<SystemTime> {
        let start: chrono::DateTime<chrono::Utc> = after.into();
        self.0
            .find_next_occurrence(&start, false)
            .ok()
            .map(SystemTime::from)
    }
}

/// When a task should next fire, seen at `now` (`None`: never again).
pub fn next_run(task: &ScheduledTask, now: SystemTime) -> Option<String> {
    match task.schedule_type.as_str() {
        "cron" => CronSchedule::parse(&task.cron_expr)
            .ok()?
            .next_after(now)
            .map(turnstone_store::timestamp::format_system_time),
        "at" => (!task.at_time.is_empty()).then(|| task.at_time.clone()),
        _ => None,
    }
}

/// Checks a task and normalises `at_time`; the error is the 400 message.
pub fn validate(task: &mut ScheduledTask) -> Result<(), String> {
    task.name = task.name.trim().to_string();
    if task.name.is_empty() || task.name.chars().count() > MAX_NAME {
        return Err(format!("name is required (at most {MAX_NAME} characters)"));
    }
    if task.initial_message.trim().is_empty() || task.initial_message.chars().count() > MAX_MESSAGE
    {
        return Err(format!(
            "initial_message is required (at most {MAX_MESSAGE} characters)"
        ));
    }
    if task.model.chars().count() > MAX_MODEL {
        return Err(format!("model is at most {MAX_MODEL} characters"));
    }
    if task.skill.chars().count() > MAX_SKILL {
        return Err(format!("skill is at most {MAX_SKILL} characters"));
    }
    match task.schedule_type.as_str() {
        "cron" => {
            CronSchedule::parse(&task.cron_expr)?;
            task.at_time.clear();
        }
        "at" => {
            let at = turnstone_store::timestamp::parse(task.at_time.trim()).ok_or_else(|| {
                format!(
                    "Invalid at_time '{}': expected an ISO-8601 date-time",
                    task.at_time
                )
            })?;
            task.at_time = turnstone_store::timestamp::format_system_time(at);
            task.cron_expr.clear();
        }
        other => {
            return Err(format!(
                "Invalid schedule_type '{other}' (expected cron or at)"
            ));
        }
    }
    task.target_mode = task.target_mode.trim().to_string();
    if task.target_mode.is_empty() {
        task.target_mode = "auto".into();
    }
    if !matches!(task.target_mode.as_str(), "auto" | "pool" | "all")
        && !crate::api::valid_node_id(&task.target_mode)
    {
        return Err(format!(
            "Invalid target_mode '{}' (expected auto, pool, all or a node id)",
            task.target_mode
        ));
    }
    task.auto_approve_tools = task
        .auto_approve_tools
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(",");
    Ok(())
}

/// `POST` (every field; `name`, `schedule_type`, its `cron_expr` or `at_time` and
/// `initial_message` required) and `PUT` (the fields to change).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TaskBody {
    pub name: Option<String>,
    pub description: Option<String>,
    pub schedule_type: Option<String>,
    pub cron_expr: Option<String>,
    pub at_time: Option<String>,
    pub target_mode: Option<String>,
    pub model: Option<String>,
    pub initial_message: Option<String>,
    pub auto_approve: Option<bool>,
    /// Comma list of tool names.
    pub auto_approve_tools: Option<String>,
    pub skill: Option<String>,
    pub enabled: Option<bool>,
}

impl TaskBody {
    fn apply(self, task: &mut ScheduledTask) {
        let set = |field: &mut String, value: Option<String>| {
            if let Some(v) = value {
                *field = v;
            }
        };
        set(&mut task.name, self.name);
        set(&mut task.description, self.description);
        set(&mut task.schedule_type, self.schedule_type);
        set(&mut task.cron_expr, self.cron_expr);
        set(&mut task.at_time, self.at_time);
        set(&mut task.target_mode, self.target_mode);
        set(&mut task.model, self.model);
        set(&mut task.initial_message, self.initial_message);
        set(&mut task.auto_approve_tools, self.auto_approve_tools);
        set(&mut task.skill, self.skill);
        if let Some(v) = self.auto_approve {
            task.auto_approve = v;
        }
        if let Some(v) = self.enabled {
            task.enabled = v;
        }
    }
}

fn store(console: &Console) -> Result<Arc<dyn Store>, ApiError> {
    console
        .store
        .clone()
        .ok_or_else(|| ApiError::Unavailable("Storage not available".into()))
}

fn storage(e: turnstone_store::StoreError) -> ApiError {
    ApiError::Internal(format!("storage error: {e}"))
}

fn not_found() -> ApiError {
    ApiError::NotFound("Schedule not found".into())
}

/// Switching approvals off is an approve-scope act with `tools.approve`; without auth there
/// is no identity and nothing to check.
fn check_auto_approve(task: &ScheduledTask, identity: Option<&Identity>) -> Result<(), ApiError> {
    let switches_off = task.auto_approve || !task.auto_approve_tools.is_empty();
    match identity {
        Some(i) if switches_off && !i.may_switch_approvals_off() => Err(ApiError::Auth {
            status: 403,
            message: "Forbidden: auto_approve needs the approve scope and the 'tools.approve' \
                      permission"
                .into(),
        }),
        _ => Ok(()),
    }
}

/// A task with its newest run's status (`last_status`, `last_error`).
async fn view(store: &Arc<dyn Store>, task: ScheduledTask) -> Result<Value, ApiError> {
    let last = store
        .list_runs(&task.task_id, 1)
        .await
        .map_err(storage)?
        .into_iter()
        .next();
    let mut v = serde_json::to_value(&task).map_err(|e| ApiError::Internal(e.to_string()))?;
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "last_status".into(),
            json!(last.as_ref().map(|r| r.status.clone())),
        );
        o.insert("last_error".into(), json!(last.map(|r| r.error)));
    }
    Ok(v)
}

/// What the audit log keeps of a task change.
fn audit_detail(task: &ScheduledTask) -> Value {
    json!({
        "name": task.name,
        "schedule_type": task.schedule_type,
        "cron_expr": task.cron_expr,
        "at_time": task.at_time,
        "target_mode": task.target_mode,
        "enabled": task.enabled,
        "auto_approve": task.auto_approve,
    })
}

/// `GET /v1/api/admin/schedules`.
pub async fn list(State(console): State<Arc<Console>>) -> Result<Json<Value>, ApiError> {
    let store = store(&console)?;
    let mut tasks = Vec::new();
    for task in store.list_tasks().await.map_err(storage)? {
        tasks.push(view(&store, task).await?);
    }
    Ok(Json(json!({ "tasks": tasks })))
}

/// `POST /v1/api/admin/schedules`: 201 with the task.
pub async fn create(
    State(console): State<Arc<Console>>,
    identity: Option<Extension<Identity>>,
    actor: Actor,
    AccountsJson(body): AccountsJson<TaskBody>,
) -> Result<Response, ApiError> {
    let store = store(&console)?;
    let identity = identity.map(|Extension(i)| i);
    let mut task = ScheduledTask {
        task_id: String::new(),
        name: String::new(),
        description: String::new(),
        schedule_type: String::new(),
        cron_expr: String::new(),
        at_time: String::new(),
        target_mode: "auto".into(),
        model: String::new(),
        initial_message: String::new(),
        auto_approve: false,
        auto_approve_tools: String::new(),
        skill: String::new(),
        enabled: true,
        created_by: identity
            .as_ref()
            .map(|i| i.user_id.clone())
            .unwrap_or_default(),
        last_run: None,
        next_run: None,
        created: String::new(),
        updated: String::new(),
    };
    body.apply(&mut task);
    validate(&mut task).map_err(ApiError::BadRequest)?;
    check_auto_approve(&task, identity.as_ref())?;
    task.next_run = next_run(&task, SystemTime::now());
    let task = store.create_task(task).await.map_err(storage)?;
    actor
        .record(
            &store,
            "schedule.create",
            "schedule",
            &task.task_id,
            audit_detail(&task),
        )
        .await;
    tracing::info!(task_id = %task.task_id, name = %task.name, next_run = ?task.next_run, "schedule created");
    Ok((StatusCode::CREATED, Json(view(&store, task).await?)).into_response())
}

/// `GET /v1/api/admin/schedules/{task_id}`.
pub async fn get(
    State(console): State<Arc<Console>>,
    Path(task_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let store = store(&console)?;
    let task = store
        .get_task(&task_id)
        .await
        .map_err(storage)?
        .ok_or_else(not_found)?;
    Ok(Json(view(&store, task).await?))
}

/// `PUT /v1/api/admin/schedules/{task_id}`: the given fields; `next_run` is worked out anew.
pub async fn update(
    State(console): State<Arc<Console>>,
    Path(task_id): Path<String>,
    identity: Option<Extension<Identity>>,
    actor: Actor,
    AccountsJson(body): AccountsJson<TaskBody>,
) -> Result<Json<Value>, ApiError> {
    let store = store(&console)?;
    let mut task = store
        .get_task(&task_id)
        .await
        .map_err(storage)?
        .ok_or_else(not_found)?;
    body.apply(&mut task);
    validate(&mut task).map_err(ApiError::BadRequest)?;
    check_auto_approve(&task, identity.map(|Extension(i)| i).as_ref())?;
    task.next_run = next_run(&task, SystemTime::now());
    let task = store
        .save_task(&task)
        .await
        .map_err(storage)?
        .ok_or_else(not_found)?;
    tracing::info!(task_id, next_run = ?task.next_run, "schedule updated");
    actor
        .record(
            &store,
            "schedule.update",
            "schedule",
            &task_id,
            audit_detail(&task),
        )
        .await;
    Ok(Json(view(&store, task).await?))
}

/// `DELETE /v1/api/admin/schedules/{task_id}` (with its runs).
pub async fn delete(
    State(console): State<Arc<Console>>,
    Path(task_id): Path<String>,
    actor: Actor,
) -> Result<Json<Value>, ApiError> {
    let store = store(&console)?;
    let done = store.delete_task(&task_id).await.map_err(storage)?;
    if done {
        actor
            .record(&store, "schedule.delete", "schedule", &task_id, json!({}))
            .await;
    }
    let missing = turnstone_accounts::AccountsError::NotFound("Schedule not found".into());
    Ok(turnstone_accounts::users::deleted(
        done, "task_id", task_id, missing,
    )?)
}

/// `GET /v1/api/admin/schedules/{task_id}/runs?limit=`: newest first.
pub async fn runs(
    State(console): State<Arc<Console>>,
    Path(task_id): Path<String>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let limit = match query.get("limit").map(String::as_str) {
        None | Some("") => DEFAULT_RUNS,
        Some(text) => usize::from_str(text)
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .ok_or_else(|| ApiError::BadRequest("limit must be an integer in 1..1000".into()))?,
    };
    let store = store(&console)?;
    if store.get_task(&task_id).await.map_err(storage)?.is_none() {
        return Err(not_found());
    }
    let runs = store.list_runs(&task_id, limit).await.map_err(storage)?;
    Ok(Json(json!({ "runs": runs })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn task(kind: &str) -> ScheduledTask {
        ScheduledTask {
            task_id: String::new(),
            name: " nightly ".into(),
            description: String::new(),
            schedule_type: kind.into(),
            cron_expr: "0 3 * * *".into(),
            at_time: "2030-01-02T03:04:05Z".into(),
            target_mode: String::new(),
            model: String::new(),
            initial_message: "report".into(),
            auto_approve: false,
            auto_approve_tools: " bash , ,read_file".into(),
            skill: String::new(),
            enabled: true,
            created_by: String::new(),
            last_run: None,
            next_run: None,
            created: String::new(),
            updated: String::new(),
        }
    }

    #[test]
    fn tasks_are_checked_and_normalised() {
        let mut t = task("cron");
        validate(&mut t).unwrap();
        assert_eq!(t.name, "nightly");
        assert_eq!(t.target_mode, "auto");
        assert_eq!(t.at_time, "");
        assert_eq!(t.auto_approve_tools, "bash,read_file");
        let mut t = task("at");
        validate(&mut t).unwrap();
        assert_eq!(t.at_time, "2030-01-02T03:04:05.000000+00:00");
        assert_eq!(t.cron_expr, "");
        for (change, needle) in [
            (
                (|t: &mut ScheduledTask| t.cron_expr = "61 * * * *".into()) as fn(&mut _),
                "Invalid cron_expr",
            ),
            (
                |t| t.schedule_type = "weekly".into(),
                "Invalid schedule_type",
            ),
            (|t| t.target_mode = "a/b".into(), "Invalid target_mode"),
            (|t| t.initial_message = " ".into(), "initial_message"),
            (|t| t.name = String::new(), "name is required"),
        ] {
            let mut t = task("cron");
            change(&mut t);
            let err = validate(&mut t).unwrap_err();
            assert!(err.contains(needle), "{err}");
        }
        let mut t = task("at");
        t.at_time = "tomorrow".into();
        assert!(validate(&mut t).unwrap_err().contains("Invalid at_time"));
    }

    #[test]
    fn cron_next_runs_are_utc_and_strictly_later() {
        let at = turnstone_store::timestamp::parse("2030-01-02T02:59:59Z").unwrap();
        let daily = CronSchedule::parse("0 3 * * *").unwrap();
        let next = daily.next_after(at).unwrap();
        assert_eq!(
            turnstone_store::timestamp::format_system_time(next),
            "2030-01-02T03:00:00.000000+00:00"
        );
        let again = daily.next_after(next).unwrap();
        assert_eq!(
            again.duration_since(next).unwrap(),
            Duration::from_secs(86_400)
        );
        let every_2s = CronSchedule::parse("*/2 * * * * *").unwrap();
        let n = every_2s.next_after(at).unwrap();
        assert_eq!(n.duration_since(at).unwrap(), Duration::from_secs(1));
        assert!(CronSchedule::parse("").is_err());
        assert!(CronSchedule::parse("* * *").is_err());
    }
}

-- Scheduled tasks of the console's scheduler and their runs (spec §6.1: scheduled_tasks,
-- scheduled_task_runs). Keep in step with ../sqlite/0010_schedules.sql (the schema parity
-- test compares them). Timestamps are fixed-width ISO-8601 UTC text (text order is time order).

CREATE TABLE scheduled_tasks (
    task_id            TEXT PRIMARY KEY,
    name               TEXT NOT NULL,
    description        TEXT NOT NULL DEFAULT '',
    schedule_type      TEXT NOT NULL,
    cron_expr          TEXT NOT NULL DEFAULT '',
    at_time            TEXT NOT NULL DEFAULT '',
    target_mode        TEXT NOT NULL DEFAULT 'auto',
    model              TEXT NOT NULL DEFAULT '',
    initial_message    TEXT NOT NULL,
    auto_approve       BIGINT NOT NULL DEFAULT 0,
    auto_approve_tools TEXT NOT NULL DEFAULT '',
    skill              TEXT NOT NULL DEFAULT '',
    enabled            BIGINT NOT NULL DEFAULT 1,
    created_by         TEXT NOT NULL DEFAULT '',
    last_run           TEXT,
    next_run           TEXT,
    created            TEXT NOT NULL,
    updated            TEXT NOT NULL
);
-- The scheduler's query: enabled tasks that are due.
CREATE INDEX idx_scheduled_tasks_due ON scheduled_tasks (enabled, next_run);

CREATE TABLE scheduled_task_runs (
    run_id         TEXT PRIMARY KEY,
    task_id        TEXT NOT NULL,
    node_id        TEXT NOT NULL DEFAULT '',
    ws_id          TEXT NOT NULL DEFAULT '',
    correlation_id TEXT NOT NULL DEFAULT '',
    started        TEXT NOT NULL,
    status         TEXT NOT NULL DEFAULT 'dispatched',
    error          TEXT NOT NULL DEFAULT ''
);
CREATE INDEX idx_scheduled_task_runs_task ON scheduled_task_runs (task_id, started);

-- Model usage accounting (node spec §6.1 usage_events): one row per model call, written by
-- the node that made it, read by the admin usage report and pruned by age. Keep in step
-- with ../postgres/0013_usage_events.sql (the schema parity test compares them). Timestamps are
-- fixed-width ISO-8601 UTC text, so a time range is a text range.
CREATE TABLE usage_events (
    event_id              TEXT PRIMARY KEY,
    timestamp             TEXT NOT NULL,
    user_id               TEXT NOT NULL DEFAULT '',
    ws_id                 TEXT NOT NULL DEFAULT '',
    node_id               TEXT NOT NULL DEFAULT '',
    model                 TEXT NOT NULL DEFAULT '',
    prompt_tokens         INTEGER NOT NULL DEFAULT 0,
    completion_tokens     INTEGER NOT NULL DEFAULT 0,
    tool_calls_count      INTEGER NOT NULL DEFAULT 0,
    cache_creation_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens     INTEGER NOT NULL DEFAULT 0,
    created               TEXT NOT NULL
);
-- Time-range reports and the age prune; per-user and per-model reports over a range.
CREATE INDEX idx_usage_events_timestamp ON usage_events (timestamp);
CREATE INDEX idx_usage_events_user ON usage_events (user_id, timestamp);
CREATE INDEX idx_usage_events_model ON usage_events (model, timestamp);

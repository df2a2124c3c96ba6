-- Cluster-wide runtime settings, model definitions and the admin audit log (node spec §6.1:
-- system_settings, model_definitions, audit_events). Keep in step with
-- ../postgres/0012_cluster_settings.sql (the schema parity test compares them). Timestamps are
-- fixed-width ISO-8601 UTC text, flags 0/1 integers.

-- One JSON-encoded value per key: the global row (node_id = '') and per-node override rows.
CREATE TABLE system_settings (
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    node_id    TEXT NOT NULL DEFAULT '',
    is_secret  INTEGER NOT NULL DEFAULT 0,
    changed_by TEXT NOT NULL DEFAULT '',
    created    TEXT NOT NULL,
    updated    TEXT NOT NULL,
    PRIMARY KEY (key, node_id)
);

-- Model aliases the nodes add to (or override in) their model registry. `api_key` is a
-- secret: stored, never returned by the admin API.
CREATE TABLE model_definitions (
    definition_id  TEXT PRIMARY KEY,
    alias          TEXT NOT NULL UNIQUE,
    model          TEXT NOT NULL,
    provider       TEXT NOT NULL DEFAULT 'openai',
    base_url       TEXT NOT NULL DEFAULT '',
    api_key        TEXT NOT NULL DEFAULT '',
    context_window INTEGER NOT NULL DEFAULT 32768,
    capabilities   TEXT NOT NULL DEFAULT '{}',
    enabled        INTEGER NOT NULL DEFAULT 1,
    created_by     TEXT NOT NULL DEFAULT '',
    created        TEXT NOT NULL,
    updated        TEXT NOT NULL
);

-- Who did what, when, from where: one row per administrative change.
CREATE TABLE audit_events (
    event_id      TEXT PRIMARY KEY,
    timestamp     TEXT NOT NULL,
    user_id       TEXT NOT NULL DEFAULT '',
    action        TEXT NOT NULL,
    resource_type TEXT NOT NULL DEFAULT '',
    resource_id   TEXT NOT NULL DEFAULT '',
    detail        TEXT NOT NULL DEFAULT '{}',
    ip_address    TEXT NOT NULL DEFAULT '',
    created       TEXT NOT NULL
);
CREATE INDEX idx_audit_events_timestamp ON audit_events (timestamp);
CREATE INDEX idx_audit_events_user ON audit_events (user_id, timestamp);

-- Turnstone store, PostgreSQL schema v2: watches (periodic command polls of a workstream).
-- Keep in step with ../sqlite/0002_watches.sql (the schema parity test compares them).
-- Columns as the original's `watches` table; timestamps are fixed-width ISO-8601 UTC text.

CREATE TABLE watches (
    watch_id       TEXT PRIMARY KEY,
    ws_id          TEXT NOT NULL,
    node_id        TEXT NOT NULL DEFAULT '',
    name           TEXT NOT NULL,
    command        TEXT NOT NULL,
    interval_secs  DOUBLE PRECISION NOT NULL,
    stop_on        TEXT,
    max_polls      BIGINT NOT NULL DEFAULT 100,
    poll_count     BIGINT NOT NULL DEFAULT 0,
    last_output    TEXT,
    last_exit_code BIGINT,
    last_poll      TEXT,
    next_poll      TEXT,
    active         BIGINT NOT NULL DEFAULT 1,
    created_by     TEXT NOT NULL DEFAULT '',
    created        TEXT NOT NULL,
    updated        TEXT NOT NULL
);
-- The runner's query: active watches of a node that are due.
CREATE INDEX idx_watches_due ON watches (active, node_id, next_poll);
CREATE INDEX idx_watches_ws ON watches (ws_id, active);
-- A name is unique among a workstream's active watches.
CREATE UNIQUE INDEX uq_watches_active_name ON watches (ws_id, name) WHERE active = 1;

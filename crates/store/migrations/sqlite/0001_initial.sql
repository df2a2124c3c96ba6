-- Turnstone store, SQLite schema v1. Keep in step with ../postgres/0001_initial.sql
-- (the schema parity test compares table and column names).
-- Timestamps are ISO-8601 UTC text of fixed width, so text order is time order.

CREATE TABLE workstreams (
    ws_id   TEXT PRIMARY KEY,
    node_id TEXT,
    user_id TEXT,
    alias   TEXT UNIQUE,
    title   TEXT,
    name    TEXT NOT NULL DEFAULT '',
    state   TEXT NOT NULL DEFAULT 'idle',
    created TEXT NOT NULL,
    updated TEXT NOT NULL
);
CREATE INDEX idx_workstreams_node_id ON workstreams (node_id);
CREATE INDEX idx_workstreams_state ON workstreams (state);
CREATE INDEX idx_workstreams_updated ON workstreams (updated);

CREATE TABLE conversations (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    ws_id         TEXT NOT NULL,
    timestamp     TEXT NOT NULL,
    role          TEXT NOT NULL,
    content       TEXT,
    tool_name     TEXT,
    tool_args     TEXT,
    tool_call_id  TEXT,
    provider_data TEXT
);
CREATE INDEX idx_conversations_ws_id ON conversations (ws_id, id);
CREATE INDEX idx_conversations_timestamp ON conversations (timestamp);

CREATE TABLE workstream_config (
    ws_id TEXT NOT NULL,
    key   TEXT NOT NULL,
    value TEXT,
    PRIMARY KEY (ws_id, key)
);

CREATE TABLE structured_memories (
    memory_id     TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    type          TEXT NOT NULL DEFAULT 'general',
    scope         TEXT NOT NULL DEFAULT 'global',
    scope_id      TEXT NOT NULL DEFAULT '',
    content       TEXT NOT NULL,
    created       TEXT NOT NULL,
    updated       TEXT NOT NULL,
    last_accessed TEXT NOT NULL DEFAULT '',
    access_count  INTEGER NOT NULL DEFAULT 0,
    CONSTRAINT uq_smem_name_scope UNIQUE (name, scope, scope_id)
);
CREATE INDEX idx_smem_type ON structured_memories (type);
CREATE INDEX idx_smem_scope ON structured_memories (scope, scope_id);

CREATE TABLE workstream_events (
    ws_id   TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    type    TEXT NOT NULL,
    payload TEXT NOT NULL,
    created TEXT NOT NULL,
    PRIMARY KEY (ws_id, seq)
);

CREATE TABLE approvals (
    request_id TEXT PRIMARY KEY,
    ws_id      TEXT NOT NULL,
    payload    TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'pending',
    verdict    TEXT NOT NULL DEFAULT '',
    feedback   TEXT NOT NULL DEFAULT '',
    decided_by TEXT NOT NULL DEFAULT '',
    created    TEXT NOT NULL,
    decided    TEXT
);
CREATE INDEX idx_approvals_ws_state ON approvals (ws_id, state);

-- Full-text search: an external-content FTS5 table over conversations.content,
-- kept in sync by triggers (rowid = conversations.id).
CREATE VIRTUAL TABLE conversations_fts USING fts5(
    content,
    content = 'conversations',
    content_rowid = 'id'
);

CREATE TRIGGER conversations_fts_insert AFTER INSERT ON conversations BEGIN
    INSERT INTO conversations_fts (rowid, content) VALUES (new.id, new.content);
END;

CREATE TRIGGER conversations_fts_delete AFTER DELETE ON conversations BEGIN
    INSERT INTO conversations_fts (conversations_fts, rowid, content)
    VALUES ('delete', old.id, old.content);
END;

CREATE TRIGGER conversations_fts_update AFTER UPDATE OF content ON conversations BEGIN
    INSERT INTO conversations_fts (conversations_fts, rowid, content)
    VALUES ('delete', old.id, old.content);
    INSERT INTO conversations_fts (rowid, content) VALUES (new.id, new.content);
END;

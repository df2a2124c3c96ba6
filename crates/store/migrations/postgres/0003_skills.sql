-- Turnstone store, PostgreSQL migration 0003. Keep in step with ../sqlite/0003_skills.sql
-- (the schema parity test compares table and column names).

-- Skills (the original's `prompt_templates`, node spec §6.1): every column of v0.9.6 with its
-- type and default. JSON columns (`variables`, `tags`, `allowed_tools`, `scan_report`,
-- `notify_on_complete`) hold JSON text; flags are 0/1 integers.
CREATE TABLE prompt_templates (
    template_id        TEXT PRIMARY KEY,
    name               TEXT NOT NULL UNIQUE,
    category           TEXT NOT NULL DEFAULT 'general',
    content            TEXT NOT NULL,
    variables          TEXT NOT NULL DEFAULT '[]',
    is_default         INTEGER NOT NULL DEFAULT 0,
    org_id             TEXT NOT NULL DEFAULT '',
    created_by         TEXT NOT NULL DEFAULT '',
    origin             TEXT NOT NULL DEFAULT 'manual',
    mcp_server         TEXT NOT NULL DEFAULT '',
    readonly           INTEGER NOT NULL DEFAULT 0,
    description        TEXT NOT NULL DEFAULT '',
    tags               TEXT NOT NULL DEFAULT '[]',
    source_url         TEXT NOT NULL DEFAULT '',
    version            TEXT NOT NULL DEFAULT '1.0.0',
    author             TEXT NOT NULL DEFAULT '',
    activation         TEXT NOT NULL DEFAULT 'named',
    token_estimate     INTEGER NOT NULL DEFAULT 0,
    allowed_tools      TEXT NOT NULL DEFAULT '[]',
    license            TEXT NOT NULL DEFAULT '',
    compatibility      TEXT NOT NULL DEFAULT '',
    scan_status        TEXT NOT NULL DEFAULT '',
    scan_report        TEXT NOT NULL DEFAULT '{}',
    installed_at       TEXT NOT NULL DEFAULT '',
    installed_by       TEXT NOT NULL DEFAULT '',
    scan_version       TEXT NOT NULL DEFAULT '',
    model              TEXT NOT NULL DEFAULT '',
    auto_approve       INTEGER NOT NULL DEFAULT 0,
    temperature        DOUBLE PRECISION,
    reasoning_effort   TEXT NOT NULL DEFAULT '',
    max_tokens         INTEGER,
    token_budget       INTEGER NOT NULL DEFAULT 0,
    agent_max_turns    INTEGER,
    notify_on_complete TEXT NOT NULL DEFAULT '{}',
    enabled            INTEGER NOT NULL DEFAULT 1,
    priority           INTEGER NOT NULL DEFAULT 0,
    created            TEXT NOT NULL,
    updated            TEXT NOT NULL
);
CREATE INDEX idx_prompt_templates_enabled ON prompt_templates (enabled, priority);

-- Memory type rename: the general-purpose type is `project` (as the v0.9.6 API and the
-- original's later schema call it), no longer `general`. Existing rows are renamed.
ALTER TABLE structured_memories ALTER COLUMN type SET DEFAULT 'project';
UPDATE structured_memories SET type = 'project' WHERE type = 'general';

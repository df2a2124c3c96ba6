-- Turnstone store, SQLite schema v8: output guard assessments (issue 14).
-- Keep in step with ../postgres/0008_output_assessments.sql (the schema parity test compares
-- them). Columns as the original's `output_assessments`; lists are JSON text, flags 0/1.

-- One row per tool result the output guard flagged. An audit log: kept when the workstream
-- is deleted. Never holds the output itself.
CREATE TABLE output_assessments (
    assessment_id TEXT PRIMARY KEY,
    ws_id         TEXT NOT NULL,
    call_id       TEXT NOT NULL,
    func_name     TEXT NOT NULL,
    flags         TEXT NOT NULL DEFAULT '[]',
    risk_level    TEXT NOT NULL DEFAULT 'none',
    annotations   TEXT NOT NULL DEFAULT '[]',
    output_length INTEGER NOT NULL DEFAULT 0,
    redacted      INTEGER NOT NULL DEFAULT 0,
    created       TEXT NOT NULL
);
CREATE INDEX idx_output_assessments_ws ON output_assessments (ws_id);
CREATE INDEX idx_output_assessments_created ON output_assessments (created);

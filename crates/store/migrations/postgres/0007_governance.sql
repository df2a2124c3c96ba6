-- Turnstone store, PostgreSQL schema v7: governance of tool use (issue 14).
-- Keep in step with ../sqlite/0007_governance.sql (the schema parity test compares them).
-- Columns as the original's `tool_policies` (its migration 008) and `intent_verdicts` (012);
-- timestamps are fixed-width ISO-8601 UTC text, flags 0/1 integers.

-- Admin rules `tool_pattern` (fnmatch) -> `action` (`allow` | `deny` | `ask`), tried highest
-- `priority` first.
CREATE TABLE tool_policies (
    policy_id    TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    tool_pattern TEXT NOT NULL,
    action       TEXT NOT NULL,
    priority     BIGINT NOT NULL DEFAULT 0,
    org_id       TEXT NOT NULL DEFAULT '',
    enabled      BIGINT NOT NULL DEFAULT 1,
    created_by   TEXT NOT NULL DEFAULT '',
    created      TEXT NOT NULL,
    updated      TEXT NOT NULL
);
CREATE INDEX idx_tool_policies_order ON tool_policies (org_id, priority DESC, created);

-- Judge verdicts on gated tool calls (heuristic and LLM tier) and the human's decision.
-- An audit log: kept when the workstream is deleted.
CREATE TABLE intent_verdicts (
    verdict_id     TEXT PRIMARY KEY,
    ws_id          TEXT NOT NULL,
    call_id        TEXT NOT NULL,
    func_name      TEXT NOT NULL,
    func_args      TEXT NOT NULL DEFAULT '',
    intent_summary TEXT NOT NULL,
    risk_level     TEXT NOT NULL,
    confidence     DOUBLE PRECISION NOT NULL,
    recommendation TEXT NOT NULL,
    reasoning      TEXT NOT NULL,
    evidence       TEXT NOT NULL DEFAULT '[]',
    tier           TEXT NOT NULL,
    judge_model    TEXT NOT NULL DEFAULT '',
    user_decision  TEXT NOT NULL DEFAULT '',
    latency_ms     BIGINT NOT NULL DEFAULT 0,
    created        TEXT NOT NULL
);
CREATE INDEX idx_intent_verdicts_ws ON intent_verdicts (ws_id);
CREATE INDEX idx_intent_verdicts_created ON intent_verdicts (created);
CREATE INDEX idx_intent_verdicts_risk ON intent_verdicts (risk_level);

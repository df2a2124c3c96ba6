-- Turnstone store, SQLite schema v6: queued user turns (issue 20).
-- Keep in step with ../postgres/0006_queued_sends.sql (the schema parity test compares them).
-- A send that arrives while its workstream is busy waits here, in `id` order per workstream.
-- `state`: `queued` (waiting), `started` (its turn began: written in the same transaction as
-- the turn's user message, so a restart neither loses nor repeats it), `removed` (cancelled
-- or deleted before it ran). Rows that are not `queued` are kept for a while so a
-- redelivered `correlation_id` is still recognised after a restart.

CREATE TABLE queued_sends (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    ws_id          TEXT NOT NULL,
    correlation_id TEXT NOT NULL,
    message        TEXT NOT NULL,
    options        TEXT NOT NULL DEFAULT '{}',
    state          TEXT NOT NULL DEFAULT 'queued',
    created        TEXT NOT NULL,
    updated        TEXT NOT NULL
);
CREATE UNIQUE INDEX uq_queued_sends_correlation ON queued_sends (correlation_id);
CREATE INDEX idx_queued_sends_state ON queued_sends (state, ws_id, id);
CREATE INDEX idx_queued_sends_updated ON queued_sends (updated);

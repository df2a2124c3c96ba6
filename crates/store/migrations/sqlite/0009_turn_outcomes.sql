-- Turnstone store, schema v9: the outcome of a send's turn (issue 17, chaos).
-- Keep in step with ../postgres/0009_turn_outcomes.sql (the schema parity test compares them).
-- A send whose turn ended becomes `completed` with `outcome`: its `turn_complete` event as
-- JSON, written in the transaction the node waits for before it emits that event. After a
-- crash a `started` row is a turn that never ended (the node reports it interrupted), and a
-- bridge that missed a `turn_complete` can still ask for it.

ALTER TABLE queued_sends ADD COLUMN outcome TEXT NOT NULL DEFAULT '';

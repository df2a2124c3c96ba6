-- Session revocation: every JWT the node mints for a user carries the user's generation
-- (`gen` claim); logout and API-token revocation bump it, so older sessions are refused.
-- Keep in step with ../postgres/0005_session_generation.sql (the schema parity test compares them).

ALTER TABLE users ADD COLUMN session_generation INTEGER NOT NULL DEFAULT 0;

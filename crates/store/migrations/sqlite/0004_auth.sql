-- Users, roles and API tokens (spec §6.1: users, roles, user_roles, api_tokens).
-- Keep in step with ../postgres/0004_auth.sql (the schema parity test compares them).

CREATE TABLE users (
    user_id       TEXT PRIMARY KEY,
    username      TEXT NOT NULL UNIQUE,
    display_name  TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    org_id        TEXT NOT NULL DEFAULT '',
    created       TEXT NOT NULL
);

CREATE TABLE roles (
    role_id      TEXT PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    display_name TEXT NOT NULL,
    permissions  TEXT NOT NULL,
    builtin      INTEGER NOT NULL DEFAULT 0,
    org_id       TEXT NOT NULL DEFAULT '',
    created      TEXT NOT NULL,
    updated      TEXT NOT NULL
);

CREATE TABLE user_roles (
    user_id     TEXT NOT NULL,
    role_id     TEXT NOT NULL,
    assigned_by TEXT NOT NULL DEFAULT '',
    created     TEXT NOT NULL,
    PRIMARY KEY (user_id, role_id)
);

CREATE TABLE api_tokens (
    token_id     TEXT PRIMARY KEY,
    token_hash   TEXT NOT NULL UNIQUE,
    token_prefix TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    name         TEXT NOT NULL DEFAULT '',
    scopes       TEXT NOT NULL,
    created      TEXT NOT NULL,
    expires      TEXT
);
CREATE INDEX idx_api_tokens_user_id ON api_tokens (user_id);

INSERT INTO roles (role_id, name, display_name, permissions, builtin, created, updated) VALUES
  ('builtin-admin', 'admin', 'Administrator',
   'admin.audit,admin.judge,admin.mcp,admin.memories,admin.models,admin.orgs,admin.policies,admin.roles,admin.schedules,admin.settings,admin.skills,admin.usage,admin.users,admin.watches,approve,conversation.modify,read,tools.approve,workstreams.close,workstreams.create,write',
   1, '1970-01-01T00:00:00.000000+00:00', '1970-01-01T00:00:00.000000+00:00'),
  ('builtin-operator', 'operator', 'Operator',
   'conversation.modify,read,workstreams.close,workstreams.create,write',
   1, '1970-01-01T00:00:00.000000+00:00', '1970-01-01T00:00:00.000000+00:00'),
  ('builtin-viewer', 'viewer', 'Viewer', 'read',
   1, '1970-01-01T00:00:00.000000+00:00', '1970-01-01T00:00:00.000000+00:00');

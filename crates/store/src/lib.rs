//! `turnstone-store`: persistence for Turnstone on SQLite (embedded default) or PostgreSQL.
//!
//! # What it owns
//! * The [`Store`] trait and its two implementations on sqlx (runtime queries only):
//!   [`SqliteStore`] (one file, default `.turnstone.db`, WAL, busy timeout, created if missing)
//!   and [`PostgresStore`] (URL + pool size). [`connect`] opens the one a [`StoreConfig`]
//!   names and applies that backend's embedded migrations (`migrations/sqlite`,
//!   `migrations/postgres`; sqlx records them in `_sqlx_migrations`).
//! * The batching [`Writer`] that keeps database latency out of a turn.
//! * Resume: [`Store::resume_session`] rebuilds provider messages ([`rebuild_messages`]) and
//!   the [`SessionConfig`]; [`Store::list_sessions`] and [`Store::prune_sessions`].
//! * Search: full-text history search ([`Store::search`]) and recent messages; typed, scoped
//!   memories (the `memory` tool's storage); the durable per-workstream event log and
//!   approval records.
//! * Skills ([`skills`]): the `prompt_templates` rows behind `GET /v1/api/skills`, the admin
//!   skill routes and the `skill` tool, through [`SkillStore`] (a supertrait of [`Store`]).
//!
//! # What it must not know
//! HTTP, SSE, Redis, providers' wire formats, the engine's turn loop. Messages come in and go
//! out as `turnstone_llm::ChatMessage`; everything else is plain records from [`model`].
//!
//! # Schema (both backends, same table and column names; a test compares them)
//! * `workstreams` — `ws_id` PK (32 hex), `node_id`, `user_id`, `alias` UNIQUE (named
//!   sessions), `title`, `name`, `state`, `created`, `updated` (last activity).
//! * `conversations` — `id` autoincrement (write order), `ws_id`, `timestamp`, `role`
//!   (`user` | `assistant` | `tool_call` | `tool_result`), `content`, `tool_name`,
//!   `tool_args`, `tool_call_id`, `provider_data`. One row per tool call and per result.
//! * `workstream_config` — (`ws_id`, `key`) PK, `value`: session settings as strings.
//! * `structured_memories` — `memory_id` (UUID), `name`, `description`, `type`, `scope`,
//!   `scope_id`, `content`, `created`, `updated`, `last_accessed`, `access_count`; UNIQUE
//!   (`name`, `scope`, `scope_id`), so saving an existing name updates it in place.
//! * `workstream_events` — (`ws_id`, `seq`) PK, `type`, `payload` (JSON text), `created`:
//!   append-only, `seq` gap-free from 1 per workstream.
//! * `approvals` — `request_id` PK, `ws_id`, `payload` (JSON), `state` (`pending` |
//!   `approved` | `denied` | `timed_out`), `verdict`, `feedback`, `decided_by`, `created`,
//!   `decided`; a decision is a conditional update, so only the first one counts.
//! * `prompt_templates` — skills: every column of the original's table (spec §6.1), `name`
//!   UNIQUE, JSON columns as JSON text, flags as 0/1 integers (migration 0003, which also
//!   renamed the memory type `general` to `project`).
//! * `watches` — periodic command polls of a workstream ([`WatchStore`], `watches.rs`).
//! * `roles`, `user_roles` changes through [`RoleStore`] (`roles.rs`); `scheduled_tasks`,
//!   `scheduled_task_runs` — the console scheduler's tasks and runs ([`ScheduleStore`],
//!   `schedules.rs`).
//! * `tool_policies` — admin allow/deny/ask rules on tool names ([`ToolPolicyStore`],
//!   `policies.rs`); `intent_verdicts` — judge verdicts on gated tool calls and the human's
//!   decision, an audit log kept after its workstream ([`VerdictStore`], `verdicts.rs`).
//! * `system_settings`, `model_definitions` — cluster-wide runtime settings (global and
//!   per-node rows, JSON values) and model aliases ([`SettingsStore`],
//!   `cluster_settings.rs`); `audit_events` — who changed what, when, from where
//!   ([`AuditStore`], `audit.rs`).
//! * `usage_events` — one row per model call: who, where, which model, token and tool-call
//!   counts; summed by time range and group, pruned by age ([`UsageStore`], `usage.rs`).
//!
//! Column names follow the Python original (`spec/node-api.md` §6) where it has the table.
//! Timestamps are fixed-width ISO-8601 UTC text, so text order is time order. Search differs
//! per backend by design: SQLite has an FTS5 external-content table `conversations_fts`
//! kept in sync by triggers (in the write transaction); PostgreSQL has `conversation_search`
//! (`id`, `tsv` = `to_tsvector('english', content)`, GIN index) filled in the background from
//! `conversation_search_pending` (ids queued by a statement trigger on insert), so stemming
//! and the GIN insertion stay out of the write path; search also matches the pending rows, so
//! a committed message is always found (migration 0014, `search_indexer.rs`). Those search
//! tables are the only schema differences.
//!
//! # Durability: the crash window
//! Writes through the [`Writer`] are committed in batches: when `max_batch` ops are queued or
//! `max_delay` (default 5 ms) after the first op of a batch. A crash loses at most the ops
//! not yet committed — the queue plus the batch being assembled, in steady state the last few
//! milliseconds of messages. [`Writer::shutdown`] flushes everything, so a clean exit loses
//! nothing. Dropped (queue full, writer shut down) and failed (transaction error after one
//! retry) writes are counted in [`WriterCounters`] and logged at ERROR, never silently lost.
//! Direct [`Store`] calls (events, approvals, memories, workstreams) are committed before
//! they return. SQLite runs with `synchronous = NORMAL` in WAL mode: a committed transaction
//! survives a process crash; an OS crash or power loss may roll back the last commits.

pub mod assessments;
pub mod audit;
pub mod auth;
pub mod cluster_settings;
mod error;
mod ids;
pub mod model;
pub mod policies;
mod postgres;
pub mod queued;
mod resume;
pub mod roles;
pub mod schedules;
mod search_indexer;
pub mod skills;
mod sql_common;
mod sqlite;
mod store;
pub mod timestamp;
pub mod usage;
pub mod verdicts;
mod watches;
mod writer;

pub use assessments::{AssessmentStore, NewOutputAssessment, OutputAssessmentRecord};
pub use audit::{AuditEvent, AuditQuery, AuditStore, NewAuditEvent};
pub use auth::{ApiToken, AuthStore, NewApiToken, NewUser, User, UserCredentials};
pub use cluster_settings::{
    ModelDefinition, ModelDefinitionUpdate, NewModelDefinition, SettingRow, SettingsStore,
};
pub use error::{Result, StoreError};
pub use model::{
    ApprovalDecision, ApprovalRecord, ApprovalState, DecideOutcome, EventRecord, Memory,
    MemoryFilter, MemoryInput, MemoryScope, MemoryType, MessageRole, NewMessage, NewWorkstream,
    ResumedSession, SchemaDescription, ScopeRef, SearchHit, SessionConfig, SessionSummary,
    StoredMessage, Workstream, WriteOp,
};
pub use policies::{
    NewToolPolicy, POLICY_ACTIONS, ToolPolicyRecord, ToolPolicyStore, ToolPolicyUpdate,
};
pub use postgres::PostgresStore;
pub use queued::{QueuedSend, QueuedSendStore, QueuedState};
pub use resume::rebuild_messages;
pub use roles::{NewRole, Role, RoleStore, RoleUpdate, UserUpdate};
pub use schedules::{NewTaskRun, ScheduleStore, ScheduledTask, TaskRun};
pub use search_indexer::{SearchIndexerConfig, SearchIndexerCounters};
pub use skills::{Skill, SkillSpec, SkillStore};
pub use sqlite::{BUSY_TIMEOUT, SqliteStore};
pub use store::{
    DEFAULT_POOL_SIZE, DEFAULT_SQLITE_PATH, Store, StoreBackend, StoreConfig, connect,
};
pub use usage::{
    NewUsageEvent, UsageGroup, UsageQuery, UsageReport, UsageRow, UsageStore, UsageTotals,
};
pub use verdicts::{IntentVerdictRecord, NewIntentVerdict, VerdictFilter, VerdictStore};
pub use watches::{NewWatch, Watch, WatchPoll, WatchStore};
pub use writer::{Writer, WriterConfig, WriterCounters};

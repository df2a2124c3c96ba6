//! # turnstone-accounts
//!
//! Stored users, `ts_` API tokens and roles, shared by the node and the console so both
//! administer and authenticate against the same tables the same way (with a shared
//! PostgreSQL they share the rows too):
//!
//! * [`passwords`] — bcrypt hashing and the password check that yields a user's identity;
//! * [`api_tokens`] — the authenticator's `ts_` token lookup in the store;
//! * [`limiter`] — the login limiter (failures per address and per address+username);
//! * [`login`] — the wire types of login, status and whoami;
//! * [`users`], [`roles`], [`routes`] — the admin routes under `/v1/api/admin/` (users,
//!   tokens, roles), generic over the service ([`users::AccountsHost`]);
//! * [`session`] — login, logout and first-user setup, the same flow on both services;
//! * [`policies`] — tool policies' wire types, checks and store operations (the node
//!   applies them to its engine; the console pushes them to every node);
//! * [`skills`] — the skill admin operations and their checks, and the push of manual
//!   skills to a node's own store;
//! * [`audit`] — who changed what, from where: the admin handlers' audit rows;
//! * [`usage`] — the model usage report (`GET /v1/api/admin/usage`) over the service's
//!   store, served by both;
//! * [`db`] — the `--db-*` storage flags;
//! * [`body`], [`error`] — request bodies and the `{"error": ...}` failures of these routes.
//!
//! It knows HTTP (axum) and the store; it must not know the engine, Redis or either
//! service's state beyond [`users::AccountsHost`].

pub mod api_tokens;
pub mod audit;
pub mod body;
pub mod db;
pub mod error;
pub mod limiter;
pub mod login;
pub mod passwords;
pub mod policies;
pub mod roles;
pub mod routes;
pub mod session;
pub mod skills;
pub mod usage;
pub mod users;

pub use error::AccountsError;
pub use routes::{ADMIN_ROUTES, admin_routes};
pub use users::AccountsHost;

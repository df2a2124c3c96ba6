//! End-to-end tests of the `turnstone` binary against its built-in scripted model.

mod parity;
mod pipe;
mod tty;

use std::path::Path;

/// Environment variables that would leak the developer's setup into a test run.
pub const SCRUBBED_ENV: &[&str] = &[
    "TURNSTONE_CONFIG",
    "TURNSTONE_DB_PATH",
    "TURNSTONE_NO_PERSISTENCE",
    "TURNSTONE_BASE_URL",
    "TURNSTONE_API_KEY",
    "TURNSTONE_API_KEY_FILE",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_API_KEY_FILE",
    "OPENAI_API_KEY_FILE",
    "TURNSTONE_MODEL",
    "TURNSTONE_LOG_LEVEL",
    "OPENAI_API_KEY",
    "NO_COLOR",
    "RUST_LOG",
];

pub fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_turnstone"))
}

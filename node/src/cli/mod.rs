//! The `turnstone` terminal client: a REPL running the engine in-process.
//!
//! * [`settings`] — flags and the TOML file, resolved into [`settings::Settings`];
//! * [`commands`] — parsing of slash commands and approval answers;
//! * [`render`] — the line-buffered markdown renderer and styling;
//! * [`repl`] — the loop tying input, Ctrl-C and workstream events together.
//!
//! It drives workstreams only through the engine's public handle (`send`, `approve`,
//! `cancel`, `subscribe`) like any other frontend; it must not know the HTTP API, Redis or
//! how sessions are stored (`/resume` says persistence is not available yet).

pub mod commands;
pub mod render;
pub mod repl;
pub mod settings;
mod spinner;

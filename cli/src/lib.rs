//! # turnstone-cli
//!
//! The terminal frontends, both running the engine in-process: `turnstone`, the terminal
//! client (a REPL running the engine in-process, also usable through a pipe), and
//! `turnstone-demo`, one workstream driven by prompts given as arguments.
//!
//! * [`settings`] — flags and the TOML file, resolved into [`settings::Settings`];
//! * [`commands`] — parsing of slash commands and approval answers;
//! * [`render`] — the line-buffered markdown renderer and styling;
//! * [`repl`] — the loop tying input, Ctrl-C and workstream events together;
//! * [`demo`] — the demo's transcript printer.
//!
//! The model they run on is the node's [`turnstone_node::backend`]: an OpenAI-compatible
//! endpoint, or the scripted fake model started in-process when no base URL is given.
//!
//! It drives workstreams only through the engine's public handle (`send`, `approve`,
//! `cancel`, `subscribe`) like any other frontend; it must not know the HTTP API, Redis or
//! how sessions are stored (sessions are saved through the node's `persist` journal).

pub mod commands;
pub mod demo;
pub mod render;
pub mod repl;
pub mod settings;
mod spinner;

//! # turnstone-node
//!
//! The node: it will own the HTTP API, SSE, auth and the web UI (`turnstone-server`) and the
//! terminal client (`turnstone`). Today it holds the in-process demo ([`demo`]): one
//! workstream driven from the terminal against a real OpenAI-compatible endpoint or the
//! scripted fake model.
//!
//! It must not know Redis: the bridge talks to a node over HTTP only.

pub mod demo;

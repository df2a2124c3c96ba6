//! `watch`: create, list and cancel watches — periodic polls of a shell command whose result
//! comes back to the workstream as a new message when a stop condition holds.
//!
//! The tool only validates and records: storage is a [`WatchBackend`] (the node's store),
//! and the node's watch runner polls, evaluates and delivers. `create` needs approval (it
//! runs shell commands, label `watch`); `list` and `cancel` do not. Everything the model can
//! get wrong — an unknown action, a blocked command, an interval outside 10 s–24 h, a
//! `stop_on` that does not parse, a sixth active watch, a duplicate name — is a tool error
//! with the reason, never a stored watch.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{finish, header, schema_definition};
use crate::arguments::Args;
use crate::error::RegistryError;
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};
use crate::watch::{
    Condition, DEFAULT_MAX_POLLS, DEFAULT_POLL_EVERY, MAX_ACTIVE_PER_WORKSTREAM, MAX_INTERVAL_SECS,
    MIN_INTERVAL_SECS, WatchBackend, WatchEntry, WatchRequest, check_command, format_interval,
    parse_duration,
};

/// Longest watch name, in characters.
const MAX_NAME_CHARS: usize = 64;
/// Largest `max_polls`.
const MAX_POLLS_LIMIT: i64 = 10_000;
/// Characters of a watch id shown to the model (enough to cancel by prefix).
const SHORT_ID: usize = 8;

/// The `watch` tool.
pub struct WatchTool {
    definition: ToolDefinition,
    backend: Arc<dyn WatchBackend>,
    /// Serialises the check-then-insert of `create` (the limit and unique names), also when
    /// a batch runs several calls in parallel.
    create_lock: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for WatchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchTool").finish_non_exhaustive()
    }
}

impl WatchTool {
    pub fn new(backend: Arc<dyn WatchBackend>) -> Result<Self, RegistryError> {
        Ok(Self {
            definition: schema_definition("watch", include_str!("../../schemas/watch.json"))?,
            backend,
            create_lock: tokio::sync::Mutex::new(()),
        })
    }
}

/// The checked arguments of `create`.
#[derive(Debug, Clone, PartialEq)]
struct CreateArgs {
    command: String,
    name: String,
    poll_every: String,
    interval_secs: f64,
    stop_on: Option<String>,
    max_polls: i64,
}

impl CreateArgs {
    /// Validates raw (model) or normalised (`prepare`d) arguments alike.
    fn parse(args: &Value) -> Result<Self, String> {
        let a = Args::new(args)?;
        let command = a.non_blank("command")?.trim().to_owned();
        check_command(&command)?;
        let name = a.non_blank("name")?.trim().to_owned();
        if name.chars().count() > MAX_NAME_CHARS {
            return Err(format!(
                "Error: name is {} characters; the limit is {MAX_NAME_CHARS}",
                name.chars().count()
            ));
        }
        if name.chars().any(char::is_control) {
            return Err("Error: name must be a single line of text".into());
        }
        let poll_every = match args.get("poll_every") {
            None | Some(Value::Null) => DEFAULT_POLL_EVERY.to_owned(),
            Some(Value::String(s)) if s.trim().is_empty() => DEFAULT_POLL_EVERY.to_owned(),
            Some(Value::String(s)) => s.trim().to_owned(),
            // A bare number is seconds.
            Some(Value::Number(n)) => n.to_string(),
            Some(_) => {
                return Err("Error: poll_every must be a duration such as 30s, 5m or 1h".into());
            }
        };
        let interval_secs =
            parse_duration(&poll_every).map_err(|e| format!("Error: poll_every: {e}"))?;
        if !(MIN_INTERVAL_SECS..=MAX_INTERVAL_SECS).contains(&interval_secs) {
            return Err(format!(
                "Error: poll_every must be between 10s and 24h, got {poll_every} ({interval_secs}s)"
            ));
        }
        let stop_on = a.opt_trimmed("stop_on")?.map(str::to_owned);
        if let Err(e) = Condition::parse(stop_on.as_deref()) {
            return Err(format!("Error: invalid stop_on expression {e}"));
        }
        let max_polls = a.opt_int("max_polls")?.unwrap_or(DEFAULT_MAX_POLLS);
        if !(1..=MAX_POLLS_LIMIT).contains(&max_polls) {
            return Err(format!(
                "Error: max_polls must be between 1 and {MAX_POLLS_LIMIT}, got {max_polls}"
            ));
        }
        Ok(Self {
            command,
            name,
            poll_every,
            interval_secs,
            stop_on,
            max_polls,
        })
    }

    fn to_json(&self) -> Value {
        json!({
            "action": "create",
            "command": self.command,
            "name": self.name,
            "poll_every": self.poll_every,
            "stop_on": self.stop_on,
            "max_polls": self.max_polls,
        })
    }
}

fn action_of(args: &Value) -> Result<String, String> {
    let a = Args::new(args)?;
    let action = a.non_blank("action")?.trim().to_ascii_lowercase();
    match action.as_str() {
        "create" | "list" | "cancel" => Ok(action),
        other => Err(format!(
            "Error: unknown action '{other}'; use create, list or cancel"
        )),
    }
}

fn short(id: &str) -> &str {
    id.get(..SHORT_ID).unwrap_or(id)
}

fn describe(w: &WatchEntry) -> String {
    let condition = match &w.stop_on {
        Some(expr) => format!("stop_on: {expr}"),
        None => "fires on output change".to_owned(),
    };
    format!(
        "- {} (id {}): `{}` every {}, polls {}/{}, {}; next poll {}",
        w.name,
        short(&w.watch_id),
        w.command,
        format_interval(w.interval_secs),
        w.poll_count,
        w.max_polls,
        condition,
        w.next_poll.as_deref().unwrap_or("-"),
    )
}

impl WatchTool {
    async fn create(&self, args: &CreateArgs, ctx: &ToolContext) -> ToolOutput {
        if ctx.ws_id.is_empty() {
            return ToolOutput::error("Error: watches belong to a workstream; this call has none");
        }
        let _serialised = self.create_lock.lock().await;
        let active = match self.backend.active(&ctx.ws_id).await {
            Ok(active) => active,
            Err(e) => return ToolOutput::error(format!("Error: cannot read watches: {e}")),
        };
        if active.len() >= MAX_ACTIVE_PER_WORKSTREAM {
            let names: Vec<&str> = active.iter().map(|w| w.name.as_str()).collect();
            return ToolOutput::error(format!(
                "Error: this workstream already has {} active watches (the limit is \
                 {MAX_ACTIVE_PER_WORKSTREAM}): {}. Cancel one first.",
                active.len(),
                names.join(", ")
            ));
        }
        if active.iter().any(|w| w.name == args.name) {
            return ToolOutput::error(format!(
                "Error: a watch named '{}' is already active in this workstream; choose \
                 another name or cancel it first",
                args.name
            ));
        }
        let request = WatchRequest {
            ws_id: ctx.ws_id.to_string(),
            node_id: ctx.node_id.to_string(),
            name: args.name.clone(),
            command: args.command.clone(),
            interval_secs: args.interval_secs,
            stop_on: args.stop_on.clone(),
            max_polls: args.max_polls,
            created_by: "model".to_owned(),
        };
        let entry = match self.backend.create(request).await {
            Ok(entry) => entry,
            Err(e) => return ToolOutput::error(format!("Error: watch not created: {e}")),
        };
        tracing::info!(
            ws_id = %ctx.ws_id,
            watch_id = %entry.watch_id,
            name = %entry.name,
            interval_secs = entry.interval_secs,
            "watch created"
        );
        let until = match &entry.stop_on {
            Some(expr) => format!("until `{expr}` holds"),
            None => "until its output changes".to_owned(),
        };
        ToolOutput::ok(format!(
            "Watch '{}' created (id {}): `{}` runs now and then every {}, {until}, at most {} \
             times. When it fires, the result arrives here as a new message and the watch \
             ends.",
            entry.name,
            short(&entry.watch_id),
            entry.command,
            format_interval(entry.interval_secs),
            entry.max_polls,
        ))
    }

    async fn list(&self, ctx: &ToolContext) -> ToolOutput {
        match self.backend.active(&ctx.ws_id).await {
            Ok(active) if active.is_empty() => ToolOutput::ok("No active watches."),
            Ok(active) => {
                let lines: Vec<String> = active.iter().map(describe).collect();
                ToolOutput::ok(format!(
                    "{} active watch{}:\n{}",
                    active.len(),
                    if active.len() == 1 { "" } else { "es" },
                    lines.join("\n")
                ))
            }
            Err(e) => ToolOutput::error(format!("Error: cannot read watches: {e}")),
        }
    }

    async fn cancel(&self, key: &str, ctx: &ToolContext) -> ToolOutput {
        let active = match self.backend.active(&ctx.ws_id).await {
            Ok(active) => active,
            Err(e) => return ToolOutput::error(format!("Error: cannot read watches: {e}")),
        };
        let by_name: Vec<&WatchEntry> = active.iter().filter(|w| w.name == key).collect();
        let matches = if by_name.is_empty() {
            active
                .iter()
                .filter(|w| w.watch_id.starts_with(key))
                .collect()
        } else {
            by_name
        };
        let watch = match matches.as_slice() {
            [one] => *one,
            [] => {
                let names: Vec<String> = active
                    .iter()
                    .map(|w| format!("{} ({})", w.name, short(&w.watch_id)))
                    .collect();
                return ToolOutput::error(format!(
                    "Error: no active watch is named '{key}' or has an id starting with it. \
                     Active watches: {}",
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                ));
            }
            many => {
                let ids: Vec<&str> = many.iter().map(|w| w.watch_id.as_str()).collect();
                return ToolOutput::error(format!(
                    "Error: '{key}' matches {} watches ({}); give more of the id",
                    many.len(),
                    ids.join(", ")
                ));
            }
        };
        match self.backend.cancel(&watch.watch_id).await {
            Ok(true) => {
                tracing::info!(ws_id = %ctx.ws_id, watch_id = %watch.watch_id, "watch cancelled");
                ToolOutput::ok(format!(
                    "Watch '{}' (id {}) cancelled.",
                    watch.name,
                    short(&watch.watch_id)
                ))
            }
            Ok(false) => {
                ToolOutput::error(format!("Error: watch '{}' is no longer active", watch.name))
            }
            Err(e) => ToolOutput::error(format!("Error: watch not cancelled: {e}")),
        }
    }
}

#[async_trait]
impl Tool for WatchTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, _ctx: &ToolContext) -> Result<Prepared, String> {
        match action_of(&args)?.as_str() {
            "create" => {
                let create = CreateArgs::parse(&args)?;
                let every = format_interval(create.interval_secs);
                let mut preview = format!(
                    "command: {}\npoll every: {every}\nmax polls: {}\n",
                    create.command, create.max_polls
                );
                match &create.stop_on {
                    Some(expr) => preview.push_str(&format!("stop on: {expr}")),
                    None => preview.push_str("stop on: output change"),
                }
                Ok(Prepared {
                    header: header(
                        "watch",
                        &format!("create '{}' every {every}: {}", create.name, create.command),
                    ),
                    preview,
                    args: create.to_json(),
                    needs_approval: true,
                    approval_label: "watch".to_owned(),
                })
            }
            "list" => Ok(Prepared {
                args: json!({"action": "list"}),
                header: header("watch", "list"),
                preview: String::new(),
                needs_approval: false,
                approval_label: "watch".to_owned(),
            }),
            _ => {
                let a = Args::new(&args)?;
                let key = a
                    .non_blank("name")
                    .map_err(|_| {
                        "Error: cancel needs 'name': the watch's name or a prefix of its id"
                            .to_owned()
                    })?
                    .trim()
                    .to_owned();
                Ok(Prepared {
                    header: header("watch", &format!("cancel '{key}'")),
                    args: json!({"action": "cancel", "name": key}),
                    preview: String::new(),
                    needs_approval: false,
                    approval_label: "watch".to_owned(),
                })
            }
        }
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let args = &prepared.args;
        let action = match action_of(args) {
            Ok(action) => action,
            Err(e) => return ToolOutput::error(e),
        };
        let output = match action.as_str() {
            // `prepare` checked these; a hand-built `Prepared` is checked again, not trusted.
            "create" => match CreateArgs::parse(args) {
                Ok(create) => self.create(&create, ctx).await,
                Err(e) => ToolOutput::error(e),
            },
            "list" => self.list(ctx).await,
            _ => match prepared.text("name").map(str::trim) {
                Some(key) if !key.is_empty() => self.cancel(key, ctx).await,
                _ => ToolOutput::error("Error: cancel needs 'name'"),
            },
        };
        finish(output, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_arguments_are_normalised_and_checked() {
        let args = CreateArgs::parse(&json!({
            "action": "create", "command": " gh pr view 1 ", "name": " pr ",
            "poll_every": "1h30m", "stop_on": " data['state'] == 'MERGED' ", "max_polls": "7"
        }))
        .unwrap();
        assert_eq!(args.command, "gh pr view 1");
        assert_eq!(args.name, "pr");
        assert_eq!(args.interval_secs, 5400.0);
        assert_eq!(args.stop_on.as_deref(), Some("data['state'] == 'MERGED'"));
        assert_eq!(args.max_polls, 7);
        // Normalised arguments parse to the same thing (execute re-checks them).
        assert_eq!(CreateArgs::parse(&args.to_json()).unwrap(), args);

        let defaults = CreateArgs::parse(&json!({"command": "ls", "name": "n"})).unwrap();
        assert_eq!(defaults.interval_secs, 300.0);
        assert_eq!(defaults.max_polls, 100);
        assert_eq!(defaults.stop_on, None);
        let bare = CreateArgs::parse(&json!({"command": "ls", "name": "n", "poll_every": 45}));
        assert_eq!(bare.unwrap().interval_secs, 45.0);
    }

    #[test]
    fn bad_create_arguments_say_why() {
        let cases = [
            (json!({"name": "n"}), "missing required argument 'command'"),
            (json!({"command": "ls"}), "missing required argument 'name'"),
            (
                json!({"command": "ls", "name": "n", "poll_every": "5s"}),
                "between 10s and 24h",
            ),
            (
                json!({"command": "ls", "name": "n", "poll_every": "25h"}),
                "between 10s and 24h",
            ),
            (
                json!({"command": "ls", "name": "n", "poll_every": "soon"}),
                "invalid duration",
            ),
            (
                json!({"command": "ls", "name": "n", "stop_on": "foo == 1"}),
                "unknown name 'foo'",
            ),
            (
                json!({"command": "ls", "name": "n", "stop_on": "output ="}),
                "position 8",
            ),
            (
                json!({"command": "ls", "name": "n", "max_polls": 0}),
                "max_polls must be between",
            ),
            (json!({"command": "rm -rf /", "name": "n"}), "blocked"),
            (json!({"command": "ls", "name": "a\nb"}), "single line"),
        ];
        for (args, expected) in cases {
            let e = CreateArgs::parse(&args).unwrap_err();
            assert!(e.contains(expected), "{args}: {e}");
        }
    }

    #[test]
    fn actions_are_checked() {
        assert_eq!(action_of(&json!({"action": " LIST "})).unwrap(), "list");
        assert!(
            action_of(&json!({"action": "delete"}))
                .unwrap_err()
                .contains("unknown action")
        );
        assert!(action_of(&json!({})).unwrap_err().contains("'action'"));
    }
}

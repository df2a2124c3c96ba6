//! `notify`: POST a JSON notification to the operator's webhook targets, at most
//! `notify_per_turn` (5) successful ones per turn (see [`crate::web::notify`] for how a turn
//! is told apart).
//!
//! The webhook receives
//! `{"message", "title"?, "username"?, "channel_type"?, "channel_id"?, "source": "turnstone"}`.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::{finish, header, schema_definition};
use crate::arguments::Args;
use crate::error::RegistryError;
use crate::tool::{OutputSink, Prepared, Tool, ToolContext, ToolDefinition, ToolOutput};
use crate::web::WebOptions;
use crate::web::notify::{NotifyLimiter, NotifyTarget, deliver};

const MAX_MESSAGE_CHARS: usize = 2000;
const MAX_TITLE_CHARS: usize = 200;
const MAX_ID_CHARS: usize = 200;

/// The `notify` tool.
#[derive(Debug, Clone)]
pub struct NotifyTool {
    definition: ToolDefinition,
    targets: Vec<NotifyTarget>,
    backoff: Vec<Duration>,
    timeout: Duration,
    per_turn: usize,
    limiter: NotifyLimiter,
}

impl NotifyTool {
    pub fn new(options: &WebOptions) -> Result<Self, RegistryError> {
        let mut definition =
            schema_definition("notify", include_str!("../../schemas/notify.json"))?;
        // The model sees the configured target names (fixed by configuration, so the tool
        // payload stays deterministic).
        if !options.notify_targets.is_empty()
            && let Some(target) = definition
                .parameters
                .get_mut("properties")
                .and_then(|p| p.get_mut("target"))
                .and_then(Value::as_object_mut)
        {
            let names: Vec<Value> = options
                .notify_targets
                .iter()
                .map(|t| Value::String(t.name.clone()))
                .collect();
            target.insert("enum".to_owned(), Value::Array(names));
        }
        Ok(Self {
            definition,
            targets: options.notify_targets.clone(),
            backoff: options.notify_retry_backoff.clone(),
            timeout: options.notify_timeout,
            per_turn: options.notify_per_turn,
            limiter: options.notify_limiter.clone(),
        })
    }
}

fn bounded<'a>(a: &Args<'a>, key: &str, max: usize) -> Result<Option<&'a str>, String> {
    match a.opt_trimmed(key)? {
        Some(s) if s.chars().count() > max => Err(format!(
            "Error: {key} is {} characters; the limit is {max}",
            s.chars().count()
        )),
        other => Ok(other),
    }
}

#[async_trait]
impl Tool for NotifyTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn prepare(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, String> {
        let a = Args::new(&args)?;
        let message = a.non_blank("message")?.trim();
        let count = message.chars().count();
        if count > MAX_MESSAGE_CHARS {
            return Err(format!(
                "Error: message is {count} characters; the limit is {MAX_MESSAGE_CHARS}"
            ));
        }
        let title = bounded(&a, "title", MAX_TITLE_CHARS)?;
        let username = bounded(&a, "username", MAX_ID_CHARS)?;
        let channel_type = bounded(&a, "channel_type", MAX_ID_CHARS)?;
        let channel_id = bounded(&a, "channel_id", MAX_ID_CHARS)?;
        let target = bounded(&a, "target", MAX_ID_CHARS)?;
        if username.is_some() && (channel_type.is_some() || channel_id.is_some()) {
            return Err(
                "Error: give either username or channel_type + channel_id, not both".into(),
            );
        }
        if channel_type.is_some() != channel_id.is_some() {
            return Err("Error: channel_type and channel_id must be given together".into());
        }
        if self.targets.is_empty() {
            return Err(
                "Error: no notification targets are configured (the operator sets \
                        webhook targets under [tools.notify] in config.toml)"
                    .into(),
            );
        }
        if let Some(name) = target
            && !self.targets.iter().any(|t| t.name == name)
        {
            let names: Vec<&str> = self.targets.iter().map(|t| t.name.as_str()).collect();
            return Err(format!(
                "Error: unknown notification target '{name}'; configured targets: {}",
                names.join(", ")
            ));
        }
        self.limiter.on_prepare(ctx);
        let mut normalized = Map::new();
        normalized.insert("message".into(), json!(message));
        for (key, value) in [
            ("title", title),
            ("username", username),
            ("channel_type", channel_type),
            ("channel_id", channel_id),
            ("target", target),
        ] {
            if let Some(v) = value {
                normalized.insert(key.into(), json!(v));
            }
        }
        let summary = match title {
            Some(t) => format!("{t}: {message}"),
            None => message.to_owned(),
        };
        Ok(Prepared {
            args: Value::Object(normalized),
            header: header("notify", &summary),
            preview: String::new(),
            needs_approval: false,
            approval_label: "notify".to_owned(),
        })
    }

    async fn execute(
        &self,
        prepared: &Prepared,
        ctx: &ToolContext,
        _out: &dyn OutputSink,
    ) -> ToolOutput {
        let message = match prepared.required_text("message") {
            Ok(message) => message,
            Err(missing) => return missing,
        };
        let targets: Vec<&NotifyTarget> = match prepared.text("target") {
            Some(name) => self.targets.iter().filter(|t| t.name == name).collect(),
            None => self.targets.iter().collect(),
        };
        if targets.is_empty() {
            return ToolOutput::error("Error: no matching notification target is configured");
        }
        let slot = match self.limiter.reserve(ctx, self.per_turn) {
            Ok(slot) => slot,
            Err(sent) => {
                return ToolOutput::error(format!(
                    "Error: notification limit reached: {sent} of {} notifications already \
                     sent this turn",
                    self.per_turn
                ));
            }
        };
        let mut payload = Map::new();
        payload.insert("message".into(), json!(message));
        for key in ["title", "username", "channel_type", "channel_id"] {
            if let Some(v) = prepared.args.get(key) {
                payload.insert(key.into(), v.clone());
            }
        }
        payload.insert("source".into(), json!("turnstone"));
        let output = match deliver(
            &targets,
            &Value::Object(payload),
            &self.backoff,
            self.timeout,
        )
        .await
        {
            Ok(name) => {
                slot.succeeded();
                ToolOutput::ok(format!("Notification sent via '{name}'."))
            }
            Err(failures) => ToolOutput::error(format!(
                "Error: notification not delivered: {}",
                failures.join("; ")
            )),
        };
        finish(output, ctx)
    }
}

//! The cluster-wide runtime settings (node spec §7.2, `system_settings`): which keys the
//! console accepts and the nodes apply, each value's type and range, and the shapes of
//! `POST /v1/api/_internal/config-reload` and `model-reload` that carry them.
//!
//! A value is JSON. [`validate`] checks a key and a value exactly as the console's admin
//! route and the node's reload do (one rule for both), returning the value to store
//! (choices lowercased). [`Applies::Live`] keys take effect on the node at the next use after
//! a reload (a new approval, the next turn, the next tool array); [`Applies::Restart`] keys
//! when the node next starts; [`Applies::Models`] keys at the next model reload.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// When a node applies a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Applies {
    /// At the next use after `config-reload`.
    Live,
    /// At the node's next start.
    Restart,
    /// At `model-reload` (the model registry is rebuilt).
    Models,
}

/// A value's type and range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Bool,
    Int {
        min: i64,
        max: i64,
    },
    Float {
        min: f64,
        max: f64,
    },
    /// One of these (any case).
    Choice(&'static [&'static str]),
    /// A web search backend: `""`, `searxng`, or `mcp:<server>:<tool>`.
    SearchBackend,
    /// An array of model aliases.
    Aliases,
    /// A model alias, or `""` for the node's own default.
    Alias,
    /// Text of at most `max` characters, no control characters (never echoed in errors:
    /// a secret may be one).
    Text {
        max: usize,
    },
    /// `""` or an `http://` / `https://` URL.
    Url,
}

/// One accepted key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SettingSpec {
    pub key: &'static str,
    pub kind: Kind,
    pub applies: Applies,
    /// A secret's value is stored but never returned.
    pub secret: bool,
    pub description: &'static str,
}

const fn live(key: &'static str, kind: Kind, description: &'static str) -> SettingSpec {
    SettingSpec {
        key,
        kind,
        applies: Applies::Live,
        secret: false,
        description,
    }
}

/// The keys the console accepts, sorted.
pub const CLUSTER_SETTINGS: &[SettingSpec] = &[
    SettingSpec {
        key: "judge.api_key",
        kind: Kind::Text { max: 4096 },
        applies: Applies::Live,
        secret: true,
        description: "the key of the judge's own endpoint (stored, never returned or logged)",
    },
    live(
        "judge.base_url",
        Kind::Url,
        "the LLM judge's own endpoint (\"\": the workstream's client)",
    ),
    live(
        "judge.confidence_threshold",
        Kind::Float { min: 0.0, max: 1.0 },
        "least verdict confidence that lets the auto-review posture run a call unasked",
    ),
    live(
        "judge.enabled",
        Kind::Bool,
        "heuristic verdicts and the LLM judge on gated tool calls",
    ),
    live(
        "judge.model",
        Kind::Text { max: 256 },
        "the LLM judge's model (\"\": the workstream's model)",
    ),
    live(
        "judge.output_guard",
        Kind::Bool,
        "scan every tool result; flagged ones emit output_warning",
    ),
    live(
        "judge.provider",
        Kind::Choice(&["", "openai", "anthropic"]),
        "the LLM judge's provider (\"\": the workstream's client)",
    ),
    live(
        "judge.redact_secrets",
        Kind::Bool,
        "replace detected secrets in tool output (needs judge.output_guard)",
    ),
    live(
        "judge.timeout",
        Kind::Float {
            min: 0.1,
            max: 86_400.0,
        },
        "seconds the LLM judge may take per call; slower gives no verdict",
    ),
    SettingSpec {
        key: "model.default",
        kind: Kind::Alias,
        applies: Applies::Models,
        secret: false,
        description: "model alias of new workstreams that name none (\"\": the node's own)",
    },
    SettingSpec {
        key: "model.fallback",
        kind: Kind::Aliases,
        applies: Applies::Models,
        secret: false,
        description: "aliases tried in order when a selected model is unreachable",
    },
    SettingSpec {
        key: RERANKER_ROLE,
        kind: Kind::Alias,
        applies: Applies::Models,
        secret: false,
        description: "the Reranker role: alias of an enabled model definition with supports_rerank (\"\": none)",
    },
    live(
        "server.approval_timeout",
        Kind::Int {
            min: 1,
            max: 604_800,
        },
        "seconds a tool approval may stay pending before it is denied",
    ),
    live(
        "session.auto_compact_pct",
        Kind::Float { min: 0.0, max: 1.0 },
        "compact after a turn above this share of the context window (0: never)",
    ),
    live(
        "session.compact_max_tokens",
        Kind::Int {
            min: 1,
            max: 1_000_000,
        },
        "max_tokens of the compaction summary request",
    ),
    live(
        "tools.rerank_bm25",
        Kind::Bool,
        "the reranker also re-orders memory, tool_search and skill candidates",
    ),
    live(
        "tools.rerank_bm25_threshold",
        Kind::Float { min: 0.0, max: 1.0 },
        "retrieval candidates the reranker scores below this are dropped (0: none)",
    ),
    live(
        "tools.rerank_web_search",
        Kind::Bool,
        "the reranker re-orders web_search results (default: on once a reranker is selected)",
    ),
    live(
        "tools.search",
        Kind::Choice(&["auto", "on", "off"]),
        "tool search (deferred tools behind tool_search): auto, on or off",
    ),
    live(
        "tools.search_max_results",
        Kind::Int { min: 1, max: 50 },
        "most tools one tool_search call returns",
    ),
    live(
        "tools.search_threshold",
        Kind::Int {
            min: 0,
            max: 100_000,
        },
        "with tools.search = auto: the number of tools that turns it on",
    ),
    SettingSpec {
        key: "tools.web_search_backend",
        kind: Kind::SearchBackend,
        applies: Applies::Restart,
        secret: false,
        description: "web_search backend: \"\" (SearxNG when configured), searxng, or mcp:<server>:<tool>",
    },
];

/// The spec of `key`, if it is accepted.
pub fn spec(key: &str) -> Option<&'static SettingSpec> {
    CLUSTER_SETTINGS.iter().find(|s| s.key == key)
}

/// Why a key or value is refused; the message names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    #[error("Unknown setting: {0}")]
    UnknownKey(String),
    #[error("Invalid value for {key}: {reason}")]
    InvalidValue { key: String, reason: String },
}

fn is_alias(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Checks `value` for `key`; the value to store (choices lowercased, integral floats of an
/// integer key as integers).
pub fn validate(key: &str, value: &Value) -> Result<Value, SettingError> {
    let spec = spec(key).ok_or_else(|| SettingError::UnknownKey(key.to_string()))?;
    let bad = |reason: String| SettingError::InvalidValue {
        key: key.to_string(),
        reason,
    };
    match spec.kind {
        Kind::Bool => value
            .as_bool()
            .map(Value::Bool)
            .ok_or_else(|| bad("expected true or false".into())),
        Kind::Int { min, max } => {
            let n = value
                .as_i64()
                .or_else(|| {
                    value
                        .as_f64()
                        .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                        .map(|f| f as i64)
                })
                .ok_or_else(|| bad("expected an integer".into()))?;
            if !(min..=max).contains(&n) {
                return Err(bad(format!("must be between {min} and {max}, got {n}")));
            }
            Ok(Value::from(n))
        }
        Kind::Float { min, max } => {
            let f = value
                .as_f64()
                .filter(|f| f.is_finite())
                .ok_or_else(|| bad("expected a number".into()))?;
            if !(min..=max).contains(&f) {
                return Err(bad(format!("must be between {min} and {max}, got {f}")));
            }
            Ok(Value::from(f))
        }
        Kind::Choice(choices) => {
            let s = value
                .as_str()
                .ok_or_else(|| bad("expected a string".into()))?
                .trim()
                .to_ascii_lowercase();
            if choices.contains(&s.as_str()) {
                Ok(Value::String(s))
            } else {
                Err(bad(format!("expected one of {}", choices.join(", "))))
            }
        }
        Kind::SearchBackend => {
            let s = value
                .as_str()
                .ok_or_else(|| bad("expected a string".into()))?
                .trim();
            let ok = s.is_empty()
                || s == "searxng"
                || s.strip_prefix("mcp:").is_some_and(|rest| {
                    let mut parts = rest.splitn(2, ':');
                    matches!((parts.next(), parts.next()), (Some(a), Some(b)) if !a.is_empty() && !b.is_empty())
                });
            if ok {
                Ok(Value::String(s.to_string()))
            } else {
                Err(bad("expected \"\", searxng or mcp:<server>:<tool>".into()))
            }
        }
        Kind::Alias => {
            let s = value
                .as_str()
                .ok_or_else(|| bad("expected a string".into()))?
                .trim();
            if s.is_empty() || is_alias(s) {
                Ok(Value::String(s.to_string()))
            } else {
                Err(bad("expected a model alias (letters, digits, . _ -)".into()))
            }
        }
        Kind::Text { max } => {
            let s = value
                .as_str()
                .ok_or_else(|| bad("expected a string".into()))?
                .trim();
            if s.chars().count() > max || s.chars().any(char::is_control) {
                return Err(bad(format!(
                    "expected at most {max} characters, no control characters"
                )));
            }
            Ok(Value::String(s.to_string()))
        }
        Kind::Url => {
            let s = value
                .as_str()
                .ok_or_else(|| bad("expected a string".into()))?
                .trim();
            let ok = s.is_empty()
                || ((s.starts_with("http://") || s.starts_with("https://"))
                    && s.len() <= 2048
                    && !s.chars().any(|c| c.is_control() || c.is_whitespace()));
            if ok {
                Ok(Value::String(s.to_string()))
            } else {
                Err(bad("expected \"\" or an http:// or https:// URL".into()))
            }
        }
        Kind::Aliases => {
            let items = value
                .as_array()
                .ok_or_else(|| bad("expected an array of model aliases".into()))?;
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match item.as_str().map(str::trim) {
                    Some(a) if is_alias(a) => out.push(Value::String(a.to_string())),
                    _ => return Err(bad(format!("{item} is not a model alias"))),
                }
            }
            Ok(Value::Array(out))
        }
    }
}

/// The setting naming the model definition of the Reranker role (Models → Roles → Reranker).
pub const RERANKER_ROLE: &str = "model.reranker";

/// The capability that makes a model definition a reranker: its `base_url` is a
/// Cohere/Jina-compatible `/rerank` endpoint. Such a definition is a reranker only — it is
/// never a chat model (no registry alias, no fallback target, not `model.default`).
pub const SUPPORTS_RERANK: &str = "supports_rerank";

/// A reranker definition's optional instruction: each query is sent as
/// `<Instruct>: {instruction}\n<Query>: {query}` (for endpoints that apply no chat template).
pub const RERANK_INSTRUCTION: &str = "rerank_instruction";

/// A reranker definition's optional request timeout in seconds (default 5).
pub const RERANK_TIMEOUT: &str = "rerank_timeout";

/// A boolean of a model definition's `capabilities` JSON text (`{"vision": true}`); false
/// when absent, not a boolean, or the text is not JSON.
pub fn capability_flag(capabilities: &str, key: &str) -> bool {
    capability(capabilities, key)
        .and_then(|v| v.as_bool())
        .unwrap_or(false)
}

/// One value of a model definition's `capabilities` JSON text.
pub fn capability(capabilities: &str, key: &str) -> Option<Value> {
    serde_json::from_str::<Value>(capabilities)
        .ok()
        .and_then(|mut c| c.get_mut(key).map(Value::take))
}

/// Why a model definition cannot be the Reranker role (`None`: it can): it must have
/// `supports_rerank` and be enabled. The console's check at selection and the node's.
pub fn reranker_role_problem(alias: &str, capabilities: &str, enabled: bool) -> Option<String> {
    if !capability_flag(capabilities, SUPPORTS_RERANK) {
        Some(format!(
            "model {alias:?} is not a reranker: its capabilities need {{\"supports_rerank\": true}}"
        ))
    } else if !enabled {
        Some(format!("model {alias:?} is disabled"))
    } else {
        None
    }
}

/// Checks a model definition's `capabilities` object as the console's admin route does: an
/// object; `vision` and `supports_rerank` booleans; `rerank_instruction` text of at most
/// 4096 characters; `rerank_timeout` seconds above 0 and at most 600. Other keys are kept
/// as given. The message names the key.
pub fn validate_capabilities(value: &Value) -> Result<Value, String> {
    let object = value
        .as_object()
        .ok_or_else(|| "capabilities: expected a JSON object".to_string())?;
    for (key, v) in object {
        let ok = match key.as_str() {
            "vision" | SUPPORTS_RERANK => v.is_boolean(),
            RERANK_INSTRUCTION => v
                .as_str()
                .is_some_and(|s| s.chars().count() <= 4096 && !s.contains('\0')),
            RERANK_TIMEOUT => v
                .as_f64()
                .is_some_and(|t| t.is_finite() && t > 0.0 && t <= 600.0),
            _ => true,
        };
        if !ok {
            let expected = match key.as_str() {
                RERANK_INSTRUCTION => "text of at most 4096 characters",
                RERANK_TIMEOUT => "seconds above 0 and at most 600",
                _ => "true or false",
            };
            return Err(format!("capabilities.{key}: expected {expected}"));
        }
    }
    Ok(value.clone())
}

/// The body of `POST /v1/api/_internal/config-reload` (ours; the original's is empty). With
/// `settings`, the node first makes its stored settings exactly these (global rows and its
/// own): how a node on its own SQLite gets the console's values. Without, it re-reads its
/// store (a node sharing the console's PostgreSQL). `policies` (the admin API's policy
/// rows) and `skills` (manual skills, every column) are made the node's stored tool
/// policies and manual skills the same way; its config-file policies and MCP-synced skills
/// stay.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigReloadBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Vec<PushedSetting>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<Value>>,
}

/// One `system_settings` row as the console pushes it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushedSetting {
    pub key: String,
    pub value: Value,
    /// `""`: every node.
    #[serde(default)]
    pub node_id: String,
    #[serde(default)]
    pub changed_by: String,
}

/// The reply of `config-reload`: `status` `ok` (or `noop` without storage), the effective
/// values now in force (secrets as `"<set>"`), keys refused (stored by an older or newer
/// console, unknown to this node, or out of range) with the reason, and the keys that apply
/// only at the next start.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigReloadReply {
    pub status: String,
    #[serde(default)]
    pub applied: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refused: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restart_required: Vec<String>,
}

/// The body of `POST /v1/api/_internal/model-reload` (ours): with `definitions`, the node
/// first makes its stored model definitions exactly these (secrets included: the node needs
/// the key to call the model).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelReloadBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definitions: Option<Vec<Value>>,
    /// The console's `model.*` settings rows, stored like `config-reload`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Vec<PushedSetting>>,
}

/// The effective settings of `node_id`: each key's global row, overridden by the node's own.
pub fn effective<'a>(
    rows: impl IntoIterator<Item = (&'a str, &'a str, &'a Value)>,
    node_id: &str,
) -> BTreeMap<String, Value> {
    let mut global = BTreeMap::new();
    let mut own = BTreeMap::new();
    for (key, row_node, value) in rows {
        if row_node.is_empty() {
            global.insert(key.to_string(), value.clone());
        } else if row_node == node_id {
            own.insert(key.to_string(), value.clone());
        }
    }
    global.extend(own);
    global
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_are_sorted_and_unique() {
        let keys: Vec<&str> = CLUSTER_SETTINGS.iter().map(|s| s.key).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn values_are_checked_by_kind_and_range() {
        assert_eq!(validate("judge.enabled", &json!(false)), Ok(json!(false)));
        assert_eq!(
            validate("server.approval_timeout", &json!(5.0)),
            Ok(json!(5))
        );
        assert_eq!(validate("tools.search", &json!(" ON ")), Ok(json!("on")));
        assert_eq!(
            validate("model.fallback", &json!(["a", "b-2"])),
            Ok(json!(["a", "b-2"]))
        );
        assert_eq!(
            validate("tools.web_search_backend", &json!("mcp:brave:search")),
            Ok(json!("mcp:brave:search"))
        );
        for (key, value, says) in [
            ("judge.enabled", json!("yes"), "true or false"),
            ("judge.base_url", json!("ftp://x"), "http://"),
            ("judge.provider", json!("gemini"), "openai, anthropic"),
            ("judge.timeout", json!(0), "between 0.1 and 86400"),
            ("judge.model", json!("a\nb"), "control characters"),
            ("server.approval_timeout", json!(0), "between 1 and 604800"),
            ("server.approval_timeout", json!(1.5), "an integer"),
            ("session.auto_compact_pct", json!(1.5), "between 0 and 1"),
            ("tools.search", json!("sometimes"), "auto, on, off"),
            ("model.fallback", json!("a"), "array"),
            ("model.fallback", json!(["a b"]), "not a model alias"),
            (
                "tools.web_search_backend",
                json!("mcp:x"),
                "mcp:<server>:<tool>",
            ),
        ] {
            let err = validate(key, &value).unwrap_err().to_string();
            assert!(
                err.contains(key) && err.contains(says),
                "{key} {value}: {err}"
            );
        }
        assert_eq!(
            validate("judge.provider", &json!(" Anthropic ")),
            Ok(json!("anthropic"))
        );
        let long_secret = "sk-".repeat(2000);
        let err = validate("judge.api_key", &json!(long_secret))
            .unwrap_err()
            .to_string();
        assert!(!err.contains("sk-sk-"), "a secret is never echoed: {err}");
        assert_eq!(
            validate("tools.nope", &json!(1)).unwrap_err().to_string(),
            "Unknown setting: tools.nope"
        );
    }

    #[test]
    fn capabilities_are_read_and_checked_naming_the_key() {
        let caps = r#"{"supports_rerank": true, "rerank_instruction": "find it"}"#;
        assert!(capability_flag(caps, SUPPORTS_RERANK));
        assert!(!capability_flag(caps, "vision"));
        assert!(
            !capability_flag("", SUPPORTS_RERANK),
            "empty text: no capability"
        );
        assert_eq!(capability(caps, RERANK_INSTRUCTION), Some(json!("find it")));
        let good = json!({"supports_rerank": true, "rerank_timeout": 2.5, "thinking": "x"});
        assert_eq!(validate_capabilities(&good), Ok(good.clone()));
        for (bad, says) in [
            (json!([]), "a JSON object"),
            (
                json!({"supports_rerank": "yes"}),
                "capabilities.supports_rerank",
            ),
            (json!({"vision": 1}), "capabilities.vision"),
            (json!({"rerank_timeout": 0}), "capabilities.rerank_timeout"),
            (
                json!({"rerank_instruction": 3}),
                "capabilities.rerank_instruction",
            ),
        ] {
            let err = validate_capabilities(&bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn a_node_row_overrides_the_global_one() {
        let (a, b, c) = (json!(1), json!(2), json!(3));
        let rows = [
            ("k", "", &a),
            ("k", "n1", &b),
            ("k", "n2", &c),
            ("j", "", &a),
        ];
        let n1 = effective(rows.iter().map(|(k, n, v)| (*k, *n, *v)), "n1");
        assert_eq!(
            n1,
            BTreeMap::from([("j".into(), a.clone()), ("k".into(), b.clone())])
        );
        let n3 = effective(rows.iter().map(|(k, n, v)| (*k, *n, *v)), "n3");
        assert_eq!(n3["k"], a);
    }
}

//! [`ToolIntent`]: what a workstream stores about its tools — toggle intent, never a
//! materialized list of names (seed 002 §3). The tool array is expanded from the live
//! registry at every turn ([`super::expand()`]), so a tool added later reaches old workstreams.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest tool or preset name an intent accepts.
const MAX_NAME_LEN: usize = 200;
/// Most names in one list of an intent.
const MAX_NAMES: usize = 512;

/// A workstream's tool toggles.
///
/// Stored as JSON: an object with only the keys that were set, e.g.
/// `{"toolset":"readonly","web_search":true}`. Reading accepts what older writers produced
/// too: a missing key reads back as none, `true`/`false` mean all on / all off, and a list
/// of names is a hand-picked set ([`ToolIntent::only`]). Unknown keys are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolIntent {
    /// `Some(false)`: no tools at all. `None`/`Some(true)`: tools on (the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// A preset name (`ToolsetConfig::presets` or a built-in preset), expanded at run time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toolset: Option<String>,
    /// Tools (names or patterns) switched off. `tool_search` here turns tool search off.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disabled: Vec<String>,
    /// When set, only these tools (names or patterns) of the base set stay available.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<String>>,
    /// `Some(true)` layers `web_search` in, `Some(false)` takes it out, `None` follows the
    /// base set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub web_search: Option<bool>,
    /// A hand-picked set: exactly these tools (still expanded against the live registry,
    /// in registry order; names not registered are skipped). `Some(vec![])` = no tools.
    /// Never written to hold "all tools": that is the default intent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub only: Option<Vec<String>>,
    /// Plan mode (seed 004): `Some(true)` narrows whatever the rest of the intent selects
    /// to the read-only tools (`ToolsetConfig::plan_tools`) plus `tool_search`; a call of
    /// any other tool is refused. Entered and left explicitly (`/plan on|off`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<bool>,
    /// A persona (`ToolsetConfig::personas`): a named tool-visibility set (seed 000). An
    /// *exact* set (it names `tool_search`) makes its tools the visible ones and defers
    /// every other available tool behind a client-side `tool_search`, whatever the search
    /// mode; a *hard* set (no `tool_search`) is all the workstream gets, with no tool search.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persona: Option<String>,
}

/// An intent (or a change to one) that cannot be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntentError {
    #[error("invalid tool intent: {0}")]
    Invalid(String),
    #[error("unknown toolset '{name}' (known: {})", .known.join(", "))]
    UnknownToolset { name: String, known: Vec<String> },
    #[error("unknown persona '{name}' (configured: {})", if .known.is_empty() { "none".to_owned() } else { .known.join(", ") })]
    UnknownPersona { name: String, known: Vec<String> },
}

impl ToolIntent {
    /// All tools, live (the default).
    pub fn all() -> Self {
        Self::default()
    }

    /// No tools at all.
    pub fn none() -> Self {
        Self {
            enabled: Some(false),
            ..Self::default()
        }
    }

    /// Exactly these hand-picked tools.
    pub fn only<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        Self {
            only: Some(names.into_iter().map(Into::into).collect()),
            ..Self::default()
        }
    }

    /// The named preset.
    pub fn toolset(name: impl Into<String>) -> Self {
        Self {
            toolset: Some(name.into()),
            ..Self::default()
        }
    }

    #[must_use]
    pub fn with_web_search(mut self, on: bool) -> Self {
        self.web_search = Some(on);
        self
    }

    #[must_use]
    pub fn with_disabled(mut self, name: impl Into<String>) -> Self {
        let name = name.into();
        if !self.disabled.contains(&name) {
            self.disabled.push(name);
        }
        self
    }

    /// The same intent with this persona (`None`: no persona).
    #[must_use]
    pub fn with_persona(mut self, persona: Option<String>) -> Self {
        self.persona = persona.filter(|p| !p.trim().is_empty());
        self
    }

    /// Whether plan mode is on.
    pub fn is_plan(&self) -> bool {
        self.plan == Some(true)
    }

    /// The same intent with plan mode on or off (off clears the key, so a plain intent
    /// stays the default).
    #[must_use]
    pub fn with_plan(mut self, on: bool) -> Self {
        self.plan = on.then_some(true);
        self
    }

    /// Whether every tool is switched off.
    pub fn is_off(&self) -> bool {
        self.enabled == Some(false)
    }

    /// Whether this is the plain default (nothing changed; stores as `{}`).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The stored form: a compact JSON object of the keys that were set.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }

    /// Reads a stored form (see the type docs for what is accepted).
    pub fn from_json(text: &str) -> Result<Self, IntentError> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Self::default());
        }
        let intent: Self = serde_json::from_str(text)
            .map_err(|e| IntentError::Invalid(format!("not a tool intent: {e}")))?;
        intent.check_shape()?;
        Ok(intent)
    }

    /// Applies a change sent by a client: a JSON object whose keys replace the same keys of
    /// this intent (`null` clears a key). Keys: `enabled`, `toolset`, `disabled`, `allowed`,
    /// `web_search`, `only`, `plan`, `persona`. Setting `only` to a list hand-picks tools; setting `enabled`,
    /// `toolset` or `web_search` never turns the intent into a list.
    pub fn merged(&self, change: &Value) -> Result<Self, IntentError> {
        let Value::Object(change) = change else {
            return Err(IntentError::Invalid(
                "a tool intent change must be a JSON object".into(),
            ));
        };
        let mut next = serde_json::to_value(self)
            .ok()
            .and_then(|v| match v {
                Value::Object(map) => Some(map),
                _ => None,
            })
            .unwrap_or_default();
        for (key, value) in change {
            if !FIELDS.contains(&key.as_str()) {
                return Err(IntentError::Invalid(format!(
                    "unknown key '{key}' (expected one of: {})",
                    FIELDS.join(", ")
                )));
            }
            if value.is_null() {
                next.remove(key);
            } else {
                next.insert(key.clone(), value.clone());
            }
        }
        let intent: Self = serde_json::from_value(Value::Object(next))
            .map_err(|e| IntentError::Invalid(e.to_string()))?;
        intent.check_shape()?;
        Ok(intent)
    }

    /// Bounds on names and list sizes (the preset name is checked against configuration by
    /// `ToolsetConfig::validate`).
    pub(crate) fn check_shape(&self) -> Result<(), IntentError> {
        let lists: [(&str, Option<&Vec<String>>); 3] = [
            ("disabled", Some(&self.disabled)),
            ("allowed", self.allowed.as_ref()),
            ("only", self.only.as_ref()),
        ];
        for (key, list) in lists {
            let Some(list) = list else { continue };
            if list.len() > MAX_NAMES {
                return Err(IntentError::Invalid(format!(
                    "'{key}' has {} names (at most {MAX_NAMES})",
                    list.len()
                )));
            }
            for name in list {
                check_name(key, name)?;
            }
        }
        if let Some(name) = &self.toolset {
            check_name("toolset", name)?;
        }
        if let Some(name) = &self.persona {
            check_name("persona", name)?;
        }
        Ok(())
    }
}

fn check_name(key: &str, name: &str) -> Result<(), IntentError> {
    if name.trim().is_empty() {
        return Err(IntentError::Invalid(format!("'{key}' holds an empty name")));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(IntentError::Invalid(format!(
            "'{key}' holds a name longer than {MAX_NAME_LEN} bytes"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(IntentError::Invalid(format!(
            "'{key}' holds a name with control characters"
        )));
    }
    Ok(())
}

const FIELDS: &[&str] = &[
    "enabled",
    "toolset",
    "disabled",
    "allowed",
    "web_search",
    "only",
    "plan",
    "persona",
];

/// The object form, every key optional, unknown keys ignored.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Fields {
    enabled: Option<bool>,
    toolset: Option<String>,
    disabled: Option<Vec<String>>,
    allowed: Option<Vec<String>>,
    web_search: Option<bool>,
    only: Option<Vec<String>>,
    plan: Option<bool>,
    persona: Option<String>,
}

impl From<Fields> for ToolIntent {
    fn from(f: Fields) -> Self {
        Self {
            enabled: f.enabled,
            toolset: f.toolset.filter(|t| !t.is_empty()),
            disabled: f.disabled.unwrap_or_default(),
            allowed: f.allowed,
            web_search: f.web_search,
            only: f.only,
            // `false` is the default: stored as absent.
            plan: f.plan.filter(|on| *on),
            persona: f.persona.filter(|p| !p.is_empty()),
        }
    }
}

impl<'de> Deserialize<'de> for ToolIntent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IntentVisitor;

        impl<'de> Visitor<'de> for IntentVisitor {
            type Value = ToolIntent;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tool intent object, a boolean or a list of tool names")
            }

            fn visit_bool<E: de::Error>(self, on: bool) -> Result<ToolIntent, E> {
                Ok(if on {
                    ToolIntent::all()
                } else {
                    ToolIntent::none()
                })
            }

            fn visit_unit<E: de::Error>(self) -> Result<ToolIntent, E> {
                Ok(ToolIntent::default())
            }

            fn visit_none<E: de::Error>(self) -> Result<ToolIntent, E> {
                Ok(ToolIntent::default())
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ToolIntent, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    names.push(name);
                }
                Ok(ToolIntent::only(names))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ToolIntent, A::Error> {
                let fields = Fields::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(fields.into())
            }
        }

        deserializer.deserialize_any(IntentVisitor)
    }
}

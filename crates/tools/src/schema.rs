//! Tool schema files: `schemas/<name>.json`, embedded at compile time, in the format of the
//! original (an OpenAI function schema plus Turnstone metadata keys at the top level).

use serde_json::{Map, Value};

use crate::error::RegistryError;
use crate::tool::{ToolDefinition, ToolMeta};

/// The embedded schema files, in file-name (= registry) order.
const BUILTIN_SCHEMAS: &[(&str, &str)] = &[
    ("bash", include_str!("../schemas/bash.json")),
    ("diff_file", include_str!("../schemas/diff_file.json")),
    ("edit_file", include_str!("../schemas/edit_file.json")),
    ("read_file", include_str!("../schemas/read_file.json")),
    ("search", include_str!("../schemas/search.json")),
    ("write_file", include_str!("../schemas/write_file.json")),
];

/// Metadata keys removed from the schema before it is sent to a model.
const META_KEYS: &[&str] = &[
    "agent",
    "task_agent",
    "auto_approve",
    "primary_key",
    "coordinator",
    "interactive",
    "kind_variants",
    "cwd_note",
    "workspace_note",
];

/// Parses one schema file: `name`, `description`, `parameters` plus metadata keys.
pub fn parse_definition(text: &str) -> Result<ToolDefinition, RegistryError> {
    let invalid = |name: &str, reason: String| RegistryError::InvalidSchema {
        name: name.to_owned(),
        reason,
    };
    let value: Value = serde_json::from_str(text).map_err(|e| invalid("?", e.to_string()))?;
    let Value::Object(mut obj) = value else {
        return Err(invalid("?", "schema is not a JSON object".into()));
    };
    let name =
        take_string(&mut obj, "name").ok_or_else(|| invalid("?", "missing 'name'".into()))?;
    let description = take_string(&mut obj, "description")
        .ok_or_else(|| invalid(&name, "missing 'description'".into()))?;
    let parameters = match obj.remove("parameters") {
        Some(p @ Value::Object(_)) => p,
        _ => return Err(invalid(&name, "'parameters' must be a JSON object".into())),
    };
    let flag = |obj: &Map<String, Value>, key: &str| -> Result<bool, RegistryError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(invalid(&name, format!("'{key}' must be a boolean"))),
        }
    };
    let primary_key = match obj.get("primary_key") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(invalid(&name, "'primary_key' must be a string".into())),
    };
    let meta = ToolMeta {
        agent: flag(&obj, "agent")?,
        task_agent: flag(&obj, "task_agent")?,
        auto_approve: flag(&obj, "auto_approve")?,
        primary_key,
    };
    if let Some(unknown) = obj.keys().find(|k| !META_KEYS.contains(&k.as_str())) {
        return Err(invalid(&name, format!("unexpected key '{unknown}'")));
    }
    Ok(ToolDefinition {
        name,
        description,
        parameters,
        meta,
    })
}

fn take_string(obj: &mut Map<String, Value>, key: &str) -> Option<String> {
    match obj.remove(key) {
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        _ => None,
    }
}

/// Definitions of all built-in tools, in registry order.
pub fn builtin_definitions() -> Result<Vec<ToolDefinition>, RegistryError> {
    BUILTIN_SCHEMAS
        .iter()
        .map(|(_, text)| parse_definition(text))
        .collect()
}

/// The definition of one built-in tool by name.
pub(crate) fn builtin_definition(name: &str) -> Result<ToolDefinition, RegistryError> {
    let (_, text) = BUILTIN_SCHEMAS
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| RegistryError::InvalidSchema {
            name: name.to_owned(),
            reason: "no such built-in schema".into(),
        })?;
    schema_definition(name, text)
}

/// The definition in an embedded schema file, checked to declare `name`. (The tools added
/// after the original six parse their own files: `BUILTIN_SCHEMAS` holds those six.)
pub(crate) fn schema_definition(name: &str, text: &str) -> Result<ToolDefinition, RegistryError> {
    let def = parse_definition(text)?;
    if def.name != name {
        return Err(RegistryError::InvalidSchema {
            name: name.to_owned(),
            reason: format!("schema file declares name '{}'", def.name),
        });
    }
    Ok(def)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_schema_parses_with_metadata_split_off() {
        let defs = builtin_definitions().unwrap();
        let names: Vec<_> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "bash",
                "diff_file",
                "edit_file",
                "read_file",
                "search",
                "write_file"
            ]
        );
        for def in &defs {
            assert_eq!(builtin_definition(&def.name).unwrap(), *def);
            assert_eq!(def.parameters["type"], "object");
            let pk = def.meta.primary_key.as_deref().unwrap();
            assert!(
                def.parameters["properties"].get(pk).is_some(),
                "{}: primary key",
                def.name
            );
            for key in META_KEYS {
                assert!(def.parameters.get(key).is_none());
            }
            for req in def.parameters["required"].as_array().unwrap() {
                let req = req.as_str().unwrap();
                assert!(
                    def.parameters["properties"].get(req).is_some(),
                    "{}: {req}",
                    def.name
                );
            }
        }
    }

    #[test]
    fn metadata_matches_the_reference_table() {
        let meta = |n: &str| builtin_definition(n).unwrap().meta;
        assert_eq!(
            meta("bash"),
            ToolMeta {
                agent: false,
                task_agent: true,
                auto_approve: false,
                primary_key: Some("command".into())
            }
        );
        assert!(meta("read_file").auto_approve && meta("read_file").agent);
        assert!(meta("search").auto_approve && meta("diff_file").auto_approve);
        assert!(!meta("write_file").auto_approve && !meta("edit_file").auto_approve);
        assert_eq!(meta("write_file").primary_key.as_deref(), Some("content"));
        assert_eq!(meta("edit_file").primary_key.as_deref(), Some("old_string"));
    }

    #[test]
    fn malformed_schemas_are_rejected() {
        assert!(parse_definition("not json").is_err());
        assert!(parse_definition("[]").is_err());
        assert!(parse_definition(r#"{"name":"x","description":"d"}"#).is_err());
        assert!(
            parse_definition(r#"{"name":"x","description":"d","parameters":{},"agent":"yes"}"#)
                .is_err()
        );
        assert!(
            parse_definition(r#"{"name":"x","description":"d","parameters":{},"extra":1}"#)
                .is_err()
        );
        let ok = parse_definition(r#"{"name":"x","description":"d","parameters":{}}"#).unwrap();
        assert_eq!(ok.meta, ToolMeta::default());
    }
}

//! Typed, lenient access to the JSON arguments of a call. Models often send numbers and
//! booleans as strings; those are accepted. Every failure is a message for the model.

use serde_json::{Map, Value};

pub(crate) struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    pub(crate) fn new(value: &'a Value) -> Result<Self, String> {
        value
            .as_object()
            .map(|map| Self { map })
            .ok_or_else(|| "Error: arguments must be a JSON object".to_owned())
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(crate) fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// A required string argument.
    pub(crate) fn string(&self, key: &str) -> Result<&'a str, String> {
        self.opt_string(key)?
            .ok_or_else(|| format!("Error: missing required argument '{key}'"))
    }

    /// A required string argument that must not be empty or blank.
    pub(crate) fn non_blank(&self, key: &str) -> Result<&'a str, String> {
        let s = self.string(key)?;
        if s.trim().is_empty() {
            return Err(format!("Error: argument '{key}' must not be empty"));
        }
        Ok(s)
    }

    pub(crate) fn opt_string(&self, key: &str) -> Result<Option<&'a str>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!(
                "Error: argument '{key}' must be a string, got {}",
                kind(other)
            )),
        }
    }

    /// An optional string argument, trimmed; a blank one counts as absent.
    pub(crate) fn opt_trimmed(&self, key: &str) -> Result<Option<&'a str>, String> {
        Ok(self
            .opt_string(key)?
            .map(str::trim)
            .filter(|s| !s.is_empty()))
    }

    pub(crate) fn opt_int(&self, key: &str) -> Result<Option<i64>, String> {
        let bad = || format!("Error: argument '{key}' must be an integer");
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => Ok(Some(i)),
                (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Some(f as i64)),
                _ => Err(bad()),
            },
            Some(Value::String(s)) => s.trim().parse::<i64>().map(Some).map_err(|_| bad()),
            Some(_) => Err(bad()),
        }
    }

    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" => Ok(Some(true)),
                "false" | "no" | "0" | "" => Ok(Some(false)),
                _ => Err(format!("Error: argument '{key}' must be a boolean")),
            },
            Some(Value::Number(n)) if n.as_i64() == Some(0) => Ok(Some(false)),
            Some(Value::Number(n)) if n.as_i64() == Some(1) => Ok(Some(true)),
            Some(_) => Err(format!("Error: argument '{key}' must be a boolean")),
        }
    }

    pub(crate) fn opt_array(&self, key: &str) -> Result<Option<&'a Vec<Value>>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(_) => Err(format!("Error: argument '{key}' must be an array")),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lenient_scalars() {
        let v = json!({"a": "12", "b": 3.0, "c": "true", "d": 1, "e": null, "s": 5});
        let args = Args::new(&v).unwrap();
        assert_eq!(args.opt_int("a").unwrap(), Some(12));
        assert_eq!(args.opt_int("b").unwrap(), Some(3));
        assert_eq!(args.opt_bool("c").unwrap(), Some(true));
        assert_eq!(args.opt_bool("d").unwrap(), Some(true));
        assert_eq!(args.opt_string("e").unwrap(), None);
        assert!(
            args.string("e")
                .unwrap_err()
                .contains("missing required argument 'e'")
        );
        assert!(
            args.opt_string("s")
                .unwrap_err()
                .contains("must be a string")
        );
        assert!(args.opt_int("c").is_err());
        assert!(Args::new(&json!([1])).is_err());
    }
}

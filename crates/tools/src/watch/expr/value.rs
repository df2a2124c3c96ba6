//! The values an expression computes with (Python's `None`, bool, int, float, str, list,
//! dict) and their Python spellings.

use std::sync::Arc;

use super::*;

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

/// A value of the language. Strings, lists and dicts are shared (cheap to clone).
#[derive(Debug, Clone)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Arc<str>),
    List(Arc<Vec<Value>>),
    /// String keys in insertion order (JSON objects keep their order).
    Dict(Arc<Vec<(Arc<str>, Value)>>),
}

impl Value {
    /// A string value.
    pub fn str(s: &str) -> Self {
        Self::Str(Arc::from(s))
    }

    /// The value of a JSON document (`json.loads`): objects become dicts, arrays lists,
    /// integers that fit 64 bits ints and every other number a float.
    pub fn from_json(json: &serde_json::Value) -> Self {
        match json {
            serde_json::Value::Null => Self::None,
            serde_json::Value::Bool(b) => Self::Bool(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Self::Int(i),
                None => Self::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(s) => Self::str(s),
            serde_json::Value::Array(items) => {
                Self::List(Arc::new(items.iter().map(Self::from_json).collect()))
            }
            serde_json::Value::Object(map) => Self::Dict(Arc::new(
                map.iter()
                    .map(|(k, v)| (Arc::from(k.as_str()), Self::from_json(v)))
                    .collect(),
            )),
        }
    }

    /// Python's type name (`NoneType`, `bool`, `int`, `float`, `str`, `list`, `dict`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::None => "NoneType",
            Self::Bool(_) => "bool",
            Self::Int(_) => "int",
            Self::Float(_) => "float",
            Self::Str(_) => "str",
            Self::List(_) => "list",
            Self::Dict(_) => "dict",
        }
    }

    /// Python truthiness.
    pub fn truthy(&self) -> bool {
        match self {
            Self::None => false,
            Self::Bool(b) => *b,
            Self::Int(i) => *i != 0,
            Self::Float(f) => *f != 0.0,
            Self::Str(s) => !s.is_empty(),
            Self::List(l) => !l.is_empty(),
            Self::Dict(d) => !d.is_empty(),
        }
    }

    /// Python `str(value)` (strings inside containers are quoted, as `repr` does).
    pub fn to_display(&self) -> String {
        let mut out = String::new();
        self.write_display(&mut out, false);
        out
    }

    pub(super) fn write_display(&self, out: &mut String, quoted: bool) {
        match self {
            Self::None => out.push_str("None"),
            Self::Bool(true) => out.push_str("True"),
            Self::Bool(false) => out.push_str("False"),
            Self::Int(i) => out.push_str(&i.to_string()),
            Self::Float(f) => out.push_str(&float_repr(*f)),
            Self::Str(s) if quoted => out.push_str(&str_repr(s)),
            Self::Str(s) => out.push_str(s),
            Self::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_display(out, true);
                }
                out.push(']');
            }
            Self::Dict(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&str_repr(k));
                    out.push_str(": ");
                    v.write_display(out, true);
                }
                out.push('}');
            }
        }
    }

    /// Rough size in units of work: characters of strings, elements of containers.
    pub(super) fn weight(&self) -> u64 {
        match self {
            Self::Str(s) => s.len() as u64,
            Self::List(l) => l.len() as u64,
            Self::Dict(d) => d.len() as u64,
            _ => 1,
        }
    }
}

/// Structural equality with Python's rules (`True == 1`, `1 == 1.0`, no cross-type errors).
impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        let mut budget = Budget::unlimited();
        py_eq(self, other, &mut budget).unwrap_or(false)
    }
}

/// Python's `repr` of a float: shortest round-trip digits, exponent form outside
/// `1e-4 <= |x| < 1e16`.
pub(super) fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&exp) {
        let plain = format!("{f}");
        if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        }
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

/// Python's `repr` of a string: single quotes unless the text has some and no double ones.
pub(super) fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

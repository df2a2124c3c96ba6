//! Tolerant decoding shared by every tagged payload (cluster spec §1.1):
//! unknown keys ignored, missing keys defaulted, `null` treated as missing at
//! the top level, wrong value types reported with the offending key.
//!
//! Also home of the two declarative macros that keep each wire type written
//! once: [`wire_struct!`] (a payload struct with its spec defaults) and
//! [`tagged_enum!`] (an enum discriminated by the `type` key).

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::ProtoError;

/// Parses bytes into a JSON object.
pub(crate) fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, ProtoError> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| ProtoError::Malformed(e.to_string()))?;
    into_object(value)
}

/// Unwraps a JSON object, naming what was found otherwise.
pub(crate) fn into_object(value: Value) -> Result<Map<String, Value>, ProtoError> {
    match value {
        Value::Object(map) => Ok(map),
        Value::Null => Err(ProtoError::NotAnObject("null")),
        Value::Bool(_) => Err(ProtoError::NotAnObject("a boolean")),
        Value::Number(_) => Err(ProtoError::NotAnObject("a number")),
        Value::String(_) => Err(ProtoError::NotAnObject("a string")),
        Value::Array(_) => Err(ProtoError::NotAnObject("an array")),
    }
}

/// Removes and returns the `type` discriminator. Missing or `null` gives `""`;
/// a non-string is an [`ProtoError::InvalidField`].
pub(crate) fn take_tag(map: &mut Map<String, Value>) -> Result<String, ProtoError> {
    match map.shift_remove("type") {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(ProtoError::InvalidField {
            message_type: other.to_string(),
            field: "type".to_owned(),
            reason: "expected a string".to_owned(),
        }),
    }
}

/// Decodes the (tag-less) object into `T`. Top-level `null`s count as missing
/// keys, so they take the spec default. On a type error, the offending key is
/// located by decoding each key on its own (every field has a default, so only
/// a bad value can fail).
pub(crate) fn decode_fields<T: DeserializeOwned>(
    message_type: &str,
    mut map: Map<String, Value>,
) -> Result<T, ProtoError> {
    map.retain(|_, v| !v.is_null());
    let value = Value::Object(map);
    match T::deserialize(&value) {
        Ok(t) => Ok(t),
        Err(whole) => {
            if let Value::Object(map) = &value {
                for (key, v) in map {
                    let mut single = Map::new();
                    single.insert(key.clone(), v.clone());
                    if let Err(e) = T::deserialize(&Value::Object(single)) {
                        return Err(ProtoError::InvalidField {
                            message_type: message_type.to_owned(),
                            field: key.clone(),
                            reason: e.to_string(),
                        });
                    }
                }
            }
            Err(ProtoError::InvalidField {
                message_type: message_type.to_owned(),
                field: String::new(),
                reason: whole.to_string(),
            })
        }
    }
}

/// Serde helper for nested structs: a `null` value takes the field type's
/// default instead of failing.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de> + Default,
{
    use serde::Deserialize;
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Serde helper for integer fields the original sometimes fills with a float
/// or a bool (`latency_ms`, `redacted`; cluster spec §3.6): any JSON number is
/// truncated toward zero and clamped at 0, `true`/`false` become 1/0, `null`
/// becomes 0.
pub(crate) fn lenient_u64<'de, D>(deserializer: D) -> Result<u64, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize;
    use serde::de::Error;
    match Value::deserialize(deserializer)? {
        Value::Null => Ok(0),
        Value::Bool(b) => Ok(u64::from(b)),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                Ok(u)
            } else if n.as_i64().is_some() {
                Ok(0)
            } else {
                let f = n.as_f64().unwrap_or(0.0);
                // `as` saturates and maps NaN to 0, which is what we want.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                Ok(f.max(0.0) as u64)
            }
        }
        other => Err(D::Error::custom(format!(
            "invalid type: {}, expected an integer",
            kind_of(&other)
        ))),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Defines a wire payload struct whose every field has a spec default.
///
/// `Default` is implemented from the `= expr` of each field, and the struct is
/// `#[serde(default)]`, so missing keys take exactly those defaults. Fields
/// are serialized in declaration order (the original's key order).
macro_rules! wire_struct {
    (
        $(#[$smeta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty = $default:expr ),* $(,)?
        }
    ) => {
        $(#[$smeta])*
        #[derive(Debug, Clone, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(default)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $( $field: $default, )* }
            }
        }
    };
}
pub(crate) use wire_struct;

/// Defines an enum discriminated by the JSON key `type`, with tolerant
/// `decode` / `from_value`, `encode`, `type_name` and a `Deserialize` impl
/// that goes through the same tolerant path.
///
/// Sections, in order: newtype variants `Variant(Payload) = "tag",`; optional
/// `units { Variant = "tag", }` for field-less events; optional
/// `unknown { Variant(Payload) }` as the fallback for unknown tags (without
/// it an unknown tag is [`ProtoError::UnknownType`]); optional
/// `envelope Trait` to generate `envelope()`/`envelope_mut()` over the
/// payloads. The enum must have an inherent `fn after_decode(&mut self)`.
macro_rules! tagged_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident($payload:ty) = $tag:tt, )*
        }
        $( units { $( $(#[$umeta:meta])* $unit:ident = $utag:tt, )* } )?
        $( unknown { $(#[$xmeta:meta])* $xvar:ident($xpay:ty) } )?
        $( envelope $env:path )?
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, ::serde::Serialize)]
        #[serde(tag = "type")]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $tag)] $variant($payload), )*
            $($( $(#[$umeta])* #[serde(rename = $utag)] $unit, )*)?
            $( $(#[$xmeta])* #[serde(untagged)] $xvar($xpay), )?
        }

        impl $name {
            /// Every `type` this enum knows, in declaration order.
            pub const TYPE_NAMES: &'static [&'static str] = &[
                $( $tag, )* $($( $utag, )*)?
            ];

            /// The wire `type` of this value.
            pub fn type_name(&self) -> &str {
                match self {
                    $( Self::$variant(_) => $tag, )*
                    $($( Self::$unit => $utag, )*)?
                    $( Self::$xvar(p) => p.type_name.as_str(), )?
                }
            }

            /// Tolerant decoding of one JSON payload (cluster spec §1.1).
            pub fn decode(bytes: &[u8]) -> Result<Self, $crate::ProtoError> {
                let map = $crate::tolerant::parse_object(bytes)?;
                Self::from_map(map)
            }

            /// Tolerant decoding of an already parsed JSON value.
            pub fn from_value(value: ::serde_json::Value) -> Result<Self, $crate::ProtoError> {
                let map = $crate::tolerant::into_object(value)?;
                Self::from_map(map)
            }

            fn from_map(
                mut map: ::serde_json::Map<String, ::serde_json::Value>,
            ) -> Result<Self, $crate::ProtoError> {
                let tag = $crate::tolerant::take_tag(&mut map)?;
                let mut decoded = match tag.as_str() {
                    $( $tag => Self::$variant($crate::tolerant::decode_fields(&tag, map)?), )*
                    $($( $utag => Self::$unit, )*)?
                    _ => $crate::tolerant::tagged_enum!(@fallback tag map $($xvar $xpay)?),
                };
                decoded.after_decode();
                Ok(decoded)
            }

            /// The JSON text of this value: every field, `type` first.
            pub fn encode(&self) -> String {
                // Cannot fail: all map keys are strings and no Serialize impl errors.
                ::serde_json::to_string(self).unwrap_or_default()
            }

            /// This value as a JSON tree.
            pub fn to_value(&self) -> ::serde_json::Value {
                ::serde_json::to_value(self).unwrap_or_default()
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let value = <::serde_json::Value as ::serde::Deserialize>::deserialize(d)?;
                Self::from_value(value).map_err(<D::Error as ::serde::de::Error>::custom)
            }
        }

        $crate::tolerant::tagged_enum!(@envelope $name [$($env)?] [$($variant)*] [$($xvar)?]);
    };

    (@fallback $tag:ident $map:ident) => {
        return Err($crate::ProtoError::UnknownType($tag))
    };
    (@fallback $tag:ident $map:ident $xvar:ident $xpay:ty) => {{
        let mut payload: $xpay = $crate::tolerant::decode_fields(&$tag, $map)?;
        payload.type_name = $tag;
        Self::$xvar(payload)
    }};

    (@envelope $name:ident [] [$($variant:ident)*] [$($xvar:ident)?]) => {};
    (@envelope $name:ident [$env:path] [$($variant:ident)*] [$($xvar:ident)?]) => {
        impl $name {
            /// The fields every message of this family carries.
            pub fn envelope(&self) -> &dyn $env {
                match self {
                    $( Self::$variant(p) => p, )*
                    $( Self::$xvar(p) => p, )?
                }
            }

            /// Mutable access to the common fields.
            pub fn envelope_mut(&mut self) -> &mut dyn $env {
                match self {
                    $( Self::$variant(p) => p, )*
                    $( Self::$xvar(p) => p, )?
                }
            }
        }
    };
}
pub(crate) use tagged_enum;

/// `From<Payload> for Enum` for each `Variant(Payload)`: wraps a payload in its variant.
macro_rules! variant_from {
    ($name:ident: $($variant:ident($payload:ty)),* $(,)?) => {
        $(
            impl From<$payload> for $name {
                fn from(p: $payload) -> Self {
                    Self::$variant(p)
                }
            }
        )*
    };
}
pub(crate) use variant_from;

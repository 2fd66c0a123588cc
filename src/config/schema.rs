//! The JSON Schema of the configuration file, generated from the config types so that it
//! cannot drift from what the loader reads. `seawall schema` prints it;
//! `config/seawall.schema.json` is a copy (a test keeps it current) that editors load
//! through the `# yaml-language-server: $schema=` line of the example files.
//!
//! The schema is draft 7, the draft that editors' YAML and JSON language servers support
//! best. Fields read by custom deserializers are described as what those accept:
//! durations (humantime: `250ms`, `5s`, `1h 30m`) and socket addresses are strings.
//! `${VAR}` references are expanded after deserialization, in string values only, so
//! they need nothing of their own.

use std::borrow::Cow;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::Value;

use super::Config;

/// The JSON Schema (draft 7) of the configuration file, with the doc comment of every
/// field as its description and every default as its `default`.
pub fn json_schema() -> serde_json::Value {
    let mut schema = SchemaSettings::draft07().into_generator().into_root_schema_for::<Config>();
    schema.insert("title".to_owned(), "seawall configuration".into());
    let mut value = schema.to_value();
    default_unset_to_null(&mut value);
    value
}

/// Gives every optional property that may be `null` and has no `default` the default
/// `null`: serde reads an absent `Option` as `None`, but the generator leaves the default
/// out of fields that serialization skips while unset.
fn default_unset_to_null(node: &mut Value) {
    match node {
        Value::Object(object) => {
            let required: Vec<String> = match object.get("required") {
                Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
                _ => Vec::new(),
            };
            if let Some(Value::Object(properties)) = object.get_mut("properties") {
                for (name, property) in properties.iter_mut() {
                    if let Value::Object(property) = property
                        && !required.contains(name)
                        && !property.contains_key("default")
                        && nullable(property)
                    {
                        property.insert("default".to_owned(), Value::Null);
                    }
                }
            }
            object.values_mut().for_each(default_unset_to_null);
        }
        Value::Array(items) => items.iter_mut().for_each(default_unset_to_null),
        _ => {}
    }
}

/// Whether a property's schema admits `null` (`"type": [.., "null"]`, or a `null`
/// branch of `anyOf`).
fn nullable(property: &serde_json::Map<String, Value>) -> bool {
    let null = Value::from("null");
    match property.get("type") {
        Some(Value::Array(types)) => types.contains(&null),
        Some(kind) => *kind == null,
        None => match property.get("anyOf") {
            Some(Value::Array(branches)) => branches.iter().any(|b| b.get("type") == Some(&null)),
            _ => false,
        },
    }
}

/// A humantime duration: one or more `<number><unit>` groups, e.g. `250ms`, `1.5s`,
/// `1h 30m`. A bare number has no unit and is refused, as the loader refuses it.
pub(crate) const DURATION_PATTERN: &str = concat!(
    r"^\s*([0-9]+(\.[0-9]+)?\s*(nanos|nsec|ns|usec|us|µs|millis|msec|ms|seconds|second|secs|sec|s|",
    r"minutes|minute|mins|min|m|hours|hour|hrs|hr|h|days|day|d|weeks|week|wks|wk|w|months|month|M|",
    r"years|year|yrs|yr|y)\s*)+$"
);

/// The schema of a `Duration` field read with `humantime_serde`.
pub(crate) struct HumanDuration;

impl JsonSchema for HumanDuration {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "pattern": DURATION_PATTERN })
    }
}

/// An IPv4 `a.b.c.d:port` or IPv6 `[addr]:port` socket address.
pub(crate) const SOCKET_ADDRESS_PATTERN: &str =
    r"^([0-9]{1,3}(\.[0-9]{1,3}){3}|\[[0-9A-Fa-f:.]+(%[^\]]+)?\]):[0-9]{1,5}$";

/// The schema of a `SocketAddr` field read from its text form.
pub(crate) struct SocketAddress;

impl JsonSchema for SocketAddress {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "SocketAddress".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "pattern": SOCKET_ADDRESS_PATTERN })
    }
}

/// The schema of a string value of `env`, `headers` and the like: yaml_serde reads any
/// scalar where a string is wanted, and a port or a flag is naturally written bare there.
pub(crate) struct ScalarText;

impl JsonSchema for ScalarText {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "ScalarText".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": ["string", "number", "boolean"] })
    }
}

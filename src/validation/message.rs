//! Human-readable violation messages built from the kind of failure.
//!
//! jsonschema's own `Display` quotes the offending value whole; an argument can be
//! megabytes. Here only the schema's limits and short schema literals are quoted, and the
//! instance contributes at most its JSON type. The caller sanitises the result.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::Value;

use crate::sanitize;

/// Schema literals (`enum` options, `const`, limits) longer than this are not quoted.
const MAX_LITERAL: usize = 80;
/// Unexpected property names listed before "and N more".
const MAX_NAMES: usize = 3;

/// A message for one failure of `instance`.
pub(super) fn describe(kind: &ValidationErrorKind, instance: &Value) -> String {
    use ValidationErrorKind as K;
    match kind {
        K::Required { property } => {
            let name = property.as_str().map_or_else(|| property.to_string(), str::to_owned);
            format!("missing required property '{}'", sanitize::ident(&name))
        }
        K::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(ty) => ty.to_string(),
                TypeKind::Multiple(set) => set.iter().map(|ty| ty.to_string()).collect::<Vec<_>>().join(" or "),
            };
            format!("expected {expected}, got {}", type_name(instance))
        }
        K::AdditionalProperties { unexpected } => {
            format!("unexpected {}", names(unexpected, "property", "properties"))
        }
        K::UnevaluatedProperties { unexpected } => {
            format!("unevaluated {}", names(unexpected, "property", "properties"))
        }
        K::UnevaluatedItems { unexpected } => {
            format!("{} unevaluated item(s) not allowed", unexpected.len())
        }
        K::AdditionalItems { limit } => format!("no more than {limit} item(s) allowed"),
        K::Enum { options } => match literal(options) {
            Some(options) => format!("must be one of {options}"),
            None => "must be one of the allowed values".to_owned(),
        },
        K::Constant { expected_value } => match literal(expected_value) {
            Some(value) => format!("must equal {value}"),
            None => "must equal the schema's constant".to_owned(),
        },
        K::Minimum { limit } => bound("must be >=", limit),
        K::Maximum { limit } => bound("must be <=", limit),
        K::ExclusiveMinimum { limit } => bound("must be >", limit),
        K::ExclusiveMaximum { limit } => bound("must be <", limit),
        K::MultipleOf { multiple_of } => format!("must be a multiple of {multiple_of}"),
        K::MinLength { limit } => format!("must be at least {limit} character(s) long"),
        K::MaxLength { limit } => format!("must be at most {limit} character(s) long"),
        K::MinItems { limit } => format!("must have at least {limit} item(s)"),
        K::MaxItems { limit } => format!("must have at most {limit} item(s)"),
        K::MinProperties { limit } => format!("must have at least {limit} propert(ies)"),
        K::MaxProperties { limit } => format!("must have at most {limit} propert(ies)"),
        K::UniqueItems => "items must be unique".to_owned(),
        K::Contains => "no item matches the 'contains' schema".to_owned(),
        K::Pattern { pattern } => format!("must match the pattern '{pattern}'"),
        K::BacktrackLimitExceeded { .. } | K::RegexEngineFailure { .. } => {
            "the schema's pattern could not be evaluated".to_owned()
        }
        K::Format { format } => format!("must be a valid '{format}'"),
        K::ContentEncoding { content_encoding } => {
            format!("must be encoded as '{content_encoding}'")
        }
        K::ContentMediaType { content_media_type } => {
            format!("must be of media type '{content_media_type}'")
        }
        K::FromUtf8 { .. } => "decoded content is not valid UTF-8".to_owned(),
        K::AnyOf { .. } => "must match at least one of the 'anyOf' schemas".to_owned(),
        K::OneOfNotValid { .. } => "must match exactly one of the 'oneOf' schemas".to_owned(),
        K::OneOfMultipleValid { .. } => "matches more than one of the 'oneOf' schemas".to_owned(),
        K::Not { .. } => "must not match the 'not' schema".to_owned(),
        K::FalseSchema => "no value is allowed here".to_owned(),
        K::PropertyNames { error } => {
            format!("invalid property name: {}", describe(error.kind(), error.instance()))
        }
        K::Custom { keyword, message } => format!("{keyword}: {message}"),
        K::Referencing(_) => "a schema reference could not be resolved".to_owned(),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `property 'x'` or `properties 'x', 'y', 'z' and 2 more`.
fn names(names: &[String], one: &str, many: &str) -> String {
    let quoted: Vec<String> = names.iter().take(MAX_NAMES).map(|name| format!("'{}'", sanitize::ident(name))).collect();
    let noun = if names.len() == 1 { one } else { many };
    let mut out = format!("{noun} {}", quoted.join(", "));
    if names.len() > MAX_NAMES {
        out.push_str(&format!(" and {} more", names.len() - MAX_NAMES));
    }
    out
}

/// A schema literal in JSON, when short enough to quote.
fn literal(value: &Value) -> Option<String> {
    let text = value.to_string();
    (text.len() <= MAX_LITERAL).then_some(text)
}

fn bound(relation: &str, limit: &Value) -> String {
    match literal(limit) {
        Some(limit) => format!("{relation} {limit}"),
        None => format!("{relation} the schema's limit"),
    }
}

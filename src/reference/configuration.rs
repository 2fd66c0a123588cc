//! reference/configuration.md: every key of the configuration file, read from the JSON
//! Schema that `seawall schema` prints (itself generated from the config types), with
//! its type, default, unit and meaning. One section per top-level key; a table per
//! object, each nested object in a section of its own after its parent's table.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::markdown::{GENERATED, cell, code, prose};
use crate::config::{DURATION_PATTERN, SOCKET_ADDRESS_PATTERN, json_schema};

/// The page.
pub(super) fn page() -> String {
    let schema = json_schema();
    let reader = Reader { definitions: schema.get("definitions").and_then(Value::as_object) };
    let mut out = format!("# Configuration\n\n{GENERATED}\n\n{INTRO}");
    let empty = Map::new();
    let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    for (key, property) in properties {
        let _ = writeln!(out, "\n## {key}\n");
        let mut nested = Vec::new();
        match reader.object_of(property) {
            Some((path, object)) => {
                if let Some(text) = description(property) {
                    let _ = writeln!(out, "{}\n", paragraph(text));
                }
                let path = format!("{key}{path}");
                reader.table(&mut out, &path, object, &mut nested);
            }
            None => {
                table_head(&mut out);
                reader.row(&mut out, key, property, false, &mut nested);
            }
        }
        while !nested.is_empty() {
            for (path, object, text) in std::mem::take(&mut nested) {
                let _ = writeln!(out, "\n### {}\n", code(&path));
                if let Some(text) = text {
                    let _ = writeln!(out, "{}\n", paragraph(&text));
                }
                reader.table(&mut out, &path, object, &mut nested);
            }
        }
    }
    out
}

const INTRO: &str = "\
Every key of the configuration file, generated from the same types as `seawall schema`
(and its copy [config/seawall.schema.json](../../../config/seawall.schema.json), which
editors load through the first line of each example:
`# yaml-language-server: $schema=./seawall.schema.json`).
[config/example.yaml](../../../config/example.yaml) sets every key with a comment.
`seawall check-config FILE` checks a file against all of this and reports each problem
with its line and key.

Types and units:

- **duration**: a string of one or more `<number><unit>` groups: `250ms`, `1.5s`, `30s`,
  `5m`, `1h 30m`, `1day` (units `ns`, `us`, `ms`, `s`, `m`, `h`, `d`, `w` and their long
  names). A bare number has no unit and is refused.
- **bytes** and **count**: plain non-negative integers (`1048576`, not `1 MiB`).
- **address**: `IP:port`, e.g. `127.0.0.1:8080` or `[::1]:8080`; port 0 picks a free
  port.
- Keys not listed here are refused. An absent key takes its default; `null` in the
  default column means the key is unset.
- `${VAR}` in the values that say so is replaced by the environment variable `VAR` when
  the file is loaded; an unset variable is an error.
";

fn table_head(out: &mut String) {
    out.push_str("| key | type | default | unit | meaning |\n|---|---|---|---|---|\n");
}

/// A property's description, if it has one.
fn description(property: &Value) -> Option<&str> {
    property.get("description").and_then(Value::as_str)
}

/// A doc comment's text as one paragraph.
fn paragraph(text: &str) -> String {
    prose(text)
}

/// A nested object still to be written: its path, its schema, and its own description.
type Nested<'a> = (String, &'a Map<String, Value>, Option<String>);

/// Reads the schema with its definitions at hand.
struct Reader<'a> {
    definitions: Option<&'a Map<String, Value>>,
}

impl<'a> Reader<'a> {
    /// The schema a property stands for: its `$ref`'s definition, the one non-null branch
    /// of `anyOf`, the one schema of `allOf`, or itself.
    fn resolve(&self, schema: &'a Value) -> &'a Value {
        if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
            let name = target.rsplit('/').next().unwrap_or_default();
            if let Some(definition) = self.definitions.and_then(|d| d.get(name)) {
                return self.resolve(definition);
            }
        }
        for combinator in ["allOf", "anyOf"] {
            if let Some(branches) = schema.get(combinator).and_then(Value::as_array) {
                let real: Vec<&Value> =
                    branches.iter().filter(|b| b.get("type").and_then(Value::as_str) != Some("null")).collect();
                if let [only] = real.as_slice() {
                    return self.resolve(only);
                }
            }
        }
        schema
    }

    /// When a property holds objects with keys of their own (an object, a list of them,
    /// a map of them): the suffix their keys' paths take (``, `[]`, `.<name>`) and their
    /// schema.
    fn object_of(&self, property: &'a Value) -> Option<(&'static str, &'a Map<String, Value>)> {
        let schema = self.resolve(property);
        let with_keys = |s: &'a Value| s.get("properties").is_some().then(|| s.as_object()).flatten();
        if let Some(object) = with_keys(schema) {
            return Some(("", object));
        }
        if let Some(items) = schema.get("items") {
            return with_keys(self.resolve(items)).map(|o| ("[]", o));
        }
        if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
            return with_keys(self.resolve(values)).map(|o| (".<name>", o));
        }
        None
    }

    /// The table of one object's keys; the objects among them are queued in `nested`.
    fn table(&self, out: &mut String, path: &str, object: &'a Map<String, Value>, nested: &mut Vec<Nested<'a>>) {
        let required: Vec<&str> = object
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        table_head(out);
        let Some(properties) = object.get("properties").and_then(Value::as_object) else { return };
        for (key, property) in properties {
            let key_path = format!("{path}.{key}");
            self.row(out, &key_path, property, required.contains(&key.as_str()), nested);
        }
    }

    /// One key's row.
    fn row(&self, out: &mut String, path: &str, property: &'a Value, required: bool, nested: &mut Vec<Nested<'a>>) {
        let text = description(property).unwrap_or_default();
        let mut kind = self.type_of(property);
        if let Some((suffix, object)) = self.object_of(property) {
            let target = format!("{path}{suffix}");
            kind = format!("[{kind}](#{})", anchor(&target));
            nested.push((target, object, description(self.resolve(property)).map(str::to_owned)));
        }
        let unit = unit(property, text, &kind);
        let default = default_cell(property, required, text);
        let _ = writeln!(out, "| {} | {kind} | {default} | {unit} | {} |", code(path), cell(text));
    }

    /// What a property holds, in words.
    fn type_of(&self, property: &Value) -> String {
        let schema = self.resolve(property);
        if let Some(variants) = variants(schema) {
            return one_of(&variants);
        }
        if schema.get("properties").is_some() {
            return "object".to_owned();
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect(),
            _ => Vec::new(),
        };
        match types.as_slice() {
            ["string"] => match schema.get("pattern").and_then(Value::as_str) {
                Some(DURATION_PATTERN) => "duration".to_owned(),
                Some(SOCKET_ADDRESS_PATTERN) => "address".to_owned(),
                _ => "string".to_owned(),
            },
            ["array"] => match schema.get("items") {
                Some(items) => format!("list of {}", plural(&self.type_of(items))),
                None => "list".to_owned(),
            },
            ["object"] => match schema.get("additionalProperties").filter(|v| v.is_object()) {
                Some(values) => format!("map of {}", plural(&self.type_of(values))),
                None => "map".to_owned(),
            },
            [one] => (*one).to_owned(),
            [] => "any".to_owned(),
            ["string", "number", "boolean"] => "scalar".to_owned(),
            several => several.join(" or "),
        }
    }
}

/// The values of an enumeration: `enum`, or `oneOf` branches with a `const` each.
fn variants(schema: &Value) -> Option<Vec<String>> {
    let render = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return Some(values.iter().filter(|v| !v.is_null()).map(render).collect());
    }
    let branches = schema.get("oneOf").and_then(Value::as_array)?;
    branches.iter().map(|b| b.get("const").map(render)).collect()
}

/// `a`, `b` or `c`.
fn one_of(values: &[String]) -> String {
    let coded: Vec<String> = values.iter().map(|v| code(v)).collect();
    match coded.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "string".to_owned(),
    }
}

/// A type's name for `list of …`.
fn plural(kind: &str) -> String {
    match kind {
        "string" | "duration" | "address" | "integer" | "number" | "boolean" | "object" | "scalar" => {
            format!("{kind}s")
        }
        other => other.to_owned(),
    }
}

/// The unit a key is given in, from its type or its doc comment's `(bytes…` / `(count…`.
fn unit(property: &Value, text: &str, kind: &str) -> String {
    let _ = property;
    if kind == "duration" || kind == "list of durations" {
        return "duration".to_owned();
    }
    if kind == "address" {
        return "`IP:port`".to_owned();
    }
    ["bytes", "count", "percent"]
        .iter()
        .find(|unit| text.contains(&format!("({unit}")))
        .map_or_else(|| "—".to_owned(), |unit| (*unit).to_owned())
}

/// The default column: the schema's `default`, the doc comment's "Default …" sentence
/// when the default is unset, or `required`.
fn default_cell(property: &Value, required: bool, text: &str) -> String {
    if required {
        return "required".to_owned();
    }
    match property.get("default") {
        None => "—".to_owned(),
        Some(Value::Null) => default_sentence(text).map_or_else(|| "`null`".to_owned(), |s| cell(&s)),
        Some(Value::Object(values)) if !values.is_empty() => "see its keys".to_owned(),
        Some(Value::String(s)) if s.is_empty() => "`\"\"`".to_owned(),
        Some(Value::String(s)) => code(s),
        Some(Value::Number(n)) if text.contains("(bytes") => with_binary_size(&n.to_string()),
        Some(other) => code(&other.to_string()),
    }
}

/// `1048576` as `` `1048576` (1 MiB) ``.
fn with_binary_size(number: &str) -> String {
    let value: u64 = number.parse().unwrap_or(0);
    for (size, name) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        if value >= size && value.is_multiple_of(size) {
            return format!("`{number}` ({} {name})", value / size);
        }
    }
    code(number)
}

/// The doc comment's sentence that gives the default, without its `Default` word: `none`,
/// `not overridden`, `one per core …`.
fn default_sentence(text: &str) -> Option<String> {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    // A per-upstream override: unset, it is the key of `defaults` it names.
    if let Some(inherited) = text.strip_prefix("See `defaults.").and_then(|rest| rest.split('`').next()) {
        return Some(format!("as `defaults.{inherited}`"));
    }
    // "Unset: …" says what an unset key means, and is kept whole.
    let start = text
        .find("Default: ")
        .map(|i| i + "Default: ".len())
        .or_else(|| text.find("Default ").map(|i| i + "Default ".len()))
        .or_else(|| text.find("Unset: "))?;
    let rest = &text[start..];
    let end = rest.find(". ").unwrap_or(rest.len());
    let sentence = rest[..end].trim_end_matches('.');
    (!sentence.is_empty()).then(|| sentence.to_owned())
}

/// The anchor of a heading that is `path` in code, as mdBook and GitHub make it: lower
/// case, spaces to `-`, everything but letters, digits, `-` and `_` dropped.
fn anchor(path: &str) -> String {
    path.chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_sentence_is_found_in_a_doc_comment() {
        assert_eq!(
            default_sentence("Where. Default: none — a key of its own. More."),
            Some("none — a key of its own".into())
        );
        assert_eq!(default_sentence("Count. Default `3`; `1` disables."), Some("`3`; `1` disables".into()));
        assert_eq!(default_sentence("See `defaults.retry.max_delay`."), Some("as `defaults.retry.max_delay`".into()));
        assert_eq!(default_sentence("The URL. Unset: `OTEL_X`, else `y`."), Some("Unset: `OTEL_X`, else `y`".into()));
        assert_eq!(default_sentence("No default."), None);
    }

    #[test]
    fn sizes_in_bytes_are_also_given_in_binary_units() {
        assert_eq!(with_binary_size("1048576"), "`1048576` (1 MiB)");
        assert_eq!(with_binary_size("1000"), "`1000`");
        assert_eq!(anchor("upstreams[].tools.<name>"), "upstreamstoolsname");
    }
}

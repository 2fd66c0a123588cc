//! Per-tool settings of one upstream (`upstreams[].tools.<name>`, keyed by the tool's name
//! on the upstream): how seawall calls the tool (retries, deadline) and how clients see it
//! (its name, title, description and annotations, hidden or not, and the arguments the
//! gateway sets itself).

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::locate::{FieldPath, Problem};
use super::schema::HumanDuration;
use super::upstream::put_schema_defaults;

/// Settings for one tool of one upstream, under the tool's name on the upstream.
///
/// The overrides of what clients see (`name`, `title`, `description`, `annotations`,
/// `hidden`, `arguments`) apply wherever the tool appears: both endpoints' `tools/list`
/// and `tools/call`, the argument check, authorisation rules and rate limits (which see
/// the name the client sees), and the access log (the client's name). Metrics (the `tool`
/// label), circuit breakers and these settings keep the upstream's name, so the labels
/// stay bounded by what the upstream lists. Sessions hear
/// `notifications/tools/list_changed` when a reload changes what clients see.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
#[schemars(transform = tool_schema_defaults)]
pub struct ToolConfig {
    /// The operator vouches that calling the tool twice is safe, so failed calls are
    /// retried (as `annotations.idempotentHint: true` does, without changing what clients
    /// see). Default `false`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub idempotent: bool,
    /// Overrides `timeouts.tool_call` for this tool (duration). Default: not overridden.
    #[schemars(with = "Option<HumanDuration>")]
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// The name clients see and call the tool by (on `/mcp` prefixed as
    /// `<upstream><name_separator><name>`); the upstream's own name is then unknown to
    /// clients. 1 to 128 letters, digits, `_`, `-` and `.`, and no other tool of the
    /// upstream configured here may be seen under it (one the upstream lists under it is
    /// left out of lists). Default: the upstream's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Replaces the tool's `title`. Default: the upstream's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Replaces the tool's `description`. Default: the upstream's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Hints merged over the upstream's `annotations` (those set here win). A
    /// `readOnlyHint` or `idempotentHint` set here is the operator's word: `true` makes
    /// failed calls retried, `false` stops an upstream's hint from doing so, whatever
    /// `trust_annotations` says. Default: none.
    #[serde(skip_serializing_if = "ToolAnnotations::is_empty")]
    pub annotations: ToolAnnotations,
    /// Leave the tool out of `tools/list`; calls of it are answered as calls of an unknown
    /// tool. Default `false`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hidden: bool,
    /// Arguments the gateway sets, by the argument's name: a fixed one (`value`, `env`,
    /// `principal`, `claim`) is set on every call and taken out of the advertised
    /// `inputSchema` (its `properties` and `required`), and a client that sends it is
    /// refused with -32602; a `default` fills an argument the client left out and stays
    /// advertised (as the property's `default`, no longer `required`). An argument the
    /// upstream's schema does not list is known only once the upstream lists the tool:
    /// seawall then warns once in its log and sets it all the same. Default: none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub arguments: BTreeMap<String, ArgumentConfig>,
}

/// The defaults of the fields serialization skips while they are at them.
fn tool_schema_defaults(schema: &mut schemars::Schema) {
    let d = ToolConfig::default();
    put_schema_defaults(
        schema,
        [
            ("idempotent", d.idempotent.into()),
            ("annotations", serde_json::json!({})),
            ("hidden", d.hidden.into()),
            ("arguments", serde_json::json!({})),
        ],
    );
}

/// An argument's `value` and `default` are any JSON: unset unless given.
fn argument_schema_defaults(schema: &mut schemars::Schema) {
    put_schema_defaults(schema, [("value", Value::Null), ("default", Value::Null)]);
}

impl ToolConfig {
    /// Whether any of these settings changes what clients see of the tool.
    pub(crate) fn shapes(&self) -> bool {
        self.name.is_some()
            || self.title.is_some()
            || self.description.is_some()
            || !self.annotations.is_empty()
            || self.hidden
            || !self.arguments.is_empty()
    }
}

/// The behaviour hints of MCP's `ToolAnnotations` an operator may set.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields, default, rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// The tool does not change its environment. Default: the upstream's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may change its environment destructively. Default: the upstream's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling the tool again with the same arguments has no further effect. Default:
    /// the upstream's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool reaches an open world of outside entities. Default: the upstream's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

impl ToolAnnotations {
    /// Whether no hint is set.
    pub(crate) fn is_empty(&self) -> bool {
        *self == ToolAnnotations::default()
    }

    /// The hints that are set, under their MCP names.
    pub(crate) fn set(&self) -> impl Iterator<Item = (&'static str, bool)> {
        [
            ("readOnlyHint", self.read_only_hint),
            ("destructiveHint", self.destructive_hint),
            ("idempotentHint", self.idempotent_hint),
            ("openWorldHint", self.open_world_hint),
        ]
        .into_iter()
        .filter_map(|(name, hint)| hint.map(|h| (name, h)))
    }
}

/// Where the gateway takes an argument's value from: exactly one of these keys.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
#[schemars(transform = argument_schema_defaults)]
pub struct ArgumentConfig {
    /// Fixed: this JSON value. The admin API shows it as written: a secret belongs in
    /// `env`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Fixed: the value of this environment variable of seawall's (a string), read when
    /// the configuration is loaded; an unset variable is a configuration error. The value
    /// is never logged, and the admin API shows only the variable's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// Fixed: a fact of the authenticated caller (`name`: the API key's name or the JWT's
    /// `sub`). A call without an authenticated caller is refused (-32600).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<PrincipalField>,
    /// Fixed: the value of this claim of the caller's JWT, as JSON (a string, a number, an
    /// array, …). A call whose caller has no such claim is refused (-32600).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// Not fixed: the value used when the client leaves the argument out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

/// Where one argument's value comes from, as [`ArgumentConfig`] says it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ArgumentSource<'a> {
    /// A constant.
    Value(&'a Value),
    /// An environment variable.
    Env(&'a str),
    /// The caller's name.
    PrincipalName,
    /// A claim of the caller's.
    Claim(&'a str),
    /// A default for an argument the client leaves out.
    Default(&'a Value),
}

impl ArgumentConfig {
    /// Where the value comes from; `None` unless exactly one source is set.
    pub(crate) fn source(&self) -> Option<ArgumentSource<'_>> {
        let mut sources = [
            self.value.as_ref().map(ArgumentSource::Value),
            self.env.as_deref().map(ArgumentSource::Env),
            self.principal.map(|PrincipalField::Name| ArgumentSource::PrincipalName),
            self.claim.as_deref().map(ArgumentSource::Claim),
            self.default.as_ref().map(ArgumentSource::Default),
        ]
        .into_iter()
        .flatten();
        let first = sources.next()?;
        sources.next().is_none().then_some(first)
    }
}

/// A fact of the authenticated caller.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PrincipalField {
    /// The API key's configured name, or the JWT's `sub`.
    Name,
}

/// Most characters of a name clients see (MCP's tool-name guidance).
const MAX_NAME: usize = 128;

/// Whether `name` is a name as MCP advises for tools: 1 to 128 of `A-Z a-z 0-9 _ - .`.
fn check_name(name: &str) -> Result<(), String> {
    let valid = (1..=MAX_NAME).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if valid {
        return Ok(());
    }
    Err(format!("invalid name {name:?}: use 1 to {MAX_NAME} letters, digits, `_`, `-` and `.`"))
}

/// One entry of `tools` or `prompts` as the name check reads it: its key, its `name`
/// and whether it is hidden.
pub(super) struct Seen<'a> {
    pub(super) key: &'a str,
    pub(super) name: Option<&'a str>,
    pub(super) hidden: bool,
}

/// Checks the names clients see of the entries of `kind` (`tools` or `prompts`) of the
/// upstream at `upstream`: each valid, and each the name of one entry only. A clash is
/// reported at the `name` that makes it.
pub(super) fn check_seen_names(upstream: &FieldPath, kind: &str, entries: Vec<Seen<'_>>, out: &mut Vec<Problem>) {
    let at = upstream.key(kind);
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    // The entries seen under their own keys first, so that a clash lands on a `name`.
    let (own, renamed): (Vec<_>, Vec<_>) = entries.into_iter().partition(|e| e.name.is_none());
    for entry in own.into_iter().chain(renamed) {
        let here = at.key(entry.key);
        if let Some(name) = entry.name
            && let Err(why) = check_name(name)
        {
            out.push(Problem::new(here.key("name"), why));
            continue;
        }
        if entry.hidden {
            continue;
        }
        let seen_as = entry.name.unwrap_or(entry.key);
        if let Some(other) = seen.insert(seen_as, entry.key) {
            let field = if entry.name.is_some() { here.key("name") } else { here };
            let why = format!("clients would see two {kind} named {seen_as:?}: this one and {kind}.{other}");
            out.push(Problem::new(field, why));
        }
    }
}

/// Checks the `tools` of the upstream at `at`: each argument has one source, and the
/// names clients see are valid and each the name of one tool only.
pub(crate) fn check_tools(upstream: &FieldPath, tools: &BTreeMap<String, ToolConfig>, out: &mut Vec<Problem>) {
    let at = upstream.key("tools");
    for (key, tool) in tools {
        for (arg, config) in &tool.arguments {
            if config.source().is_none() {
                let why = "needs exactly one of `value`, `env`, `principal`, `claim` and `default`";
                out.push(Problem::new(at.key(key).key("arguments").key(arg), why));
            }
        }
    }
    let entries = tools.iter().map(|(key, t)| Seen { key, name: t.name.as_deref(), hidden: t.hidden }).collect();
    check_seen_names(upstream, "tools", entries, out);
}

/// The `env` sources of fixed arguments, each with its field path, for the check that
/// the variable is set.
pub(crate) fn env_sources<'a>(
    at: &FieldPath,
    tools: &'a BTreeMap<String, ToolConfig>,
) -> impl Iterator<Item = (FieldPath, &'a str)> {
    let at = at.key("tools");
    tools.iter().flat_map(move |(key, tool)| {
        let here = at.key(key).key("arguments");
        tool.arguments.iter().filter_map(move |(arg, config)| Some((here.key(arg).key("env"), config.env.as_deref()?)))
    })
}

#[cfg(test)]
mod tests {
    //! Overrides of what clients see of a tool or prompt, reported by line.

    use crate::config::test_support::{assert_issue, issues, ok};

    #[test]
    fn overrides_of_what_clients_see_load() {
        let config = ok(&[
            "upstreams:",
            "  - name: demo",
            "    command: x",
            "    tools:",
            "      add:",
            "        name: plus",
            "        title: Plus",
            "        description: Adds forty.",
            "        annotations: { readOnlyHint: true, idempotentHint: true }",
            "        arguments:",
            "          b: { value: 40 }",
            "          who: { principal: name }",
            "          team: { claim: team }",
            "          secret: { env: TOKEN }",
            "          note: { default: none }",
            "      fail: { hidden: true }",
        ]);
        let add = &config.upstreams[0].tools["add"];
        assert!(add.shapes());
        assert_eq!(add.name.as_deref(), Some("plus"));
        assert_eq!(add.annotations.read_only_hint, Some(true));
        assert_eq!(add.arguments.len(), 5);
        assert!(add.arguments.values().all(|a| a.source().is_some()));
        assert!(config.upstreams[0].tools["fail"].hidden);
    }

    #[test]
    fn a_name_clients_would_see_twice_or_an_invalid_one_is_reported_at_the_name() {
        let found = issues(&[
            "upstreams:",
            "  - name: demo",
            "    command: x",
            "    tools:",
            "      add: { name: echo }",
            "      echo: { timeout: 5s }",
            "      big: { name: 'has space' }",
            "      log: { name: sleep }",
            "      sleep: { name: log }",
            "      crash: { hidden: true }",
            "      roots: { name: crash }",
        ]);
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_issue(&found[0], 5, "upstreams[0].tools.add.name", "clients would see two tools named \"echo\"");
        assert_issue(&found[1], 7, "upstreams[0].tools.big.name", "invalid name \"has space\"");
    }

    #[test]
    fn an_argument_needs_one_source_and_a_set_environment_variable() {
        let found = issues(&[
            "upstreams:",
            "  - name: demo",
            "    command: x",
            "    tools:",
            "      add:",
            "        arguments:",
            "          a: { value: 1, default: 2 }",
            "          b: {}",
            "          c: { env: NOPE }",
            "          d: { principal: email }",
        ]);
        assert_eq!(found.len(), 4, "{found:#?}");
        assert_issue(&found[0], 7, "upstreams[0].tools.add.arguments.a", "exactly one of `value`, `env`");
        assert_issue(&found[1], 8, "upstreams[0].tools.add.arguments.b", "exactly one of");
        assert_issue(&found[2], 9, "upstreams[0].tools.add.arguments.c.env", "environment variable NOPE is not set");
        assert_issue(&found[3], 10, "upstreams[0].tools.add.arguments.d.principal", "unknown variant `email`");
    }

    #[test]
    fn prompt_names_clients_would_see_twice_are_reported() {
        let found = issues(&[
            "upstreams:",
            "  - name: demo",
            "    command: x",
            "    prompts:",
            "      greet: { name: hello, description: Says hello. }",
            "      hello: { description: Another. }",
            "      other: { name: 'a b' }",
            "      old: { hidden: true, size: 3 }",
        ]);
        assert_eq!(found.len(), 3, "{found:#?}");
        assert_issue(&found[0], 5, "upstreams[0].prompts.greet.name", "clients would see two prompts named \"hello\"");
        assert_issue(&found[1], 7, "upstreams[0].prompts.other.name", "invalid name \"a b\"");
        assert_issue(&found[2], 8, "upstreams[0].prompts.old", "unknown field `size`");
    }
}

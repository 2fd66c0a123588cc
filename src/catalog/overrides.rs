//! An upstream's tools and prompts as its clients see them, when the operator overrides
//! some (`upstreams[].tools.<name>`, `upstreams[].prompts.<name>`): another name, title,
//! description or annotations, hidden, and arguments the gateway sets itself.
//!
//! The upstream's `tools/list` and `prompts/list` pages are reshaped on their way to the
//! client (once per distinct page, then found by its bytes), and each call of an
//! overridden tool is turned back into a call of the upstream's tool with the gateway's
//! arguments in it (a prompt's, into the upstream's name). An upstream without overrides
//! has no [`Overrides`] at all, so its lists and calls pass as they did.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::pages::PageMemo;
use crate::config::{ArgumentSource, PromptConfig, ToolConfig};
use crate::hashing::Map as HashMap;
use crate::identity::Principal;

/// The overridden tools, or the overridden prompts, of one upstream.
pub(crate) struct Overrides {
    /// Its upstream's name, for the log.
    upstream: Arc<str>,
    /// The list's array (`tools` or `prompts`).
    kind: &'static str,
    /// By the name on the upstream.
    by_upstream: HashMap<Arc<str>, Arc<Override>>,
    /// By the name clients see (hidden ones are not here).
    by_client: HashMap<Arc<str>, Arc<Override>>,
    /// List pages reshaped, by the upstream's page.
    pages: PageMemo<Box<RawValue>>,
}

/// What clients see of one tool or prompt, and what the gateway adds to a tool's calls.
pub(crate) struct Override {
    /// Its name on the upstream.
    pub(crate) upstream: Arc<str>,
    /// The name clients see (unprefixed).
    pub(crate) client: Arc<str>,
    title: Option<String>,
    description: Option<String>,
    annotations: Vec<(&'static str, bool)>,
    hidden: bool,
    /// Arguments set on every call.
    fixed: Vec<(String, Fixed)>,
    /// Arguments set when the client leaves them out.
    defaults: Vec<(String, Value)>,
    /// Whether the log has heard of arguments the upstream's schema does not list.
    warned: AtomicBool,
}

/// A fixed argument's value, or where it comes from per call.
enum Fixed {
    Value(Value),
    PrincipalName,
    Claim(String),
}

/// Which tool (or prompt) a client's request names.
pub(crate) enum Resolved<'a> {
    /// One seawall does not override: sent under the client's name.
    Plain,
    /// An overridden one.
    Shaped(&'a Arc<Override>),
    /// A hidden one, or the upstream's own name of a renamed one: unknown to clients.
    Unknown,
}

/// Why the gateway cannot make a call's arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ArgumentRefusal {
    /// The client sent an argument the gateway sets.
    #[error("argument '{arg}' of tool '{tool}' is set by the gateway; leave it out")]
    Fixed { tool: String, arg: String },
    /// `arguments` is not an object.
    #[error("the arguments of tool '{tool}' must be an object")]
    NotAnObject { tool: String },
    /// The argument comes from the caller, and no caller authenticated.
    #[error("tool '{tool}' needs an authenticated caller: the gateway sets its argument '{arg}' from the caller")]
    NoPrincipal { tool: String, arg: String },
    /// The argument comes from a claim the caller's credential does not carry.
    #[error("tool '{tool}' needs the caller's claim '{claim}' for its argument '{arg}', and the caller has none")]
    NoClaim { tool: String, arg: String, claim: String },
}

impl ArgumentRefusal {
    /// Whether the client's own request is at fault (-32602) rather than who sent it.
    pub(crate) fn is_invalid_params(&self) -> bool {
        matches!(self, ArgumentRefusal::Fixed { .. } | ArgumentRefusal::NotAnObject { .. })
    }
}

impl std::fmt::Debug for Overrides {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<_> = self.by_upstream.keys().collect();
        names.sort();
        f.debug_struct("Overrides").field("kind", &self.kind).field("names", &names).finish()
    }
}

impl Overrides {
    /// The overrides among `tools` of the upstream `upstream`; `None` when none changes
    /// what clients see. Environment values are read here.
    pub(crate) fn tools(upstream: &str, tools: &BTreeMap<String, ToolConfig>) -> Option<Overrides> {
        let shaped = tools.iter().filter(|(_, c)| c.shapes()).map(|(name, c)| Override::tool(name, c));
        Overrides::new(upstream, "tools", shaped)
    }

    /// The overrides among `prompts` of the upstream `upstream`; `None` when there are none.
    pub(crate) fn prompts(upstream: &str, prompts: &BTreeMap<String, PromptConfig>) -> Option<Overrides> {
        let shaped =
            prompts.iter().filter(|(_, c)| **c != PromptConfig::default()).map(|(name, c)| Override::prompt(name, c));
        Overrides::new(upstream, "prompts", shaped)
    }

    fn new(upstream: &str, kind: &'static str, shaped: impl Iterator<Item = Override>) -> Option<Overrides> {
        let mut by_upstream = HashMap::default();
        let mut by_client = HashMap::default();
        for entry in shaped {
            let entry = Arc::new(entry);
            if !entry.hidden {
                by_client.insert(Arc::clone(&entry.client), Arc::clone(&entry));
            }
            by_upstream.insert(Arc::clone(&entry.upstream), entry);
        }
        if by_upstream.is_empty() {
            return None;
        }
        Some(Overrides { upstream: Arc::from(upstream), kind, by_upstream, by_client, pages: PageMemo::default() })
    }

    /// The tool (or prompt) a client's request for `name` reaches.
    pub(crate) fn resolve(&self, name: &str) -> Resolved<'_> {
        if let Some(entry) = self.by_client.get(name) {
            return Resolved::Shaped(entry);
        }
        if self.by_upstream.contains_key(name) {
            return Resolved::Unknown;
        }
        Resolved::Plain
    }

    /// A `tools/list` (or `prompts/list`) page of the upstream as clients see it: hidden
    /// entries left out, overridden ones reshaped, and one the upstream lists under a
    /// name another is now seen by left out too (requests for that name reach the other).
    pub(crate) fn list(&self, page: Box<RawValue>) -> Box<RawValue> {
        if let Some(shaped) = self.pages.get(page.get()) {
            return shaped.as_ref().clone();
        }
        let shaped = self.reshape(&page).unwrap_or_else(|| page.clone());
        self.pages.insert(page.get(), Arc::new(shaped.clone()));
        shaped
    }

    fn reshape(&self, page: &RawValue) -> Option<Box<RawValue>> {
        let mut page: Map<String, Value> = serde_json::from_str(page.get()).ok()?;
        let Some(Value::Array(entries)) = page.get_mut(self.kind) else { return None };
        entries.retain_mut(|entry| {
            let Some(Value::String(name)) = entry.get("name") else { return true };
            match self.by_upstream.get(name.as_str()) {
                Some(shape) if shape.hidden => false,
                Some(shape) => {
                    if let Value::Object(entry) = entry {
                        shape.reshape(&self.upstream, entry);
                    }
                    true
                }
                None if self.by_client.contains_key(name.as_str()) => {
                    tracing::warn!(
                        upstream = %self.upstream,
                        name = %name,
                        list = self.kind,
                        "the upstream lists an entry under a name an override gives another of its entries: \
                         clients see and reach the other"
                    );
                    false
                }
                None => true,
            }
        });
        serde_json::value::to_raw_value(&page).ok()
    }
}

impl Override {
    fn prompt(name: &str, config: &PromptConfig) -> Override {
        Override {
            upstream: Arc::from(name),
            client: Arc::from(config.name.as_deref().unwrap_or(name)),
            title: None,
            description: config.description.clone(),
            annotations: Vec::new(),
            hidden: config.hidden,
            fixed: Vec::new(),
            defaults: Vec::new(),
            warned: AtomicBool::new(false),
        }
    }

    fn tool(name: &str, config: &ToolConfig) -> Override {
        let mut fixed = Vec::new();
        let mut defaults = Vec::new();
        for (arg, config) in &config.arguments {
            // The configuration was refused unless each argument has exactly one source.
            let Some(source) = config.source() else { continue };
            let value = match source {
                ArgumentSource::Value(v) => Fixed::Value(v.clone()),
                // The configuration was refused if the variable was unset when it was
                // loaded; one unset since reads as empty.
                ArgumentSource::Env(var) => Fixed::Value(Value::String(std::env::var(var).unwrap_or_default())),
                ArgumentSource::PrincipalName => Fixed::PrincipalName,
                ArgumentSource::Claim(claim) => Fixed::Claim(claim.to_owned()),
                ArgumentSource::Default(v) => {
                    defaults.push((arg.clone(), v.clone()));
                    continue;
                }
            };
            fixed.push((arg.clone(), value));
        }
        Override {
            upstream: Arc::from(name),
            client: Arc::from(config.name.as_deref().unwrap_or(name)),
            title: config.title.clone(),
            description: config.description.clone(),
            annotations: config.annotations.set().collect(),
            hidden: config.hidden,
            fixed,
            defaults,
            warned: AtomicBool::new(false),
        }
    }

    /// Whether calls keep the arguments the client sent (only the name changes).
    pub(crate) fn keeps_arguments(&self) -> bool {
        self.fixed.is_empty() && self.defaults.is_empty()
    }

    /// One entry of a `tools/list` or `prompts/list` page as clients see it.
    fn reshape(&self, upstream: &str, entry: &mut Map<String, Value>) {
        entry.insert("name".into(), Value::String(self.client.to_string()));
        if let Some(title) = &self.title {
            entry.insert("title".into(), Value::String(title.clone()));
        }
        if let Some(description) = &self.description {
            entry.insert("description".into(), Value::String(description.clone()));
        }
        if !self.annotations.is_empty() {
            let annotations = entry.entry("annotations").or_insert_with(|| Value::Object(Map::new()));
            if !annotations.is_object() {
                *annotations = Value::Object(Map::new());
            }
            if let Value::Object(annotations) = annotations {
                for (hint, value) in &self.annotations {
                    annotations.insert((*hint).into(), Value::Bool(*value));
                }
            }
        }
        if self.keeps_arguments() {
            return;
        }
        let unlisted = self.reshape_schema(entry.get_mut("inputSchema"));
        if !unlisted.is_empty() && !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                upstream,
                tool = %self.upstream,
                arguments = ?unlisted,
                "the upstream's input schema does not list arguments the gateway sets; it sets them all the same"
            );
        }
    }

    /// The input schema without the fixed arguments, with the defaults; returns the
    /// arguments it does not list.
    fn reshape_schema(&self, schema: Option<&mut Value>) -> Vec<&str> {
        let mut unlisted = Vec::new();
        let Some(Value::Object(schema)) = schema else {
            unlisted.extend(self.fixed.iter().map(|(a, _)| a.as_str()));
            unlisted.extend(self.defaults.iter().map(|(a, _)| a.as_str()));
            return unlisted;
        };
        let mut properties = match schema.get_mut("properties") {
            Some(Value::Object(properties)) => Some(properties),
            _ => None,
        };
        for (arg, _) in &self.fixed {
            if properties.as_mut().and_then(|p| p.remove(arg)).is_none() {
                unlisted.push(arg.as_str());
            }
        }
        for (arg, value) in &self.defaults {
            match properties.as_mut().and_then(|p| p.get_mut(arg)) {
                Some(Value::Object(property)) => {
                    property.insert("default".into(), value.clone());
                }
                _ => unlisted.push(arg.as_str()),
            }
        }
        if let Some(Value::Array(required)) = schema.get_mut("required") {
            let set_here = |r: &Value| {
                r.as_str().is_some_and(|r| {
                    self.fixed.iter().any(|(a, _)| a == r) || self.defaults.iter().any(|(a, _)| a == r)
                })
            };
            required.retain(|r| !set_here(r));
        }
        unlisted
    }

    /// The arguments a call sends upstream: the client's `sent` with the fixed ones set
    /// (from `principal` where they come from the caller) and the defaults filled in.
    /// `tool` is the name the client called, for the refusals.
    pub(crate) fn arguments(
        &self,
        tool: &str,
        principal: Option<&Principal>,
        sent: Option<&Value>,
    ) -> Result<Value, ArgumentRefusal> {
        let mut arguments = match sent {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(sent)) => sent.clone(),
            Some(_) => return Err(ArgumentRefusal::NotAnObject { tool: tool.to_owned() }),
        };
        for (arg, source) in &self.fixed {
            if arguments.contains_key(arg) {
                return Err(ArgumentRefusal::Fixed { tool: tool.to_owned(), arg: arg.clone() });
            }
            let value = match source {
                Fixed::Value(value) => value.clone(),
                Fixed::PrincipalName => match principal {
                    Some(p) => Value::String(p.name.to_string()),
                    None => return Err(ArgumentRefusal::NoPrincipal { tool: tool.to_owned(), arg: arg.clone() }),
                },
                Fixed::Claim(claim) => match principal {
                    None => return Err(ArgumentRefusal::NoPrincipal { tool: tool.to_owned(), arg: arg.clone() }),
                    Some(p) => match p.claims.get(claim) {
                        Some(value) => value.clone(),
                        None => {
                            return Err(ArgumentRefusal::NoClaim {
                                tool: tool.to_owned(),
                                arg: arg.clone(),
                                claim: claim.clone(),
                            });
                        }
                    },
                },
            };
            arguments.insert(arg.clone(), value);
        }
        for (arg, value) in &self.defaults {
            arguments.entry(arg.as_str()).or_insert_with(|| value.clone());
        }
        Ok(Value::Object(arguments))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn overrides(yaml: &str) -> Overrides {
        let tools: BTreeMap<String, ToolConfig> = yaml_serde::from_str(yaml).unwrap();
        Overrides::tools("demo", &tools).unwrap()
    }

    fn listed(o: &Overrides, page: Value) -> Value {
        let shaped = o.list(serde_json::value::to_raw_value(&page).unwrap());
        serde_json::from_str(shaped.get()).unwrap()
    }

    const CONFIG: &str = r#"
add:
  name: plus
  title: Plus
  description: Adds forty.
  annotations: { idempotentHint: true, readOnlyHint: false }
  arguments:
    b: { value: 40 }
    note: { default: "none" }
fail: { hidden: true }
echo: { arguments: { message: { principal: name }, team: { claim: team } } }
sleep: { timeout: 5s }
"#;

    fn page() -> Value {
        json!({"tools": [
            {"name": "add", "description": "Add.", "annotations": {"readOnlyHint": true, "openWorldHint": false},
             "inputSchema": {"type": "object", "properties": {"a": {}, "b": {}, "note": {"type": "string"}}, "required": ["a", "b", "note"]}},
            {"name": "fail"},
            {"name": "plus", "description": "the upstream's own plus"},
            {"name": "echo", "inputSchema": {"type": "object", "properties": {"message": {}}, "required": ["message"]}},
            {"name": "sleep", "inputSchema": {"type": "object"}},
        ], "nextCursor": "2"})
    }

    #[test]
    fn a_list_shows_the_overridden_tools_as_configured() {
        let o = overrides(CONFIG);
        let shaped = listed(&o, page());
        assert_eq!(
            shaped,
            json!({"tools": [
                {"name": "plus", "title": "Plus", "description": "Adds forty.",
                 "annotations": {"readOnlyHint": false, "openWorldHint": false, "idempotentHint": true},
                 "inputSchema": {"type": "object", "properties": {"a": {}, "note": {"type": "string", "default": "none"}}, "required": ["a"]}},
                {"name": "echo", "inputSchema": {"type": "object", "properties": {}, "required": []}},
                {"name": "sleep", "inputSchema": {"type": "object"}},
            ], "nextCursor": "2"}),
            "hidden and shadowed tools are left out; `sleep` (no override of what clients see) is as it was"
        );
        assert_eq!(listed(&o, page()), shaped, "the same page again gives the same list");
    }

    #[test]
    fn calls_reach_the_upstream_name_and_old_and_hidden_names_are_unknown() {
        let o = overrides(CONFIG);
        assert!(matches!(o.resolve("plus"), Resolved::Shaped(t) if &*t.upstream == "add"));
        assert!(matches!(o.resolve("add"), Resolved::Unknown));
        assert!(matches!(o.resolve("fail"), Resolved::Unknown));
        assert!(matches!(o.resolve("echo"), Resolved::Shaped(t) if &*t.upstream == "echo"));
        assert!(matches!(o.resolve("sleep"), Resolved::Plain), "a timeout alone shapes nothing");
        assert!(matches!(o.resolve("other"), Resolved::Plain));
        let only_timeouts: BTreeMap<String, ToolConfig> = yaml_serde::from_str("sleep: { timeout: 5s }").unwrap();
        assert!(Overrides::tools("demo", &only_timeouts).is_none(), "nothing to look up on the call path");
    }

    #[test]
    fn arguments_get_the_fixed_values_and_the_defaults() {
        let o = overrides(CONFIG);
        let Resolved::Shaped(plus) = o.resolve("plus") else { panic!() };
        assert_eq!(plus.arguments("plus", None, Some(&json!({"a": 2}))), Ok(json!({"a": 2, "b": 40, "note": "none"})));
        assert_eq!(plus.arguments("plus", None, Some(&json!({"a": 2, "note": "x"}))).unwrap()["note"], "x");
        assert_eq!(plus.arguments("plus", None, None), Ok(json!({"b": 40, "note": "none"})));
        let sent_fixed = plus.arguments("demo__plus", None, Some(&json!({"a": 2, "b": 1}))).unwrap_err();
        assert!(sent_fixed.is_invalid_params());
        assert_eq!(sent_fixed.to_string(), "argument 'b' of tool 'demo__plus' is set by the gateway; leave it out");
        assert!(plus.arguments("plus", None, Some(&json!([1]))).unwrap_err().is_invalid_params());

        let Resolved::Shaped(echo) = o.resolve("echo") else { panic!() };
        let refused = echo.arguments("echo", None, None).unwrap_err();
        assert!(!refused.is_invalid_params());
        assert!(refused.to_string().contains("needs an authenticated caller"), "{refused}");
        let mut principal = Principal::api_key("ci");
        let refused = echo.arguments("echo", Some(&principal), None).unwrap_err();
        assert!(refused.to_string().contains("claim 'team'"), "{refused}");
        principal.claims.insert("team".into(), json!(["a", "b"]));
        assert_eq!(echo.arguments("echo", Some(&principal), None), Ok(json!({"message": "ci", "team": ["a", "b"]})));
    }

    #[test]
    fn prompts_are_renamed_described_and_hidden() {
        let prompts: BTreeMap<String, PromptConfig> =
            yaml_serde::from_str("greet: { name: hello, description: Says hello. }\nsecret: { hidden: true }").unwrap();
        let o = Overrides::prompts("demo", &prompts).unwrap();
        let page = json!({"prompts": [{"name": "greet", "arguments": [{"name": "who"}]}, {"name": "secret"}, {"name": "other"}]});
        assert_eq!(
            listed(&o, page),
            json!({"prompts": [{"name": "hello", "description": "Says hello.", "arguments": [{"name": "who"}]}, {"name": "other"}]})
        );
        assert!(matches!(o.resolve("hello"), Resolved::Shaped(p) if &*p.upstream == "greet"));
        assert!(matches!(o.resolve("greet"), Resolved::Unknown));
        assert!(matches!(o.resolve("secret"), Resolved::Unknown));
        assert!(Overrides::prompts("demo", &BTreeMap::new()).is_none());
    }

    #[test]
    fn environment_values_are_read_when_the_overrides_are_made() {
        // A variable every test process has (setting one would take `unsafe`).
        let path = std::env::var("PATH").unwrap();
        let o = overrides("log: { arguments: { level: { env: PATH } } }");
        let Resolved::Shaped(log) = o.resolve("log") else { panic!() };
        assert_eq!(log.arguments("log", None, None), Ok(json!({"level": path})));
    }
}

//! Lists filtered by the caller's rights: the entries a principal may not use are taken
//! out of a `tools/list`, `prompts/list`, `resources/list` or `resources/templates/list`
//! result; every other member (`nextCursor`, unknown fields) is kept.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use std::sync::Arc;

use super::rules::{Kind, Rules, Target};
use crate::config::Decision;
use crate::identity::Principal;
use crate::mcp::method;
use crate::session::{Scope, Session};

/// What filtering one list result needs: the rules, the method, and the session (whose
/// scope and resource catalog tell each entry's upstream).
pub(crate) struct Lister {
    pub(crate) rules: Arc<Rules>,
    pub(crate) method: Arc<str>,
    pub(crate) session: Arc<Session>,
    pub(crate) separator: Arc<str>,
}

impl Lister {
    /// The upstream serving the list entry `name` of `kind`, when known.
    fn upstream_of(&self, kind: Kind, name: &str) -> Option<Arc<str>> {
        match &self.session.scope {
            Scope::Single(upstream) => Some(Arc::clone(upstream)),
            Scope::Aggregate if kind == Kind::Resource => self.session.resources.lock().resolve(name),
            Scope::Aggregate => name.split_once(&*self.separator).map(|(upstream, _)| Arc::from(upstream)),
        }
    }
}

/// What a list method's result holds: the array's key, the name field of its entries,
/// and the kind of name.
pub(crate) fn list_shape(method: &str) -> Option<(&'static str, &'static str, Kind)> {
    match method {
        method::TOOLS_LIST => Some(("tools", "name", Kind::Tool)),
        method::PROMPTS_LIST => Some(("prompts", "name", Kind::Prompt)),
        method::RESOURCES_LIST => Some(("resources", "uri", Kind::Resource)),
        method::RESOURCE_TEMPLATES_LIST => Some(("resourceTemplates", "uriTemplate", Kind::Resource)),
        _ => None,
    }
}

/// `result` without the entries `principal` may not use; the same text when nothing
/// was removed or the result is not a list of that shape. An entry without a name is
/// removed (nobody can be allowed it).
pub(crate) fn filter_list(lister: &Lister, principal: Option<&Principal>, result: Box<RawValue>) -> Box<RawValue> {
    let method = &*lister.method;
    let Some((key, field, kind)) = list_shape(method) else {
        return result;
    };
    let Ok(mut object) = serde_json::from_str::<Map<String, Value>>(result.get()) else {
        return result;
    };
    let Some(Value::Array(entries)) = object.get_mut(key) else {
        return result;
    };
    let before = entries.len();
    entries.retain(|entry| {
        let Some(name) = entry.get(field).and_then(Value::as_str) else {
            return false;
        };
        let upstream = lister.upstream_of(kind, name);
        let target = Target { kind, name, upstream: upstream.as_deref(), method, args: None };
        let verdict = lister.rules.decide(principal, &target);
        tracing::debug!(
            target: "seawall::policy",
            method,
            name,
            decision = ?verdict.decision,
            rule = ?verdict.rule,
            "authorisation of a list entry"
        );
        verdict.decision == Decision::Allow
    });
    if entries.len() == before {
        return result;
    }
    crate::jsonrpc::to_raw(&object)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::{AuthorizationConfig, AuthzRuleConfig, PatternsConfig};

    fn rules() -> Rules {
        let only = |tools: &[&str], resources: &[&str]| PatternsConfig {
            tools: tools.iter().map(|t| t.to_string()).collect(),
            resources: resources.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        };
        Rules::new(&AuthorizationConfig {
            default: Decision::Deny,
            rules: vec![AuthzRuleConfig {
                principals: vec!["ci".into()],
                allow: Some(only(&["demo__echo"], &["demo://public/*"])),
                deny: None,
                when: None,
            }],
        })
    }

    fn lister(method: &str) -> Lister {
        Lister {
            rules: Arc::new(rules()),
            method: Arc::from(method),
            session: Session::new(Scope::Aggregate, "2025-11-25".into(), json!({}), json!({})),
            separator: Arc::from("__"),
        }
    }

    fn filtered(method: &str, result: serde_json::Value) -> serde_json::Value {
        let raw = crate::jsonrpc::to_raw(&result);
        let out = filter_list(&lister(method), Some(&Principal::api_key("ci")), raw);
        serde_json::from_str(out.get()).unwrap()
    }

    #[tokio::test]
    async fn a_list_loses_denied_entries_and_keeps_every_other_member() {
        let out = filtered(
            "tools/list",
            json!({"tools": [{"name": "demo__echo", "x": 1}, {"name": "demo__add"}, {"title": "no name"}],
                   "nextCursor": "c2", "_meta": {"k": true}}),
        );
        assert_eq!(out, json!({"tools": [{"name": "demo__echo", "x": 1}], "nextCursor": "c2", "_meta": {"k": true}}));
        let out = filtered(
            "resources/templates/list",
            json!({"resourceTemplates": [{"uriTemplate": "demo://public/{id}"}, {"uriTemplate": "demo://secret/{id}"}]}),
        );
        assert_eq!(out, json!({"resourceTemplates": [{"uriTemplate": "demo://public/{id}"}]}));
        let out = filtered("prompts/list", json!({"prompts": [{"name": "demo__greet"}]}));
        assert_eq!(out, json!({"prompts": []}));
    }

    #[tokio::test]
    async fn a_result_with_nothing_removed_is_the_same_text() {
        let text = r#"{"tools":[{"name":"demo__echo"}],  "nextCursor":null}"#;
        let raw = crate::jsonrpc::raw_from_str(text).unwrap();
        let out = filter_list(&lister("tools/list"), Some(&Principal::api_key("ci")), raw);
        assert_eq!(out.get(), text);
        let raw = crate::jsonrpc::raw_from_str(r#"{"content":[]}"#).unwrap();
        assert_eq!(filter_list(&lister("tools/call"), None, raw).get(), r#"{"content":[]}"#);
    }
}

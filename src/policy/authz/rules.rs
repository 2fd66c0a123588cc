//! The decision: which rule, if any, decides whether a principal may do what a request
//! asks.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::config::{AuthorizationConfig, Decision, PatternsConfig, PrincipalMatcher};
use crate::identity::Credential;
use crate::identity::Principal;
use crate::policy::glob::glob;

/// What kind of name a decision is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A tool name.
    Tool,
    /// A prompt name.
    Prompt,
    /// A resource URI or URI template.
    Resource,
    /// A method with no name of those kinds (`tasks/*`, custom methods): only `upstreams`
    /// patterns speak of it, and the default does not apply.
    Other,
}

/// What a request asks for, as a decision sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    /// The kind of name.
    pub(crate) kind: Kind,
    /// The name as the client sees it (the method, for [`Kind::Other`]).
    pub(crate) name: &'a str,
    /// The upstream that serves it, when known.
    pub(crate) upstream: Option<&'a str>,
    /// The method.
    pub(crate) method: &'a str,
    /// The call's `arguments`, when it has any (`None` when deciding on a list entry:
    /// a condition over `args` is then unknown).
    pub(crate) args: Option<&'a Value>,
}

/// A decision and the rule that made it (`None`: the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Allow or deny.
    pub(crate) decision: Decision,
    /// The index of the deciding rule in `authorization.rules`, or `None` for the default.
    pub(crate) rule: Option<usize>,
}

/// The configured rules, with their principal matchers parsed and conditions compiled.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    default: Decision,
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
struct Rule {
    principals: Vec<PrincipalMatcher>,
    allow: Option<PatternsConfig>,
    deny: Option<PatternsConfig>,
    when: Option<Condition>,
}

/// A compiled `when` expression.
#[derive(Clone)]
struct Condition {
    /// `None`: the expression did not compile, and the condition never holds.
    program: Option<Arc<cel::Program>>,
    /// Whether it reads `args` (then it cannot be decided for a list entry).
    uses_args: bool,
}

impl std::fmt::Debug for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Condition").field("uses_args", &self.uses_args).finish_non_exhaustive()
    }
}

/// What a condition says of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holds {
    /// It evaluated to `true`.
    Yes,
    /// It evaluated to `false`.
    No,
    /// It failed (a missing key, a wrong type, not a boolean, did not compile): an
    /// allow rule does not apply, a deny rule does, so an error never widens access.
    Failed,
    /// It reads `args` and a list entry has none: an allow rule applies (the name is
    /// listed, since some call may pass), a deny rule does not.
    Unknown,
}

impl Condition {
    /// Whether the expression holds for `target`.
    fn holds(&self, principal: Option<&Principal>, target: &Target<'_>) -> Holds {
        let Some(program) = &self.program else { return Holds::Failed };
        if self.uses_args && target.args.is_none() {
            return Holds::Unknown;
        }
        let mut context = cel::Context::default();
        let principal = match principal {
            None => json!({"name": null, "credential": "anonymous", "claims": {}}),
            Some(p) => json!({
                "name": &*p.name,
                "credential": match p.credential { Credential::ApiKey => "api_key", Credential::Jwt => "jwt" },
                "claims": p.claims,
            }),
        };
        let empty = Value::Object(Map::new());
        let variables = [
            ("principal", principal),
            ("method", Value::from(target.method)),
            ("name", Value::from(target.name)),
            ("upstream", target.upstream.map_or(Value::Null, Value::from)),
            ("args", target.args.unwrap_or(&empty).clone()),
        ];
        for (name, value) in variables {
            let Ok(()) = context.add_variable(name, cel_value(&value));
        }
        match program.execute(&context) {
            Ok(cel::Value::Bool(true)) => Holds::Yes,
            Ok(cel::Value::Bool(false)) => Holds::No,
            Ok(other) => {
                tracing::debug!(target: "seawall::policy", value = ?other, "a rule's condition is not a boolean");
                Holds::Failed
            }
            Err(e) => {
                tracing::debug!(target: "seawall::policy", error = %e, "a rule's condition failed");
                Holds::Failed
            }
        }
    }
}

/// `value` as CEL sees it. Built by hand rather than through serde: seawall's JSON numbers
/// keep their exact text (`arbitrary_precision`), which serde hands on as a map, so a
/// condition like `args.limit <= 100` would compare a map with an int and fail. A number is
/// an `int` when it is a whole number that fits, else a `uint`, else a `double`.
fn cel_value(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => cel::Value::Int(i),
            (None, Some(u), _) => cel::Value::UInt(u),
            (None, None, Some(f)) => cel::Value::Float(f),
            (None, None, None) => cel::Value::String(Arc::new(n.to_string())),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(cel_value).collect())),
        Value::Object(fields) => {
            let map: HashMap<cel::objects::Key, cel::Value> =
                fields.iter().map(|(k, v)| (cel::objects::Key::String(Arc::new(k.clone())), cel_value(v))).collect();
            cel::Value::Map(cel::objects::Map { map: Arc::new(map) })
        }
    }
}

fn patterns(p: &PatternsConfig, kind: Kind) -> &[String] {
    match kind {
        Kind::Tool => &p.tools,
        Kind::Prompt => &p.prompts,
        Kind::Resource => &p.resources,
        Kind::Other => &[],
    }
}

/// Whether `p` names the target. An `upstreams` pattern names everything of a matching
/// upstream; when the upstream is not known only a deny pattern (`deny: true`) matches,
/// so an unknown owner never widens what is allowed.
fn matches(p: Option<&PatternsConfig>, target: &Target<'_>, deny: bool) -> bool {
    let Some(p) = p else { return false };
    if patterns(p, target.kind).iter().any(|pattern| glob(pattern, target.name)) {
        return true;
    }
    match target.upstream {
        Some(upstream) => p.upstreams.iter().any(|pattern| glob(pattern, upstream)),
        None => deny && !p.upstreams.is_empty(),
    }
}

impl Rules {
    /// The rules of `config`. A principal matcher or condition that does not parse
    /// (validation rejects it first) matches nobody.
    pub(crate) fn new(config: &AuthorizationConfig) -> Rules {
        let rules = config
            .rules
            .iter()
            .map(|rule| Rule {
                principals: rule.principals.iter().filter_map(|p| PrincipalMatcher::parse(p).ok()).collect(),
                allow: rule.allow.clone(),
                deny: rule.deny.clone(),
                when: rule.when.as_deref().map(|text| {
                    let program = cel::Program::compile(text).ok();
                    let uses_args = program.as_ref().is_some_and(|p| p.references().has_variable("args"));
                    Condition { program: program.map(Arc::new), uses_args }
                }),
            })
            .collect();
        Rules { default: config.default, rules }
    }

    /// Whether there are no rules and the default allows: nothing is ever denied.
    pub(crate) fn allows_everything(&self) -> bool {
        self.rules.is_empty() && self.default == Decision::Allow
    }

    /// Whether some `kind` name may be denied to `principal`: the default denies, or a
    /// rule about it denies some names of that kind (or whole upstreams).
    pub(crate) fn may_deny(&self, principal: Option<&Principal>, kind: Kind) -> bool {
        self.default == Decision::Deny
            || self.rules.iter().any(|rule| {
                rule.is_for(principal)
                    && rule.deny.as_ref().is_some_and(|d| !patterns(d, kind).is_empty() || !d.upstreams.is_empty())
            })
    }

    /// The decision on `principal` asking for `target`: the first rule whose principals,
    /// patterns (deny first) and condition match, else the default ([`Kind::Other`]:
    /// allow). A condition that fails counts as holding for a deny and not for an allow;
    /// one that cannot be told (a list entry, a condition over `args`) counts as holding
    /// for an allow and not for a deny, so a list shows every name some call could use.
    pub(crate) fn decide(&self, principal: Option<&Principal>, target: &Target<'_>) -> Verdict {
        for (i, rule) in self.rules.iter().enumerate() {
            if !rule.is_for(principal) {
                continue;
            }
            let deny = matches(rule.deny.as_ref(), target, true);
            let allow = !deny && matches(rule.allow.as_ref(), target, false);
            if !deny && !allow {
                continue;
            }
            let holds = rule.when.as_ref().map_or(Holds::Yes, |c| c.holds(principal, target));
            let applies = match holds {
                Holds::Yes => true,
                Holds::No => false,
                Holds::Failed => deny,
                Holds::Unknown => !deny,
            };
            if applies {
                let decision = if deny { Decision::Deny } else { Decision::Allow };
                return Verdict { decision, rule: Some(i) };
            }
        }
        let decision = if target.kind == Kind::Other { Decision::Allow } else { self.default };
        Verdict { decision, rule: None }
    }
}

impl Rule {
    fn is_for(&self, principal: Option<&Principal>) -> bool {
        self.principals.iter().any(|m| principal_matches(m, principal))
    }
}

/// Whether `matcher` selects `principal` (`None`: unauthenticated).
fn principal_matches(matcher: &PrincipalMatcher, principal: Option<&Principal>) -> bool {
    let Some(principal) = principal else {
        return *matcher == PrincipalMatcher::Anonymous;
    };
    match matcher {
        PrincipalMatcher::Any => true,
        PrincipalMatcher::Anonymous => false,
        PrincipalMatcher::Name(name) => *principal.name == **name,
        PrincipalMatcher::Claim { name, value } if name == "scope" => principal.has_scope(value),
        PrincipalMatcher::Claim { name, value } => match principal.claims.get(name) {
            Some(Value::String(s)) => s == value,
            Some(Value::Array(items)) => items.iter().any(|item| item.as_str() == Some(value)),
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::config::AuthzRuleConfig;
    use crate::identity::Credential;

    fn rule(principals: &[&str], allow: Option<PatternsConfig>, deny: Option<PatternsConfig>) -> AuthzRuleConfig {
        AuthzRuleConfig { principals: principals.iter().map(|p| p.to_string()).collect(), allow, deny, when: None }
    }

    fn tools(patterns: &[&str]) -> Option<PatternsConfig> {
        Some(PatternsConfig { tools: patterns.iter().map(|p| p.to_string()).collect(), ..Default::default() })
    }

    fn jwt(sub: &str, claims: serde_json::Value) -> Principal {
        let claims = claims.as_object().cloned().unwrap_or_default();
        Principal { name: Arc::from(sub), credential: Credential::Jwt, claims }
    }

    fn target(kind: Kind, name: &str) -> Target<'_> {
        let upstream = name.split_once("__").map(|(u, _)| u);
        Target { kind, name, upstream, method: "tools/call", args: Some(&serde_json::Value::Null) }
    }

    fn rules(default: Decision, rules: Vec<AuthzRuleConfig>) -> Rules {
        Rules::new(&AuthorizationConfig { default, rules })
    }

    #[test]
    fn the_first_matching_rule_decides_and_deny_beats_a_later_allow() {
        let r = rules(
            Decision::Allow,
            vec![
                rule(&["ci"], tools(&["demo__*"]), None),
                rule(&["*"], None, tools(&["*__delete_*"])),
                rule(&["*"], tools(&["*"]), None),
            ],
        );
        let ci = Principal::api_key("ci");
        let other = Principal::api_key("other");
        let v = r.decide(Some(&ci), &target(Kind::Tool, "demo__delete_all"));
        assert_eq!(v, Verdict { decision: Decision::Allow, rule: Some(0) }, "rule 0 matches first");
        let v = r.decide(Some(&other), &target(Kind::Tool, "demo__delete_all"));
        assert_eq!(v, Verdict { decision: Decision::Deny, rule: Some(1) });
        let v = r.decide(Some(&other), &target(Kind::Tool, "demo__echo"));
        assert_eq!(v, Verdict { decision: Decision::Allow, rule: Some(2) });
        let v = r.decide(Some(&other), &target(Kind::Prompt, "demo__greet"));
        assert_eq!(v, Verdict { decision: Decision::Allow, rule: None }, "tool patterns say nothing of prompts");
        assert!(r.may_deny(Some(&other), Kind::Tool));
        assert!(!r.may_deny(Some(&other), Kind::Prompt));
    }

    #[test]
    fn the_default_decides_when_no_rule_matches() {
        let r = rules(Decision::Deny, vec![rule(&["ci"], tools(&["demo__echo"]), None)]);
        let ci = Principal::api_key("ci");
        assert_eq!(r.decide(Some(&ci), &target(Kind::Tool, "demo__echo")).decision, Decision::Allow);
        assert_eq!(
            r.decide(Some(&ci), &target(Kind::Tool, "demo__add")),
            Verdict { decision: Decision::Deny, rule: None }
        );
        assert_eq!(r.decide(None, &target(Kind::Tool, "demo__echo")).decision, Decision::Deny);
        assert!(r.may_deny(None, Kind::Resource));
        assert!(rules(Decision::Allow, vec![]).allows_everything());
    }

    #[test]
    fn principal_matchers_select_names_claims_anyone_and_anonymous() {
        let m = |text: &str| PrincipalMatcher::parse(text).unwrap();
        let alice = jwt("alice", json!({"role": "admin", "groups": ["ops", "dev"], "scope": "read write"}));
        let key = Principal::api_key("ci");
        assert!(principal_matches(&m("alice"), Some(&alice)));
        assert!(!principal_matches(&m("alice"), Some(&key)));
        assert!(principal_matches(&m("claim:role=admin"), Some(&alice)));
        assert!(!principal_matches(&m("claim:role=adm"), Some(&alice)));
        assert!(principal_matches(&m("claim:groups=dev"), Some(&alice)));
        assert!(!principal_matches(&m("claim:groups=qa"), Some(&alice)));
        assert!(principal_matches(&m("claim:scope=write"), Some(&alice)));
        assert!(!principal_matches(&m("claim:role=admin"), Some(&key)));
        assert!(principal_matches(&m("*"), Some(&key)));
        assert!(!principal_matches(&m("*"), None));
        assert!(principal_matches(&m("anonymous"), None));
        assert!(!principal_matches(&m("anonymous"), Some(&key)));
        for bad in ["", "claim:", "claim:role", "claim:=x", "claim:role="] {
            assert!(PrincipalMatcher::parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    // --- conditions (`when`) -------------------------------------------------------------

    fn when(principals: &[&str], allow: PatternsConfig, deny: Option<PatternsConfig>, when: &str) -> AuthzRuleConfig {
        AuthzRuleConfig {
            principals: principals.iter().map(|p| p.to_string()).collect(),
            allow: Some(allow),
            deny,
            when: Some(when.to_owned()),
        }
    }

    fn tool_names(names: &[&str]) -> PatternsConfig {
        PatternsConfig { tools: names.iter().map(|n| n.to_string()).collect(), ..Default::default() }
    }

    fn call<'a>(name: &'a str, args: &'a Value) -> Target<'a> {
        Target { kind: Kind::Tool, name, upstream: Some("fs"), method: "tools/call", args: Some(args) }
    }

    fn entry(name: &str) -> Target<'_> {
        Target { kind: Kind::Tool, name, upstream: Some("fs"), method: "tools/list", args: None }
    }

    #[test]
    fn a_condition_over_arguments_allows_one_call_and_not_another() {
        let r = Rules::new(&AuthorizationConfig {
            default: Decision::Deny,
            rules: vec![when(&["*"], tool_names(&["fs__read_file"]), None, "args.path.startsWith('/srv/docs/')")],
        });
        let ci = Principal::api_key("ci");
        let inside = json!({"path": "/srv/docs/a.md"});
        let outside = json!({"path": "/etc/passwd"});
        assert_eq!(r.decide(Some(&ci), &call("fs__read_file", &inside)).decision, Decision::Allow);
        assert_eq!(
            r.decide(Some(&ci), &call("fs__read_file", &outside)),
            Verdict { decision: Decision::Deny, rule: None }
        );
        assert_eq!(
            r.decide(Some(&ci), &call("fs__read_file", &json!({}))).decision,
            Decision::Deny,
            "a failing condition"
        );
        assert_eq!(
            r.decide(Some(&ci), &entry("fs__read_file")).decision,
            Decision::Allow,
            "listed: some call may pass"
        );
    }

    #[test]
    fn a_condition_compares_numbers_in_arguments_and_claims() {
        let r = Rules::new(&AuthorizationConfig {
            default: Decision::Deny,
            rules: vec![when(
                &["*"],
                tool_names(&["fs__read_file"]),
                None,
                "args.limit <= 100 && args.ratio < 0.5 && args.big > 9223372036854775807 && args.tags[0] == 'a'",
            )],
        });
        let ci = Principal::api_key("ci");
        let small = json!({"limit": 100, "ratio": 0.25, "big": 18446744073709551615u64, "tags": ["a"]});
        let large = json!({"limit": 101, "ratio": 0.25, "big": 18446744073709551615u64, "tags": ["a"]});
        assert_eq!(r.decide(Some(&ci), &call("fs__read_file", &small)).decision, Decision::Allow);
        assert_eq!(r.decide(Some(&ci), &call("fs__read_file", &large)).decision, Decision::Deny);
    }

    #[test]
    fn a_condition_over_claims_decides_lists_too_a_failing_deny_holds_and_an_unknown_one_hides_nothing() {
        let admin_only = PatternsConfig::default();
        let r = Rules::new(&AuthorizationConfig {
            default: Decision::Allow,
            rules: vec![
                when(&["*"], admin_only, Some(tool_names(&["fs__delete"])), "principal.claims.role != 'admin'"),
                when(&["*"], PatternsConfig::default(), Some(tool_names(&["fs__write"])), "args.force == true"),
            ],
        });
        let mut admin = Principal::api_key("root");
        admin.claims.insert("role".into(), json!("admin"));
        admin.claims.insert("roles".into(), json!(["ops", "admin"]));
        let in_list = Rules::new(&AuthorizationConfig {
            default: Decision::Deny,
            rules: vec![when(&["*"], tool_names(&["*"]), None, "'admin' in principal.claims.roles")],
        });
        assert_eq!(in_list.decide(Some(&admin), &entry("fs__x")).decision, Decision::Allow);
        assert_eq!(in_list.decide(Some(&Principal::api_key("bob")), &entry("fs__x")).decision, Decision::Deny);
        let user = Principal::api_key("bob");
        assert_eq!(r.decide(Some(&user), &entry("fs__delete")).decision, Decision::Deny, "no role claim: fails closed");
        assert_eq!(r.decide(Some(&admin), &entry("fs__delete")).decision, Decision::Allow);
        assert_eq!(r.decide(Some(&user), &entry("fs__write")).decision, Decision::Allow, "unknown args: shown");
        let forced = json!({"force": true});
        assert_eq!(
            r.decide(Some(&user), &call("fs__write", &forced)),
            Verdict { decision: Decision::Deny, rule: Some(1) }
        );
        assert_eq!(r.decide(Some(&user), &call("fs__write", &json!({"force": false}))).decision, Decision::Allow);
    }

    #[test]
    fn upstream_patterns_speak_of_everything_an_upstream_serves() {
        let ups = |names: &[&str]| PatternsConfig {
            upstreams: names.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        };
        let r = Rules::new(&AuthorizationConfig {
            default: Decision::Allow,
            rules: vec![AuthzRuleConfig {
                principals: vec!["ci".into()],
                allow: None,
                deny: Some(ups(&["secret*"])),
                when: None,
            }],
        });
        let ci = Principal::api_key("ci");
        let args = json!({});
        let at = |kind, name, upstream| Target { kind, name, upstream, method: "m", args: Some(&args) };
        assert_eq!(r.decide(Some(&ci), &at(Kind::Tool, "secrets__get", Some("secrets"))).decision, Decision::Deny);
        assert_eq!(r.decide(Some(&ci), &at(Kind::Prompt, "demo__greet", Some("demo"))).decision, Decision::Allow);
        assert_eq!(r.decide(Some(&ci), &at(Kind::Resource, "x://y", None)).decision, Decision::Deny, "owner unknown");
        assert_eq!(r.decide(Some(&ci), &at(Kind::Other, "tasks/get", Some("secrets"))).decision, Decision::Deny);
        assert_eq!(r.decide(Some(&ci), &at(Kind::Other, "tasks/get", Some("demo"))).decision, Decision::Allow);
        assert!(r.may_deny(Some(&ci), Kind::Prompt));
        let deny_all = Rules::new(&AuthorizationConfig {
            default: Decision::Deny,
            rules: vec![AuthzRuleConfig {
                principals: vec!["ci".into()],
                allow: Some(ups(&["demo"])),
                deny: None,
                when: None,
            }],
        });
        assert_eq!(deny_all.decide(Some(&ci), &at(Kind::Tool, "demo__echo", Some("demo"))).decision, Decision::Allow);
        assert_eq!(deny_all.decide(Some(&ci), &at(Kind::Resource, "x://y", None)).decision, Decision::Deny);
        assert_eq!(
            deny_all.decide(Some(&ci), &at(Kind::Other, "custom", Some("other"))).decision,
            Decision::Allow,
            "no default for other methods"
        );
    }

    #[test]
    fn the_condition_sees_the_principal_name_credential_method_and_upstream() {
        let r = Rules::new(&AuthorizationConfig {
            default: Decision::Deny,
            rules: vec![when(
                &["*", "anonymous"],
                tool_names(&["*"]),
                None,
                "principal.credential == 'api_key' && principal.name == 'ci' && method == 'tools/call' && upstream == 'fs' && name == 'fs__x'",
            )],
        });
        let args = json!({});
        assert_eq!(r.decide(Some(&Principal::api_key("ci")), &call("fs__x", &args)).decision, Decision::Allow);
        assert_eq!(r.decide(Some(&Principal::api_key("cd")), &call("fs__x", &args)).decision, Decision::Deny);
        assert_eq!(r.decide(None, &call("fs__x", &args)).decision, Decision::Deny);
    }
}

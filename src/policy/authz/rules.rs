//! The decision: which rule, if any, decides whether a principal may use a name.

use crate::config::{AuthorizationConfig, Decision, PatternsConfig, PrincipalMatcher};
use crate::policy::Principal;
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
}

/// A decision and the rule that made it (`None`: the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Allow or deny.
    pub(crate) decision: Decision,
    /// The index of the deciding rule in `authorization.rules`, or `None` for the default.
    pub(crate) rule: Option<usize>,
}

/// The configured rules, with their principal matchers parsed.
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
}

fn patterns(p: &PatternsConfig, kind: Kind) -> &[String] {
    match kind {
        Kind::Tool => &p.tools,
        Kind::Prompt => &p.prompts,
        Kind::Resource => &p.resources,
    }
}

fn matches(p: Option<&PatternsConfig>, kind: Kind, name: &str) -> bool {
    p.is_some_and(|p| patterns(p, kind).iter().any(|pattern| glob(pattern, name)))
}

impl Rules {
    /// The rules of `config`. A principal matcher that does not parse (validation
    /// rejects it first) matches nobody.
    pub(crate) fn new(config: &AuthorizationConfig) -> Rules {
        let rules = config
            .rules
            .iter()
            .map(|rule| Rule {
                principals: rule.principals.iter().filter_map(|p| PrincipalMatcher::parse(p).ok()).collect(),
                allow: rule.allow.clone(),
                deny: rule.deny.clone(),
            })
            .collect();
        Rules { default: config.default, rules }
    }

    /// Whether there are no rules and the default allows: nothing is ever denied.
    pub(crate) fn allows_everything(&self) -> bool {
        self.rules.is_empty() && self.default == Decision::Allow
    }

    /// Whether some `kind` name may be denied to `principal`: the default denies, or a
    /// rule about it denies some names of that kind.
    pub(crate) fn may_deny(&self, principal: Option<&Principal>, kind: Kind) -> bool {
        self.default == Decision::Deny
            || self
                .rules
                .iter()
                .any(|rule| rule.is_for(principal) && rule.deny.as_ref().is_some_and(|d| !patterns(d, kind).is_empty()))
    }

    /// The decision on `principal` using the `kind` name `name`: the first rule whose
    /// principals and patterns match (its deny patterns first), else the default.
    pub(crate) fn decide(&self, principal: Option<&Principal>, kind: Kind, name: &str) -> Verdict {
        for (i, rule) in self.rules.iter().enumerate() {
            if !rule.is_for(principal) {
                continue;
            }
            if matches(rule.deny.as_ref(), kind, name) {
                return Verdict { decision: Decision::Deny, rule: Some(i) };
            }
            if matches(rule.allow.as_ref(), kind, name) {
                return Verdict { decision: Decision::Allow, rule: Some(i) };
            }
        }
        Verdict { decision: self.default, rule: None }
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
        PrincipalMatcher::Claim { name, value } => match principal.claims.get(name) {
            Some(serde_json::Value::String(s)) => {
                s == value || (name == "scope" && s.split(' ').any(|scope| scope == value))
            }
            Some(serde_json::Value::Array(items)) => items.iter().any(|item| item.as_str() == Some(value)),
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
    use crate::policy::principal::Credential;

    fn rule(principals: &[&str], allow: Option<PatternsConfig>, deny: Option<PatternsConfig>) -> AuthzRuleConfig {
        AuthzRuleConfig { principals: principals.iter().map(|p| p.to_string()).collect(), allow, deny }
    }

    fn tools(patterns: &[&str]) -> Option<PatternsConfig> {
        Some(PatternsConfig { tools: patterns.iter().map(|p| p.to_string()).collect(), ..Default::default() })
    }

    fn jwt(sub: &str, claims: serde_json::Value) -> Principal {
        let claims = claims.as_object().cloned().unwrap_or_default();
        Principal { name: Arc::from(sub), credential: Credential::Jwt, claims }
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
        let v = r.decide(Some(&ci), Kind::Tool, "demo__delete_all");
        assert_eq!(v, Verdict { decision: Decision::Allow, rule: Some(0) }, "rule 0 matches first");
        let v = r.decide(Some(&other), Kind::Tool, "demo__delete_all");
        assert_eq!(v, Verdict { decision: Decision::Deny, rule: Some(1) });
        let v = r.decide(Some(&other), Kind::Tool, "demo__echo");
        assert_eq!(v, Verdict { decision: Decision::Allow, rule: Some(2) });
        let v = r.decide(Some(&other), Kind::Prompt, "demo__greet");
        assert_eq!(v, Verdict { decision: Decision::Allow, rule: None }, "tool patterns say nothing of prompts");
        assert!(r.may_deny(Some(&other), Kind::Tool));
        assert!(!r.may_deny(Some(&other), Kind::Prompt));
    }

    #[test]
    fn the_default_decides_when_no_rule_matches() {
        let r = rules(Decision::Deny, vec![rule(&["ci"], tools(&["demo__echo"]), None)]);
        let ci = Principal::api_key("ci");
        assert_eq!(r.decide(Some(&ci), Kind::Tool, "demo__echo").decision, Decision::Allow);
        assert_eq!(r.decide(Some(&ci), Kind::Tool, "demo__add"), Verdict { decision: Decision::Deny, rule: None });
        assert_eq!(r.decide(None, Kind::Tool, "demo__echo").decision, Decision::Deny);
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
}

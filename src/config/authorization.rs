//! The `authorization:` section: which principals may use which tools, prompts and
//! resources, as ordered rules of glob patterns.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::locate::{FieldPath, Problem};

/// Authorisation of client requests. Default: no rules, everything allowed.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct AuthorizationConfig {
    /// The decision when no rule matches: `allow` or `deny`. Default `allow`.
    pub default: Decision,
    /// The rules, in order; the first rule that matches decides. Default: none.
    pub rules: Vec<AuthzRuleConfig>,
}

/// An authorisation decision.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The request may proceed.
    #[default]
    Allow,
    /// The request is answered as if the name did not exist.
    Deny,
}

/// One rule: for these principals, these names are allowed or denied.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AuthzRuleConfig {
    /// Whom the rule is about: an API key's name or a JWT's `sub` (exact),
    /// `claim:<name>=<value>`, `*` (any authenticated principal) or `anonymous`
    /// (unauthenticated requests). At least one. Required.
    pub principals: Vec<String>,
    /// Names the rule allows. Default: none.
    #[serde(default)]
    pub allow: Option<PatternsConfig>,
    /// Names the rule denies; checked before `allow`. Default: none.
    #[serde(default)]
    pub deny: Option<PatternsConfig>,
    /// A CEL expression the request must satisfy for the rule to apply, over
    /// `principal` (`name`, `credential`: `api_key`/`jwt`/`anonymous`, `claims`),
    /// `method`, `name` (the tool or prompt name or resource URI as the client sees it),
    /// `upstream` (or `null` when not known) and `args` (the call's `arguments`, `{}`
    /// without). An expression that does not evaluate to `true` (including one that
    /// fails, e.g. on a missing key) leaves the rule out. Default: none (always applies).
    #[serde(default)]
    pub when: Option<String>,
}

/// Glob patterns (`*`, `?`) per kind of name, as the client sees the names.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq, Default)]
#[serde(deny_unknown_fields, default)]
pub struct PatternsConfig {
    /// Tool names as listed on the endpoint (`<upstream>__<tool>` on `/mcp`). Default: none.
    pub tools: Vec<String>,
    /// Prompt names as listed on the endpoint. Default: none.
    pub prompts: Vec<String>,
    /// Resource URIs (and, for `resources/templates/list`, URI templates). Default: none.
    pub resources: Vec<String>,
    /// Upstream names: every tool, prompt and resource of a matching upstream, and every
    /// other method sent to it. Default: none.
    pub upstreams: Vec<String>,
}

/// A parsed principal matcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrincipalMatcher {
    /// Any authenticated principal (`*`).
    Any,
    /// Unauthenticated requests (`anonymous`).
    Anonymous,
    /// The principal with this API key name or JWT `sub`.
    Name(String),
    /// A principal whose claim `name` is `value`, contains `value` (array), or for
    /// `scope`, lists `value` among its space-separated scopes.
    Claim {
        /// The claim's name.
        name: String,
        /// The value looked for.
        value: String,
    },
}

impl PrincipalMatcher {
    /// Parses one entry of `principals`.
    pub fn parse(text: &str) -> Result<PrincipalMatcher, String> {
        if text.is_empty() {
            return Err("must not be empty (use \"*\" for every authenticated principal)".into());
        }
        if text == "*" {
            return Ok(PrincipalMatcher::Any);
        }
        if text == "anonymous" {
            return Ok(PrincipalMatcher::Anonymous);
        }
        let Some(claim) = text.strip_prefix("claim:") else {
            return Ok(PrincipalMatcher::Name(text.to_owned()));
        };
        match claim.split_once('=') {
            Some((name, value)) if !name.is_empty() && !value.is_empty() => {
                Ok(PrincipalMatcher::Claim { name: name.to_owned(), value: value.to_owned() })
            }
            _ => Err(format!("invalid claim matcher {text:?}: expected claim:<name>=<value>")),
        }
    }
}

/// Checks every rule's principals and patterns.
pub(crate) fn check_authorization(config: &AuthorizationConfig, out: &mut Vec<Problem>) {
    let list = FieldPath::root().key("authorization").key("rules");
    for (i, rule) in config.rules.iter().enumerate() {
        let at = list.index(i);
        if rule.principals.is_empty() {
            out.push(Problem::new(at.key("principals"), "must list at least one principal"));
        }
        for (j, principal) in rule.principals.iter().enumerate() {
            if let Err(why) = PrincipalMatcher::parse(principal) {
                out.push(Problem::new(at.key("principals").index(j), why));
            }
        }
        if let Some(when) = &rule.when
            && let Err(why) = cel::Program::compile(when)
        {
            let first = why.to_string();
            let first = first.lines().next().unwrap_or("invalid expression").trim_start_matches("ERROR: ");
            out.push(Problem::new(at.key("when"), format!("not a CEL expression: {first}")));
        }
        if rule.allow.is_none() && rule.deny.is_none() {
            out.push(Problem::new(at.clone(), "a rule needs `allow` or `deny`"));
        }
        for (field, patterns) in [("allow", &rule.allow), ("deny", &rule.deny)] {
            let Some(patterns) = patterns else { continue };
            let at = at.key(field);
            let lists = [
                ("tools", &patterns.tools),
                ("prompts", &patterns.prompts),
                ("resources", &patterns.resources),
                ("upstreams", &patterns.upstreams),
            ];
            if lists.iter().all(|(_, list)| list.is_empty()) {
                out.push(Problem::new(at.clone(), "must list tools, prompts, resources or upstreams"));
            }
            for (kind, list) in lists {
                for (j, pattern) in list.iter().enumerate() {
                    if pattern.is_empty() {
                        out.push(Problem::new(at.key(kind).index(j), "must not be empty (use \"*\" for every name)"));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{assert_issue, issues, ok, with_upstream};
    use crate::config::{Decision, PrincipalMatcher};

    #[test]
    fn authorization_defaults_to_allow_and_parses_rules() {
        assert_eq!(ok(&with_upstream(&[])).authorization.default, Decision::Allow);
        let config = ok(&with_upstream(&[
            "authorization:",
            "  default: deny",
            "  rules:",
            "    - { principals: [ci], allow: { tools: ['demo__*'] } }",
            "    - { principals: ['claim:role=admin'], allow: { tools: ['*'], prompts: ['*'], resources: ['*'] } }",
            "    - { principals: ['*'], deny: { tools: ['*__delete_*'] } }",
        ]));
        let authz = &config.authorization;
        assert_eq!(authz.default, Decision::Deny);
        assert_eq!(authz.rules.len(), 3);
        assert_eq!(
            PrincipalMatcher::parse(&authz.rules[1].principals[0]),
            Ok(PrincipalMatcher::Claim { name: "role".into(), value: "admin".into() })
        );
        assert_eq!(authz.rules[2].deny.as_ref().map(|d| d.tools.clone()), Some(vec!["*__delete_*".to_owned()]));
    }

    #[test]
    fn bad_authorization_rules_are_reported_at_their_line() {
        let found = issues(&with_upstream(&[
            "authorization:",
            "  rules:",
            "    - principals: [ci]",
            "    - principals: ['claim:role']",
            "      allow: { tools: [''] }",
            "    - principals: []",
            "      deny: {}",
            "    - { principals: [ci], allow: { tool: ['x'] } }",
        ]));
        assert_eq!(found.len(), 6, "{found:#?}");
        assert_issue(&found[0], 3, "authorization.rules[0]", "needs `allow` or `deny`");
        assert_issue(&found[1], 4, "authorization.rules[1].principals[0]", "expected claim:<name>=<value>");
        assert_issue(&found[2], 5, "authorization.rules[1].allow.tools[0]", "must not be empty");
        assert_issue(&found[3], 6, "authorization.rules[2].principals", "at least one principal");
        assert_issue(&found[4], 7, "authorization.rules[2].deny", "must list tools, prompts, resources or upstreams");
        assert_issue(&found[5], 8, "authorization.rules[3].allow", "unknown field `tool`");
    }

    #[test]
    fn conditions_upstreams_and_scopes_are_checked_at_their_line() {
        let config = ok(&with_upstream(&[
            "authorization:",
            "  rules:",
            "    - principals: ['*']",
            "      deny: { upstreams: [vault] }",
            "      when: \"args.path.startsWith('/etc')\"",
        ]));
        assert_eq!(
            config.authorization.rules[0].deny.as_ref().map(|d| d.upstreams.clone()),
            Some(vec!["vault".into()])
        );
        let found = issues(&with_upstream(&[
            "auth:",
            "  required_scopes: ['a b']",
            "  api_keys:",
            "    - { name: ci, key: 0123456789abcdef0, scopes: ['x\"'] }",
            "authorization:",
            "  rules:",
            "    - principals: ['*']",
            "      allow: { upstreams: [''] }",
            "      when: \"args.path ==\"",
        ]));
        assert_eq!(found.len(), 4, "{found:#?}");
        assert_issue(&found[0], 2, "auth.required_scopes[0]", "is not a scope");
        assert_issue(&found[1], 4, "auth.api_keys[0].scopes[0]", "is not a scope");
        assert_issue(&found[2], 8, "authorization.rules[0].allow.upstreams[0]", "must not be empty");
        assert_issue(&found[3], 9, "authorization.rules[0].when", "not a CEL expression: <input>:1:13: Syntax error");
    }
}

use super::{assert_issue, issues, ok, with_upstream};
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
    assert_eq!(config.authorization.rules[0].deny.as_ref().map(|d| d.upstreams.clone()), Some(vec!["vault".into()]));
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

//! The `auth:` section: each rule reported at its line and field.

use super::{assert_issue, issues, ok, with_upstream};

#[test]
fn api_keys_are_named_uniquely_with_exactly_one_credential() {
    let found = issues(&with_upstream(&[
        "auth:",
        "  api_keys:",
        "    - { name: ci, key: short }",
        "    - { name: ci, sha256: abc }",
        "    - { name: '', key: 0123456789abcdef, sha256: '' }",
        "    - name: none",
    ]));
    assert_eq!(found.len(), 6, "{found:#?}");
    assert_issue(&found[0], 3, "auth.api_keys[0].key", "at least 16 characters");
    assert_issue(&found[1], 4, "auth.api_keys[1].name", "duplicate API key name \"ci\"");
    assert_issue(&found[2], 4, "auth.api_keys[1].sha256", "64 hex digits");
    assert_issue(&found[3], 5, "auth.api_keys[2].name", "must not be empty");
    assert_issue(&found[4], 5, "auth.api_keys[2]", "not both");
    assert_issue(&found[5], 6, "auth.api_keys[3]", "give key or sha256");
}

#[test]
fn auth_needs_a_key_and_valid_metadata_urls() {
    let found = issues(&with_upstream(&[
        "auth:",
        "  resource_metadata:",
        "    resource: gw.example/mcp",
        "    authorization_servers: ['https://idp.example', 'ftp://x']",
    ]));
    assert_eq!(found.len(), 3, "{found:#?}");
    assert_issue(&found[0], 1, "auth.api_keys", "at least one API key");
    assert_issue(&found[1], 3, "auth.resource_metadata.resource", "not an http(s) URL");
    assert_issue(&found[2], 4, "auth.resource_metadata.authorization_servers[1]", "not an http(s) URL");
}

#[test]
fn the_metadata_resource_defaults_to_an_http_audience_and_is_otherwise_missing() {
    let config = ok(&with_upstream(&[
        "auth:",
        "  jwt: { issuer: 'https://idp.example', audience: 'https://gw.example/mcp', jwks_url: 'https://idp.example/jwks' }",
        "  resource_metadata: { authorization_servers: ['https://idp.example'] }",
    ]));
    let meta = config.auth.and_then(|a| a.resource_metadata).unwrap_or_default();
    assert_eq!(meta.resource, "https://gw.example/mcp");
    let found = issues(&with_upstream(&[
        "auth:",
        "  jwt: { issuer: 'https://idp.example', audience: 'urn:gw', jwks_url: 'https://idp.example/jwks' }",
        "  resource_metadata:",
        "    scopes_supported: [tools]",
    ]));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_issue(&found[0], 3, "auth.resource_metadata.resource", "missing");
}

#[test]
fn a_full_auth_section_is_accepted() {
    let sha = format!("    - {{ name: ops, sha256: {} }}", "aB".repeat(32));
    let config = ok(&with_upstream(&[
        "auth:",
        "  api_keys:",
        "    - { name: ci, key: 0123456789abcdef }",
        &sha,
        "  resource_metadata:",
        "    resource: https://gw.example/mcp",
        "    authorization_servers: [https://idp.example]",
        "    scopes_supported: [tools]",
    ]));
    let auth = config.auth.unwrap_or_default();
    assert_eq!(auth.api_keys.len(), 2);
    assert!(ok(&with_upstream(&[])).auth.is_none());
}

#[test]
fn jwt_needs_issuer_audience_one_jwks_source_and_public_key_algorithms() {
    let found = issues(&with_upstream(&[
        "auth:",
        "  jwt:",
        "    issuer: ''",
        "    jwks_file: /k.json",
        "    jwks_url: https://idp.example/jwks",
        "    algorithms: [RS256, HS256, none]",
    ]));
    assert_eq!(found.len(), 5, "{found:#?}");
    assert_issue(&found[0], 2, "auth.jwt.audience", "must not be empty");
    assert_issue(&found[1], 2, "auth.jwt", "not both");
    assert_issue(&found[2], 3, "auth.jwt.issuer", "must not be empty");
    assert_issue(&found[3], 6, "auth.jwt.algorithms[1]", "\"HS256\" is not a public-key algorithm");
    assert_issue(&found[4], 6, "auth.jwt.algorithms[2]", "\"none\" is not a public-key algorithm");
    let config = ok(&with_upstream(&[
        "auth:",
        "  jwt: { issuer: 'https://idp.example', audience: 'https://gw.example/mcp', jwks_url: 'https://idp.example/jwks' }",
    ]));
    let jwt = config.auth.and_then(|a| a.jwt).unwrap_or_default();
    assert_eq!((jwt.algorithms.len(), jwt.leeway.as_secs()), (2, 30));
}

#[test]
fn api_keys_expand_variables_and_an_unset_one_is_an_error_at_its_key() {
    let config = ok(&with_upstream(&["auth:", "  api_keys:", "    - { name: ci, key: '${TOKEN}-0123456789abcdef' }"]));
    let auth = config.auth.expect("auth");
    assert_eq!(auth.api_keys[0].key.as_deref(), Some("secret-0123456789abcdef"));
    let found = issues(&with_upstream(&["auth:", "  api_keys:", "    - { name: ci, key: '${CI_KEY}' }"]));
    assert!(!found.is_empty());
    assert_issue(&found[0], 3, "auth.api_keys[0].key", "environment variable CI_KEY is not set");
}

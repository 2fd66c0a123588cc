//! The guards: CORS, and the per-principal session and in-flight caps.

use std::time::Duration;

use super::{assert_issue, assert_one, issues, ok, with_upstream};
use crate::config::{Config, CorsConfig};

#[test]
fn guards_are_off_by_default() {
    let c = Config::default();
    assert_eq!(c.security.cors, CorsConfig::default());
    assert!(c.security.cors.allowed_origins.is_empty());
    assert_eq!(c.security.cors.max_age, Duration::from_secs(600));
    assert!(!c.security.cors.allow_credentials);
    assert_eq!(c.session.max_sessions_per_principal, 0);
    assert_eq!(c.limits.max_in_flight_per_principal, 0);
}

#[test]
fn guards_parse() {
    let c = ok(&with_upstream(&[
        "security:",
        "  cors: { allowed_origins: ['https://app.example.com', 'http://localhost:5173'], max_age: 1h, allow_credentials: true }",
        "session: { max_sessions_per_principal: 64 }",
        "limits: { max_in_flight_per_principal: 32 }",
    ]));
    let cors = &c.security.cors;
    assert_eq!(cors.allowed_origins, ["https://app.example.com", "http://localhost:5173"]);
    assert_eq!(cors.max_age, Duration::from_secs(3600));
    assert!(cors.allow_credentials);
    assert_eq!(c.session.max_sessions_per_principal, 64);
    assert_eq!(c.limits.max_in_flight_per_principal, 32);
    ok(&with_upstream(&["security:", "  cors: { allowed_origins: ['*'], max_age: 0s }"]));
}

#[test]
fn bad_cors_values_are_reported_at_their_line() {
    let found = issues(&with_upstream(&[
        "security:",
        "  cors:",
        "    allowed_origins:",
        "      - '*'",
        "      - app.example.com",
        "      - https://app.example.com/path",
        "    max_age: 2d",
        "    allow_credentials: true",
    ]));
    assert_eq!(found.len(), 4, "{found:#?}");
    assert_issue(&found[0], 5, "security.cors.allowed_origins[1]", "not an origin");
    assert_issue(&found[1], 6, "security.cors.allowed_origins[2]", "not an origin");
    assert_issue(&found[2], 7, "security.cors.max_age", "at most 24h");
    assert_issue(&found[3], 8, "security.cors.allow_credentials", "contains \"*\"");
    assert_one(
        &with_upstream(&["security:", "  cors: { allowed_origin: ['*'] }"]),
        2,
        "security.cors",
        "unknown field `allowed_origin`",
    );
    assert_one(&with_upstream(&["security:", "  cors:", "    max_age: soon"]), 3, "security.cors.max_age", "invalid");
}

#[test]
fn per_principal_caps_are_counts() {
    assert_one(
        &with_upstream(&["session:", "  max_sessions_per_principal: -1"]),
        2,
        "session.max_sessions_per_principal",
        "expected usize",
    );
    assert_one(
        &with_upstream(&["limits:", "  max_in_flight_per_principal: many"]),
        2,
        "limits.max_in_flight_per_principal",
        "invalid type",
    );
}

//! The `admin:` and `shutdown:` sections.

use std::time::Duration;

use super::{assert_issue, assert_one, issues, ok, with_upstream};

#[test]
fn the_admin_token_comes_from_the_file_or_the_environment_and_is_long_enough() {
    let config = ok(&with_upstream(&["admin:", "  token: 0123456789abcdef"]));
    assert_eq!(config.admin.token.as_deref(), Some("0123456789abcdef"));
    let config = ok(&with_upstream(&["admin:", "  token: ${TOKEN}-and-some-more"]));
    assert_eq!(config.admin.token.as_deref(), Some("secret-and-some-more"));
    assert_eq!(ok(&with_upstream(&[])).admin.token, None);
    assert_one(&with_upstream(&["admin:", "  token: short"]), 2, "admin.token", "at least 16 characters");
    assert_one(&with_upstream(&["admin:", "  token: ${TOKEN}"]), 2, "admin.token", "at least 16 characters");
    assert_one(&with_upstream(&["admin:", "  token: '0123456789 abcdef'"]), 2, "admin.token", "printable ASCII");
    assert_one(&with_upstream(&["admin:", "  token: ${NOPE}"]), 2, "admin.token", "NOPE is not set");
    assert_one(&with_upstream(&["admin:", "  key: x"]), 2, "admin", "unknown field `key`");
}

#[test]
fn shutdown_waits_are_durations_of_at_most_an_hour() {
    let defaults = ok(&with_upstream(&[])).shutdown;
    assert_eq!((defaults.grace, defaults.drain_delay), (Duration::from_secs(10), Duration::ZERO));
    let config = ok(&with_upstream(&["shutdown:", "  grace: 30s", "  drain_delay: 5s"]));
    assert_eq!((config.shutdown.grace, config.shutdown.drain_delay), (Duration::from_secs(30), Duration::from_secs(5)));
    let found = issues(&with_upstream(&["shutdown:", "  grace: 2h", "  drain_delay: 61m"]));
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_issue(&found[0], 2, "shutdown.grace", "at most 1h");
    assert_issue(&found[1], 3, "shutdown.drain_delay", "at most 1h");
}

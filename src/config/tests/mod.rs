//! Tests for loading and validating configuration. Documents are built line by line
//! with [`doc`] so the expected line numbers can be read off the source.

mod auth;
mod authorization;
mod collect;
mod files;
mod guards;
mod load;
mod locate;
mod mcp_servers;
mod operations;
mod tools;
mod trace;
mod validation;

use super::{Config, ConfigError, ConfigIssue};

/// Joins `lines` into a YAML document; `lines[i]` is line `i + 1`.
pub(super) fn doc(lines: &[&str]) -> String {
    lines.join("\n") + "\n"
}

/// A stand-in environment: `TOKEN=secret`, `EMPTY=` and nothing else.
pub(super) fn env(name: &str) -> Option<String> {
    match name {
        "TOKEN" => Some("secret".to_owned()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

pub(super) fn parse(lines: &[&str]) -> Result<Config, ConfigError> {
    Config::parse_with_env(&doc(lines), "t.yaml", &env)
}

/// Parses a document that must be valid.
pub(super) fn ok(lines: &[&str]) -> Config {
    parse(lines).unwrap_or_else(|err| panic!("expected a valid config, got:\n{err}"))
}

/// Parses a document that must be invalid and returns its issues.
pub(super) fn issues(lines: &[&str]) -> Vec<ConfigIssue> {
    match parse(lines) {
        Ok(config) => panic!("expected an error, got {config:#?}"),
        Err(err) => err.errors().to_vec(),
    }
}

/// Asserts that the document has exactly one issue, at `line` and `field`, whose
/// message contains `message`.
#[track_caller]
pub(super) fn assert_one(lines: &[&str], line: usize, field: &str, message: &str) {
    let found = issues(lines);
    assert_eq!(found.len(), 1, "expected one issue, got {found:#?}");
    assert_issue(&found[0], line, field, message);
}

#[track_caller]
pub(super) fn assert_issue(issue: &ConfigIssue, line: usize, field: &str, message: &str) {
    assert_eq!((issue.line, issue.field.as_str()), (Some(line), field), "{issue:?}");
    assert!(issue.message.contains(message), "message {:?} should contain {message:?}", issue.message);
}

/// The smallest valid upstream list, to append to documents testing other sections.
pub(super) const ONE_UPSTREAM: [&str; 3] = ["upstreams:", "  - name: a", "    command: x"];

/// `head` followed by [`ONE_UPSTREAM`].
pub(super) fn with_upstream<'a>(head: &[&'a str]) -> Vec<&'a str> {
    let mut lines = head.to_vec();
    lines.extend(ONE_UPSTREAM);
    lines
}

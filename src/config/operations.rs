//! Operating the gateway: who may use the admin API (`admin:`) and how it shuts down
//! (`shutdown:`).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::locate::{FieldPath, Problem};
use super::schema::HumanDuration;

/// Shortest admin token accepted (characters).
const MIN_TOKEN_CHARS: usize = 16;
/// Longest grace period or drain delay accepted.
const MAX_SHUTDOWN_WAIT: Duration = Duration::from_secs(3600);

/// The admin API (`/admin/...` on `admin_listen`): breakers forced open or closed,
/// endpoints ejected, the configuration in force. `/healthz`, `/readyz`, `/metrics` and
/// the status page are not part of it and stay open to probes and scrapers.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// The bearer token every admin API request must carry (`Authorization: Bearer
    /// <token>`), from any address, loopback included; at least 16 characters. `${VAR}`
    /// takes it from the environment. Without one, the admin API answers loopback
    /// clients only and refuses every other address with 403. Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// Graceful shutdown on SIGTERM or SIGINT: `/readyz` answers 503 at once; after
/// `drain_delay` the MCP listener stops accepting connections; requests in flight get
/// up to `grace` to finish, and those still running then are answered -32014; then the
/// sessions end (upstream sessions are closed) and the stdio processes stop. A second
/// signal ends the grace period at once.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ShutdownConfig {
    /// How long requests in flight may take to finish once the listener has stopped
    /// accepting (duration, at most 1h). Default `10s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub grace: Duration,
    /// How long `/readyz` answers 503 before the listener stops accepting, so that load
    /// balancers stop sending new connections first (duration, at most 1h); requests
    /// keep being served meanwhile. Default `0s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub drain_delay: Duration,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig { grace: Duration::from_secs(10), drain_delay: Duration::ZERO }
    }
}

/// Checks the `admin:` and `shutdown:` sections.
pub(crate) fn check_operations(admin: &AdminConfig, shutdown: &ShutdownConfig, out: &mut Vec<Problem>) {
    // A `${VAR}` left in it could not be expanded, which is reported already.
    if let Some(token) = admin.token.as_ref().filter(|t| !t.contains("${")) {
        let at = FieldPath::root().key("admin").key("token");
        if token.chars().count() < MIN_TOKEN_CHARS {
            out.push(Problem::new(at, format!("must be at least {MIN_TOKEN_CHARS} characters")));
        } else if !token.bytes().all(|b| b.is_ascii_graphic()) {
            out.push(Problem::new(at, "must be printable ASCII without spaces (it travels in a header)"));
        }
    }
    let at = FieldPath::root().key("shutdown");
    for (field, value) in [("grace", shutdown.grace), ("drain_delay", shutdown.drain_delay)] {
        if value > MAX_SHUTDOWN_WAIT {
            out.push(Problem::new(at.key(field), "must be at most 1h"));
        }
    }
}

#[cfg(test)]
mod tests {
    //! The `admin:` and `shutdown:` sections.

    use std::time::Duration;

    use crate::config::test_support::{assert_issue, assert_one, issues, ok, with_upstream};

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
        assert_eq!(
            (config.shutdown.grace, config.shutdown.drain_delay),
            (Duration::from_secs(30), Duration::from_secs(5))
        );
        let found = issues(&with_upstream(&["shutdown:", "  grace: 2h", "  drain_delay: 61m"]));
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_issue(&found[0], 2, "shutdown.grace", "at most 1h");
        assert_issue(&found[1], 3, "shutdown.drain_delay", "at most 1h");
    }
}

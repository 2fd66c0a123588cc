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

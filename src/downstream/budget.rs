//! The file-descriptor budget. Every client connection is a descriptor, every session
//! may keep one connection per HTTP upstream (its GET stream, once its client listens),
//! and upstream requests and stdio processes need their own; when the process runs
//! out, `accept` fails and every listener goes silent. So at start seawall raises its soft `RLIMIT_NOFILE` to the hard
//! limit, and lowers `limits.max_connections` and `session.max_sessions` when the limit
//! cannot hold them next to what upstreams, the admin listener and the process need.

use crate::config::{Config, StdioShare, UpstreamKind};

/// Descriptors kept for the process itself (standard streams, listeners, the event
/// loop, signal and DNS machinery, logs).
const RESERVED: u64 = 64;
/// Connections the admin listener accepts, counted apart from client connections so
/// that `/healthz` answers while clients saturate theirs.
pub(crate) const ADMIN_CONNECTIONS: usize = 32;
/// Descriptors of one stdio upstream process (three pipes and a spare).
const PER_PROCESS: u64 = 4;
/// Ceiling when the hard limit is unlimited (Linux refuses an unlimited soft limit).
const UNLIMITED_CEILING: u64 = 1 << 20;

/// How many client connections and sessions fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Effective `limits.max_connections`.
    pub(crate) max_connections: usize,
    /// Effective `session.max_sessions`.
    pub(crate) max_sessions: usize,
}

/// Raises the soft open-file limit to the hard one where allowed, logs both, and
/// returns the soft limit in effect (`None` when it cannot be read).
pub(crate) fn raise_nofile_limit() -> Option<u64> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    let target = if hard == nix::sys::resource::RLIM_INFINITY { UNLIMITED_CEILING.max(soft) } else { hard };
    if target > soft {
        match setrlimit(Resource::RLIMIT_NOFILE, target, hard) {
            Ok(()) => {
                tracing::info!(soft = target, was = soft, hard, "raised the open-file limit");
                return Some(target);
            }
            Err(e) => tracing::warn!(soft, hard, error = %e, "could not raise the open-file limit"),
        }
    } else {
        tracing::info!(soft, hard, "open-file limit");
    }
    Some(soft)
}

/// Fits the configured connection and session caps into `nofile` descriptors.
pub(crate) fn plan(config: &Config, nofile: u64) -> Budget {
    let mut upstream_fds = 0u64;
    let mut per_session = 0u64;
    for up in &config.upstreams {
        match up.kind() {
            UpstreamKind::Http { .. } | UpstreamKind::Sse { .. } => {
                let concurrency = up.concurrency(&config.defaults.concurrency);
                upstream_fds += concurrency.max_in_flight as u64 * (1 + up.endpoints.len() as u64);
                per_session += 1;
            }
            UpstreamKind::Stdio { share: StdioShare::Shared, .. } => upstream_fds += PER_PROCESS,
            UpstreamKind::Stdio { share: StdioShare::PerSession, .. } => {
                upstream_fds += PER_PROCESS * up.max_processes as u64;
            }
        }
    }
    let configured =
        Budget { max_connections: config.limits.max_connections, max_sessions: config.session.max_sessions };
    let available = nofile.saturating_sub(RESERVED + ADMIN_CONNECTIONS as u64 + upstream_fds);
    let wanted = configured.max_connections as u64 + configured.max_sessions as u64 * per_session;
    if wanted <= available {
        return configured;
    }
    // Connections get half of what is left when sessions need descriptors too.
    let connection_share = if per_session == 0 { available } else { available / 2 };
    let max_connections = configured.max_connections.min(to_usize(connection_share)).max(1);
    let session_share = available.saturating_sub(max_connections as u64) / per_session.max(1);
    let max_sessions = if per_session == 0 {
        configured.max_sessions
    } else {
        configured.max_sessions.min(to_usize(session_share)).max(1)
    };
    let budget = Budget { max_connections, max_sessions };
    tracing::warn!(
        nofile,
        max_connections = budget.max_connections,
        max_sessions = budget.max_sessions,
        configured_connections = configured.max_connections,
        configured_sessions = configured.max_sessions,
        "lowered limits.max_connections / session.max_sessions to fit the open-file limit"
    );
    budget
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::UpstreamConfig;

    fn config(http: bool) -> Config {
        let up = if http {
            UpstreamConfig { name: "h".into(), url: Some("http://127.0.0.1:1/mcp".into()), ..Default::default() }
        } else {
            UpstreamConfig { name: "s".into(), command: Some("x".into()), ..Default::default() }
        };
        Config { upstreams: vec![up], ..Default::default() }
    }

    #[test]
    fn a_large_limit_keeps_the_configuration() {
        let c = config(true);
        let b = plan(&c, 1 << 20);
        assert_eq!(b, Budget { max_connections: 4096, max_sessions: 4096 });
    }

    #[test]
    fn a_small_limit_lowers_both_caps_below_it() {
        let c = config(true);
        let b = plan(&c, 1024);
        // 1024 - 64 reserved - 32 admin - 64 upstream requests = 864.
        assert_eq!(b.max_connections, 432);
        assert_eq!(b.max_sessions, 432);
        assert!(b.max_connections + b.max_sessions + 64 + 32 + 64 <= 1024);
    }

    #[test]
    fn sessions_without_http_upstreams_cost_no_descriptor() {
        let c = config(false);
        let b = plan(&c, 256);
        assert_eq!(b, Budget { max_connections: 256 - 64 - 32 - 4, max_sessions: 4096 });
    }
}

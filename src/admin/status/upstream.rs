//! One upstream in `/status.json`: its kind, era, endpoints or process, breakers and
//! recent traffic, the health they add up to, and its tools when asked for.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use super::breaker::{Breaker, StateCounts, millis, rate, severity};
use crate::resilience::breaker::{Breakers, State};
use crate::session::{Session, Slot};
use crate::telemetry::recent;
use crate::upstream::http::EraStatus;
use crate::upstream::registry::{Connector, UpstreamHandle};

/// Requests and errors per bucket, oldest first.
#[derive(Debug, Serialize)]
pub(super) struct Series {
    requests: Vec<u64>,
    errors: Vec<u64>,
}

impl From<recent::Counts> for Series {
    fn from(c: recent::Counts) -> Series {
        Series { requests: c.requests, errors: c.errors }
    }
}

/// How an upstream, or the gateway, is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Health {
    /// Nothing refuses calls.
    Ok,
    /// Part of it refuses calls or is out of service: a tool's breaker, an ejected
    /// endpoint, a half-open breaker, a process starting.
    Degraded,
    /// Calls to it fail: its own breaker is open or its process is down.
    Failing,
}

#[derive(Debug, Serialize)]
pub(super) struct Upstream {
    name: String,
    /// `http`, `sse` or `stdio`.
    kind: &'static str,
    /// stdio: `shared` or `per_session`.
    #[serde(skip_serializing_if = "Option::is_none")]
    share: Option<&'static str>,
    pub(super) state: Health,
    era: Era,
    endpoints: Vec<Endpoint>,
    #[serde(skip_serializing_if = "Option::is_none")]
    process: Option<Process>,
    tools: ToolCounts,
    /// The upstream's own breaker; `null` before its first call.
    breaker: Option<Breaker>,
    recent: Series,
}

#[derive(Debug, Serialize)]
struct Era {
    /// `auto`, `modern` or `legacy` (HTTP+SSE and stdio always speak the session era).
    protocol: &'static str,
    /// With `auto`: `unknown`, `legacy_only` or `modern_only`.
    detected: Option<&'static str>,
    /// The era of the last successful handshake: `legacy` or `modern`.
    speaking: Option<&'static str>,
    /// The protocol version of a shared stdio process, once it answered `initialize`.
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
}

impl From<EraStatus> for Era {
    fn from(e: EraStatus) -> Era {
        Era { protocol: e.protocol, detected: e.detected, speaking: e.speaking, version: None }
    }
}

#[derive(Debug, Serialize)]
struct Endpoint {
    /// The URL without user information, query or fragment.
    url: String,
    ejected: bool,
    /// Who ejected it: `operator` (until restored) or `outlier_detection` (for
    /// `ejected_for_ms`); `null` while it is not ejected.
    ejected_by: Option<&'static str>,
    ejected_for_ms: Option<u64>,
    ejections: u32,
    consecutive_failures: u32,
    in_flight: usize,
    era: Era,
}

#[derive(Debug, Serialize)]
struct Process {
    /// Shared: `starting`, `running`, `down` or `stopped`. Per session: `per_session`.
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    restarts: Option<u64>,
    /// Shared, down after a failed start: that process's exit status, when it exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_status: Option<String>,
    /// Shared, down after a failed start: the last lines it wrote on stderr, sanitised.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    stderr: Vec<String>,
    /// Per session: processes running now (one per session linked to the upstream).
    #[serde(skip_serializing_if = "Option::is_none")]
    running: Option<usize>,
    /// Per session: how many more may start.
    #[serde(skip_serializing_if = "Option::is_none")]
    available: Option<usize>,
}

#[derive(Debug, Default, Serialize)]
struct ToolCounts {
    /// Tools the upstream listed.
    listed: usize,
    /// Its tools' breakers by state.
    breakers: StateCounts,
}

/// One tool of the upstream asked for with `?upstream=`.
#[derive(Debug, Serialize)]
pub(super) struct Tool {
    tool: String,
    /// Whether the upstream listed it (a tool may have a breaker from calls alone).
    listed: bool,
    /// Its breaker's state; `null` while it has none (never called, or beyond the
    /// upstream's tool breaker limit).
    state: Option<&'static str>,
    for_ms: Option<u64>,
    failure_rate: Option<f64>,
    calls: u32,
    failures: u32,
}

/// What one pass over the breakers found per upstream.
#[derive(Default)]
pub(super) struct UpstreamBreakers {
    pub(super) own: Option<Breaker>,
    pub(super) tools: StateCounts,
}

pub(super) fn upstream(
    handle: &UpstreamHandle,
    found: UpstreamBreakers,
    sessions: &[Arc<Session>],
    recent: recent::Counts,
) -> Upstream {
    let session_era = |speaking| Era { protocol: "legacy", detected: None, speaking, version: None };
    let (kind, share, era, endpoints, process) = match &handle.connector {
        Connector::Http(pool) => {
            let endpoints: Vec<Endpoint> = pool
                .endpoints()
                .into_iter()
                .map(|e| {
                    let era = e.upstream.era();
                    Endpoint {
                        url: shown_url(e.upstream.url()),
                        ejected: e.held_out || e.ejected_for.is_some(),
                        ejected_by: if e.held_out {
                            Some("operator")
                        } else {
                            e.ejected_for.map(|_| "outlier_detection")
                        },
                        ejected_for_ms: e.ejected_for.map(millis),
                        ejections: e.ejections,
                        consecutive_failures: e.consecutive_failures,
                        in_flight: e.in_flight,
                        era: era.into(),
                    }
                })
                .collect();
            // Replicas of one server: the first one's era stands for the upstream's.
            let era = pool.first().map_or_else(|| session_era(None), |up| up.era().into());
            ("http", None, era, endpoints, None)
        }
        Connector::Sse(_) => ("sse", None, session_era(Some("legacy")), Vec::new(), None),
        Connector::SharedStdio(link) => {
            let status = link.status();
            let running = status.state == "running";
            let version = link.init_result().map(|i| i.protocol_version.clone());
            let era = Era { version, ..session_era(running.then_some("legacy")) };
            let process = Process {
                state: status.state,
                reason: status.reason,
                restarts: Some(status.restarts),
                exit_status: status.exit_status,
                stderr: status.stderr,
                running: None,
                available: None,
            };
            ("stdio", Some("shared"), era, Vec::new(), Some(process))
        }
        Connector::PerSessionStdio(_, processes) => {
            let running = sessions.iter().filter(|s| matches!(s.slot(&handle.name), Some(Slot::Up(_)))).count();
            let process = Process {
                state: "per_session",
                reason: None,
                restarts: None,
                exit_status: None,
                stderr: Vec::new(),
                running: Some(running),
                available: Some(processes.available_permits()),
            };
            ("stdio", Some("per_session"), session_era(Some("legacy")), Vec::new(), Some(process))
        }
    };
    let state = health(found.own.as_ref(), found.tools, &endpoints, process.as_ref());
    Upstream {
        name: handle.name.to_string(),
        kind,
        share,
        state,
        era,
        endpoints,
        process,
        tools: ToolCounts { listed: handle.policy.catalog.len(), breakers: found.tools },
        breaker: found.own,
        recent: recent.into(),
    }
}

/// Failing when its own breaker is open or its shared process is down; degraded when
/// anything of it refuses some calls or is out of service.
fn health(own: Option<&Breaker>, tools: StateCounts, endpoints: &[Endpoint], process: Option<&Process>) -> Health {
    let own_state = own.map_or("closed", Breaker::state);
    let process_state = process.map_or("running", |p| p.state);
    if own_state == "open" || matches!(process_state, "down" | "stopped") {
        return Health::Failing;
    }
    let degraded = own_state == "half_open"
        || tools.open + tools.half_open > 0
        || endpoints.iter().any(|e| e.ejected)
        || process_state == "starting"
        || process.and_then(|p| p.available).is_some_and(|free| free == 0);
    if degraded { Health::Degraded } else { Health::Ok }
}

/// The URL as shown: scheme, host, port and path only (credentials or tokens put in a
/// URL stay out of the page).
fn shown_url(url: &url::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// Every tool of `handle` that it listed or that has a breaker: not closed first.
pub(super) fn tools_of(handle: &UpstreamHandle, breakers: &Breakers) -> Vec<Tool> {
    let mut tools: HashMap<String, Tool> = handle
        .policy
        .catalog
        .names()
        .into_iter()
        .map(|name| {
            let tool = Tool {
                tool: name.clone(),
                listed: true,
                state: None,
                for_ms: None,
                failure_rate: None,
                calls: 0,
                failures: 0,
            };
            (name, tool)
        })
        .collect();
    breakers.for_each_snapshot(Some(&handle.name), |key, s| {
        let Some(name) = key.tool.as_deref() else { return };
        let shown = if s.state == State::Closed { s.window } else { s.tripped.map_or(s.window, |t| t.window) };
        let entry = tools.entry(name.to_owned()).or_insert_with(|| Tool {
            tool: name.to_owned(),
            listed: false,
            state: None,
            for_ms: None,
            failure_rate: None,
            calls: 0,
            failures: 0,
        });
        entry.state = Some(s.state.as_str());
        entry.for_ms = Some(millis(s.in_state));
        entry.failure_rate = rate(shown);
        entry.calls = shown.calls;
        entry.failures = shown.failures;
    });
    let mut tools: Vec<Tool> = tools.into_values().collect();
    tools.sort_by(|a, b| {
        let rank = |t: &Tool| t.state.map_or(3, severity);
        (rank(a), &a.tool).cmp(&(rank(b), &b.tool))
    });
    tools
}

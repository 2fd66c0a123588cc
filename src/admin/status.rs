//! `/status.json`: the gateway, its upstreams, their breakers and the last 15 minutes
//! of traffic, in one document that the status page and scripts share.
//!
//! It stays small however many tools there are: breakers are counted per upstream and
//! only those not closed are listed (all of them with `?all=1`), and one upstream's
//! tools are listed only when asked for (`?upstream=NAME`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::resilience::breaker::transition::Reason;
use crate::resilience::breaker::{BreakerKey, Breakers, Hold, Snapshot, State, Totals};
use crate::session::{Session, Slot};
use crate::telemetry::recent::{self, Recent};
use crate::upstream::http::EraStatus;
use crate::upstream::registry::{Connector, UpstreamHandle, Upstreams};

/// The query of `/status.json`, as sent.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawQuery {
    all: Option<String>,
    upstream: Option<String>,
}

/// What `/status.json` was asked for.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Query {
    /// List every breaker, closed ones included.
    pub all: bool,
    /// Also list this upstream's tools.
    pub upstream: Option<String>,
}

impl TryFrom<RawQuery> for Query {
    type Error = String;

    fn try_from(raw: RawQuery) -> Result<Query, String> {
        let all = match raw.all.as_deref() {
            None | Some("0" | "false") => false,
            Some("" | "1" | "true") => true,
            Some(_) => return Err("all: expected 1 or 0".to_owned()),
        };
        Ok(Query { all, upstream: raw.upstream })
    }
}

/// What the document is made of.
pub(crate) struct Sources<'a> {
    /// Every upstream, in configuration order.
    pub upstreams: &'a Upstreams,
    /// Every breaker.
    pub breakers: &'a Breakers,
    /// The live client sessions.
    pub sessions: Vec<Arc<Session>>,
    /// The recent requests.
    pub recent: &'a Recent,
    /// When the process started serving.
    pub started: Instant,
    /// The same moment on the wall clock.
    pub started_wall: SystemTime,
}

/// `?upstream=NAME` named no upstream.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct UnknownUpstream;

/// The whole document.
#[derive(Debug, Serialize)]
pub(crate) struct Status {
    gateway: Gateway,
    /// Seconds per bucket of every `recent` series.
    bucket_seconds: u64,
    /// How much of the last bucket (the one in progress) has passed.
    current_bucket_ms: u64,
    recent: Series,
    upstreams: Vec<Upstream>,
    breakers: BreakerList,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<Tool>>,
}

#[derive(Debug, Serialize)]
struct Gateway {
    version: &'static str,
    state: Health,
    uptime_seconds: u64,
    started_unix_ms: u64,
    sessions: Sessions,
}

#[derive(Debug, Serialize)]
struct Sessions {
    total: usize,
    /// By protocol version; the modern era's contexts under `2026-07-28`.
    by_era: BTreeMap<String, usize>,
}

/// Requests and errors per bucket, oldest first.
#[derive(Debug, Serialize)]
struct Series {
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
enum Health {
    /// Nothing refuses calls.
    Ok,
    /// Part of it refuses calls or is out of service: a tool's breaker, an ejected
    /// endpoint, a half-open breaker, a process starting.
    Degraded,
    /// Calls to it fail: its own breaker is open or its process is down.
    Failing,
}

#[derive(Debug, Serialize)]
struct Upstream {
    name: String,
    /// `http`, `sse` or `stdio`.
    kind: &'static str,
    /// stdio: `shared` or `per_session`.
    #[serde(skip_serializing_if = "Option::is_none")]
    share: Option<&'static str>,
    state: Health,
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

#[derive(Debug, Default, Clone, Copy, Serialize)]
struct StateCounts {
    closed: usize,
    open: usize,
    half_open: usize,
}

impl StateCounts {
    fn add(&mut self, state: State) {
        match state {
            State::Closed => self.closed += 1,
            State::Open => self.open += 1,
            State::HalfOpen => self.half_open += 1,
        }
    }
}

#[derive(Debug, Serialize)]
struct BreakerList {
    /// Whether closed breakers are listed too (`?all=1`).
    all: bool,
    /// Every breaker, by state, listed or not.
    #[serde(flatten)]
    counts: StateCounts,
    /// Breakers left out of `listed` beyond [`MAX_LISTED`] (never with `?all=1`).
    unlisted: usize,
    /// Not closed first (open, then half-open), then by upstream and tool.
    listed: Vec<Breaker>,
}

/// Most breakers listed without `?all=1`: an outage that opens thousands of tool
/// breakers at once must not make the document that reports it unbounded.
pub(crate) const MAX_LISTED: usize = 500;

/// One breaker as listed.
#[derive(Debug, Serialize)]
pub(crate) struct Breaker {
    upstream: String,
    /// `null` for the upstream's own breaker.
    tool: Option<String>,
    state: &'static str,
    /// Time in this state.
    for_ms: u64,
    /// Why it entered it (`null` if it never changed state).
    reason: Option<&'static str>,
    /// Open: time until probes may go through.
    retry_in_ms: Option<u64>,
    /// Opens since it last closed.
    opens: u32,
    /// The failure rate that matters now: the one that opened it while it is not closed,
    /// the sliding window's while closed (`null` without calls).
    failure_rate: Option<f64>,
    /// The sliding window now (a breaker that is not closed counts no calls).
    window: Window,
    consecutive_failures: u32,
    /// The last time it opened from closed.
    tripped: Option<Tripped>,
    /// The operator's hold: `{"state": "open", "reason": …}` or `{"state": "closed"}`;
    /// `null` while it follows its automatic rules.
    forced: Option<Forced>,
}

#[derive(Debug, Serialize)]
struct Forced {
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl From<&Hold> for Forced {
    fn from(hold: &Hold) -> Forced {
        match hold {
            Hold::Open { reason } => Forced { state: "open", reason: Some(reason.to_string()) },
            Hold::Closed => Forced { state: "closed", reason: None },
        }
    }
}

#[derive(Debug, Serialize)]
struct Window {
    calls: u32,
    failures: u32,
    slow: u32,
    failure_rate: Option<f64>,
}

impl From<Totals> for Window {
    fn from(t: Totals) -> Window {
        Window { calls: t.calls, failures: t.failures, slow: t.slow, failure_rate: rate(t) }
    }
}

#[derive(Debug, Serialize)]
struct Tripped {
    reason: &'static str,
    ago_ms: u64,
    calls: u32,
    failures: u32,
    slow: u32,
    failure_rate: Option<f64>,
    consecutive_failures: u32,
}

/// One tool of the upstream asked for with `?upstream=`.
#[derive(Debug, Serialize)]
struct Tool {
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

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn rate(t: Totals) -> Option<f64> {
    (t.calls > 0).then(|| f64::from(t.failures) / f64::from(t.calls))
}

/// Every breaker, or `upstream`'s: not closed first, then by upstream and tool.
pub(crate) fn breakers(breakers: &Breakers, upstream: Option<&str>) -> Vec<Breaker> {
    let mut listed = Vec::new();
    breakers.for_each_snapshot(upstream, |key, s| listed.push(breaker(key, s)));
    listed.sort_by(|a, b| (severity(a.state), &a.upstream, &a.tool).cmp(&(severity(b.state), &b.upstream, &b.tool)));
    listed
}

/// One breaker as listed.
pub(crate) fn breaker(key: &BreakerKey, s: &Snapshot) -> Breaker {
    let tripped = s.tripped.map(|t| Tripped {
        reason: t.reason.as_str(),
        ago_ms: millis(t.ago),
        calls: t.window.calls,
        failures: t.window.failures,
        slow: t.window.slow,
        failure_rate: rate(t.window),
        consecutive_failures: t.consecutive_failures,
    });
    let failure_rate = match (s.state, &tripped) {
        (State::Closed, _) | (_, None) => rate(s.window),
        (_, Some(t)) => t.failure_rate,
    };
    Breaker {
        upstream: key.upstream.to_string(),
        tool: key.tool.as_deref().map(str::to_owned),
        state: s.state.as_str(),
        for_ms: millis(s.in_state),
        reason: s.reason.map(Reason::as_str),
        retry_in_ms: s.retry_in.map(millis),
        opens: s.opens,
        failure_rate,
        window: s.window.into(),
        consecutive_failures: s.consecutive_failures,
        tripped,
        forced: s.hold.as_ref().map(Forced::from),
    }
}

impl Breaker {
    /// Its state, as listed (`closed`, `open`, `half_open`).
    pub(crate) fn state(&self) -> &'static str {
        self.state
    }
}

/// Listing order: open, half-open, closed; then by upstream and tool.
fn severity(state: &str) -> u8 {
    match state {
        "open" => 0,
        "half_open" => 1,
        _ => 2,
    }
}

/// What one pass over the breakers found per upstream.
#[derive(Default)]
struct UpstreamBreakers {
    own: Option<Breaker>,
    tools: StateCounts,
}

/// Builds the document; `Err` when `?upstream=` names no upstream.
pub(crate) fn document(src: &Sources<'_>, query: &Query, now: Instant) -> Result<Status, UnknownUpstream> {
    let asked = match &query.upstream {
        Some(name) => Some(src.upstreams.get(name).ok_or(UnknownUpstream)?),
        None => None,
    };
    let mut per_upstream: HashMap<Arc<str>, UpstreamBreakers> = HashMap::new();
    let mut counts = StateCounts::default();
    let mut listed = Vec::new();
    src.breakers.for_each_snapshot(None, |key, s| {
        counts.add(s.state);
        let entry = per_upstream.entry(Arc::clone(&key.upstream)).or_default();
        match key.tool {
            None => entry.own = Some(breaker(key, s)),
            Some(_) => entry.tools.add(s.state),
        }
        if query.all || s.state != State::Closed {
            listed.push(breaker(key, s));
        }
    });
    listed.sort_by(|a, b| (severity(a.state), &a.upstream, &a.tool).cmp(&(severity(b.state), &b.upstream, &b.tool)));
    let unlisted = if query.all { 0 } else { listed.len().saturating_sub(MAX_LISTED) };
    listed.truncate(listed.len() - unlisted);
    let upstreams: Vec<Upstream> = src
        .upstreams
        .iter()
        .map(|handle| {
            let found = per_upstream.remove(&handle.name).unwrap_or_default();
            upstream(handle, found, &src.sessions, src.recent.upstream(&handle.name, now))
        })
        .collect();
    let state = upstreams.iter().map(|u| u.state).max().unwrap_or(Health::Ok);
    let tools = asked.map(|handle| tools_of(handle, src.breakers));
    Ok(Status {
        gateway: Gateway {
            version: env!("CARGO_PKG_VERSION"),
            state,
            uptime_seconds: now.saturating_duration_since(src.started).as_secs(),
            started_unix_ms: src.started_wall.duration_since(UNIX_EPOCH).map(millis).unwrap_or(0),
            sessions: sessions(&src.sessions),
        },
        bucket_seconds: recent::BUCKET.as_secs(),
        current_bucket_ms: millis(src.recent.bucket_elapsed(now)),
        recent: src.recent.total(now).into(),
        upstreams,
        breakers: BreakerList { all: query.all, counts, unlisted, listed },
        tools,
    })
}

fn sessions(all: &[Arc<Session>]) -> Sessions {
    let mut by_era = BTreeMap::new();
    for s in all {
        let modern = crate::mcp::modern::MODERN_VERSIONS.first().copied();
        let era = if s.is_stateless() { modern.unwrap_or(s.version.as_str()) } else { s.version.as_str() };
        *by_era.entry(era.to_owned()).or_insert(0) += 1;
    }
    Sessions { total: all.len(), by_era }
}

fn upstream(
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
    let own_state = own.map_or("closed", |b| b.state);
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
fn shown_url(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// Every tool of `handle` that it listed or that has a breaker: not closed first.
fn tools_of(handle: &UpstreamHandle, breakers: &Breakers) -> Vec<Tool> {
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

#[cfg(test)]
mod tests;

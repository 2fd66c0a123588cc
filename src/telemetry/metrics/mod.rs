//! Every metric seawall exports, with its labels, in one place; `dashboards/` uses exactly
//! these names ([`names`]). Label values are bounded: methods outside the MCP set become `other`,
//! tools are named only when the upstream listed them (else `other`), and no label ever
//! carries a client or session id.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{Counter, Histogram, counter, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

mod names;

use names::*;
pub(crate) use names::{Kind, METRICS};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder (once per process) and returns its handle.
pub(crate) fn install() -> Option<PrometheusHandle> {
    if let Some(h) = HANDLE.get() {
        return Some(h.clone());
    }
    let buckets = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];
    // Every histogram is a duration in seconds, with the same buckets.
    let builder = PrometheusBuilder::new().set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &buckets);
    let builder = match builder {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "metrics buckets rejected; metrics disabled");
            return None;
        }
    };
    match builder.install_recorder() {
        Ok(handle) => {
            describe();
            let _ = HANDLE.set(handle.clone());
            // The configuration the process started with is in force.
            metrics::gauge!(CONFIG_LAST_RELOAD_OK).set(1.0);
            Some(handle)
        }
        Err(e) => {
            tracing::warn!(error = %e, "metrics recorder not installed");
            None
        }
    }
}
/// upstreams it adds.
pub(crate) fn zero(upstreams: &[&str]) {
    const RETRY_REASONS: [&str; 6] =
        ["attempt_timeout", "not_sent", "process_exited", "connection", "http_status", "rate_limited"];
    const GATEWAY_SHED: [&str; 5] = ["gateway", "session", "principal", "sessions", "connections"];
    const LIMITS: [&str; 5] = ["principal", "tool", "upstream", "global", "store"];
    const ORIGINS: [&str; 6] =
        ["client", "policy", "upstream_transport", "upstream_protocol", "upstream_tool", "gateway"];
    for upstream in upstreams {
        let upstream = || upstream.to_string();
        for reason in RETRY_REASONS {
            counter!(RETRIES, "upstream" => upstream(), "reason" => reason).increment(0);
        }
        counter!(RETRY_BUDGET_EXHAUSTED, "upstream" => upstream()).increment(0);
        for scope in ["upstream", "tool"] {
            for to in ["open", "half_open", "closed"] {
                counter!(BREAKER_TRANSITIONS, "upstream" => upstream(), "scope" => scope, "to" => to).increment(0);
                counter!(BREAKER_REMOTE_TRANSITIONS, "upstream" => upstream(), "scope" => scope, "to" => to)
                    .increment(0);
            }
        }
        counter!(LOAD_SHED, "scope" => upstream()).increment(0);
        counter!(UPSTREAM_RESTARTS, "upstream" => upstream()).increment(0);
        counter!(ENDPOINT_EJECTIONS, "upstream" => upstream()).increment(0);
    }
    for scope in GATEWAY_SHED {
        counter!(LOAD_SHED, "scope" => scope).increment(0);
    }
    for scope in LIMITS {
        counter!(RATE_LIMITED, "scope" => scope).increment(0);
    }
    for origin in ORIGINS {
        counter!(ERRORS_REWRITTEN, "origin" => origin).increment(0);
    }
    for result in ["hit", "miss"] {
        counter!(CACHE, "result" => result).increment(0);
    }
    counter!(ACCESS_LOG_DROPPED).increment(0);
    for outcome in ["applied", "invalid", "refused", "failed"] {
        counter!(CONFIG_RELOADS, "outcome" => outcome).increment(0);
    }
    for reason in ["queue_full", "export_failed"] {
        counter!(TRACE_SPANS_DROPPED, "reason" => reason).increment(0);
    }
}

/// One answered client request.
pub fn client_request(method: &str, outcome: &'static str, elapsed: Duration) {
    static COUNTERS: Series<Counter> = Series::new();
    static DURATIONS: Series<Histogram> = Series::new();
    let method = method_label(method);
    COUNTERS.with(
        &[method, outcome],
        || counter!(CLIENT_REQUESTS, "method" => method, "outcome" => outcome),
        |c| c.increment(1),
    );
    DURATIONS.with(
        &[method],
        || histogram!(CLIENT_REQUEST_DURATION, "method" => method),
        |h| h.record(elapsed.as_secs_f64()),
    );
}

/// Times one attempt on an upstream and records it once: with the outcome it ended
/// with, or as `cancelled` when it is dropped unfinished (its deadline passed, the client left).
pub(crate) struct AttemptTimer {
    upstream: std::sync::Arc<str>,
    method: &'static str,
    started: std::time::Instant,
    finished: bool,
}

impl AttemptTimer {
    /// Starts timing an attempt of `method` on `upstream`.
    pub(crate) fn start(upstream: &std::sync::Arc<str>, method: &str) -> AttemptTimer {
        AttemptTimer {
            upstream: std::sync::Arc::clone(upstream),
            method: method_label(method),
            started: std::time::Instant::now(),
            finished: false,
        }
    }

    /// Records the attempt with its outcome.
    pub(crate) fn finish(mut self, outcome: &'static str) {
        self.finished = true;
        self.record(outcome);
    }

    fn record(&self, outcome: &'static str) {
        static DURATIONS: Series<Histogram> = Series::new();
        let (upstream, method) = (&*self.upstream, self.method);
        DURATIONS.with(
            &[upstream, method, outcome],
            || histogram!(ATTEMPT_DURATION, "upstream" => upstream.to_owned(), "method" => method, "outcome" => outcome),
            |h| h.record(self.started.elapsed().as_secs_f64()),
        );
    }
}

impl Drop for AttemptTimer {
    fn drop(&mut self) {
        if !self.finished {
            self.record("cancelled");
        }
    }
}

/// The gauges read when `/metrics` is scraped rather than kept on the request path.
pub(crate) mod observed {
    use metrics::gauge;

    /// Live sessions opened by `front`.
    pub(crate) fn sessions(front: &'static str, n: usize) {
        gauge!(super::SESSIONS, "front" => front).set(n as f64);
    }

    /// Requests in flight to `upstream`.
    pub(crate) fn in_flight(upstream: &str, n: usize) {
        gauge!(super::IN_FLIGHT, "upstream" => upstream.to_owned()).set(n as f64);
    }

    /// Client requests in flight in the gateway.
    pub(crate) fn client_in_flight(n: usize) {
        gauge!(super::CLIENT_IN_FLIGHT).set(n as f64);
    }

    /// The state of the breaker of `tool` of `upstream` (`None`: the upstream's own),
    /// as its name in the logs (`closed`, `half_open`, `open`).
    pub(crate) fn breaker_state(upstream: &str, tool: Option<&str>, state: &str) {
        let value = match state {
            "open" => 2.0,
            "half_open" => 1.0,
            _ => 0.0,
        };
        gauge!(super::BREAKER_STATE, "upstream" => upstream.to_owned(), "tool" => tool.unwrap_or("").to_owned())
            .set(value);
    }
}

/// One answered request to one upstream (also counted in the status page's recent
/// series).
pub fn request(upstream: &str, method: &str, tool: &str, outcome: &'static str, elapsed: Duration) {
    record_request(upstream, method_label(method), tool, outcome, elapsed);
}

/// [`request`] with the method's label already found.
fn record_request(upstream: &str, method: &'static str, tool: &str, outcome: &'static str, elapsed: Duration) {
    static COUNTERS: Series<Counter> = Series::new();
    static DURATIONS: Series<Histogram> = Series::new();
    COUNTERS.with(
        &[upstream, method, tool, outcome],
        || counter!(REQUESTS, "upstream" => upstream.to_owned(), "method" => method, "tool" => tool.to_owned(), "outcome" => outcome),
        |c| c.increment(1),
    );
    DURATIONS.with(
        &[upstream, method, tool],
        || histogram!(REQUEST_DURATION, "upstream" => upstream.to_owned(), "method" => method, "tool" => tool.to_owned()),
        |h| h.record(elapsed.as_secs_f64()),
    );
    super::recent::global().record(upstream, outcome);
}

/// Times one forwarded request and counts it once: with the outcome it finished with,
/// or as `cancelled` when it is dropped unfinished (the client cancelled it).
pub(crate) struct RequestTimer {
    upstream: std::sync::Arc<str>,
    method: &'static str,
    tool: ToolLabel,
    started: std::time::Instant,
    finished: bool,
}

/// The `tool` label of a request's series: a tool is named only once its upstream listed
/// it, so that a client cannot grow the series with names of its own.
pub(crate) enum ToolLabel {
    /// Not a `tools/call` (the empty label).
    None,
    /// A tool its upstream did not list (`other`).
    Unlisted,
    /// A listed tool.
    Listed(std::sync::Arc<str>),
}

impl ToolLabel {
    fn as_str(&self) -> &str {
        match self {
            ToolLabel::None => "",
            ToolLabel::Unlisted => "other",
            ToolLabel::Listed(tool) => tool,
        }
    }
}

impl RequestTimer {
    /// Starts timing a request to `upstream`.
    pub(crate) fn start(upstream: &std::sync::Arc<str>, method: &str, tool: ToolLabel) -> RequestTimer {
        RequestTimer {
            upstream: std::sync::Arc::clone(upstream),
            method: method_label(method),
            tool,
            started: std::time::Instant::now(),
            finished: false,
        }
    }

    /// Counts the request with its outcome.
    pub(crate) fn finish(mut self, outcome: &'static str) {
        self.finished = true;
        record_request(&self.upstream, self.method, self.tool.as_str(), outcome, self.started.elapsed());
    }
}

impl Drop for RequestTimer {
    fn drop(&mut self) {
        if !self.finished {
            record_request(&self.upstream, self.method, self.tool.as_str(), "cancelled", self.started.elapsed());
        }
    }
}

/// One retry.
/// Counts a configuration reload and sets whether the last one was applied.
pub(crate) fn config_reload(outcome: &'static str) {
    counter!(CONFIG_RELOADS, "outcome" => outcome).increment(1);
    metrics::gauge!(CONFIG_LAST_RELOAD_OK).set(if outcome == "applied" { 1.0 } else { 0.0 });
}

pub(crate) fn retry(upstream: &str, reason: &'static str) {
    counter!(RETRIES, "upstream" => upstream.to_owned(), "reason" => reason).increment(1);
}

/// A retry refused by the budget.
pub(crate) fn retry_budget_exhausted(upstream: &str) {
    counter!(RETRY_BUDGET_EXHAUSTED, "upstream" => upstream.to_owned()).increment(1);
}

/// A breaker transition.
pub(crate) fn breaker_transition(upstream: &str, tool_scope: bool, to: &'static str) {
    let scope = if tool_scope { "tool" } else { "upstream" };
    counter!(BREAKER_TRANSITIONS, "upstream" => upstream.to_owned(), "scope" => scope, "to" => to).increment(1);
}

/// A shared breaker's transition repeated from another replica.
pub(crate) fn breaker_remote_transition(upstream: &str, tool_scope: bool, to: &'static str) {
    let scope = if tool_scope { "tool" } else { "upstream" };
    counter!(BREAKER_REMOTE_TRANSITIONS, "upstream" => upstream.to_owned(), "scope" => scope, "to" => to).increment(1);
}

/// Whether shared breakers are subscribed to their Redis.
pub(crate) fn breaker_sharing_connected(connected: bool) {
    metrics::gauge!(BREAKER_SHARING_CONNECTED).set(if connected { 1.0 } else { 0.0 });
}

/// A request refused by load shedding.
pub(crate) fn load_shed(scope: &str) {
    counter!(LOAD_SHED, "scope" => scope.to_owned()).increment(1);
}

/// An access log line dropped.
pub(crate) fn access_log_dropped() {
    counter!(ACCESS_LOG_DROPPED).increment(1);
}

/// `n` finished spans dropped for `reason` (`queue_full` or `export_failed`).
pub(crate) fn trace_spans_dropped(reason: &'static str, n: u64) {
    counter!(TRACE_SPANS_DROPPED, "reason" => reason).increment(n);
}

/// A lookup in the response cache (`hit` or `miss`).
pub(crate) fn cache(result: &'static str) {
    counter!(CACHE, "result" => result).increment(1);
}

/// A request refused by a rate limit of this scope.
pub(crate) fn rate_limited(scope: &'static str) {
    counter!(RATE_LIMITED, "scope" => scope).increment(1);
}

/// A failure rewritten into an answer.
pub(crate) fn error_rewritten(origin: &'static str) {
    counter!(ERRORS_REWRITTEN, "origin" => origin).increment(1);
}

/// A stdio upstream restart, or an HTTP+SSE upstream stream reopened.
pub(crate) fn upstream_restart(upstream: &str) {
    counter!(UPSTREAM_RESTARTS, "upstream" => upstream.to_owned()).increment(1);
}

/// An endpoint ejection.
pub(crate) fn endpoint_ejected(upstream: &str) {
    counter!(ENDPOINT_EJECTIONS, "upstream" => upstream.to_owned()).increment(1);
}

/// Most series one [`Series`] keeps handles of; past it, lookups go to the registry.
/// Label values are bounded, so this is only a backstop.
const MAX_CACHED_SERIES: usize = 65_536;

/// Handles of the series of one metric on the request path, registered on first use
/// and kept by each thread for itself: a lookup here hashes the label values into a
/// buffer of the thread's and reads that thread's own map, with no lock and no count of
/// references to bump on memory the other workers write, where the registry's allocates
/// every label and compares keys. Until the recorder is installed nothing is kept (a
/// handle taken before it would record nowhere for good).
struct Series<H: Send> {
    handles: thread_local::ThreadLocal<std::cell::RefCell<crate::hashing::Map<Box<str>, H>>>,
}

impl<H: Send> Series<H> {
    const fn new() -> Series<H> {
        Series { handles: thread_local::ThreadLocal::new() }
    }

    /// Applies `record` to the handle of the series with these label values, made by
    /// `register` the first time this thread needs it.
    fn with(&self, labels: &[&str], register: impl FnOnce() -> H, record: impl FnOnce(&H)) {
        thread_local! {
            static KEY: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
        }
        if HANDLE.get().is_none() {
            return record(&register());
        }
        KEY.with_borrow_mut(|key| {
            key.clear();
            for label in labels {
                key.push_str(label);
                // Not a character label values are made of: keys of different labels differ.
                key.push('\u{1f}');
            }
            let mut handles = self.handles.get_or(Default::default).borrow_mut();
            if let Some(handle) = handles.get(key.as_str()) {
                return record(handle);
            }
            let handle = register();
            record(&handle);
            if handles.len() < MAX_CACHED_SERIES {
                handles.insert(key.as_str().into(), handle);
            }
        })
    }
}

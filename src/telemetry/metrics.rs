//! Every metric seawall exports, with its labels, in one place; `dashboards/` uses exactly
//! these names. Label values are bounded: methods outside the MCP set become `other`,
//! tools are named only when the upstream listed them (else `other`), and no label ever
//! carries a client or session id.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Requests answered, by upstream, method, tool and outcome.
pub(crate) const REQUESTS: &str = "seawall_requests_total";
/// Time to answer, by upstream, method and tool (seconds).
pub(crate) const REQUEST_DURATION: &str = "seawall_request_duration_seconds";
/// Retries, by upstream and reason.
pub(crate) const RETRIES: &str = "seawall_retries_total";
/// Retries refused because the upstream's budget was spent, by upstream.
pub(crate) const RETRY_BUDGET_EXHAUSTED: &str = "seawall_retry_budget_exhausted_total";
/// Circuit breaker transitions, by upstream, scope (`upstream` or `tool`) and new state.
pub(crate) const BREAKER_TRANSITIONS: &str = "seawall_breaker_transitions_total";
/// Requests refused by load shedding, by scope (`upstream` name or `gateway`).
pub(crate) const LOAD_SHED: &str = "seawall_load_shed_total";
/// Requests refused by a rate limit, by scope (`principal`, `tool`, `upstream`, `global`).
pub(crate) const RATE_LIMITED: &str = "seawall_rate_limited_total";
/// Access log lines dropped because the writer fell behind.
pub(crate) const ACCESS_LOG_DROPPED: &str = "seawall_access_log_dropped_total";
/// Finished spans dropped instead of exported, by reason (`queue_full`: the export
/// queue was full; `export_failed`: the collector refused or did not answer).
pub(crate) const TRACE_SPANS_DROPPED: &str = "seawall_trace_spans_dropped_total";
/// Cacheable requests looked up in the response cache, by result (`hit`, `miss`).
pub(crate) const CACHE: &str = "seawall_cache_lookups_total";
/// Failures rewritten into answers, by origin (client, policy, upstream_transport, ...).
pub(crate) const ERRORS_REWRITTEN: &str = "seawall_errors_rewritten_total";
/// Live client sessions.
pub(crate) const SESSIONS: &str = "seawall_sessions";
/// stdio upstream process restarts and HTTP+SSE upstream streams reopened, by upstream.
pub(crate) const UPSTREAM_RESTARTS: &str = "seawall_upstream_restarts_total";
/// Endpoint ejections by outlier detection, by upstream.
pub(crate) const ENDPOINT_EJECTIONS: &str = "seawall_endpoint_ejections_total";

/// Methods that get their own label value.
const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
];

/// The label value for a method.
pub(crate) fn method_label(method: &str) -> &'static str {
    METHODS.iter().copied().find(|m| *m == method).unwrap_or("other")
}

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder (once per process) and returns its handle.
pub(crate) fn install() -> Option<PrometheusHandle> {
    if let Some(h) = HANDLE.get() {
        return Some(h.clone());
    }
    let buckets = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];
    let builder = PrometheusBuilder::new().set_buckets_for_metric(Matcher::Full(REQUEST_DURATION.into()), &buckets);
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
            Some(handle)
        }
        Err(e) => {
            tracing::warn!(error = %e, "metrics recorder not installed");
            None
        }
    }
}

fn describe() {
    metrics::describe_counter!(REQUESTS, "Requests answered, by upstream, method, tool and outcome.");
    metrics::describe_histogram!(REQUEST_DURATION, metrics::Unit::Seconds, "Time to answer a request.");
    metrics::describe_counter!(RETRIES, "Retries sent to upstreams, by reason.");
    metrics::describe_counter!(RETRY_BUDGET_EXHAUSTED, "Retries refused because the budget was spent.");
    metrics::describe_counter!(BREAKER_TRANSITIONS, "Circuit breaker transitions, by new state.");
    metrics::describe_counter!(LOAD_SHED, "Requests refused by load shedding.");
    metrics::describe_counter!(ACCESS_LOG_DROPPED, "Access log lines dropped because the writer fell behind.");
    metrics::describe_counter!(TRACE_SPANS_DROPPED, "Finished spans dropped instead of exported, by reason.");
    metrics::describe_counter!(CACHE, "Cacheable requests looked up in the response cache, by result.");
    metrics::describe_counter!(ERRORS_REWRITTEN, "Failures rewritten into answers, by origin.");
    metrics::describe_gauge!(SESSIONS, "Live client sessions.");
    metrics::describe_counter!(UPSTREAM_RESTARTS, "stdio upstream process restarts.");
    metrics::describe_counter!(ENDPOINT_EJECTIONS, "Endpoints ejected by outlier detection.");
}

/// One answered request to one upstream.
pub(crate) fn request(upstream: &str, method: &str, tool: &str, outcome: &'static str, elapsed: Duration) {
    let method = method_label(method);
    counter!(REQUESTS, "upstream" => upstream.to_owned(), "method" => method, "tool" => tool.to_owned(), "outcome" => outcome)
        .increment(1);
    histogram!(REQUEST_DURATION, "upstream" => upstream.to_owned(), "method" => method, "tool" => tool.to_owned())
        .record(elapsed.as_secs_f64());
}

/// Times one forwarded request and counts it once: with the outcome it finished with,
/// or as `cancelled` when it is dropped unfinished (the client cancelled it).
pub(crate) struct RequestTimer {
    upstream: std::sync::Arc<str>,
    method: String,
    tool: String,
    started: std::time::Instant,
    finished: bool,
}

impl RequestTimer {
    /// Starts timing a request to `upstream`.
    pub(crate) fn start(upstream: &std::sync::Arc<str>, method: &str, tool: String) -> RequestTimer {
        RequestTimer {
            upstream: std::sync::Arc::clone(upstream),
            method: method.to_owned(),
            tool,
            started: std::time::Instant::now(),
            finished: false,
        }
    }

    /// Counts the request with its outcome.
    pub(crate) fn finish(mut self, outcome: &'static str) {
        self.finished = true;
        request(&self.upstream, &self.method, &self.tool, outcome, self.started.elapsed());
    }
}

impl Drop for RequestTimer {
    fn drop(&mut self) {
        if !self.finished {
            request(&self.upstream, &self.method, &self.tool, "cancelled", self.started.elapsed());
        }
    }
}

/// One retry.
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

/// The number of live sessions.
pub(crate) fn sessions(n: usize) {
    gauge!(SESSIONS).set(n as f64);
}

/// A stdio upstream restart, or an HTTP+SSE upstream stream reopened.
pub(crate) fn upstream_restart(upstream: &str) {
    counter!(UPSTREAM_RESTARTS, "upstream" => upstream.to_owned()).increment(1);
}

/// An endpoint ejection.
pub(crate) fn endpoint_ejected(upstream: &str) {
    counter!(ENDPOINT_EJECTIONS, "upstream" => upstream.to_owned()).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dashboards use exactly the metric names defined here.
    #[test]
    fn dashboards_use_only_defined_metrics() {
        let known = [
            REQUESTS,
            REQUEST_DURATION,
            RETRIES,
            RETRY_BUDGET_EXHAUSTED,
            BREAKER_TRANSITIONS,
            LOAD_SHED,
            RATE_LIMITED,
            CACHE,
            ACCESS_LOG_DROPPED,
            TRACE_SPANS_DROPPED,
            ERRORS_REWRITTEN,
            SESSIONS,
            UPSTREAM_RESTARTS,
            ENDPOINT_EJECTIONS,
        ];
        let dashboard = include_str!("../../dashboards/seawall.json");
        let mut used = std::collections::BTreeSet::new();
        let bytes = dashboard.as_bytes();
        let mut i = 0;
        while let Some(pos) = dashboard[i..].find("seawall_") {
            let start = i + pos;
            let end = bytes[start..]
                .iter()
                .position(|b| !(b.is_ascii_lowercase() || *b == b'_'))
                .map_or(bytes.len(), |n| start + n);
            let name = &dashboard[start..end];
            let base = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
            used.insert(base.to_owned());
            i = end;
        }
        used.remove("seawall_"); // the dashboard's own uid prefix, if any
        for name in &used {
            assert!(known.contains(&name.as_str()), "dashboard uses unknown metric {name}");
        }
        for name in known {
            assert!(used.contains(name), "metric {name} has no panel");
        }
    }

    #[test]
    fn unknown_methods_share_one_label() {
        assert_eq!(method_label("tools/call"), "tools/call");
        assert_eq!(method_label("x/arbitrary/client/text"), "other");
    }
}

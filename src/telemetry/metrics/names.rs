//! The name of every metric seawall exports, its description, and the bounded label
//! value of a method; `dashboards/` uses exactly these names.

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
/// Transitions of shared breakers repeated from another replica, by upstream, scope
/// (`upstream` or `tool`) and new state (also counted in [`BREAKER_TRANSITIONS`] when the
/// state changed).
pub(crate) const BREAKER_REMOTE_TRANSITIONS: &str = "seawall_breaker_remote_transitions_total";
/// Whether shared breakers are subscribed to their Redis: 1 yes, 0 no (they stay local).
/// Absent when no breaker is shared.
pub(crate) const BREAKER_SHARING_CONNECTED: &str = "seawall_breaker_sharing_connected";
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
/// Live client sessions, by the front that opened them (`streamable_http`, `sse`,
/// `stdio`, or `modern` for the contexts of 2026-07-28 clients).
pub(crate) const SESSIONS: &str = "seawall_sessions";
/// stdio upstream process restarts and HTTP+SSE upstream streams reopened, by upstream.
pub(crate) const UPSTREAM_RESTARTS: &str = "seawall_upstream_restarts_total";
/// Endpoint ejections by outlier detection, by upstream.
pub(crate) const ENDPOINT_EJECTIONS: &str = "seawall_endpoint_ejections_total";
/// Every client request answered, by method and outcome: those refused before any
/// upstream was chosen (denied, rate limited, shed by admission) included.
pub(crate) const CLIENT_REQUESTS: &str = "seawall_client_requests_total";
/// Time to answer a client request, by method (seconds).
pub(crate) const CLIENT_REQUEST_DURATION: &str = "seawall_client_request_duration_seconds";
/// Time of one attempt on an upstream, by upstream, method and outcome (seconds).
pub(crate) const ATTEMPT_DURATION: &str = "seawall_upstream_attempt_duration_seconds";
/// Requests in flight to an upstream (past load shedding), by upstream.
pub(crate) const IN_FLIGHT: &str = "seawall_in_flight_requests";
/// Client requests in flight in the gateway (past admission).
pub(crate) const CLIENT_IN_FLIGHT: &str = "seawall_client_in_flight_requests";
/// Circuit breaker state, by upstream and tool (`""`: the upstream's own breaker):
/// 0 closed, 1 half-open, 2 open.
pub(crate) const BREAKER_STATE: &str = "seawall_breaker_state";

/// Configuration reloads, by outcome (`applied`, `invalid`: the file has problems,
/// `refused`: it changes what needs a restart, `failed`: an upstream could not be built).
pub(crate) const CONFIG_RELOADS: &str = "seawall_config_reloads_total";
/// 1 when the last configuration reload was applied (or none was tried), else 0.
pub(crate) const CONFIG_LAST_RELOAD_OK: &str = "seawall_config_last_reload_successful";

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

/// Gives the recorder every metric's description (and unit).
pub(super) fn describe() {
    metrics::describe_counter!(REQUESTS, "Requests answered, by upstream, method, tool and outcome.");
    metrics::describe_histogram!(REQUEST_DURATION, metrics::Unit::Seconds, "Time to answer a request.");
    metrics::describe_counter!(RETRIES, "Retries sent to upstreams, by reason.");
    metrics::describe_counter!(RETRY_BUDGET_EXHAUSTED, "Retries refused because the budget was spent.");
    metrics::describe_counter!(BREAKER_TRANSITIONS, "Circuit breaker transitions, by new state.");
    metrics::describe_counter!(
        BREAKER_REMOTE_TRANSITIONS,
        "Shared breaker transitions repeated from another replica, by new state."
    );
    metrics::describe_gauge!(
        BREAKER_SHARING_CONNECTED,
        "Whether shared breakers are subscribed to Redis (1) or not (0)."
    );
    metrics::describe_counter!(LOAD_SHED, "Requests refused by load shedding.");
    metrics::describe_counter!(ACCESS_LOG_DROPPED, "Access log lines dropped because the writer fell behind.");
    metrics::describe_counter!(TRACE_SPANS_DROPPED, "Finished spans dropped instead of exported, by reason.");
    metrics::describe_counter!(CACHE, "Cacheable requests looked up in the response cache, by result.");
    metrics::describe_counter!(ERRORS_REWRITTEN, "Failures rewritten into answers, by origin.");
    metrics::describe_gauge!(SESSIONS, "Live client sessions.");
    metrics::describe_counter!(UPSTREAM_RESTARTS, "stdio upstream process restarts.");
    metrics::describe_counter!(ENDPOINT_EJECTIONS, "Endpoints ejected by outlier detection.");
    metrics::describe_counter!(CLIENT_REQUESTS, "Client requests answered, by method and outcome.");
    metrics::describe_histogram!(CLIENT_REQUEST_DURATION, metrics::Unit::Seconds, "Time to answer a client request.");
    metrics::describe_histogram!(ATTEMPT_DURATION, metrics::Unit::Seconds, "Time of one attempt on an upstream.");
    metrics::describe_gauge!(IN_FLIGHT, "Requests in flight to an upstream.");
    metrics::describe_gauge!(CLIENT_IN_FLIGHT, "Client requests in flight in the gateway.");
    metrics::describe_gauge!(BREAKER_STATE, "Circuit breaker state: 0 closed, 1 half-open, 2 open.");
    metrics::describe_counter!(CONFIG_RELOADS, "Configuration reloads, by outcome.");
    metrics::describe_gauge!(CONFIG_LAST_RELOAD_OK, "1 when the last configuration reload was applied, else 0.");
}

/// Starts at zero the counters whose label values are known in advance (per upstream,
/// per scope, per origin), so that every series a dashboard or alert asks for exists
/// from the first scrape, and a rate over it is 0 rather than no data. Adding zero
/// leaves a series that already counts alone, so a reload calls it again for the
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
            BREAKER_REMOTE_TRANSITIONS,
            BREAKER_SHARING_CONNECTED,
            LOAD_SHED,
            RATE_LIMITED,
            CACHE,
            ACCESS_LOG_DROPPED,
            TRACE_SPANS_DROPPED,
            ERRORS_REWRITTEN,
            SESSIONS,
            UPSTREAM_RESTARTS,
            ENDPOINT_EJECTIONS,
            CLIENT_REQUESTS,
            CLIENT_REQUEST_DURATION,
            ATTEMPT_DURATION,
            IN_FLIGHT,
            CLIENT_IN_FLIGHT,
            BREAKER_STATE,
            CONFIG_RELOADS,
            CONFIG_LAST_RELOAD_OK,
        ];
        let dashboard = include_str!("../../../dashboards/seawall.json");
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

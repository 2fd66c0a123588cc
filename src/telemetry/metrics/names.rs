//! The name of every metric seawall exports, and [`METRICS`]: each one's kind, labels and
//! description, which the recorder is given and the reference lists; and the bounded label
//! value of a method. `dashboards/` uses exactly these names.

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

/// What kind of series a metric is. Every histogram is a duration in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Only goes up (`_total`).
    Counter,
    /// A value read or set as it is.
    Gauge,
    /// A distribution of durations in seconds (`_seconds`).
    Histogram,
}

impl Kind {
    /// The Prometheus type.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One metric: what the recorder is told about it (`help`, the `# HELP` line) and what
/// the reference says (`labels`, `meaning`).
#[derive(Debug)]
pub(crate) struct Metric {
    /// The exported name.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: Kind,
    /// Its label names, in the order they are recorded.
    pub labels: &'static [&'static str],
    /// The one line of `# HELP`.
    pub help: &'static str,
    /// What it counts, with the values its labels take.
    pub meaning: &'static str,
}

/// Every metric seawall exports, in the order the reference lists them.
pub(crate) const METRICS: &[Metric] = &[
    Metric {
        name: CLIENT_REQUESTS,
        kind: Kind::Counter,
        labels: &["method", "outcome"],
        help: "Client requests answered, by method and outcome.",
        meaning: "Every client request answered, those refused before an upstream was chosen (denied, \
            rate limited, shed by admission) included: what the client got.",
    },
    Metric {
        name: CLIENT_REQUEST_DURATION,
        kind: Kind::Histogram,
        labels: &["method"],
        help: "Time to answer a client request.",
        meaning: "Time to answer a client request.",
    },
    Metric {
        name: REQUESTS,
        kind: Kind::Counter,
        labels: &["upstream", "method", "tool", "outcome"],
        help: "Requests answered, by upstream, method, tool and outcome.",
        meaning: "What each request forwarded to an upstream came to.",
    },
    Metric {
        name: REQUEST_DURATION,
        kind: Kind::Histogram,
        labels: &["upstream", "method", "tool"],
        help: "Time to answer a request.",
        meaning: "Time to answer a request forwarded to an upstream: the whole request, retries and \
            backoff included.",
    },
    Metric {
        name: ATTEMPT_DURATION,
        kind: Kind::Histogram,
        labels: &["upstream", "method", "outcome"],
        help: "Time of one attempt on an upstream.",
        meaning: "Time of one attempt on an upstream; `cancelled` when a hedge won or the client left.",
    },
    Metric {
        name: IN_FLIGHT,
        kind: Kind::Gauge,
        labels: &["upstream"],
        help: "Requests in flight to an upstream.",
        meaning: "Requests in flight to an upstream, past its load shedding.",
    },
    Metric {
        name: CLIENT_IN_FLIGHT,
        kind: Kind::Gauge,
        labels: &[],
        help: "Client requests in flight in the gateway.",
        meaning: "Client requests in flight in the gateway, past admission.",
    },
    Metric {
        name: SESSIONS,
        kind: Kind::Gauge,
        labels: &["front"],
        help: "Live client sessions.",
        meaning: "Live client sessions, by the front that opened them: `streamable_http`, `sse`, `stdio`, \
            or `modern` for the contexts of 2026-07-28 clients.",
    },
    Metric {
        name: BREAKER_STATE,
        kind: Kind::Gauge,
        labels: &["upstream", "tool"],
        help: "Circuit breaker state: 0 closed, 1 half-open, 2 open.",
        meaning: "Circuit breaker state: 0 closed, 1 half-open, 2 open. `tool` is empty for the \
            upstream's own breaker.",
    },
    Metric {
        name: BREAKER_TRANSITIONS,
        kind: Kind::Counter,
        labels: &["upstream", "scope", "to"],
        help: "Circuit breaker transitions, by new state.",
        meaning: "Circuit breaker transitions, by scope (`upstream` or `tool`) and new state (`open`, \
            `half_open`, `closed`).",
    },
    Metric {
        name: BREAKER_REMOTE_TRANSITIONS,
        kind: Kind::Counter,
        labels: &["upstream", "scope", "to"],
        help: "Shared breaker transitions repeated from another replica, by new state.",
        meaning: "Transitions of shared breakers repeated from another replica (also counted in \
            `seawall_breaker_transitions_total` when the state changed).",
    },
    Metric {
        name: BREAKER_SHARING_CONNECTED,
        kind: Kind::Gauge,
        labels: &[],
        help: "Whether shared breakers are subscribed to Redis (1) or not (0).",
        meaning: "1 while shared breakers are subscribed to their Redis, 0 while they stay local. \
            Absent when no breaker is shared.",
    },
    Metric {
        name: CONFIG_RELOADS,
        kind: Kind::Counter,
        labels: &["outcome"],
        help: "Configuration reloads, by outcome.",
        meaning: "Configuration reloads, by outcome: `applied`, `invalid` (the file has problems), \
            `refused` (it changes what needs a restart), `failed` (an upstream could not be built).",
    },
    Metric {
        name: CONFIG_LAST_RELOAD_OK,
        kind: Kind::Gauge,
        labels: &[],
        help: "1 when the last configuration reload was applied, else 0.",
        meaning: "1 while the file last read is in force (or no reload was tried), 0 after a reload \
            that was not applied.",
    },
    Metric {
        name: RETRIES,
        kind: Kind::Counter,
        labels: &["upstream", "reason"],
        help: "Retries sent to upstreams, by reason.",
        meaning: "Retries sent to upstreams, by reason: `attempt_timeout`, `not_sent`, `process_exited`, \
            `connection`, `http_status`, `rate_limited`.",
    },
    Metric {
        name: RETRY_BUDGET_EXHAUSTED,
        kind: Kind::Counter,
        labels: &["upstream"],
        help: "Retries refused because the budget was spent.",
        meaning: "Retries refused because the upstream's retry budget was spent.",
    },
    Metric {
        name: LOAD_SHED,
        kind: Kind::Counter,
        labels: &["scope"],
        help: "Requests refused by load shedding.",
        meaning: "Requests refused by load shedding, by scope: an upstream's name, `gateway`, \
            `session`, `principal`, `sessions` or `connections`.",
    },
    Metric {
        name: RATE_LIMITED,
        kind: Kind::Counter,
        labels: &["scope"],
        help: "Requests refused by a rate limit, by scope.",
        meaning: "Requests refused by a rate limit, by scope: `principal`, `tool`, `upstream`, \
            `global`, or `store` while Redis is unreachable and `on_backend_error: deny`.",
    },
    Metric {
        name: TRACE_SPANS_DROPPED,
        kind: Kind::Counter,
        labels: &["reason"],
        help: "Finished spans dropped instead of exported, by reason.",
        meaning: "Finished spans dropped instead of exported, by reason: `queue_full` (the export \
            queue was full), `export_failed` (the collector refused or did not answer).",
    },
    Metric {
        name: ERRORS_REWRITTEN,
        kind: Kind::Counter,
        labels: &["origin"],
        help: "Failures rewritten into answers, by origin.",
        meaning: "Failures rewritten into answers, by origin: `client`, `policy`, `upstream_transport`, \
            `upstream_protocol`, `upstream_tool`, `gateway`.",
    },
    Metric {
        name: UPSTREAM_RESTARTS,
        kind: Kind::Counter,
        labels: &["upstream"],
        help: "stdio upstream process restarts.",
        meaning: "stdio upstream processes restarted, and HTTP+SSE upstream streams reopened.",
    },
    Metric {
        name: ENDPOINT_EJECTIONS,
        kind: Kind::Counter,
        labels: &["upstream"],
        help: "Endpoints ejected by outlier detection.",
        meaning: "Endpoints of a replicated upstream ejected by outlier detection.",
    },
    Metric {
        name: CACHE,
        kind: Kind::Counter,
        labels: &["result"],
        help: "Cacheable requests looked up in the response cache, by result.",
        meaning: "Cacheable requests looked up in the response cache (`cache.enabled`), by result: \
            `hit` or `miss`.",
    },
    Metric {
        name: ACCESS_LOG_DROPPED,
        kind: Kind::Counter,
        labels: &[],
        help: "Access log lines dropped because the writer fell behind.",
        meaning: "Access log lines dropped because the writer fell behind.",
    },
];

/// Gives the recorder every metric's description (and unit).
pub(super) fn describe() {
    for metric in METRICS {
        match metric.kind {
            Kind::Counter => metrics::describe_counter!(metric.name, metric.help),
            Kind::Gauge => metrics::describe_gauge!(metric.name, metric.help),
            Kind::Histogram => metrics::describe_histogram!(metric.name, metrics::Unit::Seconds, metric.help),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dashboards use exactly the metric names defined here.
    #[test]
    fn dashboards_use_only_defined_metrics() {
        let known: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
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

    /// Every histogram is a duration in seconds (the recorder's buckets are chosen by that
    /// suffix), and every counter ends in `_total`.
    #[test]
    fn names_follow_their_kind() {
        for metric in METRICS {
            match metric.kind {
                Kind::Histogram => assert!(metric.name.ends_with("_seconds"), "{}", metric.name),
                Kind::Counter => assert!(metric.name.ends_with("_total"), "{}", metric.name),
                Kind::Gauge => assert!(!metric.name.ends_with("_total"), "{}", metric.name),
            }
        }
        let mut names: Vec<&str> = METRICS.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METRICS.len(), "a metric is listed twice");
    }

    #[test]
    fn unknown_methods_share_one_label() {
        assert_eq!(method_label("tools/call"), "tools/call");
        assert_eq!(method_label("x/arbitrary/client/text"), "other");
    }
}

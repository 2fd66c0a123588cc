//! reference/metrics.md: every metric of [`METRICS`], with its type, labels and meaning.

use std::fmt::Write as _;

use super::markdown::{GENERATED, cell, code};
use crate::telemetry::metrics::{Kind, METRICS};

/// The page.
pub(super) fn page() -> String {
    let mut out = format!("# Metrics\n\n{GENERATED}\n\n{INTRO}\n");
    out.push_str("| metric | type | labels | meaning |\n|---|---|---|---|\n");
    for metric in METRICS {
        let kind = match metric.kind {
            Kind::Histogram => "histogram (seconds)".to_owned(),
            other => other.as_str().to_owned(),
        };
        let labels = if metric.labels.is_empty() {
            "—".to_owned()
        } else {
            metric.labels.iter().map(|l| code(l)).collect::<Vec<_>>().join(", ")
        };
        let _ = writeln!(out, "| {} | {kind} | {labels} | {} |", code(metric.name), cell(metric.meaning));
    }
    out.push_str(OUTCOMES);
    out
}

const INTRO: &str = "\
The admin listener's `/metrics` (default `http://127.0.0.1:9090/metrics`) exports these in
the Prometheus text format. Label values are bounded: a method outside MCP's set is
`other`, a tool is named only once its upstream listed it (else `other`), and no label
carries a client or session id. Counters whose label values are known at start (per
upstream, scope, origin, reason) start at 0, so a dashboard or alert has a series before
the first event; the gauges are read when `/metrics` is scraped. Every histogram is a
duration in seconds, with buckets from 1 ms to 300 s.
";

const OUTCOMES: &str = "
## Outcomes

The `outcome` label keeps every way a request can end apart:

| outcome | meaning |
|---|---|
| `ok` | answered with a result |
| `tool_error` | a `tools/call` result with `isError`: the tool ran and failed (a failure, never a success) |
| `error` | an upstream's JSON-RPC error |
| `refused` | the client's own mistake: an unknown name, invalid arguments |
| `denied` | refused by authorisation |
| `rate_limited` | refused by a rate limit |
| `shed` | refused by an in-flight or session cap |
| `circuit_open` | refused by an open circuit breaker |
| `timeout` | no answer within the deadline |
| `upstream_error` | the upstream could not be reached, its connection broke, or it broke the protocol |
| `cancelled` | cancelled by the client (for an attempt: a hedge won or the client left) |
| `shutdown` | still running when a graceful shutdown's grace period ended (answered -32014) |

`seawall_requests_total` says what the upstream did, `seawall_client_requests_total` what
the client got: an upstream's error for a tool reaches the client as an `isError` result,
so it is `error` in the first and `tool_error` in the second.
";

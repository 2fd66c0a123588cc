//! The `tracing:` section: OpenTelemetry spans exported over OTLP. A field left unset
//! falls back to its standard `OTEL_*` environment variable, then to its default; the
//! resolution itself is `telemetry::trace::settings`.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::locate::{FieldPath, Problem};
use super::schema::{HumanDuration, ScalarText};

/// Distributed tracing. Off unless `enabled: true`, or unless `enabled` is unset and an
/// OTLP endpoint variable is set; `OTEL_SDK_DISABLED=true` turns it off either way.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TracingConfig {
    /// Export spans. Unset: on when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` is set (and `OTEL_TRACES_EXPORTER` is not `none`).
    /// Default: unset.
    pub enabled: Option<bool>,
    /// `http` (OTLP/HTTP, protobuf) or `grpc`. Unset: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`,
    /// then `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf` or `grpc`), else `http`.
    pub protocol: Option<TracingProtocol>,
    /// The collector's URL (`http://` or `https://`). For `http`, a URL without a path
    /// gets `/v1/traces`. Unset: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, then
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (plus `/v1/traces` for `http`), else
    /// `http://localhost:4318` (`http`) or `http://localhost:4317` (`grpc`).
    pub endpoint: Option<String>,
    /// Headers (gRPC metadata) sent with every export, e.g. a collector's API key;
    /// `${VAR}` is expanded. Merged with `OTEL_EXPORTER_OTLP_TRACES_HEADERS` (or
    /// `OTEL_EXPORTER_OTLP_HEADERS`), these winning on a name both give. Default `{}`.
    #[schemars(with = "BTreeMap<String, ScalarText>")]
    pub headers: BTreeMap<String, String>,
    /// The `service.name` of the exported spans. Unset: `OTEL_SERVICE_NAME`, then
    /// `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, else `seawall`.
    pub service_name: Option<String>,
    /// Extra resource attributes (e.g. `deployment.environment.name`), merged with
    /// `OTEL_RESOURCE_ATTRIBUTES`, these winning. Default `{}`.
    #[schemars(with = "BTreeMap<String, ScalarText>")]
    pub resource: BTreeMap<String, String>,
    /// The fraction of new traces that are sampled (0 to 1), parent-based: a request
    /// whose client sent a trace context follows the client's decision. Unset:
    /// `OTEL_TRACES_SAMPLER` with `OTEL_TRACES_SAMPLER_ARG`, else `1.0` (parent-based,
    /// always on).
    pub sample_ratio: Option<f64>,
    /// Most finished spans waiting for export (count, at least 1); a span that finds the
    /// queue full is dropped and counted in `seawall_trace_spans_dropped_total`.
    /// Default `2048`.
    pub queue_size: usize,
    /// Most spans in one export request (count, at least 1). Default `512`.
    pub max_batch_size: usize,
    /// Longest a finished span waits for its batch to fill before the batch is sent
    /// (duration, more than 0). Default `5s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub batch_delay: Duration,
    /// Longest one export request may take (duration, more than 0); a batch that fails
    /// is dropped and counted. Default `10s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub export_timeout: Duration,
    /// Longest wait at shutdown for the queued spans to be exported (duration).
    /// Default `5s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub shutdown_timeout: Duration,
}

impl Default for TracingConfig {
    fn default() -> Self {
        TracingConfig {
            enabled: None,
            protocol: None,
            endpoint: None,
            headers: BTreeMap::new(),
            service_name: None,
            resource: BTreeMap::new(),
            sample_ratio: None,
            queue_size: 2048,
            max_batch_size: 512,
            batch_delay: Duration::from_secs(5),
            export_timeout: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(5),
        }
    }
}

/// How spans are exported.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TracingProtocol {
    /// OTLP over HTTP with protobuf bodies (`POST .../v1/traces`).
    Http,
    /// OTLP over gRPC.
    Grpc,
}

/// Checks the `tracing:` section.
pub(crate) fn check_tracing(config: &TracingConfig, out: &mut Vec<Problem>) {
    let at = FieldPath::root().key("tracing");
    if let Some(endpoint) = &config.endpoint
        && let Err(why) = check_endpoint(endpoint)
    {
        out.push(Problem::new(at.key("endpoint"), why));
    }
    for (name, value) in &config.headers {
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            out.push(Problem::new(at.key("headers").key(name), "not a valid header name"));
        } else if http::HeaderValue::from_str(value).is_err() {
            out.push(Problem::new(at.key("headers").key(name), "not a valid header value (printable ASCII)"));
        }
    }
    if config.service_name.as_deref().is_some_and(|s| s.trim().is_empty()) {
        out.push(Problem::new(at.key("service_name"), "must not be empty"));
    }
    for key in config.resource.keys() {
        if key.trim().is_empty() {
            out.push(Problem::new(at.key("resource"), "attribute names must not be empty"));
        }
    }
    if let Some(ratio) = config.sample_ratio
        && !(0.0..=1.0).contains(&ratio)
    {
        out.push(Problem::new(at.key("sample_ratio"), "must be between 0 and 1"));
    }
    for (field, value) in [("queue_size", config.queue_size), ("max_batch_size", config.max_batch_size)] {
        if value == 0 {
            out.push(Problem::new(at.key(field), "must be at least 1"));
        }
    }
    for (field, value) in [("batch_delay", config.batch_delay), ("export_timeout", config.export_timeout)] {
        if value.is_zero() {
            out.push(Problem::new(at.key(field), "must be longer than 0"));
        }
    }
}

/// An absolute `http` or `https` URL with a host.
pub(crate) fn check_endpoint(endpoint: &str) -> Result<(), String> {
    let uri: http::Uri = endpoint.parse().map_err(|_| format!("{endpoint:?} is not a URL"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(format!("{endpoint:?} must start with http:// or https://")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("{endpoint:?} has no host"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The `tracing:` section: defaults, parsing, `${VAR}` in headers, bad values at their
    //! lines.

    use std::time::Duration;

    use crate::config::test_support::{assert_one, issues, ok, with_upstream};
    use crate::config::{Config, TracingConfig, TracingProtocol};

    #[test]
    fn off_unless_asked_for_with_the_otel_defaults() {
        let t = Config::default().tracing;
        assert_eq!((t.enabled, t.protocol, t.endpoint.as_deref(), t.sample_ratio), (None, None, None, None));
        assert_eq!((t.queue_size, t.max_batch_size), (2048, 512));
        assert_eq!(
            (t.batch_delay, t.export_timeout, t.shutdown_timeout),
            (Duration::from_secs(5), Duration::from_secs(10), Duration::from_secs(5))
        );
    }

    #[test]
    fn the_section_parses_and_expands_header_variables() {
        let c = ok(&with_upstream(&[
            "tracing:",
            "  enabled: true",
            "  protocol: grpc",
            "  endpoint: https://collector.example:4317",
            "  headers: { x-api-key: '${TOKEN}' }",
            "  service_name: edge",
            "  resource: { deployment.environment.name: prod }",
            "  sample_ratio: 0.25",
            "  queue_size: 10",
            "  max_batch_size: 5",
            "  batch_delay: 100ms",
            "  export_timeout: 2s",
            "  shutdown_timeout: 0s",
        ]));
        let t: TracingConfig = c.tracing;
        assert_eq!((t.enabled, t.protocol), (Some(true), Some(TracingProtocol::Grpc)));
        assert_eq!(t.endpoint.as_deref(), Some("https://collector.example:4317"));
        assert_eq!(t.headers["x-api-key"], "secret");
        assert_eq!(t.resource["deployment.environment.name"], "prod");
        assert_eq!((t.sample_ratio, t.queue_size, t.max_batch_size), (Some(0.25), 10, 5));
        assert_eq!(t.batch_delay, Duration::from_millis(100));
        assert_eq!(t.shutdown_timeout, Duration::ZERO, "no wait at shutdown is allowed");
    }

    #[test]
    fn bad_values_are_reported_at_their_lines() {
        assert_one(&with_upstream(&["tracing:", "  endpoint: ftp://c"]), 2, "tracing.endpoint", "http:// or https://");
        assert_one(&with_upstream(&["tracing:", "  endpoint: 'not a url'"]), 2, "tracing.endpoint", "is not a URL");
        assert_one(&with_upstream(&["tracing:", "  sample_ratio: 1.5"]), 2, "tracing.sample_ratio", "between 0 and 1");
        assert_one(&with_upstream(&["tracing:", "  protocol: http/json"]), 2, "tracing.protocol", "unknown variant");
        assert_one(
            &with_upstream(&["tracing:", "  headers: { 'bad header': x }"]),
            2,
            "tracing.headers.bad header",
            "header name",
        );
        assert_one(
            &with_upstream(&["tracing:", "  headers: { x-key: '${NOPE}' }"]),
            2,
            "tracing.headers.x-key",
            "NOPE is not set",
        );
        assert_one(&with_upstream(&["tracing:", "  sampler: always"]), 2, "tracing", "unknown field `sampler`");
        let found = issues(&with_upstream(&[
            "tracing:",
            "  queue_size: 0",
            "  max_batch_size: 0",
            "  batch_delay: 0s",
            "  export_timeout: 0s",
            "  service_name: ' '",
        ]));
        let fields: Vec<&str> = found.iter().map(|i| i.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "tracing.queue_size",
                "tracing.max_batch_size",
                "tracing.batch_delay",
                "tracing.export_timeout",
                "tracing.service_name"
            ],
            "{found:#?}"
        );
    }
}

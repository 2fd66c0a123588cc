//! The `tracing:` section: defaults, parsing, `${VAR}` in headers, bad values at their
//! lines.

use std::time::Duration;

use super::{assert_one, issues, ok, with_upstream};
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

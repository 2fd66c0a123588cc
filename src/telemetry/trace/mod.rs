//! Distributed tracing: OpenTelemetry spans made with `tracing` and exported over OTLP
//! (HTTP with protobuf, or gRPC) when `tracing:` or the `OTEL_*` variables switch it on.
//!
//! - [`settings`]: the section and the environment, resolved.
//! - [`export`]: the bounded export queue and the thread that drains it.
//! - [`spans`]: the spans seawall makes and their attributes (the client stack's
//!   [`RequestSpanLayer`](crate::client::RequestSpanLayer) runs each request in its span).
//!
//! When tracing is off none of it runs: no exporter, no OpenTelemetry layer in the
//! subscriber, and no span is made ([`on`] is false).

pub(crate) mod export;
pub(crate) mod settings;
pub(crate) mod spans;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _, WithTonicConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::resource::TelemetryResourceDetector;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider, SpanExporter as _};

use crate::config::TracingProtocol;
use export::{Batching, ExportQueue};
use settings::{Sampling, Settings};

static ON: AtomicBool = AtomicBool::new(false);

/// Whether spans are made and exported; every place that makes one asks first.
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The running export: the tracer provider over the export queue.
pub(crate) struct Pipeline {
    provider: SdkTracerProvider,
    shutdown_timeout: Duration,
}

impl Pipeline {
    /// Starts the export thread and the provider; the tracer is for the OpenTelemetry
    /// layer of the subscriber.
    pub(crate) fn start(settings: &Settings) -> anyhow::Result<(Pipeline, SdkTracer)> {
        let mut attributes = vec![KeyValue::new("service.version", env!("CARGO_PKG_VERSION"))];
        attributes.extend(settings.resource.iter().map(|(k, v)| KeyValue::new(k.clone(), v.clone())));
        let resource = Resource::builder_empty()
            .with_detector(Box::new(TelemetryResourceDetector))
            .with_service_name(settings.service_name.clone())
            .with_attributes(attributes)
            .build();
        let batching = Batching {
            queue_size: settings.queue_size,
            max_batch_size: settings.max_batch_size,
            delay: settings.batch_delay,
            timeout: settings.export_timeout,
        };
        let exporter = ExporterSpec {
            protocol: settings.protocol,
            endpoint: settings.endpoint.clone(),
            headers: settings.headers.clone().into_iter().collect(),
            timeout: settings.export_timeout,
            resource: resource.clone(),
        };
        let queue = ExportQueue::start(batching, move || exporter.build())?;
        let provider = SdkTracerProvider::builder()
            .with_span_processor(queue)
            .with_sampler(sampler(settings.sampling))
            .with_resource(resource)
            .build();
        let scope = InstrumentationScope::builder("seawall").with_version(env!("CARGO_PKG_VERSION")).build();
        let tracer = provider.tracer_with_scope(scope);
        ON.store(true, Ordering::Relaxed);
        Ok((Pipeline { provider, shutdown_timeout: settings.shutdown_timeout }, tracer))
    }

    /// Exports what is still queued and stops, waiting at most `tracing.shutdown_timeout`.
    pub(crate) fn shutdown(self) {
        ON.store(false, Ordering::Relaxed);
        if let Err(e) = self.provider.shutdown_with_timeout(self.shutdown_timeout) {
            tracing::warn!(error = %e, "the last spans may not all have been exported");
        }
    }
}

/// A one-line description of the export, for the startup log (header values are
/// secrets: only their names are shown).
pub(crate) fn describe(settings: &Settings) -> String {
    let protocol = match settings.protocol {
        TracingProtocol::Http => "OTLP/HTTP",
        TracingProtocol::Grpc => "OTLP/gRPC",
    };
    let mut text = format!(
        "{protocol} to {}, sampling {}, service {}",
        settings.endpoint, settings.sampling, settings.service_name
    );
    if !settings.headers.is_empty() {
        let names: Vec<&str> = settings.headers.keys().map(String::as_str).collect();
        text.push_str(&format!(", headers {}", names.join(", ")));
    }
    text
}

fn sampler(sampling: Sampling) -> Sampler {
    let base = match sampling.ratio {
        r if r >= 1.0 => Sampler::AlwaysOn,
        r if r <= 0.0 => Sampler::AlwaysOff,
        r => Sampler::TraceIdRatioBased(r),
    };
    if sampling.parent_based { Sampler::ParentBased(Box::new(base)) } else { base }
}

/// What the export thread builds its exporter from.
struct ExporterSpec {
    protocol: TracingProtocol,
    endpoint: String,
    headers: Vec<(String, String)>,
    timeout: Duration,
    resource: Resource,
}

impl ExporterSpec {
    /// The OTLP exporter. The configured headers are set on every request by seawall
    /// itself (the exporter would let `OTEL_EXPORTER_OTLP_HEADERS` override them).
    fn build(self) -> anyhow::Result<opentelemetry_otlp::SpanExporter> {
        let builder = opentelemetry_otlp::SpanExporter::builder();
        let mut exporter = match self.protocol {
            TracingProtocol::Http => builder
                .with_http()
                .with_http_client(ExportClient::new(&self.headers, self.timeout)?)
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(self.endpoint)
                .with_timeout(self.timeout)
                .build()?,
            TracingProtocol::Grpc => builder
                .with_tonic()
                .with_interceptor(Metadata::new(&self.headers)?)
                .with_protocol(Protocol::Grpc)
                .with_endpoint(self.endpoint)
                .with_timeout(self.timeout)
                .build()?,
        };
        exporter.set_resource(&self.resource);
        Ok(exporter)
    }
}

/// The HTTP client of OTLP/HTTP exports: reqwest, with the configured headers set on
/// every request.
#[derive(Debug)]
struct ExportClient {
    client: reqwest::Client,
    headers: http::HeaderMap,
}

impl ExportClient {
    fn new(headers: &[(String, String)], timeout: Duration) -> anyhow::Result<ExportClient> {
        let mut map = http::HeaderMap::new();
        for (name, value) in headers {
            let name = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| anyhow::anyhow!("tracing header {name:?} is not a valid header name"))?;
            let value = http::HeaderValue::from_str(value)
                .map_err(|_| anyhow::anyhow!("tracing header {name}: not a valid header value"))?;
            map.insert(name, value);
        }
        let client = reqwest::Client::builder().timeout(timeout).connect_timeout(timeout).build()?;
        Ok(ExportClient { client, headers: map })
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for ExportClient {
    async fn send_bytes(
        &self,
        mut request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
    ) -> Result<opentelemetry_http::Response<opentelemetry_http::Bytes>, opentelemetry_http::HttpError> {
        for (name, value) in &self.headers {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        opentelemetry_http::HttpClient::send_bytes(&self.client, request).await
    }
}

/// The configured headers as gRPC metadata, set on every export request.
#[derive(Clone)]
struct Metadata(Vec<(tonic::metadata::AsciiMetadataKey, tonic::metadata::AsciiMetadataValue)>);

impl Metadata {
    fn new(headers: &[(String, String)]) -> anyhow::Result<Metadata> {
        let mut entries = Vec::new();
        for (name, value) in headers {
            let key = tonic::metadata::AsciiMetadataKey::from_bytes(name.to_ascii_lowercase().as_bytes())
                .map_err(|_| anyhow::anyhow!("tracing header {name:?} is not a valid gRPC metadata key"))?;
            let value = value
                .parse::<tonic::metadata::AsciiMetadataValue>()
                .map_err(|_| anyhow::anyhow!("tracing header {name}: not a valid gRPC metadata value"))?;
            entries.push((key, value));
        }
        Ok(Metadata(entries))
    }
}

impl tonic::service::Interceptor for Metadata {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        for (key, value) in &self.0 {
            request.metadata_mut().insert(key.clone(), value.clone());
        }
        Ok(request)
    }
}

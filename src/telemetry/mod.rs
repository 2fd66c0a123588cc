//! Logging, metrics and tracing. Logs go to stderr (stdout belongs to the stdio protocol
//! and to the `listening on` lines); every metric is named in `metrics`; `recent` keeps
//! the last minutes of requests for the status page; spans are made and exported by
//! `trace` when tracing is on.

pub mod access;
pub mod metrics;
pub mod recent;
pub mod trace;

use std::io::IsTerminal as _;

use tracing_subscriber::filter::{FilterExt as _, Targets, filter_fn};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

use crate::config::TracingConfig;

/// Log line format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// What [`init`] started: shut it down on exit, so the last spans are exported.
#[must_use = "shut it down on exit, or the last spans are lost"]
pub struct Telemetry {
    pipeline: Option<trace::Pipeline>,
}

impl Telemetry {
    /// Exports the spans still queued, waiting at most `tracing.shutdown_timeout`.
    pub fn shutdown(self) {
        if let Some(pipeline) = self.pipeline {
            pipeline.shutdown();
        }
    }
}

/// Installs the global subscriber: the log lines (`RUST_LOG` overrides
/// `default_filter`) and, when `tracing` (the configuration's section, with the `OTEL_*`
/// variables) switches it on, the OpenTelemetry layer that exports seawall's spans.
/// The two are filtered apart: `RUST_LOG` does not thin out the spans, and spans do not
/// change the log lines. Fails only when tracing is on and its exporter cannot be built.
pub fn init(format: LogFormat, default_filter: &str, tracing: Option<&TracingConfig>) -> anyhow::Result<Telemetry> {
    let resolution = tracing.map(|config| trace::settings::resolve(config, &|name| std::env::var(name).ok()));
    let started = match resolution.as_ref().map(|r| &r.tracing) {
        Some(Ok(settings)) => Some(trace::Pipeline::start(settings)?),
        _ => None,
    };
    let (pipeline, tracer) = started.unzip();

    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(std::io::stderr().is_terminal());
    let fmt = match format {
        LogFormat::Text => fmt.boxed(),
        LogFormat::Json => fmt.json().flatten_event(true).boxed(),
    };
    // Log lines are events only: spans are for the exporter.
    let logs = fmt.with_filter(filter_fn(|meta| !meta.is_span()).and(filter));
    let spans = tracer.map(|tracer| {
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_context_activation(false)
            .with_filter(Targets::new().with_target("seawall", tracing::Level::INFO))
    });
    if let Err(e) = tracing_subscriber::registry().with(logs).with(spans).try_init() {
        eprintln!("seawall: logging was already initialised: {e}");
    }

    if let Some(resolution) = resolution {
        for warning in &resolution.warnings {
            tracing::warn!("tracing: {warning}");
        }
        match &resolution.tracing {
            Ok(settings) => tracing::info!(export = %trace::describe(settings), "tracing on"),
            Err(why) => tracing::info!(reason = %why, "tracing off"),
        }
    }
    Ok(Telemetry { pipeline })
}

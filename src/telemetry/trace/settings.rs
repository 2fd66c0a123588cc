//! What tracing runs with: the `tracing:` section, each field the file leaves unset
//! taken from its standard `OTEL_*` variable, then from its default.
//!
//! A field the file sets wins over its variable (for `headers` and `resource`, per
//! name); `OTEL_SDK_DISABLED=true` turns tracing off whatever the file says. An empty
//! variable counts as unset, and a malformed one is ignored with a warning, as the
//! OpenTelemetry specification asks.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::{TracingConfig, TracingProtocol};

/// The OTLP/HTTP path of traces, appended to a base URL.
const TRACES_PATH: &str = "/v1/traces";
const DEFAULT_HTTP_ENDPOINT: &str = "http://localhost:4318";
const DEFAULT_GRPC_ENDPOINT: &str = "http://localhost:4317";
const DEFAULT_SERVICE_NAME: &str = "seawall";

/// How new traces are sampled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sampling {
    /// The fraction of traces sampled (0 to 1), by trace id.
    pub(crate) ratio: f64,
    /// Whether a request with a sampled (or unsampled) parent follows its parent.
    pub(crate) parent_based: bool,
}

impl std::fmt::Display for Sampling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let base = match self.ratio {
            r if r >= 1.0 => "always_on".to_owned(),
            r if r <= 0.0 => "always_off".to_owned(),
            r => format!("ratio {r}"),
        };
        if self.parent_based { write!(f, "parent-based, {base}") } else { f.write_str(&base) }
    }
}

/// Tracing switched on, fully resolved.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    /// How spans are exported.
    pub(crate) protocol: TracingProtocol,
    /// Where: for `http` the full URL of the traces endpoint.
    pub(crate) endpoint: String,
    /// Headers (gRPC metadata) of every export, by lowercase name.
    pub(crate) headers: BTreeMap<String, String>,
    /// `service.name`.
    pub(crate) service_name: String,
    /// Other resource attributes.
    pub(crate) resource: BTreeMap<String, String>,
    /// The sampler.
    pub(crate) sampling: Sampling,
    /// Most spans waiting for export.
    pub(crate) queue_size: usize,
    /// Most spans per export.
    pub(crate) max_batch_size: usize,
    /// Longest wait for a batch to fill.
    pub(crate) batch_delay: Duration,
    /// Longest one export may take.
    pub(crate) export_timeout: Duration,
    /// Longest wait at shutdown.
    pub(crate) shutdown_timeout: Duration,
}

/// Whether tracing is on, and what the environment said that was ignored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Resolution {
    /// `Ok`: on, with these settings; `Err`: off, and why.
    pub(crate) tracing: Result<Settings, String>,
    /// Variables that were set but could not be used.
    pub(crate) warnings: Vec<String>,
}

/// Resolves `config` against the environment, read through `env`.
pub(crate) fn resolve(config: &TracingConfig, env: &dyn Fn(&str) -> Option<String>) -> Resolution {
    let mut warnings = Vec::new();
    // Empty counts as unset.
    let var = |name: &str| env(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
    let tracing = match switched_on(config, &var, &mut warnings) {
        Err(why) => Err(why),
        Ok(()) => Ok(settings(config, &var, &mut warnings)),
    };
    Resolution { tracing, warnings }
}

fn switched_on(
    config: &TracingConfig,
    var: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Result<(), String> {
    match var("OTEL_SDK_DISABLED").map(|v| v.to_ascii_lowercase()) {
        Some(v) if v == "true" => return Err("OTEL_SDK_DISABLED is true".into()),
        Some(v) if v == "false" => {}
        Some(v) => warnings.push(format!("OTEL_SDK_DISABLED={v:?} is neither true nor false; ignored")),
        None => {}
    }
    let exporter = var("OTEL_TRACES_EXPORTER").map(|v| v.to_ascii_lowercase());
    if let Some(other) = exporter.as_deref().filter(|e| !matches!(*e, "otlp" | "none")) {
        warnings.push(format!("OTEL_TRACES_EXPORTER={other:?}: only otlp is supported; ignored"));
    }
    match config.enabled {
        Some(true) => Ok(()),
        Some(false) => Err("tracing.enabled is false".into()),
        None if exporter.as_deref() == Some("none") => Err("OTEL_TRACES_EXPORTER is none".into()),
        None if var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some() || var("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() => {
            Ok(())
        }
        None => Err("not configured (tracing.enabled, or OTEL_EXPORTER_OTLP_ENDPOINT)".into()),
    }
}

fn settings(config: &TracingConfig, var: &dyn Fn(&str) -> Option<String>, warnings: &mut Vec<String>) -> Settings {
    let protocol = config.protocol.unwrap_or_else(|| protocol_from_env(var, warnings));
    let endpoint = endpoint(config, protocol, var, warnings);

    let mut headers = BTreeMap::new();
    for name in ["OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"] {
        if let Some(text) = var(name) {
            for (key, value) in pairs(name, &text, warnings) {
                headers.insert(key.to_ascii_lowercase(), value);
            }
            break;
        }
    }
    for (key, value) in &config.headers {
        headers.insert(key.to_ascii_lowercase(), value.clone());
    }

    let mut resource = BTreeMap::new();
    if let Some(text) = var("OTEL_RESOURCE_ATTRIBUTES") {
        resource.extend(pairs("OTEL_RESOURCE_ATTRIBUTES", &text, warnings));
    }
    resource.extend(config.resource.iter().map(|(k, v)| (k.clone(), v.clone())));
    let from_resource = resource.remove("service.name");
    let service_name = config
        .service_name
        .clone()
        .or_else(|| var("OTEL_SERVICE_NAME"))
        .or(from_resource)
        .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned());

    let sampling = match config.sample_ratio {
        Some(ratio) => Sampling { ratio, parent_based: true },
        None => sampling_from_env(var, warnings),
    };
    Settings {
        protocol,
        endpoint,
        headers,
        service_name,
        resource,
        sampling,
        queue_size: config.queue_size,
        max_batch_size: config.max_batch_size,
        batch_delay: config.batch_delay,
        export_timeout: config.export_timeout,
        shutdown_timeout: config.shutdown_timeout,
    }
}

fn protocol_from_env(var: &dyn Fn(&str) -> Option<String>, warnings: &mut Vec<String>) -> TracingProtocol {
    for name in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
        let Some(value) = var(name) else { continue };
        match value.as_str() {
            "grpc" => return TracingProtocol::Grpc,
            "http/protobuf" => return TracingProtocol::Http,
            "http/json" => {
                warnings.push(format!("{name}=http/json is not supported; using http/protobuf"));
                return TracingProtocol::Http;
            }
            other => warnings.push(format!("{name}={other:?} is not grpc, http/protobuf or http/json; ignored")),
        }
    }
    TracingProtocol::Http
}

/// The file's endpoint (a path-less `http` URL gets `/v1/traces`), the per-signal
/// variable as it is, the general one (plus `/v1/traces` for `http`), or the default.
fn endpoint(
    config: &TracingConfig,
    protocol: TracingProtocol,
    var: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> String {
    let http = protocol == TracingProtocol::Http;
    if let Some(url) = &config.endpoint {
        let bare = url.parse::<http::Uri>().is_ok_and(|u| matches!(u.path(), "" | "/"));
        return if http && bare { with_traces_path(url) } else { url.clone() };
    }
    let usable = |name: &str, warnings: &mut Vec<String>| {
        let url = var(name)?;
        match crate::config::check_tracing_endpoint(&url) {
            Ok(()) => Some(url),
            Err(why) => {
                warnings.push(format!("{name}: {why}; ignored"));
                None
            }
        }
    };
    if let Some(url) = usable("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", warnings) {
        return url;
    }
    if let Some(url) = usable("OTEL_EXPORTER_OTLP_ENDPOINT", warnings) {
        return if http { with_traces_path(&url) } else { url };
    }
    if http { with_traces_path(DEFAULT_HTTP_ENDPOINT) } else { DEFAULT_GRPC_ENDPOINT.to_owned() }
}

fn with_traces_path(base: &str) -> String {
    format!("{}{TRACES_PATH}", base.trim_end_matches('/'))
}

/// `OTEL_TRACES_SAMPLER` and its argument; the default is parent-based always-on.
fn sampling_from_env(var: &dyn Fn(&str) -> Option<String>, warnings: &mut Vec<String>) -> Sampling {
    let default = Sampling { ratio: 1.0, parent_based: true };
    let Some(sampler) = var("OTEL_TRACES_SAMPLER").map(|s| s.to_ascii_lowercase()) else { return default };
    let ratio = || match var("OTEL_TRACES_SAMPLER_ARG") {
        None => Some(1.0),
        Some(arg) => arg.parse::<f64>().ok().filter(|r| (0.0..=1.0).contains(r)),
    };
    let (ratio, parent_based) = match sampler.as_str() {
        "always_on" => (Some(1.0), false),
        "always_off" => (Some(0.0), false),
        "traceidratio" => (ratio(), false),
        "parentbased_always_on" => (Some(1.0), true),
        "parentbased_always_off" => (Some(0.0), true),
        "parentbased_traceidratio" => (ratio(), true),
        other => {
            warnings.push(format!("OTEL_TRACES_SAMPLER={other:?} is not supported; using parentbased_always_on"));
            return default;
        }
    };
    match ratio {
        Some(ratio) => Sampling { ratio, parent_based },
        None => {
            warnings.push("OTEL_TRACES_SAMPLER_ARG is not a number between 0 and 1; using 1.0".into());
            Sampling { ratio: 1.0, parent_based }
        }
    }
}

/// `key=value,key=value` (the format of `OTEL_EXPORTER_OTLP_HEADERS` and
/// `OTEL_RESOURCE_ATTRIBUTES`), values percent-decoded; a malformed entry is skipped
/// with a warning naming `name`.
fn pairs(name: &str, text: &str, warnings: &mut Vec<String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let decoded = entry.split_once('=').and_then(|(k, v)| Some((k.trim(), percent_decode(v.trim())?)));
        match decoded {
            Some((key, value)) if !key.is_empty() => out.push((key.to_owned(), value)),
            _ => warnings
                .push(format!("{name}: the entry {:?} is not key=value; skipped", crate::sanitize::ident(entry))),
        }
    }
    out
}

/// `%XX` escapes decoded; `None` for a bad escape or a result that is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
    }

    fn on(config: &TracingConfig, vars: &[(&str, &str)]) -> Settings {
        let resolved = resolve(config, &with_env(vars));
        resolved.tracing.unwrap_or_else(|why| panic!("expected tracing on, off because {why}"))
    }

    fn enabled() -> TracingConfig {
        TracingConfig { enabled: Some(true), ..TracingConfig::default() }
    }

    #[test]
    fn off_by_default_and_on_by_the_file_or_an_endpoint_variable() {
        let off = resolve(&TracingConfig::default(), &with_env(&[]));
        assert!(off.tracing.is_err() && off.warnings.is_empty(), "{off:?}");
        let s = on(&enabled(), &[]);
        assert_eq!(s.protocol, TracingProtocol::Http);
        assert_eq!(s.endpoint, "http://localhost:4318/v1/traces");
        assert_eq!(s.service_name, "seawall");
        assert_eq!(s.sampling, Sampling { ratio: 1.0, parent_based: true });
        let s = on(&TracingConfig::default(), &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")]);
        assert_eq!(s.endpoint, "http://collector:4318/v1/traces");
        let s = on(&TracingConfig::default(), &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:1/custom")]);
        assert_eq!(s.endpoint, "http://c:1/custom", "the per-signal variable is used as it is");
    }

    #[test]
    fn the_file_wins_except_over_the_kill_switch() {
        let file_off = TracingConfig { enabled: Some(false), ..TracingConfig::default() };
        assert!(resolve(&file_off, &with_env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")])).tracing.is_err());
        let disabled = resolve(&enabled(), &with_env(&[("OTEL_SDK_DISABLED", "TRUE")]));
        assert_eq!(disabled.tracing, Err("OTEL_SDK_DISABLED is true".to_owned()));
        let none = [("OTEL_TRACES_EXPORTER", "none"), ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")];
        assert!(resolve(&TracingConfig::default(), &with_env(&none)).tracing.is_err());
        assert!(resolve(&enabled(), &with_env(&none)).tracing.is_ok(), "enabled: true wins over the exporter variable");

        let config = TracingConfig {
            enabled: Some(true),
            protocol: Some(TracingProtocol::Grpc),
            endpoint: Some("http://file:4317".into()),
            service_name: Some("edge".into()),
            sample_ratio: Some(0.25),
            headers: [("X-Key".to_owned(), "file".to_owned())].into(),
            resource: [("deployment.environment.name".to_owned(), "prod".to_owned())].into(),
            ..TracingConfig::default()
        };
        let vars = [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318"),
            ("OTEL_SERVICE_NAME", "env-name"),
            ("OTEL_TRACES_SAMPLER", "always_off"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-key=env,other=e%20v"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=dev,team=edge"),
        ];
        let s = on(&config, &vars);
        assert_eq!(s.protocol, TracingProtocol::Grpc);
        assert_eq!(s.endpoint, "http://file:4317", "grpc endpoints get no path");
        assert_eq!(s.service_name, "edge");
        assert_eq!(s.sampling, Sampling { ratio: 0.25, parent_based: true });
        assert_eq!(s.headers, [("other".into(), "e v".into()), ("x-key".into(), "file".into())].into());
        assert_eq!(
            s.resource,
            [("deployment.environment.name".into(), "prod".into()), ("team".into(), "edge".into())].into()
        );

        let s = on(&enabled(), &vars);
        assert_eq!((s.protocol, s.endpoint.as_str()), (TracingProtocol::Http, "http://env:4318/v1/traces"));
        assert_eq!(s.service_name, "env-name");
        assert_eq!(s.sampling, Sampling { ratio: 0.0, parent_based: false });
        assert_eq!(s.headers.get("x-key").map(String::as_str), Some("env"));
    }

    #[test]
    fn file_endpoints_get_the_traces_path_only_when_they_have_none() {
        let at = |url: &str| on(&TracingConfig { endpoint: Some(url.into()), ..enabled() }, &[]).endpoint;
        assert_eq!(at("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(at("https://c/"), "https://c/v1/traces");
        assert_eq!(at("http://c:4318/otlp/v1/traces"), "http://c:4318/otlp/v1/traces");
    }

    #[test]
    fn samplers_from_the_environment() {
        let sampling = |vars: &[(&str, &str)]| on(&enabled(), vars).sampling;
        let s = |sampler: &'static str, arg: &'static str| {
            sampling(&[("OTEL_TRACES_SAMPLER", sampler), ("OTEL_TRACES_SAMPLER_ARG", arg)])
        };
        assert_eq!(s("parentbased_traceidratio", "0.1"), Sampling { ratio: 0.1, parent_based: true });
        assert_eq!(s("traceidratio", "0.5"), Sampling { ratio: 0.5, parent_based: false });
        assert_eq!(s("always_on", ""), Sampling { ratio: 1.0, parent_based: false });
        assert_eq!(s("parentbased_always_off", ""), Sampling { ratio: 0.0, parent_based: true });
        assert_eq!(sampling(&[("OTEL_TRACES_SAMPLER", "traceidratio")]).ratio, 1.0, "no argument: 1.0");
    }

    #[test]
    fn malformed_variables_are_warned_about_and_ignored() {
        let vars = [
            ("OTEL_SDK_DISABLED", "maybe"),
            ("OTEL_TRACES_EXPORTER", "zipkin"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "not a url"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://c"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "good=1,bad,also=%zz"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "2"),
        ];
        let resolved = resolve(&enabled(), &with_env(&vars));
        let s = resolved.tracing.clone().unwrap();
        assert_eq!(s.protocol, TracingProtocol::Http);
        assert_eq!(s.endpoint, "http://localhost:4318/v1/traces");
        assert_eq!(s.headers, [("good".into(), "1".into())].into());
        assert_eq!(s.sampling, Sampling { ratio: 1.0, parent_based: true });
        assert_eq!(resolved.warnings.len(), 8, "{:#?}", resolved.warnings);
        let empty = resolve(&TracingConfig::default(), &with_env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]));
        assert!(empty.tracing.is_err(), "an empty variable is unset");
        assert_eq!(resolve(&enabled(), &with_env(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")])).warnings.len(), 1);
    }

    #[test]
    fn sampling_reads_well() {
        assert_eq!(Sampling { ratio: 1.0, parent_based: true }.to_string(), "parent-based, always_on");
        assert_eq!(Sampling { ratio: 0.5, parent_based: false }.to_string(), "ratio 0.5");
    }
}

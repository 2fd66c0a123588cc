//! The upstreams as the configuration names them: how each is reached (the HTTP client
//! of each endpoint, or a supervised process) and its own request stack.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;

use crate::catalog::ToolCatalog;
use crate::catalog::overrides::Overrides;
use crate::config::{Config, StdioShare, UpstreamConfig, UpstreamKind};

use super::upstream_stack;
use crate::mcp::init::InitParams;
use crate::resilience::breaker::Breakers;
use crate::resilience::load_shed::Slots;
use crate::upstream::http::HttpUpstream;
use crate::upstream::pool::HttpPool;
use crate::upstream::registry::{Connector, UpstreamHandle, Upstreams};
use crate::upstream::settings::UpstreamSettings;
use crate::upstream::sse_legacy::SseUpstream;
use crate::upstream::stdio::{StdioLink, StdioUpstream};

/// Builds every configured upstream; shared stdio processes start here.
pub(crate) fn build_upstreams(config: &Config, breakers: &Arc<Breakers>) -> anyhow::Result<Upstreams> {
    let mut upstreams = Upstreams::default();
    for up in &config.upstreams {
        let connector = match connect_to(config, up) {
            Ok(connector) => connector,
            Err(e) => {
                stop_shared(upstreams.iter().map(|h| &h.connector));
                return Err(e);
            }
        };
        upstreams.push(upstream_handle(config, up, connector, Default::default(), breakers));
    }
    Ok(upstreams)
}

/// How to reach `up`: the HTTP client of each endpoint, or the stdio process (a shared
/// one starts here).
pub(crate) fn connect_to(config: &Config, up: &UpstreamConfig) -> anyhow::Result<Connector> {
    let timeouts = up.timeouts(&config.defaults.timeouts);
    let name: Arc<str> = Arc::from(up.name.as_str());
    let connector = match up.kind() {
        UpstreamKind::Http { url, headers } => {
            let mut endpoints = Vec::new();
            for endpoint in std::iter::once(url).chain(up.endpoints.iter().map(String::as_str)) {
                let client =
                    HttpUpstream::new(&up.name, endpoint, headers, timeouts.connect, config.limits.max_message_bytes)
                        .with_context(|| format!("upstream {:?}", up.name))?
                        .speaking(up.protocol);
                // One endpoint speaking `auto` may turn out to be an HTTP+SSE server.
                let client = if up.endpoints.is_empty() {
                    let sse = SseUpstream::new(
                        &up.name,
                        endpoint,
                        headers,
                        timeouts.connect,
                        config.limits.max_message_bytes,
                    )
                    .with_context(|| format!("upstream {:?}", up.name))?;
                    client.with_sse_fallback(sse)
                } else {
                    client
                };
                endpoints.push(Arc::new(client));
            }
            Connector::Http(Arc::new(HttpPool::new(Arc::clone(&name), endpoints, timeouts.connect)))
        }
        UpstreamKind::Sse { url, headers } => {
            let client = SseUpstream::new(&up.name, url, headers, timeouts.connect, config.limits.max_message_bytes)
                .with_context(|| format!("upstream {:?}", up.name))?;
            Connector::Sse(Arc::new(client))
        }
        UpstreamKind::Stdio { command, args, env, cwd, share } => {
            let stdio = Arc::new(StdioUpstream {
                name: Arc::clone(&name),
                program: resolve_program(command)?,
                args: args.to_vec(),
                env: env.clone(),
                inherit_env: config.defaults.inherit_env.iter().chain(&up.inherit_env).cloned().collect(),
                cwd: cwd.map(PathBuf::from),
                restart_base: up.restart.base_delay,
                restart_max: up.restart.max_delay,
                shutdown_grace: up.shutdown_grace,
                max_line_bytes: config.limits.max_message_bytes,
                connect_timeout: timeouts.connect,
            });
            match share {
                StdioShare::Shared => Connector::SharedStdio(StdioLink::spawn(stdio, InitParams::gateway_own(), false)),
                StdioShare::PerSession => {
                    let processes = Arc::new(tokio::sync::Semaphore::new(up.max_processes.max(1)));
                    Connector::PerSessionStdio(stdio, processes)
                }
            }
        }
    };
    Ok(connector)
}

/// The upstream `up` reached through `connector`, with its settings resolved against the
/// defaults and its own request stack; `catalog` is what is known of its tools.
pub(crate) fn upstream_handle(
    config: &Config,
    up: &UpstreamConfig,
    connector: Connector,
    catalog: Arc<ToolCatalog>,
    breakers: &Arc<Breakers>,
) -> UpstreamHandle {
    let policy = UpstreamSettings {
        timeouts: up.timeouts(&config.defaults.timeouts),
        retry: up.retry(&config.defaults.retry),
        breaker: up.breaker(&config.defaults.breaker),
        concurrency: up.concurrency(&config.defaults.concurrency),
        trust_annotations: up.trust_annotations,
        sanitize: up.sanitize(&config.errors),
        tools: up.tools.clone(),
        catalog,
        prefixed: Default::default(),
        tool_overrides: Overrides::tools(&up.name, &up.tools).map(Arc::new),
        prompt_overrides: Overrides::prompts(&up.name, &up.prompts).map(Arc::new),
    };
    let slots = Slots::new(policy.concurrency);
    let service = crate::workers::PerWorker::new(upstream_stack(&policy, &slots, breakers));
    UpstreamHandle { name: Arc::from(up.name.as_str()), connector, policy, service, slots }
}

/// Stops the shared stdio processes among `connectors` (the others hold no process of
/// their own outside sessions).
pub(crate) fn stop_shared<'a>(connectors: impl Iterator<Item = &'a Connector>) {
    for connector in connectors {
        if let Connector::SharedStdio(link) = connector {
            let link = Arc::clone(link);
            tokio::spawn(async move { link.close().await });
        }
    }
}

/// `seawall` as a command means this very binary (so the demo config needs nothing installed).
fn resolve_program(command: &str) -> anyhow::Result<PathBuf> {
    if command == "seawall" {
        return std::env::current_exe().context("cannot find the running seawall binary");
    }
    Ok(PathBuf::from(command))
}

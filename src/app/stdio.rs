//! `seawall stdio`: the gateway for one client on stdin and stdout, with the same core
//! as `run` and its listeners only when asked for.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::run::{Core, HttpFront, admin_limits};
use crate::config::Config;
use crate::downstream::listener;
use crate::downstream::stdio::StdioClient;
use crate::identity::Principal;
use crate::session::Scope;

/// How `seawall stdio` serves its one client.
#[derive(Debug, Default, Clone)]
pub struct StdioOptions {
    /// Only this upstream, with its own names (as `/mcp/<upstream>`); default: every
    /// upstream, names prefixed (as `/mcp`).
    pub upstream: Option<String>,
    /// The name of a configured API key (`auth.api_keys`) whose principal the client acts
    /// as for authorisation and rate limits; default: anonymous.
    pub principal: Option<String>,
    /// Also serve Streamable HTTP clients here (the file's `listen` does not apply).
    pub listen: Option<SocketAddr>,
    /// Also serve `/healthz`, `/readyz` and `/metrics` here (the file's `admin_listen`
    /// does not apply).
    pub admin_listen: Option<SocketAddr>,
    /// The file the configuration was read from: SIGHUP, a change of it, or
    /// `POST /admin/reload` reads it again. None: no reloads.
    pub config_file: Option<std::path::PathBuf>,
}

/// Serves one MCP client on stdin and stdout until stdin ends or SIGINT/SIGTERM, then
/// stops the upstreams. An HTTP or admin listener runs only when asked for, and one
/// that cannot bind is logged, not fatal: a client may launch several copies.
pub async fn run_stdio(mut config: Config, options: StdioOptions) -> anyhow::Result<()> {
    let hangups = crate::signals::Hangups::install();
    let read = config.clone();
    let client = stdio_client(&config, &options)?;
    // After `read`: a reload compares the file with what it said, not with this.
    config.access_log.default_off_on_stdio();
    let mut core = Core::assemble(&mut config)?;
    let background = core.spawn_background();
    let stop = tokio_util::sync::CancellationToken::new();
    let mut listeners = Vec::new();
    let mut fronts = Vec::new();
    if let Some(addr) = options.listen {
        match HttpFront::bind(&config, addr, &core.gateway).await {
            Ok(front) => {
                fronts.push(Arc::clone(&front.auth));
                tracing::info!(url = %format!("http://{}/mcp", front.local), "HTTP listener");
                let (stop, closing) = (stop.clone(), front.closing.clone());
                let stopping = async move {
                    stop.cancelled().await;
                    closing.cancel();
                };
                listeners.push(tokio::spawn(front.serve(None, stopping)));
            }
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "no HTTP listener; serving the stdio client only"),
        }
    }
    let reloading = match options.config_file.clone() {
        Some(file) => core.serve_reloads(hangups, file, read, fronts, false),
        None => {
            hangups.ignore("no configuration file to reload");
            None
        }
    };
    if let Some(addr) = options.admin_listen {
        match TcpListener::bind(addr).await {
            Ok(l) => {
                let local = l.local_addr()?;
                crate::admin::log_access(&config.admin, local);
                tracing::info!(url = %format!("http://{local}"), "admin listener");
                let serving = listener::serve(
                    l,
                    core.admin_app(),
                    admin_limits(&config),
                    None,
                    None,
                    stop.clone().cancelled_owned(),
                );
                listeners.push(tokio::spawn(serving));
            }
            Err(e) => tracing::warn!(%addr, error = %e, "no admin listener; serving the stdio client only"),
        }
    }
    let (input, output) = (tokio::io::stdin(), tokio::io::stdout());
    let gateway = Arc::clone(&core.gateway);
    crate::downstream::stdio::serve(gateway, client, input, output, crate::signals::shutdown_signal()).await;

    tracing::info!("shutting down");
    // The process lives as long as its stdio client: listeners stop with it.
    stop.cancel();
    for task in listeners.into_iter().chain(reloading) {
        task.abort();
    }
    drop(background);
    core.shutdown().await;
    Ok(())
}

/// The stdio client's view and identity. `auth:` does not apply (there is no bearer
/// token on stdio): the client is anonymous unless `--principal` names a configured key.
fn stdio_client(config: &Config, options: &StdioOptions) -> anyhow::Result<StdioClient> {
    let scope = match &options.upstream {
        None => Scope::Aggregate,
        Some(name) => {
            anyhow::ensure!(
                config.upstream(name).is_some(),
                "--upstream {name:?}: no such upstream (configured: {})",
                config.upstreams.iter().map(|u| u.name.as_str()).collect::<Vec<_>>().join(", ")
            );
            Scope::Single(Arc::from(name.as_str()))
        }
    };
    let principal = match &options.principal {
        None => None,
        Some(name) => {
            let keys = config.auth.as_ref().map(|a| a.api_keys.as_slice()).unwrap_or_default();
            anyhow::ensure!(
                keys.iter().any(|k| &k.name == name),
                "--principal {name:?}: not the name of one of auth.api_keys"
            );
            Some(Arc::new(Principal::api_key(name)))
        }
    };
    match (&principal, &config.auth) {
        (Some(p), _) => tracing::info!(principal = %p.label(), "the stdio client acts as a configured API key"),
        (None, Some(_)) => tracing::info!(
            "auth: does not apply to stdio; the stdio client is anonymous (--principal NAME acts as a configured API key)"
        ),
        (None, None) => {}
    }
    tracing::info!(scope = ?scope, "serving one MCP client on stdin and stdout");
    Ok(StdioClient {
        scope,
        principal,
        max_line_bytes: config.limits.max_body_bytes,
        idle_timeout: config.session.idle_timeout,
    })
}

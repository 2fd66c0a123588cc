//! Running the gateway: the listeners, the background tasks, reloads and the shutdown.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tower::Layer as _;

use crate::client::{AccessLayer, CancelLayer};
use crate::config::Config;
use crate::downstream::budget::{self, ADMIN_CONNECTIONS};
use crate::downstream::cors::CorsLayer;
use crate::downstream::endpoint;
use crate::downstream::http::HttpState;
use crate::downstream::listener::{self, ListenerLimits};
use crate::downstream::trusted_proxies::TrustedProxies;
use arc_swap::ArcSwap;

use super::upstreams::build_upstreams;
use super::{ClientLayers, ClientParts, reload, routing, shutdown};
use crate::control::{Reloads, Trigger};
use crate::gateway::Gateway;
use crate::policy::admission::AdmissionLayer;
use crate::policy::auth::Authenticator;
use crate::policy::cors::CorsPolicy;
use crate::policy::origin::OriginPolicy;
use crate::resilience::breaker::shared::{BreakerSharing, SharedUpstreams};
use crate::resilience::breaker::{BreakerKey, Breakers, State as BreakerState};
use crate::session::SessionTable;
use crate::session::sealed::SessionKeys;
use crate::signals::{Drain, Hangups, ShutdownSignals};
use crate::telemetry::access::AccessLog;
use crate::upstream::registry::Connector;
use crate::workers::Workers;

/// Overrides from the command line.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// Replaces `listen`.
    pub listen: Option<SocketAddr>,
    /// Replaces `admin_listen`.
    pub admin_listen: Option<SocketAddr>,
    /// The file the configuration was read from: SIGHUP, a change of it, or
    /// `POST /admin/reload` reads it again. None: no reloads.
    pub config_file: Option<PathBuf>,
}

/// What every front end shares: the gateway over the upstreams and their stacks, and
/// what its background tasks need.
pub(super) struct Core {
    pub(super) gateway: Arc<Gateway>,
    breakers: Arc<Breakers>,
    /// The client layers a reload keeps.
    parts: ClientParts,
    /// The client layers in force at start-up, which a reload keeps while their settings
    /// stay the same.
    layers: ClientLayers,
    /// The configuration in force (fitted to the open-file limit); a reload replaces it.
    config: Arc<ArcSwap<Config>>,
    /// Configuration reloads: who asks, and the requests the reloader serves.
    reloads: Reloads,
    requests: Option<tokio::sync::mpsc::Receiver<Trigger>>,
    transitions: tokio::sync::mpsc::UnboundedReceiver<(BreakerKey, BreakerState)>,
    /// Shared breakers' link to the other replicas, until it is started.
    sharing: Option<BreakerSharing>,
    /// The upstreams whose breakers are shared, when some are: a reload updates them.
    shared_upstreams: Option<SharedUpstreams>,
    metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    /// A graceful shutdown's progress, as readiness and the client stack see it.
    drain: Drain,
}

impl Core {
    /// Builds the upstreams (shared stdio processes start here), the client stack and the
    /// gateway; fits the connection and session caps under the open-file limit.
    pub(super) fn assemble(config: &mut Config) -> anyhow::Result<Core> {
        let (transitions_tx, transitions) = tokio::sync::mpsc::unbounded_channel();
        // Breakers marked `shared` publish their transitions to the other replicas.
        let sharing = BreakerSharing::new(config)?;
        let breakers = Breakers::new().with_feed(sharing.as_ref().map(BreakerSharing::feed));
        let breakers = Arc::new(breakers.with_listener(move |key: &BreakerKey, state| {
            crate::telemetry::metrics::breaker_transition(&key.upstream, key.tool.is_some(), state.as_str());
            let _ = transitions_tx.send((key.clone(), state));
        }));
        let metrics = crate::telemetry::metrics::install();
        // Every connection and every session's upstream streams are descriptors: raise the
        // open-file limit, and fit the caps under it so that accept never runs dry.
        let fits = budget::raise_nofile_limit().map(|nofile| budget::plan(config, nofile));
        if let Some(fits) = fits {
            config.limits.max_connections = fits.max_connections;
            config.session.max_sessions = fits.max_sessions;
        }
        let upstreams = Arc::new(build_upstreams(config, &breakers)?);
        if metrics.is_some() {
            let names: Vec<&str> = upstreams.iter().map(|h| &*h.name).collect();
            crate::telemetry::metrics::zero(&names);
        }
        let access_log = AccessLog::start(&config.access_log)?;
        let drain = Drain::default();
        let parts = ClientParts {
            access: AccessLayer::new(access_log.clone()),
            admission: AdmissionLayer::new(config.limits.max_in_flight, config.limits.max_in_flight_per_session)
                .with_max_per_principal(config.limits.max_in_flight_per_principal),
            cancel: CancelLayer::new(drain.clone()),
        };
        let layers = ClientLayers::new(config)?;
        let routing = routing(config, Arc::clone(&upstreams), &breakers, &parts, layers.clone());
        let sessions = SessionTable::new(config.session.max_sessions, config.session.idle_timeout)
            .with_max_per_peer(config.session.max_sessions_per_peer)
            .with_max_per_principal(config.session.max_sessions_per_principal)
            .with_keys(Arc::new(SessionKeys::from_config(&config.session)?));
        let gateway = Arc::new(Gateway::with_routing(routing, sessions).with_access_log(access_log));
        let (reloads, requests) = crate::control::channel();
        let config = Arc::new(ArcSwap::from_pointee(config.clone()));
        Ok(Core {
            gateway,
            breakers,
            parts,
            layers,
            config,
            reloads,
            requests: Some(requests),
            transitions,
            shared_upstreams: sharing.as_ref().map(BreakerSharing::upstreams),
            sharing,
            metrics,
            drain,
        })
    }

    /// Starts the housekeeping: idle sessions end, clients hear of hidden tools, and
    /// shared breakers follow the other replicas (whose transitions reach the listener,
    /// hence the announcer, like local ones).
    pub(super) fn spawn_background(&mut self) -> Background {
        let (_, transitions) = tokio::sync::mpsc::unbounded_channel();
        let transitions = std::mem::replace(&mut self.transitions, transitions);
        let reaper = tokio::spawn(reap_sessions(Arc::clone(&self.gateway), self.metrics.clone()));
        let announcer =
            tokio::spawn(announce_hidden_tools(Arc::clone(&self.gateway), Arc::clone(&self.breakers), transitions));
        let sharing = self.sharing.take().map(|s| s.spawn(Arc::clone(&self.breakers)));
        Background([reaper, announcer].into_iter().chain(sharing).collect())
    }

    /// The admin listener's routes; `POST /admin/reload` works when the gateway serves
    /// reloads (see [`Core::serve_reloads`]).
    pub(super) fn admin_app(&self) -> axum::Router {
        let options = crate::admin::AdminOptions {
            config: Arc::clone(&self.config),
            drain: self.drain.clone(),
            reloads: self.requests.is_none().then(|| self.reloads.clone()),
        };
        crate::admin::router(Arc::clone(&self.gateway), self.metrics.clone(), options)
    }

    /// Starts serving configuration reloads from `file` (SIGHUP, changes of the file,
    /// `POST /admin/reload`), which was read as `read` (before overrides); `fronts` are
    /// the HTTP listeners whose authentication a reload may replace; `listeners` says
    /// whether the file's listener addresses are those in use.
    pub(super) fn serve_reloads(
        &mut self,
        hangups: Hangups,
        file: PathBuf,
        read: Config,
        fronts: Vec<Arc<ArcSwap<Authenticator>>>,
        listeners: bool,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let requests = self.requests.take()?;
        let reloader = reload::Reloader {
            path: file,
            file: read,
            in_force: Arc::clone(&self.config),
            gateway: Arc::clone(&self.gateway),
            breakers: Arc::clone(&self.breakers),
            parts: self.parts.clone(),
            layers: self.layers.clone(),
            shared_upstreams: self.shared_upstreams.clone(),
            auth: fronts,
            listeners,
        };
        Some(tokio::spawn(reloader.serve(hangups, self.reloads.clone(), requests)))
    }

    /// Ends every session (closing their upstream sessions and processes) and stops the
    /// shared stdio processes.
    pub(super) async fn shutdown(&self) {
        self.gateway.shutdown().await;
        for handle in self.gateway.upstreams().iter() {
            if let Connector::SharedStdio(link) = &handle.connector {
                link.close().await;
            }
        }
    }
}

/// Background tasks, aborted on drop.
pub(super) struct Background(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Background {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// The client-facing HTTP listener, bound and ready to serve.
pub(super) struct HttpFront {
    listener: TcpListener,
    pub(super) local: SocketAddr,
    app: crate::downstream::cors::Cors<endpoint::Front>,
    limits: ListenerLimits,
    /// The proxies whose word on their clients' addresses is taken; `None` trusts none.
    proxies: Option<Arc<TrustedProxies>>,
    /// Fired to end the long-lived streams (GET, HTTP+SSE, subscriptions), so that
    /// connections can drain.
    pub(super) closing: tokio_util::sync::CancellationToken,
    /// Its authenticator, which a reload may replace.
    pub(super) auth: Arc<arc_swap::ArcSwap<Authenticator>>,
}

impl HttpFront {
    /// Binds `addr` and sets up authentication and Host/Origin checks for it.
    pub(super) async fn bind(config: &Config, addr: SocketAddr, gateway: &Arc<Gateway>) -> anyhow::Result<HttpFront> {
        let listener = TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
        let local = listener.local_addr()?;
        // Who is calling: checked first on every MCP request, before any session is found.
        let auth = Arc::new(Authenticator::new(config.auth.as_ref()).await?);
        tracing::info!(auth = %auth.describe(), "client authentication");
        let origin = OriginPolicy::new(&config.security, local);
        let state = HttpState {
            gateway: Arc::clone(gateway),
            origin: origin.clone(),
            auth: Arc::new(arc_swap::ArcSwap::new(Arc::clone(&auth))),
            max_body_bytes: config.limits.max_body_bytes,
            body_timeout: config.limits.body_timeout,
            closing: tokio_util::sync::CancellationToken::new(),
            sse: Default::default(),
            replay: config.session.replay_buffer,
        };
        let closing = state.closing.clone();
        let authenticator = Arc::clone(&state.auth);
        let mut app = endpoint::router(state.clone());
        if let Some(metadata) = auth.metadata() {
            let names = config.upstreams.iter().map(|u| u.name.clone()).collect();
            app = app.merge(crate::policy::auth::metadata::router(Arc::clone(metadata), names));
        }
        // CORS for browser clients, when configured: around the whole router, so preflights
        // (which carry no credentials) are answered before authentication, and every answer
        // to an allowed origin, refusals included, is readable by its page.
        let app =
            CorsLayer::new(CorsPolicy::new(&config.security.cors), origin).layer(endpoint::Front::new(state, app));
        let proxies = TrustedProxies::new(&config.trusted_proxies);
        if proxies.is_some() {
            let trusted = &config.trusted_proxies;
            tracing::info!(cidrs = ?trusted.cidrs, source = ?trusted.source, hops = trusted.hops, "client addresses from trusted proxies");
        }
        Ok(HttpFront { listener, local, app, limits: client_limits(config), proxies, closing, auth: authenticator })
    }

    /// Serves until `stop` completes, then drains the connections; the long-lived
    /// streams end when `closing` is fired, which the caller does. Connections run on
    /// `workers` when given, on the current runtime otherwise.
    pub(super) async fn serve(self, workers: Option<Arc<Workers>>, stop: impl std::future::Future<Output = ()>) {
        listener::serve(self.listener, self.app, self.limits, self.proxies, workers, stop).await;
    }
}

/// The bounds of the client listener.
fn client_limits(config: &Config) -> ListenerLimits {
    ListenerLimits {
        max_connections: config.limits.max_connections,
        max_per_peer: config.limits.max_connections_per_peer,
        header_timeout: config.limits.header_timeout,
        idle_timeout: config.limits.idle_timeout,
        drain: config.shutdown.grace + shutdown::LISTENER_MARGIN,
    }
}

/// The admin listener has a small budget of its own, so it answers while clients
/// saturate theirs; it stops last, with nothing left to drain.
pub(super) fn admin_limits(config: &Config) -> ListenerLimits {
    ListenerLimits {
        max_connections: ADMIN_CONNECTIONS,
        max_per_peer: 0,
        drain: Duration::from_secs(1),
        ..client_limits(config)
    }
}

/// Runs the gateway until SIGINT or SIGTERM, then shuts it down gracefully (see
/// `shutdown.rs`); SIGHUP is logged and ignored.
pub async fn run(mut config: Config, overrides: Overrides) -> anyhow::Result<()> {
    let read = config.clone();
    if let Some(listen) = overrides.listen {
        config.listen = listen;
    }
    if let Some(admin) = overrides.admin_listen {
        config.admin_listen = Some(admin);
    }
    let hangups = Hangups::install();
    let signals = ShutdownSignals::install();
    let mut core = Core::assemble(&mut config)?;
    let front = HttpFront::bind(&config, config.listen, &core.gateway).await?;
    let reloading = match overrides.config_file {
        Some(file) => core.serve_reloads(hangups, file, read, vec![Arc::clone(&front.auth)], true),
        None => {
            hangups.ignore("no configuration file to reload");
            None
        }
    };
    let workers = Workers::start_as(config.workers).context("cannot start the worker threads")?;
    tracing::info!(workers = workers.len(), "client connections are served by single-threaded worker runtimes");
    println!("seawall listening on http://{}/mcp", front.local);

    let admin = match config.admin_listen {
        Some(addr) => {
            let l = TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
            let local = l.local_addr()?;
            crate::admin::log_access(&config.admin, local);
            println!("seawall admin listening on http://{local}");
            Some(l)
        }
        None => None,
    };
    use std::io::Write as _;
    let _ = std::io::stdout().flush();

    let background = core.spawn_background();
    let admin_stop = tokio_util::sync::CancellationToken::new();
    let admin_task = admin.map(|l| {
        let stop = admin_stop.clone().cancelled_owned();
        tokio::spawn(listener::serve(l, core.admin_app(), admin_limits(&config), None, None, stop))
    });
    let accepting = tokio_util::sync::CancellationToken::new();
    let closing = front.closing.clone();
    let serving = tokio::spawn(front.serve(Some(Arc::clone(&workers)), accepting.clone().cancelled_owned()));
    let shutdown =
        shutdown::Shutdown { gateway: &core.gateway, drain: &core.drain, config: config.shutdown, accepting, closing };
    shutdown.run(signals).await;
    if let Err(e) = serving.await {
        tracing::warn!(error = %e, "the MCP listener's task failed");
    }

    tracing::info!("ending sessions and stopping upstream processes");
    if let Some(reloading) = reloading {
        reloading.abort();
    }
    drop(background);
    core.shutdown().await;
    admin_stop.cancel();
    if let Some(t) = admin_task {
        let _ = t.await;
    }
    tracing::info!("shut down");
    Ok(())
}

/// With `hide_open_tools`, a tool whose breaker opens (or every tool of an upstream whose
/// own breaker opens) disappears from `tools/list` and comes back when it half-opens;
/// clients hear `notifications/tools/list_changed` both times. Breakers half-open lazily,
/// so an open one is polled until it lets probes in.
async fn announce_hidden_tools(
    gateway: Arc<Gateway>,
    breakers: Arc<Breakers>,
    mut transitions: tokio::sync::mpsc::UnboundedReceiver<(BreakerKey, BreakerState)>,
) {
    while let Some((key, state)) = transitions.recv().await {
        let Some(handle) = gateway.upstreams().get(&key.upstream).cloned() else { continue };
        if !handle.policy.breaker.hide_open_tools {
            continue;
        }
        gateway.announce_tools_changed(&key.upstream);
        if state == BreakerState::Open {
            let breakers = Arc::clone(&breakers);
            let max = handle.policy.breaker.max_break + Duration::from_secs(1);
            tokio::spawn(async move {
                let started = tokio::time::Instant::now();
                while breakers.is_open(&key.upstream, key.tool.as_deref()) && started.elapsed() < max {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            });
        }
    }
}

/// Housekeeping every `REAP_EVERY` (15 s): idle sessions end, histograms are compacted.
async fn reap_sessions(gateway: Arc<Gateway>, metrics: Option<metrics_exporter_prometheus::PrometheusHandle>) {
    let mut tick = tokio::time::interval(crate::session::table::REAP_EVERY);
    loop {
        tick.tick().await;
        gateway.reap_idle().await;
        if let Some(m) = &metrics {
            m.run_upkeep();
        }
    }
}

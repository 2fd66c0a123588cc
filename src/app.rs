//! Assembles seawall: the listeners, the client stack, and one stack per upstream. The
//! whole request path, outermost first:
//!
//! ```text
//! client ─► downstream::listener          connection caps, header/body/idle timeouts
//!        ─► downstream::cors              CORS preflights and headers (when configured)
//!        ─► downstream::endpoint          HTTP: Host/Origin, authentication, the front of the era:
//!           downstream::streamable_http   sessions: Accept, size limit, decode, refusals, resumable streams
//!       (or downstream::modern            2026-07-28: the envelope and its headers, stateless POSTs)
//!       (or downstream::sse_legacy        HTTP+SSE clients of 2024-11-05: the same checks)
//!       (or downstream::stdio             `seawall stdio`: one client, one message per line)
//!        ─► gateway                       session lookup, progress tokens, related messages
//!        ─► client stack ([`client_stack`]) span ◄ access ◄ rewrite ◄ admission ◄ authorize ◄ rate limit ◄ cancel ◄ cache ◄ routes
//!        ─► routing                       which upstream: a name, a URI, or every upstream of a list (merged after)
//!        ─► routing::forward              per upstream: catalog ◄ metric ◄ arguments ◄ param headers ◄ upstream stack ◄ learn
//!        ─► upstream stack ([`upstream_stack`]) shed ◄ deadline ◄ blame ◄ retry ◄ breaker ◄ attempt
//!        ─► call::Transport               HTTP or HTTP+SSE session, replicas, or supervised stdio process
//! ```
//!
//! The answer comes back the same way. It stays as the upstream sent it up to the client
//! stack's rewrite layer, where it (or any failure on the way) becomes what the client
//! sees, once ([`crate::errors`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tower::{Layer as _, ServiceBuilder};

use crate::call::{SendAttempt, UpstreamService};
use crate::catalog::ToolCatalog;
use crate::client::{AccessLayer, CacheLayer, CancelLayer, ClientService, RequestSpanLayer};
use crate::config::{Config, StdioShare, UpstreamConfig, UpstreamKind};
use crate::downstream::budget::{self, ADMIN_CONNECTIONS};
use crate::downstream::cors::CorsLayer;
use crate::downstream::endpoint;
use crate::downstream::http::HttpState;
use crate::downstream::listener::{self, ListenerLimits};
use crate::errors::{RewriteLayer, Rewriter};
use arc_swap::ArcSwap;

use crate::control::{Reloads, Trigger};
use crate::gateway::{Gateway, Routing};
use crate::mcp::init::InitParams;
use crate::policy::admission::AdmissionLayer;
use crate::policy::auth::Authenticator;
use crate::policy::authz::AuthorizeLayer;
use crate::policy::cors::CorsPolicy;
use crate::policy::origin::OriginPolicy;
use crate::policy::rate_limit::RateLimitLayer;
use crate::resilience::attempt::AttemptLayer;
use crate::resilience::breaker::shared::{BreakerSharing, SharedUpstreams};
use crate::resilience::breaker::{BlameLayer, BreakerKey, BreakerLayer, Breakers, State as BreakerState};
use crate::resilience::deadline::DeadlineLayer;
use crate::resilience::load_shed::{LoadShedLayer, Slots};
use crate::resilience::retry::RetryLayer;
use crate::routing::{Router, Routes};
use crate::session::SessionTable;
use crate::session::sealed::SessionKeys;
use crate::signals::{Drain, Hangups, ShutdownSignals};
use crate::telemetry::access::AccessLog;
use crate::upstream::http::HttpUpstream;
use crate::upstream::pool::HttpPool;
use crate::upstream::registry::{Connector, UpstreamHandle, Upstreams};
use crate::upstream::settings::UpstreamSettings;
use crate::upstream::sse_legacy::SseUpstream;
use crate::upstream::stdio::{StdioLink, StdioUpstream};
use crate::workers::Workers;

mod reload;
mod shutdown;
mod stdio;

pub use stdio::{StdioOptions, run_stdio};

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

/// The layers of the client stack that keep state between requests, made once: the
/// in-flight counts of admission, the access log's writer, and the shutdown's
/// cancellation. (A reload keeps them: what they are made from needs a restart.)
#[derive(Clone)]
pub(crate) struct ClientParts {
    access: AccessLayer,
    admission: AdmissionLayer,
    cancel: CancelLayer,
}

/// The layers of the client stack made from what a reload may change.
#[derive(Clone)]
pub(crate) struct ClientLayers {
    pub(crate) authorize: AuthorizeLayer,
    pub(crate) rate_limits: RateLimitLayer,
    pub(crate) cache: CacheLayer,
}

impl ClientLayers {
    /// The layers `config` asks for.
    pub(crate) fn new(config: &Config) -> anyhow::Result<ClientLayers> {
        Ok(ClientLayers {
            rate_limits: RateLimitLayer::new(&config.rate_limits, &config.name_separator)?,
            authorize: AuthorizeLayer::new(&config.authorization, &config.name_separator),
            cache: CacheLayer::new(&config.cache),
        })
    }
}

/// The router over `upstreams` and the client stack over it, as `config` sets them.
pub(crate) fn routing(
    config: &Config,
    upstreams: Arc<Upstreams>,
    breakers: &Arc<Breakers>,
    parts: &ClientParts,
    layers: ClientLayers,
) -> Routing {
    let rewriter = Arc::new(Rewriter::new(config.errors));
    let validate_arguments = config.errors.validate_arguments;
    let router =
        Arc::new(Router::new(upstreams, config.name_separator.clone(), Arc::clone(breakers), validate_arguments));
    let client = client_stack(Arc::clone(&router), Arc::clone(&rewriter), parts.clone(), layers);
    Routing { router, rewriter, client: crate::workers::PerWorker::new(client) }
}

/// The client half of the request path, outermost layer first: what every client request
/// goes through before (and after) it is routed to an upstream's own stack.
fn client_stack(
    router: Arc<Router>,
    rewriter: Arc<Rewriter>,
    parts: ClientParts,
    layers: ClientLayers,
) -> ClientService {
    let ClientParts { access, admission, cancel } = parts;
    let ClientLayers { authorize, rate_limits, cache } = layers;
    let stack = ServiceBuilder::new()
        // With tracing on, one span per request, continuing the client's trace; absent
        // when it is off.
        .option_layer(crate::telemetry::trace::on().then_some(RequestSpanLayer))
        // One access log line per request, with what became of it and how long it took.
        .layer(access)
        // Every failure from any layer below, and every upstream's answer, becomes the
        // sanitised answer the client sees, with the HTTP hint (503 + Retry-After) its
        // transport needs.
        .layer(RewriteLayer::new(rewriter))
        // Admission: no second initialize, no id twice in flight, and the session's, the
        // principal's and the gateway's in-flight caps, all refusing with the same
        // overload answer.
        .layer(admission)
        // Authorisation rules: a denied name is answered as unknown; lists lose what the
        // principal may not use.
        .layer(authorize)
        // Rate limits (GCRA) per principal, tool, upstream and gateway: -32013, HTTP 429.
        .layer(rate_limits)
        // The client's notifications/cancelled ends the request at once (-32800) and
        // cancels its upstream call; so does the end of a shutdown's grace period (-32014).
        .layer(cancel)
        // Cacheable results with caching hints, kept for their ttlMs when `cache:` is on
        // (below authorisation: a cached list is filtered per principal like a fresh one).
        .layer(cache)
        // Which upstream: names, URIs, fan-out and merge of lists; then, per upstream
        // (routing::forward), the tool's catalog entry, the per-upstream metric, the
        // arguments against the tool's input schema, the `Mcp-Param-*` headers, that
        // upstream's own stack, and what a `tools/list` teaches the catalog.
        .service(Routes::new(router));
    ClientService::new(stack)
}

/// The request stack in front of one upstream, outermost layer first.
fn upstream_stack(settings: &UpstreamSettings, slots: &Arc<Slots>, breakers: &Arc<Breakers>) -> UpstreamService {
    let stack = ServiceBuilder::new()
        // Load shedding: a capped number of requests in flight with a short queue, then
        // an immediate "overloaded" refusal instead of a backlog.
        .layer(LoadShedLayer::new(Arc::clone(slots)))
        // One overall deadline per request, covering every attempt and backoff, extended
        // by progress; when it passes the upstream is sent `notifications/cancelled`.
        .layer(DeadlineLayer::new(settings.timeouts))
        // A process death the evidence lays at a call's door counts on its tool's
        // breaker once the call as a whole failed with it (no retry succeeded).
        .layer(BlameLayer::new(Arc::clone(breakers), settings.breaker))
        // Retries of idempotent requests only, with full-jitter backoff, within the
        // deadline and a per-upstream budget.
        .layer(RetryLayer::new(settings.retry))
        // Circuit breakers per upstream and per tool: while one is open, calls fail fast
        // without upstream traffic; each attempt counts on the breaker it is about.
        .layer(BreakerLayer::new(Arc::clone(breakers), settings.breaker))
        // One attempt: the endpoint of a replicated upstream (not one this request tried),
        // bounded by the deadline and the attempt timeout, counted on its endpoint; with
        // tracing on, in a span of its own whose context goes upstream.
        .layer(AttemptLayer::new(settings.timeouts.attempt).traced(crate::telemetry::trace::on()))
        // The link: a Streamable HTTP session, replicas of one, an HTTP+SSE session, or a
        // supervised process.
        .service(SendAttempt);
    UpstreamService::new(stack)
}

/// Builds every configured upstream; shared stdio processes start here.
pub fn build_upstreams(config: &Config, breakers: &Arc<Breakers>) -> anyhow::Result<Upstreams> {
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

/// What every front end shares: the gateway over the upstreams and their stacks, and
/// what its background tasks need.
struct Core {
    gateway: Arc<Gateway>,
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
    fn assemble(config: &mut Config) -> anyhow::Result<Core> {
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
    fn spawn_background(&mut self) -> Background {
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
    fn admin_app(&self) -> axum::Router {
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
    fn serve_reloads(
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
    async fn shutdown(&self) {
        self.gateway.shutdown().await;
        for handle in self.gateway.upstreams().iter() {
            if let Connector::SharedStdio(link) = &handle.connector {
                link.close().await;
            }
        }
    }
}

/// Background tasks, aborted on drop.
struct Background(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Background {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// The client-facing HTTP listener, bound and ready to serve.
struct HttpFront {
    listener: TcpListener,
    local: SocketAddr,
    app: crate::downstream::cors::Cors<endpoint::Front>,
    limits: ListenerLimits,
    /// Fired to end the long-lived streams (GET, HTTP+SSE, subscriptions), so that
    /// connections can drain.
    closing: tokio_util::sync::CancellationToken,
    /// Its authenticator, which a reload may replace.
    auth: Arc<arc_swap::ArcSwap<Authenticator>>,
}

impl HttpFront {
    /// Binds `addr` and sets up authentication and Host/Origin checks for it.
    async fn bind(config: &Config, addr: SocketAddr, gateway: &Arc<Gateway>) -> anyhow::Result<HttpFront> {
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
        Ok(HttpFront { listener, local, app, limits: client_limits(config), closing, auth: authenticator })
    }

    /// Serves until `stop` completes, then drains the connections; the long-lived
    /// streams end when `closing` is fired, which the caller does. Connections run on
    /// `workers` when given, on the current runtime otherwise.
    async fn serve(self, workers: Option<Arc<Workers>>, stop: impl std::future::Future<Output = ()>) {
        listener::serve(self.listener, self.app, self.limits, workers, stop).await;
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
fn admin_limits(config: &Config) -> ListenerLimits {
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
        tokio::spawn(listener::serve(l, core.admin_app(), admin_limits(&config), None, stop))
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

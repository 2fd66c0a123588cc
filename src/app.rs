//! The map of seawall: every stage a request passes, outermost first, and the two stacks
//! assembled here (the client stack, and one stack per upstream). [`run`] starts the
//! listeners and the background tasks, [`stdio`] runs `seawall stdio`, `upstreams`
//! builds each configured upstream.
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
//!        ─► routing::forward              per upstream: overrides ◄ catalog ◄ metric ◄ arguments ◄ param headers ◄ upstream stack ◄ learn
//!        ─► upstream stack ([`upstream_stack`]) shed ◄ deadline ◄ blame ◄ retry ◄ breaker ◄ attempt
//!        ─► call::Transport               HTTP or HTTP+SSE session, replicas, or supervised stdio process
//! ```
//!
//! The answer comes back the same way. It stays as the upstream sent it up to the client
//! stack's rewrite layer, where it (or any failure on the way) becomes what the client
//! sees, once ([`crate::errors`]).

use std::sync::Arc;

use tower::ServiceBuilder;

use crate::call::{SendAttempt, UpstreamService};
use crate::client::{AccessLayer, CacheLayer, CancelLayer, ClientService, RequestSpanLayer};
use crate::config::Config;
use crate::errors::{RewriteLayer, Rewriter};
use crate::gateway::Routing;
use crate::policy::admission::AdmissionLayer;
use crate::policy::authz::AuthorizeLayer;
use crate::policy::rate_limit::RateLimitLayer;
use crate::resilience::attempt::AttemptLayer;
use crate::resilience::breaker::{BlameLayer, BreakerLayer, Breakers};
use crate::resilience::deadline::DeadlineLayer;
use crate::resilience::load_shed::{LoadShedLayer, Slots};
use crate::resilience::retry::RetryLayer;
use crate::routing::{Router, Routes};
use crate::upstream::registry::Upstreams;
use crate::upstream::settings::UpstreamSettings;

mod reload;
pub mod run;
mod shutdown;
pub mod stdio;
pub(crate) mod upstreams;

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
        // (routing::forward), the operator's overrides (the upstream's name of a renamed
        // tool or prompt, the arguments the gateway sets), the tool's catalog entry, the per-upstream metric, the
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

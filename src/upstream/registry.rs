//! The configured upstreams: how to reach each one and the request stack in front of it.

use std::sync::Arc;

use super::http::HttpLink;
use super::pool::{HttpPool, PoolLink};
use super::settings::UpstreamSettings;
use super::sse_legacy::{SseLink, SseUpstream};
use super::stdio::{StdioLink, StdioUpstream};
use crate::call::{AttachedSession, Link, UpstreamError, UpstreamService};
use crate::mcp::init::InitParams;
use crate::resilience::load_shed::Slots;
use crate::telemetry::trace::spans;
use tracing::Instrument as _;

/// How an upstream is reached.
#[derive(Clone)]
pub(crate) enum Connector {
    /// Streamable HTTP: one upstream session per client session (per endpoint).
    Http(Arc<HttpPool>),
    /// HTTP+SSE (2024-11-05): one event stream per client session.
    Sse(Arc<SseUpstream>),
    /// A child process shared by every client session.
    SharedStdio(Arc<StdioLink>),
    /// A child process per client session, at most as many at once as the semaphore has
    /// permits.
    PerSessionStdio(Arc<StdioUpstream>, Arc<tokio::sync::Semaphore>),
}

impl Connector {
    /// Whether `other` is this very connector (the same clients or processes).
    pub(crate) fn same_as(&self, other: &Connector) -> bool {
        match (self, other) {
            (Connector::Http(a), Connector::Http(b)) => Arc::ptr_eq(a, b),
            (Connector::Sse(a), Connector::Sse(b)) => Arc::ptr_eq(a, b),
            (Connector::SharedStdio(a), Connector::SharedStdio(b)) => Arc::ptr_eq(a, b),
            (Connector::PerSessionStdio(a, _), Connector::PerSessionStdio(b, _)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// One configured upstream.
pub(crate) struct UpstreamHandle {
    /// Its name.
    pub name: Arc<str>,
    /// How it is reached.
    pub connector: Connector,
    /// Its settings (defaults with per-upstream overrides applied) and tool catalog.
    pub policy: UpstreamSettings,
    /// The request stack in front of it, kept once per worker.
    pub service: crate::workers::PerWorker<UpstreamService>,
    /// Its load-shedding slots (the stack's first layer), read for the in-flight gauge.
    pub slots: Arc<Slots>,
}

impl UpstreamHandle {
    /// Opens (or, for a shared process, joins) a session with the upstream on behalf of a
    /// client session whose client declared `init`; with tracing on, opening one is a
    /// span (a child of the request that needed it).
    pub(crate) async fn connect(&self, init: &InitParams) -> Result<Link, UpstreamError> {
        // Joining the shared process opens nothing: its own handshake is a trace of its own.
        let span = match self.connector {
            Connector::SharedStdio(_) => tracing::Span::none(),
            Connector::PerSessionStdio(..) => spans::connect(&self.name, true),
            Connector::Http(_) | Connector::Sse(_) => spans::connect(&self.name, false),
        };
        let opened = self.open(init).instrument(span.clone()).await;
        if !span.is_none() {
            let version = opened.as_ref().map(|link| link.init_result().map(|init| init.protocol_version.clone()));
            spans::record_connected(&span, version.as_ref().map(Option::as_deref).map_err(|e| *e));
        }
        opened
    }

    async fn open(&self, init: &InitParams) -> Result<Link, UpstreamError> {
        match &self.connector {
            Connector::Http(pool) if pool.len() > 1 => {
                let link: Link = PoolLink::connect(Arc::clone(pool), init.clone()).await?;
                Ok(link)
            }
            Connector::Http(pool) => {
                let Some(up) = pool.first() else { return Err(UpstreamError::Connect("no endpoint".into())) };
                up.connect(init, self.policy.timeouts.connect).await
            }
            Connector::Sse(up) => SseLink::connect(Arc::clone(up), init.clone()).await.map(|l| -> Link { l }),
            Connector::SharedStdio(link) => {
                link.wait_ready().await?;
                let link: Link = Arc::clone(link) as Link;
                Ok(link)
            }
            Connector::PerSessionStdio(up, processes) => {
                let Ok(permit) = Arc::clone(processes).try_acquire_owned() else {
                    return Err(UpstreamError::NotRunning(format!(
                        "all processes of upstream '{}' are in use by other sessions",
                        up.name
                    )));
                };
                let link = StdioLink::start(Arc::clone(up), init.clone(), true).await?;
                link.hold(permit);
                Ok(link)
            }
        }
    }

    /// Re-attaches, without a handshake, to the upstream sessions another process opened
    /// for a client session whose client declared `init` (see
    /// [`crate::upstream::http::HttpLink::attach`]). `None` when this upstream has no
    /// session that outlives a process (a child process, an event stream), or none of
    /// `sessions` fits it: the link then opens afresh when first needed.
    pub(crate) fn attach(&self, init: &InitParams, sessions: &[AttachedSession]) -> Option<Link> {
        let Connector::Http(pool) = &self.connector else { return None };
        if pool.len() > 1 {
            let link: Link = PoolLink::attach(Arc::clone(pool), init.clone(), sessions)?;
            return Some(link);
        }
        let up = pool.first()?;
        let session = sessions.iter().find(|s| s.endpoint.is_none_or(|e| e == 0))?;
        let link: Link = HttpLink::attach(Arc::clone(up), init.clone(), session);
        Some(link)
    }

    /// Whether the link is shared by every session (and must not be closed with one).
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self.connector, Connector::SharedStdio(_))
    }

    /// A short description of the transport for status pages.
    pub(crate) fn kind(&self) -> &'static str {
        match self.connector {
            Connector::Http(_) => "http",
            Connector::Sse(_) => "sse",
            Connector::SharedStdio(_) => "stdio-shared",
            Connector::PerSessionStdio(..) => "stdio-per-session",
        }
    }
}

/// Every upstream, in configuration order.
#[derive(Default)]
pub(crate) struct Upstreams {
    ordered: Vec<Arc<UpstreamHandle>>,
    by_name: crate::hashing::Map<Arc<str>, Arc<UpstreamHandle>>,
}

impl Upstreams {
    /// Adds an upstream.
    pub(crate) fn push(&mut self, handle: UpstreamHandle) {
        let handle = Arc::new(handle);
        self.by_name.insert(Arc::clone(&handle.name), Arc::clone(&handle));
        self.ordered.push(handle);
    }

    /// Adds an upstream that another set of upstreams holds too (a reload keeps it).
    pub(crate) fn push_shared(&mut self, handle: Arc<UpstreamHandle>) {
        self.by_name.insert(Arc::clone(&handle.name), Arc::clone(&handle));
        self.ordered.push(handle);
    }

    /// By name.
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<UpstreamHandle>> {
        self.by_name.get(name)
    }

    /// All, in configuration order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<UpstreamHandle>> {
        self.ordered.iter()
    }

    /// How many there are.
    pub(crate) fn len(&self) -> usize {
        self.ordered.len()
    }
}

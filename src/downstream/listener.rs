//! The accept loop of seawall's HTTP listeners (the client listener and the admin one).
//!
//! Each listener caps its connections, in total and per client IP, and refuses the ones
//! beyond the cap at once with a minimal 503, so that one client cannot take every file
//! descriptor; each connection has a header-read timeout (HTTP/1) and an idle timeout
//! (no request in flight). On shutdown the loop stops accepting, asks every connection to
//! finish its requests (HTTP/1 keep-alive ends, HTTP/2 sends GOAWAY), and gives them the
//! listener's drain period to do so.
//!
//! The connection caps count TCP connections by the address they come from, a trusted
//! proxy's own included (see [`super::trusted_proxies`]): behind a proxy they bound what
//! the proxy may hold open, while its clients' addresses are what each request carries.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use bytes::{Buf, Bytes};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

use super::connection::{Activity, App, Busy, PeerAddr, idle};
use super::http1::{self, Wire};
use super::refusal::Refusal;
use super::trusted_proxies::proxy_protocol;
use super::trusted_proxies::{ClientOf, Trust, TrustedProxies};
use crate::workers::Workers;

/// What an HTTP/2 client sends first (RFC 9113 §3.4): a connection that starts with it
/// is served by hyper's HTTP/2; any other by seawall's HTTP/1.x.
const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// How long an idle connection gets to close cleanly (HTTP/2 GOAWAY) before it is dropped.
const IDLE_CLOSE: Duration = Duration::from_secs(1);
/// Pause after a failed `accept` (e.g. out of descriptors) so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The bounds of one listener.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListenerLimits {
    /// Most open connections; more are refused.
    pub(crate) max_connections: usize,
    /// Most open connections from one IP address; 0: no per-address limit.
    pub(crate) max_per_peer: usize,
    /// Longest time to receive a request's headers (HTTP/1).
    pub(crate) header_timeout: Duration,
    /// A connection with no request in flight for this long is closed.
    pub(crate) idle_timeout: Duration,
    /// How long connections may take to finish their requests once the listener stops
    /// accepting; then they are dropped.
    pub(crate) drain: Duration,
}

/// Serves `app` on `listener` until `shutdown` resolves, then drains. Connections run
/// on `workers`, each on one of them, when given; on the current runtime otherwise. A
/// connection from one of `proxies` is served for the clients it names.
pub(crate) async fn serve(
    listener: TcpListener,
    app: impl App,
    limits: ListenerLimits,
    proxies: Option<Arc<TrustedProxies>>,
    workers: Option<Arc<Workers>>,
    shutdown: impl Future<Output = ()>,
) {
    let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    http2.timer(TokioTimer::new());
    let http2 = Arc::new(http2);
    let counts = Arc::new(Counts::default());
    let tracker = TaskTracker::new();
    let stop = CancellationToken::new();
    let mut last_warning: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    if last_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
                        tracing::warn!(target: "seawall::downstream", error = %e, "accept failed");
                        last_warning = Some(Instant::now());
                    }
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let Some(slot) = Counts::admit(&counts, peer.ip(), &limits) else {
            tracing::debug!(target: "seawall::downstream", peer = %peer, status = 503, "refused a connection: too many connections");
            crate::telemetry::metrics::load_shed("connections");
            // A fresh socket's send buffer is empty: the short answer fits without waiting.
            let _ = stream.try_write(&Refusal::TooManyConnections.http1_bytes());
            continue;
        };
        let trust = Trust::of(proxies.as_ref(), peer.ip());
        let conn = Connection { http2: Arc::clone(&http2), app: app.clone(), peer, trust, limits, stop: stop.clone() };
        match &workers {
            // Handed over as a plain socket: it registers with the worker's reactor.
            Some(workers) => match stream.into_std() {
                Ok(stream) => workers.spawn(tracker.track_future(conn.run_std(stream, slot))),
                Err(e) => {
                    tracing::debug!(target: "seawall::downstream", peer = %peer, error = %e, "could not hand a connection over")
                }
            },
            None => drop(tracker.spawn(conn.run(stream, slot))),
        }
    }
    // Closed now, not when the drain is over: new connections are refused at once
    // rather than left waiting in the backlog.
    drop(listener);
    stop.cancel();
    tracker.close();
    if tokio::time::timeout(limits.drain, tracker.wait()).await.is_err() {
        tracing::info!(target: "seawall::downstream", open = tracker.len(), "closing connections still open after the drain period");
    }
}

/// Open connections, in total and per IP address.
#[derive(Default)]
struct Counts {
    inner: parking_lot::Mutex<CountsInner>,
}

#[derive(Default)]
struct CountsInner {
    total: usize,
    per_peer: HashMap<IpAddr, usize>,
}

impl Counts {
    fn admit(counts: &Arc<Counts>, ip: IpAddr, limits: &ListenerLimits) -> Option<Slot> {
        let mut inner = counts.inner.lock();
        let from_peer = inner.per_peer.get(&ip).copied().unwrap_or(0);
        if inner.total >= limits.max_connections || (limits.max_per_peer > 0 && from_peer >= limits.max_per_peer) {
            return None;
        }
        inner.total += 1;
        inner.per_peer.insert(ip, from_peer + 1);
        Some(Slot { counts: Arc::clone(counts), ip })
    }
}

/// One admitted connection's place in the counts, given back on drop.
struct Slot {
    counts: Arc<Counts>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut inner = self.counts.inner.lock();
        inner.total = inner.total.saturating_sub(1);
        if let Some(n) = inner.per_peer.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                inner.per_peer.remove(&self.ip);
            }
        }
    }
}

struct Connection<A> {
    http2: Arc<hyper::server::conn::http2::Builder<TokioExecutor>>,
    app: A,
    peer: SocketAddr,
    trust: Trust,
    limits: ListenerLimits,
    stop: CancellationToken,
}

impl<A: App> Connection<A> {
    /// [`Connection::run`] for a socket taken off another runtime's reactor.
    async fn run_std(self, stream: std::net::TcpStream, slot: Slot) {
        match TcpStream::from_std(stream) {
            Ok(stream) => self.run(stream, slot).await,
            Err(e) => {
                tracing::debug!(target: "seawall::downstream", peer = %self.peer, error = %e, "could not take a connection over")
            }
        }
    }

    async fn run(self, stream: TcpStream, _slot: Slot) {
        let _ = stream.set_nodelay(true);
        let activity = Arc::new(Activity::new());
        let started = Instant::now();
        let deadline = started + self.limits.header_timeout;
        // A connection that says nothing is closed by whichever comes first: the
        // header-read timeout or the idle timeout.
        let first_bytes = started + self.limits.header_timeout.min(self.limits.idle_timeout);
        let mut wire = Wire::new(stream);
        let opening = self.open(&mut wire, deadline, first_bytes);
        // A connection that has said nothing yet has nothing in flight: it closes at once
        // when the listener does.
        let (client, http2) = tokio::select! {
            opened = opening => match opened {
                Some(opened) => opened,
                None => return,
            },
            () = self.stop.cancelled() => return,
        };
        let (limits, stop) = (self.limits, self.stop.clone());
        if http2 {
            return self.run_http2(wire, client, activity).await;
        }
        let conn = http1::serve(wire, self.app, client, limits.header_timeout, deadline, Arc::clone(&activity));
        tokio::pin!(conn);
        tokio::select! {
            () = conn.as_mut() => return,
            () = idle(&activity, limits.idle_timeout) => return,
            () = stop.cancelled() => {}
        }
        // Closing: a connection between requests closes now; one with a request in flight
        // closes after its answer, within the drain period.
        activity.closing.store(true, Ordering::Release);
        if activity.idle_since().is_none() {
            let _ = tokio::time::timeout(limits.drain, conn).await;
        }
    }

    /// Reads what comes before the first request (the PROXY header a trusted proxy starts
    /// with, by `deadline`; enough of the first bytes to tell HTTP/2's preface from an
    /// HTTP/1.x request, by `first_bytes`): where the requests come from and whether they
    /// speak HTTP/2, or `None` to close the connection.
    async fn open(&self, wire: &mut Wire, deadline: Instant, first_bytes: Instant) -> Option<(ClientOf, bool)> {
        let client = match &self.trust {
            Trust::Own | Trust::NoProxyHeader => ClientOf::fixed(self.peer),
            Trust::Headers(proxies) => ClientOf::named(self.peer, Arc::clone(proxies)),
            Trust::ProxyHeader => ClientOf::fixed(proxy_protocol::read_header(wire, self.peer, deadline).await?),
        };
        let refuse_proxy_header = matches!(self.trust, Trust::NoProxyHeader);
        let http2 = match tell(wire, refuse_proxy_header, first_bytes).await? {
            Opening::Http1 => false,
            Opening::Http2 => true,
            Opening::ProxyHeader => {
                tracing::debug!(target: "seawall::downstream", peer = %self.peer, "closed a connection: a PROXY protocol header from an address not trusted to send one");
                return None;
            }
        };
        Some((client, http2))
    }

    /// Serves an HTTP/2 connection whose first bytes `wire` holds.
    async fn run_http2(self, wire: Wire, client: ClientOf, activity: Arc<Activity>) {
        let (read, stream) = wire.into_parts();
        let io = Rewind { read: read.freeze(), io: stream };
        let (app, peer) = (self.app, self.peer);
        let watched = Arc::clone(&activity);
        let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let mut req = req.map(Body::new);
            let from = client.address(req.headers());
            req.extensions_mut().insert(PeerAddr(from));
            let guard = Busy::new(&activity);
            let app = app.clone();
            async move {
                let resp = match app.oneshot(req).await {
                    Ok(resp) => resp,
                    Err(never) => match never {},
                };
                Ok::<_, Infallible>(resp.map(|body| Body::new(TrackedBody { inner: body, _busy: guard })))
            }
        });
        let conn = self.http2.serve_connection(TokioIo::new(io), service);
        tokio::pin!(conn);
        let grace = tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(target: "seawall::downstream", peer = %peer, error = %e, "connection ended with an error");
                }
                return;
            }
            () = idle(&watched, self.limits.idle_timeout) => IDLE_CLOSE,
            () = self.stop.cancelled() => self.limits.drain,
        };
        conn.as_mut().graceful_shutdown();
        let _ = tokio::time::timeout(grace, conn).await;
    }
}

/// What a connection's first bytes say it speaks.
#[derive(Debug, PartialEq, Eq)]
enum Opening {
    Http1,
    Http2,
    /// A PROXY protocol header, from an address not trusted to send one.
    ProxyHeader,
}

/// Reads enough of the first bytes to tell HTTP/2's preface from an HTTP/1.x request
/// (and, when `watch_proxy_header`, from a PROXY protocol header); `None` when the
/// connection closes or says too little before `until`.
async fn tell(wire: &mut Wire, watch_proxy_header: bool, until: Instant) -> Option<Opening> {
    loop {
        if let Some(opening) = opening(wire.buffered(), watch_proxy_header) {
            return Some(opening);
        }
        if !matches!(wire.fill(Some(until)).await, Ok(1..)) {
            return None;
        }
    }
}

/// What `seen` says the connection speaks, or `None` while it is too little to tell.
fn opening(seen: &[u8], watch_proxy_header: bool) -> Option<Opening> {
    if watch_proxy_header {
        match proxy_protocol::starts_header(seen) {
            Some(true) => return Some(Opening::ProxyHeader),
            Some(false) => {}
            None => return None,
        }
    }
    let n = seen.len().min(HTTP2_PREFACE.len());
    if seen[..n] != HTTP2_PREFACE[..n] {
        return Some(Opening::Http1);
    }
    (n == HTTP2_PREFACE.len()).then_some(Opening::Http2)
}

/// A socket whose first bytes were already read: they are read again first.
struct Rewind {
    read: Bytes,
    io: TcpStream,
}

impl AsyncRead for Rewind {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if !this.read.is_empty() {
            let n = this.read.len().min(buf.remaining());
            buf.put_slice(&this.read[..n]);
            this.read.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

pin_project_lite::pin_project! {
    /// A response body that keeps its request counted as in flight until it ends.
    struct TrackedBody {
        #[pin]
        inner: Body,
        _busy: Busy,
    }
}

impl HttpBody for TrackedBody {
    type Data = <Body as HttpBody>::Data;
    type Error = <Body as HttpBody>::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_cap_total_and_per_peer_and_release_on_drop() {
        let counts = Arc::new(Counts::default());
        let limits = ListenerLimits {
            max_connections: 3,
            max_per_peer: 2,
            header_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            drain: Duration::from_secs(1),
        };
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = Counts::admit(&counts, a, &limits).unwrap();
        let _a2 = Counts::admit(&counts, a, &limits).unwrap();
        assert!(Counts::admit(&counts, a, &limits).is_none(), "per-peer cap");
        let _b1 = Counts::admit(&counts, b, &limits).unwrap();
        assert!(Counts::admit(&counts, b, &limits).is_none(), "total cap");
        drop(a1);
        assert!(Counts::admit(&counts, b, &limits).is_some());
    }

    #[test]
    fn the_first_bytes_tell_http2_http1_and_a_refused_proxy_header_apart() {
        assert_eq!(opening(b"", false), None);
        assert_eq!(opening(b"PRI * HTTP/2.0", false), None);
        assert_eq!(opening(HTTP2_PREFACE, false), Some(Opening::Http2));
        assert_eq!(opening(b"POST", false), Some(Opening::Http1));
        // Not watched: a PROXY line is an HTTP/1.x request (that fails to parse).
        assert_eq!(opening(b"PROXY TCP4", false), Some(Opening::Http1));
        assert_eq!(opening(b"PRO", true), None);
        assert_eq!(opening(b"PROXY TCP4", true), Some(Opening::ProxyHeader));
        assert_eq!(opening(b"\r\n\r\n\0\r\nQUIT\n!", true), Some(Opening::ProxyHeader));
        assert_eq!(opening(HTTP2_PREFACE, true), Some(Opening::Http2));
        assert_eq!(opening(b"POST", true), Some(Opening::Http1));
    }
}

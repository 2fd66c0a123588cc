//! What the serving of one client connection shares, whichever HTTP version it speaks:
//! the app it serves, the client's address recorded in each request, and what the
//! connection is doing (requests in flight, idle since when, closing).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;

/// The client's address, recorded in every request's extensions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeerAddr(pub(crate) SocketAddr);

/// What a listener serves: the router, possibly inside layers that see every request.
pub(crate) trait App:
    tower::Service<hyper::Request<Body>, Response = axum::response::Response, Error = Infallible, Future: Send>
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<A> App for A where
    A: tower::Service<hyper::Request<Body>, Response = axum::response::Response, Error = Infallible, Future: Send>
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// What a connection is doing: its requests in flight (their response bodies included)
/// and when the last one ended. Requests only count; the idle watch looks at the counts
/// when its timer fires, so a request costs no wake-up and no timer of its own.
pub(super) struct Activity {
    busy: AtomicUsize,
    /// Set when the listener closes: the connection takes no request after the one in
    /// flight.
    pub(super) closing: AtomicBool,
    /// When the last request ended, in milliseconds since `origin`.
    last_ended: AtomicU64,
    origin: Instant,
}

impl Activity {
    /// A connection that has done nothing yet.
    pub(super) fn new() -> Activity {
        Activity {
            busy: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            last_ended: AtomicU64::new(0),
            origin: Instant::now(),
        }
    }

    /// When the connection became idle, if it is.
    pub(super) fn idle_since(&self) -> Option<Instant> {
        (self.busy.load(Ordering::Acquire) == 0)
            .then(|| self.origin + Duration::from_millis(self.last_ended.load(Ordering::Acquire)))
    }
}

/// Resolves once no request has been in flight for `timeout`.
pub(super) async fn idle(activity: &Activity, timeout: Duration) {
    let mut deadline = Instant::now() + timeout;
    loop {
        tokio::time::sleep_until(deadline.into()).await;
        let now = Instant::now();
        match activity.idle_since() {
            Some(since) if since + timeout <= now => return,
            Some(since) => deadline = since + timeout,
            None => deadline = now + timeout,
        }
    }
}

/// A request in flight on a connection, until its response body is done.
pub(super) struct Busy(Arc<Activity>);

impl Busy {
    pub(super) fn new(activity: &Arc<Activity>) -> Busy {
        activity.busy.fetch_add(1, Ordering::AcqRel);
        Busy(Arc::clone(activity))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let activity = &self.0;
        let ended = u64::try_from(activity.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        // When it ended first, then that it ended: the watch never sees it idle since
        // an older time.
        activity.last_ended.fetch_max(ended, Ordering::AcqRel);
        activity.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

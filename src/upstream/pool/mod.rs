//! Several replicas (endpoints) of one Streamable HTTP server.
//!
//! Requests are balanced by the power of two choices on requests in flight; a retry goes
//! to an endpoint the request has not tried yet; an endpoint that keeps failing is
//! ejected for a period that grows with each ejection (outlier detection), but never the
//! last one standing. Each client session holds its own upstream session per endpoint,
//! opened when that endpoint is first used.
//!
//! An operator may eject an endpoint by hand ([`HttpPool::eject`]): it then takes no
//! traffic at all, not even a last-resort retry, until it is restored
//! ([`HttpPool::restore`]); the last endpoint not ejected by hand cannot be.

mod endpoints;
mod link;

pub(crate) use endpoints::{EjectError, HttpPool};
pub(crate) use link::PoolLink;

/// A pool of `n` endpoints that nothing listens on, for the unit tests of both halves.
#[cfg(test)]
fn test_pool(n: usize) -> HttpPool {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::upstream::http::HttpUpstream;

    let ups = (0..n)
        .map(|i| {
            let url = format!("http://127.0.0.1:{}/mcp", 1000 + i);
            Arc::new(HttpUpstream::new("u", &url, &Default::default(), Duration::from_secs(1), 1024).unwrap())
        })
        .collect();
    HttpPool::new(Arc::from("u"), ups, Duration::from_secs(1))
}

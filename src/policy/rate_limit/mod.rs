//! Rate limits on client requests: GCRA limits per principal, per tool, per upstream and
//! for the whole gateway, from `rate_limits:` in the configuration.
//!
//! Each limit is a generic cell rate algorithm with emission interval `T = period / count`
//! and a burst of `b`: over any span of time `t` it admits at most `b + t / T` requests
//! per key. A request must pass every limit that applies to it, checked in configured
//! order; the first that refuses answers [`GatewayError::RateLimited`] (-32013, HTTP 429
//! with `Retry-After`). Limits checked before the refusing one have counted the request.

mod memory;
mod rules;

use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use tower::{Layer, Service};

use crate::call::{GatewayError, Reply};
use crate::client::{ClientFuture, ClientRequest};
use crate::config::RateLimitsConfig;
use crate::telemetry::metrics;
use memory::MemoryStore;
use rules::Rule;

/// How often keys whose limiters are full again are forgotten.
const RETAIN_EVERY: Duration = Duration::from_secs(15);

/// The configured limits and their state, shared by every clone of the layer.
pub(crate) struct RateLimits {
    rules: Vec<Rule>,
    store: MemoryStore,
    separator: String,
}

impl RateLimits {
    /// The limits of `config`; `separator` joins upstream and tool names on `/mcp`.
    pub(crate) fn new(config: &RateLimitsConfig, separator: &str) -> Result<RateLimits, String> {
        let rules = config.limits.iter().map(Rule::new).collect::<Result<Vec<_>, _>>()?;
        let store = MemoryStore::new(&rules)?;
        Ok(RateLimits { rules, store, separator: separator.to_owned() })
    }

    /// Counts `req` on every limit that applies to it, until one refuses.
    fn check(&self, req: &ClientRequest) -> Result<(), GatewayError> {
        for (i, rule) in self.rules.iter().enumerate() {
            let Some(key) = rule.key_for(req, &self.separator) else { continue };
            if let Err(wait) = self.store.check(i, &key) {
                metrics::rate_limited(rule.scope());
                return Err(GatewayError::RateLimited { scope: rule.scope().into(), retry_after: whole_seconds(wait) });
            }
        }
        Ok(())
    }
}

/// `wait` rounded up to whole seconds, at least one: what `Retry-After` can say.
fn whole_seconds(wait: Duration) -> Duration {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    Duration::from_secs(secs.max(1))
}

/// Applies [`RateLimit`] with these limits.
#[derive(Clone)]
pub struct RateLimitLayer {
    limits: Option<Arc<RateLimits>>,
}

impl RateLimitLayer {
    /// The layer for `config`; with no limits configured it passes every request through.
    /// Keys of full limiters are forgotten every 15 s, by a task that ends with the layer.
    pub fn new(config: &RateLimitsConfig, separator: &str) -> anyhow::Result<RateLimitLayer> {
        if config.limits.is_empty() {
            return Ok(RateLimitLayer { limits: None });
        }
        let limits = Arc::new(RateLimits::new(config, separator).map_err(|why| anyhow::anyhow!("rate_limits: {why}"))?);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(retain_recent(Arc::downgrade(&limits)));
        }
        Ok(RateLimitLayer { limits: Some(limits) })
    }
}

/// Forgets full limiters' keys every [`RETAIN_EVERY`] while the limits are in use.
async fn retain_recent(limits: Weak<RateLimits>) {
    let mut tick = tokio::time::interval(RETAIN_EVERY);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(limits) = limits.upgrade() else { return };
        limits.store.retain_recent();
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;
    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit { inner, limits: self.limits.clone() }
    }
}

/// Refuses a request that exceeds a limit, before it reaches the router.
#[derive(Clone)]
pub struct RateLimit<S> {
    inner: S,
    limits: Option<Arc<RateLimits>>,
}

impl<S> Service<ClientRequest> for RateLimit<S>
where
    S: Service<ClientRequest, Response = Reply, Error = GatewayError>,
    S::Future: Send + 'static,
{
    type Response = Reply;
    type Error = GatewayError;
    type Future = ClientFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ClientRequest) -> Self::Future {
        if let Some(limits) = &self.limits
            && let Err(refused) = limits.check(&req)
        {
            return Box::pin(std::future::ready(Err(refused)));
        }
        Box::pin(self.inner.call(req))
    }
}

#[cfg(test)]
mod tests;

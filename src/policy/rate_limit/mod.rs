//! Rate limits on client requests: GCRA limits per principal, per tool, per upstream and
//! for the whole gateway, from `rate_limits:` in the configuration.
//!
//! Each limit is a generic cell rate algorithm with emission interval `T = period / count`
//! and a burst of `b`: over any span of time `t` it admits at most `b + t / T` requests
//! per key. A request must pass every limit that applies to it, checked in configured
//! order; the first that refuses answers [`GatewayError::RateLimited`] (-32013, HTTP 429
//! with `Retry-After`). Limits checked before the refusing one have counted the request.

mod memory;
mod redis;
mod rules;

use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::Either;
use tower::{Layer, Service};

use crate::call::GatewayError;
use crate::client::{ClientFuture, ClientRequest, Routed};
use crate::config::{OnBackendError, RateBackend, RateLimitsConfig};
use crate::telemetry::metrics;
use memory::MemoryStore;
use redis::{RedisStore, Verdict};
use rules::Rule;

/// How often keys whose limiters are full again are forgotten.
const RETAIN_EVERY: Duration = Duration::from_secs(15);

/// When a request refused because the store is unreachable may try again.
const STORE_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The configured limits and their state, shared by every clone of the layer.
pub(crate) struct RateLimits {
    rules: Vec<Rule>,
    store: Store,
    separator: String,
}

/// Where the limits' state lives.
enum Store {
    /// In this process.
    Memory(MemoryStore),
    /// In Redis, with what to do while it is unreachable.
    Redis(RedisStore, OnBackendError),
}

impl RateLimits {
    /// The limits of `config`; `separator` joins upstream and tool names on `/mcp`.
    pub(crate) fn new(config: &RateLimitsConfig, separator: &str) -> Result<RateLimits, String> {
        let rules = config.limits.iter().map(Rule::new).collect::<Result<Vec<_>, _>>()?;
        let store = match config.backend()? {
            RateBackend::Memory => Store::Memory(MemoryStore::new(&rules)?),
            RateBackend::Redis(url) => Store::Redis(
                RedisStore::new(&url, &config.key_prefix, config.on_backend_error, &rules)?,
                config.on_backend_error,
            ),
        };
        Ok(RateLimits { rules, store, separator: separator.to_owned() })
    }

    /// Counts `req` on every limit that applies to it. In memory the limits are checked
    /// in order until one refuses; in Redis all at once, counting only if all admit.
    async fn check(&self, req: &ClientRequest) -> Result<(), GatewayError> {
        match &self.store {
            Store::Memory(store) => self.check_in_memory(store, req),
            Store::Redis(store, on_error) => self.check_shared(store, *on_error, req).await,
        }
    }

    /// Checks the limits in this process, in order, computing each key only when its
    /// limit applies; nothing waits, so no future is needed.
    fn check_in_memory(&self, store: &MemoryStore, req: &ClientRequest) -> Result<(), GatewayError> {
        for (i, rule) in self.rules.iter().enumerate() {
            let Some(key) = rule.key_for(req, &self.separator) else { continue };
            if let Err(wait) = store.check(i, &key) {
                return Err(self.refusal(i, wait));
            }
        }
        Ok(())
    }

    /// Checks every applicable limit in Redis in one round trip.
    async fn check_shared(
        &self,
        store: &RedisStore,
        on_error: OnBackendError,
        req: &ClientRequest,
    ) -> Result<(), GatewayError> {
        let keys: Vec<(usize, String)> = (self.rules.iter().enumerate())
            .filter_map(|(i, rule)| Some((i, rule.key_for(req, &self.separator)?)))
            .collect();
        if keys.is_empty() {
            return Ok(());
        }
        match store.check(&keys).await {
            Verdict::Admitted => Ok(()),
            Verdict::Refused { rule, wait } => Err(self.refusal(rule, wait)),
            Verdict::Unreachable if on_error == OnBackendError::Allow => Ok(()),
            Verdict::Unreachable => {
                metrics::rate_limited("store");
                Err(GatewayError::RateLimited { scope: "store".into(), retry_after: STORE_RETRY_AFTER })
            }
        }
    }

    /// The refusal of rule `rule`, which would admit the request after `wait`.
    fn refusal(&self, rule: usize, wait: Duration) -> GatewayError {
        let scope = self.rules.get(rule).map_or("global", Rule::scope);
        metrics::rate_limited(scope);
        GatewayError::RateLimited { scope: scope.into(), retry_after: whole_seconds(wait) }
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
        if let Store::Memory(store) = &limits.store {
            store.retain_recent();
        }
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
    S: Service<ClientRequest, Response = Routed, Error = GatewayError> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Routed;
    type Error = GatewayError;
    type Future = Either<S::Future, ClientFuture>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ClientRequest) -> Self::Future {
        let Some(limits) = &self.limits else { return Either::Left(self.inner.call(req)) };
        // In memory the verdict is known at once: the inner service is called now, while
        // it is ready.
        if let Store::Memory(store) = &limits.store {
            return match limits.check_in_memory(store, &req) {
                Ok(()) => Either::Left(self.inner.call(req)),
                Err(refused) => Either::Right(Box::pin(std::future::ready(Err(refused)))),
            };
        }
        let limits = Arc::clone(limits);
        // The ready inner service goes with this request; the clone left behind is made
        // ready by the next `poll_ready`.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Either::Right(Box::pin(async move {
            limits.check(&req).await?;
            inner.call(req).await
        }))
    }
}

#[cfg(test)]
mod tests;

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
pub(crate) struct RateLimitLayer {
    limits: Option<Arc<RateLimits>>,
}

impl RateLimitLayer {
    /// The layer for `config`; with no limits configured it passes every request through.
    /// Keys of full limiters are forgotten every 15 s, by a task that ends with the layer.
    pub(crate) fn new(config: &RateLimitsConfig, separator: &str) -> anyhow::Result<RateLimitLayer> {
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
pub(crate) struct RateLimit<S> {
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
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use serde_json::json;
    use tower::{Service, ServiceExt, service_fn};

    use super::*;
    use crate::config::{LimitConfig, LimitKey};
    use crate::identity::Principal;
    use crate::jsonrpc::Id;
    use crate::session::{Scope, Session};

    fn limit(per: LimitKey, tools: Option<&[&str]>, rate: &str, burst: u32) -> LimitConfig {
        LimitConfig {
            per,
            tools: tools.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
            rate: rate.into(),
            burst: Some(burst),
        }
    }

    fn config(limits: Vec<LimitConfig>) -> RateLimitsConfig {
        RateLimitsConfig { limits, ..RateLimitsConfig::default() }
    }

    fn session(scope: Scope) -> Arc<Session> {
        Session::new(scope, "2025-11-25".into(), json!({}), json!({}))
    }

    fn call(session: &Arc<Session>, tool: &str) -> ClientRequest {
        let (tx, _rx) = crate::call::events(1);
        let params = crate::jsonrpc::to_raw(&json!({ "name": tool }));
        ClientRequest::new(Arc::clone(session), Id::number(1), "tools/call", Some(params), None, tx)
    }

    /// A service over a mock inner service that counts the calls reaching it.
    fn limited(
        limits: Vec<LimitConfig>,
    ) -> (impl Service<ClientRequest, Response = Routed, Error = GatewayError> + Clone, Arc<AtomicUsize>) {
        let reached = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&reached);
        let inner = service_fn(move |_req: ClientRequest| {
            count.fetch_add(1, Ordering::SeqCst);
            async { Ok::<Routed, GatewayError>(Routed::result(crate::jsonrpc::to_raw(&json!({})))) }
        });
        let layer = RateLimitLayer::new(&config(limits), "__").unwrap();
        (layer.layer(inner), reached)
    }

    /// Sends `n` requests built by `req`; returns how many passed and the last refusal.
    async fn send<S>(svc: &S, n: usize, req: impl Fn() -> ClientRequest) -> (usize, Option<GatewayError>)
    where
        S: Service<ClientRequest, Response = Routed, Error = GatewayError> + Clone,
    {
        let mut passed = 0;
        let mut refused = None;
        for _ in 0..n {
            match svc.clone().oneshot(req()).await {
                Ok(_) => passed += 1,
                Err(e) => refused = Some(e),
            }
        }
        (passed, refused)
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_passes_then_refusals_then_the_sustained_rate() {
        let s = session(Scope::Aggregate);
        let (svc, reached) = limited(vec![limit(LimitKey::Tool, Some(&["demo__*"]), "2/s", 4)]);
        let (passed, refused) = send(&svc, 6, || call(&s, "demo__echo")).await;
        assert_eq!(passed, 4, "the burst passes");
        assert_eq!(reached.load(Ordering::SeqCst), 4, "refused requests never reach the router");
        assert!(
            matches!(&refused, Some(GatewayError::RateLimited { scope, retry_after }) if scope == "tool" && *retry_after == Duration::from_secs(1)),
            "{refused:?}"
        );
        // One cell every 500 ms: after 2 s, four more (a burst of 4 at most), then none.
        tokio::time::advance(Duration::from_millis(1_000)).await;
        assert_eq!(send(&svc, 5, || call(&s, "demo__echo")).await.0, 2);
        tokio::time::advance(Duration::from_millis(500)).await;
        assert_eq!(send(&svc, 5, || call(&s, "demo__echo")).await.0, 1);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(send(&svc, 10, || call(&s, "demo__echo")).await.0, 4, "never more than the burst");
    }

    #[tokio::test(start_paused = true)]
    async fn a_tool_pattern_limits_only_matching_tools_and_a_global_limit_all() {
        let s = session(Scope::Aggregate);
        let (svc, _) = limited(vec![
            limit(LimitKey::Tool, Some(&["demo__sl*"]), "1/m", 1),
            limit(LimitKey::Global, None, "1/m", 5),
        ]);
        assert_eq!(send(&svc, 3, || call(&s, "demo__slow")).await.0, 1, "the tool's own limit");
        assert_eq!(send(&svc, 2, || call(&s, "demo__echo")).await.0, 2, "another tool is not touched");
        let (passed, refused) = send(&svc, 5, || call(&s, "demo__add")).await;
        // 1 + 2 passed before; the 2 the tool limit refused did not reach the global limit.
        assert_eq!(passed, 2, "the global limit counts every tool");
        assert!(matches!(refused, Some(GatewayError::RateLimited { scope, .. }) if scope == "global"));
        let (tx, _rx) = crate::call::events(1);
        let list = ClientRequest::new(Arc::clone(&s), Id::number(9), "tools/list", None, None, tx);
        assert!(svc.clone().oneshot(list).await.is_err(), "the global limit applies to every method");
    }

    #[tokio::test(start_paused = true)]
    async fn principals_count_apart_and_unauthenticated_clients_count_per_address() {
        let s = session(Scope::Aggregate);
        let (svc, _) = limited(vec![limit(LimitKey::Principal, Some(&["*"]), "1/m", 2)]);
        let as_principal = |name: &str| {
            let mut req = call(&s, "demo__echo");
            req.principal = Some(Arc::new(Principal::api_key(name)));
            req.peer = Some("10.0.0.1".parse().unwrap());
            req
        };
        assert_eq!(send(&svc, 3, || as_principal("alice")).await.0, 2);
        assert_eq!(send(&svc, 3, || as_principal("bob")).await.0, 2);
        // Unauthenticated: one budget per address, whichever session; none from an address
        // an authenticated principal shares.
        let (a1, a2, b) = (session(Scope::Aggregate), session(Scope::Aggregate), session(Scope::Aggregate));
        a1.bind_peer("10.0.0.1".parse().unwrap());
        a2.bind_peer("10.0.0.1".parse().unwrap());
        b.bind_peer("2001:db8::1".parse().unwrap());
        assert_eq!(send(&svc, 1, || call(&a1, "demo__echo")).await.0, 1);
        assert_eq!(send(&svc, 2, || call(&a2, "demo__echo")).await.0, 1, "sessions from one address share a budget");
        assert_eq!(send(&svc, 3, || call(&b, "demo__echo")).await.0, 2, "another address has its own");
        // Without an address (stdio), unauthenticated clients share one budget.
        let other = session(Scope::Aggregate);
        assert_eq!(send(&svc, 1, || call(&s, "demo__echo")).await.0, 1);
        assert_eq!(send(&svc, 2, || call(&other, "demo__echo")).await.0, 1, "address-less sessions share one budget");
    }

    #[tokio::test]
    async fn principal_keys_name_the_principal_or_the_address() {
        let rule = Rule::new(&limit(LimitKey::Principal, None, "1/s", 1)).unwrap();
        let s = session(Scope::Aggregate);
        let mut req = call(&s, "x");
        assert_eq!(rule.key_for(&req, "__").as_deref(), Some(rules::ANONYMOUS));
        req.peer = Some("192.0.2.7".parse().unwrap());
        assert_eq!(rule.key_for(&req, "__").as_deref(), Some("addr:192.0.2.7"));
        req.peer = Some("2001:db8::1".parse().unwrap());
        assert_eq!(rule.key_for(&req, "__").as_deref(), Some("addr:2001:db8::1"));
        req.principal = Some(Arc::new(Principal::api_key("ci")));
        assert_eq!(rule.key_for(&req, "__").as_deref(), Some("key:ci"));
    }

    #[tokio::test(start_paused = true)]
    async fn an_upstream_is_the_tool_prefix_on_mcp_and_the_scope_on_mcp_upstream() {
        let aggregate = session(Scope::Aggregate);
        let single = session(Scope::Single(Arc::from("demo")));
        let (svc, _) = limited(vec![limit(LimitKey::Upstream, None, "1/m", 2)]);
        assert_eq!(send(&svc, 1, || call(&aggregate, "demo__echo")).await.0, 1);
        assert_eq!(send(&svc, 2, || call(&single, "echo")).await.0, 1, "both count on upstream demo");
        assert_eq!(send(&svc, 2, || call(&aggregate, "other__echo")).await.0, 2, "another upstream has its own");
    }

    #[tokio::test(start_paused = true)]
    async fn full_limiters_are_forgotten() {
        let limits = RateLimits::new(&config(vec![limit(LimitKey::Tool, None, "10/s", 1)]), "__").unwrap();
        let s = session(Scope::Aggregate);
        for i in 0..50 {
            assert!(limits.check(&call(&s, &format!("demo__t{i}"))).await.is_ok());
        }
        let Store::Memory(store) = &limits.store else { panic!("a memory store") };
        assert_eq!(store.keys(), 50);
        tokio::time::advance(Duration::from_secs(1)).await;
        store.retain_recent();
        assert_eq!(store.keys(), 0);
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        assert_eq!(whole_seconds(Duration::ZERO), Duration::from_secs(1));
        assert_eq!(whole_seconds(Duration::from_millis(1_001)), Duration::from_secs(2));
        assert_eq!(whole_seconds(Duration::from_secs(3)), Duration::from_secs(3));
    }
}

//! The optional response cache (`cache:`), honouring the modern era's caching hints:
//! a cacheable result (`tools/list`, `prompts/list`, `resources/list`,
//! `resources/templates/list`, `resources/read`) that carries `ttlMs > 0` is kept for
//! that long — `cacheScope: "public"` for every client of the endpoint, `"private"` only
//! for the same authorisation context (the same principal; without authentication, the
//! same session or modern context). Never beyond `ttlMs`, never an error.
//!
//! It sits right above the router, below authorisation: a cached list is filtered for
//! each principal on its way back like a fresh one, and rate limits count cached
//! requests like any other.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::Either;
use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::time::Instant;
use tower::{Layer, Service};

use super::{ClientFuture, ClientRequest, Routed};
use crate::call::GatewayError;
use crate::config::CacheConfig;
use crate::jsonrpc;
use crate::mcp::modern;

/// Applies [`Cached`] when the cache is enabled.
#[derive(Clone, Default)]
pub(crate) struct CacheLayer {
    cache: Option<Arc<Cache>>,
}

impl CacheLayer {
    /// The layer for `config` (it does nothing when the cache is off).
    pub(crate) fn new(config: &CacheConfig) -> CacheLayer {
        CacheLayer { cache: config.enabled.then(|| Arc::new(Cache::new(config))) }
    }
}

impl<S> Layer<S> for CacheLayer {
    type Service = Cached<S>;
    fn layer(&self, inner: S) -> Cached<S> {
        Cached { inner, cache: self.cache.clone() }
    }
}

/// Answers cacheable requests from the cache while their entry is fresh.
#[derive(Clone)]
pub(crate) struct Cached<S> {
    inner: S,
    cache: Option<Arc<Cache>>,
}

/// The entries, oldest first for eviction.
struct Cache {
    entries: Mutex<Entries>,
    max_entries: usize,
    max_entry_bytes: usize,
}

#[derive(Default)]
struct Entries {
    by_key: HashMap<String, (Instant, Arc<RawValue>)>,
    order: VecDeque<String>,
}

/// The hints of a result, when it may be kept.
struct Hints {
    ttl: Duration,
    public: bool,
}

fn hints(result: &RawValue) -> Option<Hints> {
    #[derive(serde::Deserialize)]
    struct View {
        #[serde(rename = "ttlMs")]
        ttl_ms: Option<u64>,
        #[serde(rename = "cacheScope")]
        cache_scope: Option<String>,
    }
    let view = jsonrpc::view::<View>(Some(result))?;
    let ttl = Duration::from_millis(view.ttl_ms.filter(|t| *t > 0)?);
    Some(Hints { ttl, public: view.cache_scope.as_deref() == Some("public") })
}

/// The request as a key: its endpoint, method and params without `_meta` (progress
/// tokens, envelopes and the like do not change the answer).
fn request_key(req: &ClientRequest) -> String {
    let params = match jsonrpc::view::<Value>(req.params.as_deref()) {
        Some(Value::Object(mut map)) => {
            map.remove("_meta");
            Value::Object(map)
        }
        Some(other) => other,
        None => Value::Object(Map::new()),
    };
    format!("{:?}\u{0}{}\u{0}{params}", req.session.scope, req.method)
}

/// Whose private entries a request may see.
fn private_context(req: &ClientRequest) -> String {
    match &req.principal {
        Some(principal) => principal.label(),
        None => format!("session:{}", req.session.key),
    }
}

impl Cache {
    fn new(config: &CacheConfig) -> Cache {
        Cache {
            entries: Mutex::new(Entries::default()),
            max_entries: config.max_entries.max(1),
            max_entry_bytes: config.max_entry_bytes,
        }
    }

    fn get(&self, key: &str) -> Option<Arc<RawValue>> {
        let mut entries = self.entries.lock();
        match entries.by_key.get(key) {
            Some((expires, raw)) if *expires > Instant::now() => Some(Arc::clone(raw)),
            Some(_) => {
                entries.by_key.remove(key);
                None
            }
            None => None,
        }
    }

    fn put(&self, key: String, ttl: Duration, raw: &RawValue) {
        if raw.get().len() > self.max_entry_bytes {
            return;
        }
        let mut entries = self.entries.lock();
        while entries.by_key.len() >= self.max_entries {
            let Some(oldest) = entries.order.pop_front() else { break };
            entries.by_key.remove(&oldest);
        }
        if entries.by_key.insert(key.clone(), (Instant::now() + ttl, Arc::from(raw.to_owned()))).is_none() {
            entries.order.push_back(key);
        }
        // Keys of entries that expired and were removed on lookup linger in `order`
        // until they are evicted; bound that too.
        if entries.order.len() > 2 * self.max_entries {
            let Entries { by_key, order } = &mut *entries;
            order.retain(|k| by_key.contains_key(k));
        }
    }
}

impl<S> Service<ClientRequest> for Cached<S>
where
    S: Service<ClientRequest, Response = Routed, Error = GatewayError>,
    S::Future: Send + 'static,
{
    type Response = Routed;
    type Error = GatewayError;
    type Future = Either<S::Future, ClientFuture>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ClientRequest) -> Self::Future {
        let Some(cache) = self.cache.clone().filter(|_| modern::is_cacheable(&req.method)) else {
            return Either::Left(self.inner.call(req));
        };
        let public = request_key(&req);
        let private = format!("{public}\u{0}{}", private_context(&req));
        if let Some(hit) = cache.get(&private).or_else(|| cache.get(&public)) {
            crate::telemetry::metrics::cache("hit");
            return Either::Right(Box::pin(std::future::ready(Ok(Routed::result(hit.as_ref().to_owned())))));
        }
        crate::telemetry::metrics::cache("miss");
        let fut = self.inner.call(req);
        Either::Right(Box::pin(async move {
            let reply = fut.await?;
            if let Some(result) = reply.as_result()
                && let Some(hints) = hints(result)
            {
                cache.put(if hints.public { public } else { private }, hints.ttl, result);
            }
            Ok(reply)
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;
    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::identity::Principal;
    use crate::jsonrpc::Id;
    use crate::session::{Scope, Session};

    fn request(session: &Arc<Session>, principal: Option<&str>, method: &str, params: Value) -> ClientRequest {
        let (tx, _rx) = crate::call::events(1);
        let mut req =
            ClientRequest::new(Arc::clone(session), Id::number(1), method, Some(jsonrpc::to_raw(&params)), None, tx);
        req.principal = principal.map(|p| Arc::new(Principal::api_key(p)));
        req
    }

    fn layer() -> CacheLayer {
        CacheLayer::new(&CacheConfig { enabled: true, max_entries: 2, max_entry_bytes: 1024 })
    }

    /// An inner service that counts calls and answers `answer`.
    fn counting(
        calls: Arc<AtomicUsize>,
        answer: Value,
    ) -> impl Service<ClientRequest, Response = Routed, Error = GatewayError, Future: Send + 'static> + Clone {
        service_fn(move |_req: ClientRequest| {
            calls.fetch_add(1, Ordering::SeqCst);
            let answer = jsonrpc::to_raw(&answer);
            async move { Ok::<Routed, GatewayError>(Routed::result(answer)) }
        })
    }

    #[tokio::test(start_paused = true)]
    async fn public_entries_serve_everyone_until_their_ttl_and_private_ones_their_owner_only() {
        let session = Session::new(Scope::Aggregate, "2025-11-25".into(), json!({}), json!({}));
        let calls = Arc::new(AtomicUsize::new(0));
        let public = json!({"tools": [], "ttlMs": 1000, "cacheScope": "public"});
        let svc = layer().layer(counting(Arc::clone(&calls), public));
        for who in [Some("a"), Some("b"), None] {
            let req = request(&session, who, "tools/list", json!({"_meta": {"progressToken": 1}}));
            assert!(svc.clone().oneshot(req).await.unwrap().as_result().is_some());
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1, "one upstream call for three clients");
        tokio::time::advance(Duration::from_millis(1001)).await;
        let _ = svc.clone().oneshot(request(&session, Some("a"), "tools/list", json!({}))).await;
        assert_eq!(calls.load(Ordering::SeqCst), 2, "never beyond ttlMs");

        let calls = Arc::new(AtomicUsize::new(0));
        let private = json!({"contents": [], "ttlMs": 1000, "cacheScope": "private"});
        let svc = layer().layer(counting(Arc::clone(&calls), private));
        let read = |who| request(&session, who, "resources/read", json!({"uri": "x://y"}));
        for who in [Some("a"), Some("a"), Some("b")] {
            let _ = svc.clone().oneshot(read(who)).await;
        }
        assert_eq!(calls.load(Ordering::SeqCst), 2, "a and b each once");
    }

    #[tokio::test]
    async fn results_without_hints_errors_and_other_methods_are_never_kept() {
        let session = Session::new(Scope::Aggregate, "2025-11-25".into(), json!({}), json!({}));
        let calls = Arc::new(AtomicUsize::new(0));
        let svc = layer().layer(counting(Arc::clone(&calls), json!({"tools": []})));
        for _ in 0..2 {
            let _ = svc.clone().oneshot(request(&session, None, "tools/list", json!({}))).await;
        }
        let hinted = json!({"content": [], "ttlMs": 9000, "cacheScope": "public"});
        let call = layer().layer(counting(Arc::clone(&calls), hinted));
        for _ in 0..2 {
            let _ = call.clone().oneshot(request(&session, None, "tools/call", json!({"name": "x"}))).await;
        }
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }
}

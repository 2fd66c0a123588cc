//! Admission of client requests, in one place: a second `initialize` in a session, a
//! request id already in flight, and the in-flight caps per session, per principal and
//! for the whole gateway. Every overload refusal is the same [`GatewayError::Overloaded`]
//! (-32012, HTTP 503 with `Retry-After`), whichever cap refused.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::Either;
use parking_lot::Mutex;
use tower::{Layer, Service};

use crate::call::{GatewayError, Holding};
use crate::client::{ClientRequest, Routed};
use crate::identity::Identity;
use crate::jsonrpc::Id;
use crate::mcp::method;
use crate::session::Session;
use crate::telemetry::metrics;

/// When a refused client may try again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Applies [`Admission`] with these caps.
#[derive(Clone, Debug)]
pub(crate) struct AdmissionLayer {
    gateway: Arc<GatewayPlaces>,
    per_session: usize,
    principals: Option<Arc<PrincipalCounts>>,
}

impl AdmissionLayer {
    /// At most `max_in_flight` requests in the gateway and `per_session` in one session.
    pub(crate) fn new(max_in_flight: usize, per_session: usize) -> AdmissionLayer {
        AdmissionLayer { gateway: Arc::new(GatewayPlaces::new(max_in_flight)), per_session, principals: None }
    }

    /// At most `per_principal` requests of one authenticated principal, over all its
    /// sessions (0: no cap).
    pub(crate) fn with_max_per_principal(mut self, per_principal: usize) -> AdmissionLayer {
        self.principals = (per_principal > 0)
            .then(|| Arc::new(PrincipalCounts { max: per_principal, counts: Mutex::new(HashMap::new()) }));
        self
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admission<S>;
    fn layer(&self, inner: S) -> Admission<S> {
        Admission {
            inner,
            gateway: Arc::clone(&self.gateway),
            per_session: self.per_session,
            principals: self.principals.clone(),
        }
    }
}

/// Requests in flight per principal. A principal's entry goes when its count returns to
/// 0, so the map holds only principals with requests in flight.
#[derive(Debug)]
struct PrincipalCounts {
    max: usize,
    counts: Mutex<HashMap<Identity, usize>>,
}

impl PrincipalCounts {
    /// Counts one more request of `identity`, unless it already has `max` in flight.
    fn admit(self: &Arc<Self>, identity: Identity) -> Option<PrincipalPlace> {
        let mut counts = self.counts.lock();
        let n = counts.entry(identity.clone()).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(PrincipalPlace { counts: Arc::clone(self), identity })
    }

    /// How many principals have requests in flight.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.counts.lock().len()
    }
}

/// One request's place in its principal's count, given back on drop.
struct PrincipalPlace {
    counts: Arc<PrincipalCounts>,
    identity: Identity,
}

impl Drop for PrincipalPlace {
    fn drop(&mut self) {
        let mut counts = self.counts.counts.lock();
        if let Some(n) = counts.get_mut(&self.identity) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.identity);
            }
        }
    }
}

/// Admits a request, registers it with its session for cancellation, and holds its
/// places until it is answered.
#[derive(Clone, Debug)]
pub(crate) struct Admission<S> {
    inner: S,
    gateway: Arc<GatewayPlaces>,
    per_session: usize,
    principals: Option<Arc<PrincipalCounts>>,
}

/// What an admitted request holds until it is answered.
pub(crate) struct Places {
    _gateway: GatewayPlace,
    _principal: Option<PrincipalPlace>,
    _in_flight: InFlight,
}

impl<S> Admission<S> {
    fn admit(&self, req: &mut ClientRequest) -> Result<Places, GatewayError> {
        if &*req.method == method::INITIALIZE {
            return Err(GatewayError::InvalidRequest("the session is already initialized".into()));
        }
        let overloaded = |scope: &str| {
            metrics::load_shed(scope);
            GatewayError::Overloaded { scope: scope.into(), retry_after: RETRY_AFTER }
        };
        if req.session.inflight() >= self.per_session {
            return Err(overloaded("session"));
        }
        let principal = match (&self.principals, &req.principal) {
            (Some(counts), Some(principal)) => {
                Some(counts.admit(principal.identity()).ok_or_else(|| overloaded("principal"))?)
            }
            _ => None,
        };
        let permit = GatewayPlaces::take(&self.gateway).ok_or_else(|| overloaded("gateway"))?;
        let Some(cancel) = req.session.begin_request(&req.id) else {
            return Err(GatewayError::InvalidRequest("a request with this id is already in flight".into()));
        };
        req.cancel = Some(cancel);
        let in_flight = InFlight { session: Arc::clone(&req.session), id: req.id.clone() };
        Ok(Places { _gateway: permit, _principal: principal, _in_flight: in_flight })
    }
}

impl<S> Service<ClientRequest> for Admission<S>
where
    S: Service<ClientRequest, Response = Routed, Error = GatewayError>,
    S::Future: Send + 'static,
{
    type Response = Routed;
    type Error = GatewayError;
    type Future = Either<std::future::Ready<Result<Routed, GatewayError>>, Holding<S::Future, Places>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: ClientRequest) -> Self::Future {
        match self.admit(&mut req) {
            Ok(places) => Either::Right(Holding::new(self.inner.call(req), places)),
            Err(refused) => Either::Left(std::future::ready(Err(refused))),
        }
    }
}

/// The gateway's cap on requests in flight: a count, taken and given back without a
/// lock (a request over the cap is refused at once, never queued).
#[derive(Debug)]
struct GatewayPlaces {
    taken: AtomicUsize,
    max: usize,
}

impl GatewayPlaces {
    fn new(max: usize) -> GatewayPlaces {
        GatewayPlaces { taken: AtomicUsize::new(0), max: max.max(1) }
    }

    /// A place, when one is free.
    fn take(places: &Arc<GatewayPlaces>) -> Option<GatewayPlace> {
        places
            .taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| (taken < places.max).then_some(taken + 1))
            .ok()?;
        Some(GatewayPlace(Arc::clone(places)))
    }
}

/// One place in the gateway, given back on drop.
struct GatewayPlace(Arc<GatewayPlaces>);

impl Drop for GatewayPlace {
    fn drop(&mut self) {
        self.0.taken.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A request registered with its session, forgotten when it is answered or dropped.
struct InFlight {
    session: Arc<Session>,
    id: Id,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.session.end_request(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde_json::json;
    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::client::CancelLayer;
    use crate::session::Scope;

    fn request(session: &Arc<Session>, id: u64, method: &str) -> ClientRequest {
        let (tx, _rx) = crate::call::events(1);
        ClientRequest::new(Arc::clone(session), Id::number(id), method, None, None, tx)
    }

    fn session() -> Arc<Session> {
        Session::new(Scope::Aggregate, "2025-11-25".into(), json!({}), json!({}))
    }

    fn slow() -> impl Service<ClientRequest, Response = Routed, Error = GatewayError, Future: Send + 'static> + Clone {
        service_fn(|_req: ClientRequest| async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok::<Routed, GatewayError>(Routed::result(crate::jsonrpc::to_raw(&json!({}))))
        })
    }

    #[tokio::test(start_paused = true)]
    async fn every_cap_refuses_with_the_same_overload() {
        let s = session();
        let layer = AdmissionLayer::new(2, 1);
        let first = tokio::spawn(layer.layer(slow()).oneshot(request(&s, 1, "tools/list")));
        tokio::task::yield_now().await;
        let refused = layer.layer(slow()).oneshot(request(&s, 2, "tools/list")).await.unwrap_err();
        assert!(
            matches!(&refused, GatewayError::Overloaded { scope, retry_after } if scope == "session" && *retry_after == RETRY_AFTER)
        );
        let other = session();
        let _second = tokio::spawn(layer.layer(slow()).oneshot(request(&other, 1, "tools/list")));
        tokio::task::yield_now().await;
        let third = session();
        let refused = layer.layer(slow()).oneshot(request(&third, 1, "tools/list")).await.unwrap_err();
        assert!(matches!(&refused, GatewayError::Overloaded { scope, .. } if scope == "gateway"));
        first.abort();
        let _ = first.await;
        assert_eq!(s.inflight(), 0, "a dropped request leaves its session");
    }

    fn session_of(name: &str) -> Arc<Session> {
        let s = session();
        s.bind_principal(Arc::new(crate::identity::Principal::api_key(name)));
        s
    }

    #[tokio::test(start_paused = true)]
    async fn one_principal_is_capped_over_all_its_sessions_and_forgotten_at_zero() {
        let layer = AdmissionLayer::new(100, 100).with_max_per_principal(2);
        let counts = layer.principals.clone().unwrap();
        let (ci_a, ci_b) = (session_of("ci"), session_of("ci"));
        let first = tokio::spawn(layer.layer(slow()).oneshot(request(&ci_a, 1, "tools/list")));
        let second = tokio::spawn(layer.layer(slow()).oneshot(request(&ci_b, 1, "tools/list")));
        tokio::task::yield_now().await;
        let refused = layer.layer(slow()).oneshot(request(&ci_a, 2, "tools/list")).await.unwrap_err();
        assert!(
            matches!(&refused, GatewayError::Overloaded { scope, retry_after } if scope == "principal" && *retry_after == RETRY_AFTER)
        );
        assert_eq!(ci_a.inflight(), 1, "the refused request never entered its session");
        // Other principals and unauthenticated sessions have their own room.
        let ops = tokio::spawn(layer.layer(slow()).oneshot(request(&session_of("ops"), 1, "tools/list")));
        let anonymous = session();
        let unnamed: Vec<_> =
            (1..=3).map(|id| tokio::spawn(layer.layer(slow()).oneshot(request(&anonymous, id, "ping")))).collect();
        tokio::task::yield_now().await;
        assert_eq!(anonymous.inflight(), 3);
        assert_eq!(counts.len(), 2);
        first.abort();
        let _ = first.await;
        let third = tokio::spawn(layer.layer(slow()).oneshot(request(&ci_a, 3, "tools/list")));
        tokio::task::yield_now().await;
        assert_eq!(ci_a.inflight(), 1, "a freed place admits again");
        for task in [second, third, ops].into_iter().chain(unnamed) {
            task.abort();
            let _ = task.await;
        }
        assert_eq!(counts.len(), 0, "principals with nothing in flight are forgotten");
    }

    #[tokio::test(start_paused = true)]
    async fn a_place_taken_for_a_principal_is_given_back_when_the_gateway_refuses() {
        let layer = AdmissionLayer::new(1, 10).with_max_per_principal(5);
        let counts = layer.principals.clone().unwrap();
        let _running = tokio::spawn(layer.layer(slow()).oneshot(request(&session(), 1, "ping")));
        tokio::task::yield_now().await;
        let refused = layer.layer(slow()).oneshot(request(&session_of("ci"), 1, "ping")).await.unwrap_err();
        assert!(matches!(&refused, GatewayError::Overloaded { scope, .. } if scope == "gateway"));
        assert_eq!(counts.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn initialize_and_duplicate_ids_are_invalid_requests() {
        let s = session();
        let layer = AdmissionLayer::new(8, 8);
        let err = layer.layer(slow()).oneshot(request(&s, 1, "initialize")).await.unwrap_err();
        assert!(matches!(err, GatewayError::InvalidRequest(_)));
        let _running = tokio::spawn(layer.layer(slow()).oneshot(request(&s, 7, "ping")));
        tokio::task::yield_now().await;
        let err = layer.layer(slow()).oneshot(request(&s, 7, "ping")).await.unwrap_err();
        assert!(matches!(err, GatewayError::InvalidRequest(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_request_ends_at_once_and_drops_the_inner_call() {
        let s = session();
        let dropped = Arc::new(AtomicUsize::new(0));
        let flag = Arc::clone(&dropped);
        let inner = service_fn(move |_req: ClientRequest| {
            let guard = Counted(Arc::clone(&flag));
            async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<Routed, GatewayError>(Routed::result(crate::jsonrpc::to_raw(&json!({}))))
            }
        });
        let svc = AdmissionLayer::new(8, 8).layer(CancelLayer::default().layer(inner));
        let pending = tokio::spawn(svc.oneshot(request(&s, 3, "tools/call")));
        tokio::task::yield_now().await;
        assert!(s.cancel_request(&Id::number(3)));
        assert!(matches!(pending.await.unwrap(), Err(GatewayError::Cancelled)));
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        assert_eq!(s.inflight(), 0);
    }

    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

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

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use parking_lot::Mutex;

use super::http::{HttpLink, HttpUpstream};
use crate::call::{AttachedSession, BoxFuture, EventSink, Reply, Transport, UpstreamCall, UpstreamError};
use crate::jsonrpc::{Id, Notification};
use crate::mcp::init::{InitParams, InitResult};

/// Consecutive failures that eject an endpoint.
const EJECT_AFTER: u32 = 5;
/// First ejection period; doubles on each further ejection.
const BASE_EJECTION: Duration = Duration::from_secs(10);
/// Longest ejection period.
const MAX_EJECTION: Duration = Duration::from_secs(300);
/// Requests in flight beyond an ejected endpoint's, and time without an answer, that
/// make an endpoint look stuck (a hung replica's requests pile up and none is answered).
const PILE_UP: usize = 8;
const STALL: Duration = Duration::from_millis(200);

/// One replica and its health, shared by every session.
pub(crate) struct Endpoint {
    /// How to reach it.
    pub upstream: Arc<HttpUpstream>,
    in_flight: AtomicUsize,
    health: Mutex<Health>,
}

#[derive(Default)]
struct Health {
    /// When an attempt on it last ended well.
    last_answer: Option<Instant>,
    consecutive_failures: u32,
    ejections: u32,
    ejected_until: Option<Instant>,
    /// Ejected by the operator, until restored.
    held_out: bool,
}

/// Why an endpoint cannot be ejected or restored by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EjectError {
    /// No endpoint has that index.
    #[error("no endpoint {0}")]
    NoSuchEndpoint(usize),
    /// It is the last endpoint not ejected by hand.
    #[error("endpoint {0} is the last one taking traffic; isolate the upstream instead")]
    LastEndpoint(usize),
}

/// The endpoints of one upstream.
pub struct HttpPool {
    /// The upstream's name.
    pub name: Arc<str>,
    endpoints: Vec<Endpoint>,
    connect_timeout: Duration,
}

impl HttpPool {
    /// A pool over these endpoints (at least one).
    pub(crate) fn new(name: Arc<str>, upstreams: Vec<Arc<HttpUpstream>>, connect_timeout: Duration) -> HttpPool {
        let endpoints = upstreams
            .into_iter()
            .map(|upstream| Endpoint { upstream, in_flight: AtomicUsize::new(0), health: Default::default() })
            .collect();
        HttpPool { name, endpoints, connect_timeout }
    }

    /// How many endpoints there are.
    pub(crate) fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// The first endpoint (the only one of a single-endpoint upstream).
    pub(crate) fn first(&self) -> Option<&Arc<HttpUpstream>> {
        self.endpoints.first().map(|e| &e.upstream)
    }

    fn ejected(&self, i: usize, now: Instant) -> bool {
        let h = self.endpoints[i].health.lock();
        h.held_out || h.ejected_until.is_some_and(|t| t > now)
    }

    fn held_out(&self, i: usize) -> bool {
        self.endpoints[i].health.lock().held_out
    }

    /// Picks an endpoint: two distinct random candidates among the healthy ones not yet
    /// tried, the one with fewer requests in flight wins (so a hung one, whose requests
    /// pile up, stops getting new ones at once). Endpoints ejected by hand are never
    /// picked while another one is left.
    fn pick(&self, tried: &[u16]) -> usize {
        let now = Instant::now();
        let mut open: Vec<usize> = (0..self.len()).filter(|i| !self.held_out(*i)).collect();
        if open.is_empty() {
            open = (0..self.len()).collect();
        }
        let fresh: Vec<usize> = open.iter().copied().filter(|i| !tried.contains(&(*i as u16))).collect();
        let healthy: Vec<usize> = fresh.iter().copied().filter(|i| !self.ejected(*i, now)).collect();
        let candidates = if !healthy.is_empty() {
            healthy
        } else if !fresh.is_empty() {
            fresh.clone()
        } else {
            open
        };
        let chosen = match candidates.len() {
            0 => 0,
            1 => candidates[0],
            n => {
                let first = rand::random_range(0..n);
                let second = (first + rand::random_range(1..n)) % n;
                let (a, b) = (candidates[first], candidates[second]);
                if self.load(b) < self.load(a) { b } else { a }
            }
        };
        self.relief(chosen, &fresh, now).unwrap_or(chosen)
    }

    fn load(&self, i: usize) -> usize {
        self.endpoints[i].in_flight.load(Ordering::Relaxed)
    }

    /// An ejected endpoint (among `fresh`) to send the request to instead of `chosen`
    /// when `chosen` looks stuck: requests pile up on it and none was answered for a
    /// while — the last replica standing hung while an ejected one may have recovered
    /// (its answer restores it; its failure is retried elsewhere like any other).
    fn relief(&self, chosen: usize, fresh: &[usize], now: Instant) -> Option<usize> {
        let piled = self.load(chosen);
        if piled < PILE_UP {
            return None;
        }
        let answered = self.endpoints[chosen].health.lock().last_answer;
        if answered.is_some_and(|at| now.saturating_duration_since(at) < STALL) {
            return None;
        }
        fresh
            .iter()
            .copied()
            .filter(|i| *i != chosen && !self.held_out(*i) && self.ejected(*i, now))
            .filter(|i| self.load(*i) + PILE_UP <= piled)
            .min_by_key(|i| self.load(*i))
    }

    /// Records the outcome of one attempt on an endpoint.
    fn record(&self, i: usize, failed: bool) {
        let now = Instant::now();
        let healthy_others = (0..self.len()).filter(|j| *j != i && !self.ejected(*j, now)).count();
        let mut h = self.endpoints[i].health.lock();
        if !failed {
            h.consecutive_failures = 0;
            h.last_answer = Some(now);
            // An ejected endpoint that answered (a fallback attempt, or one in flight when
            // it was ejected) is back: it takes traffic again at once — unless the
            // operator ejected it.
            if !h.held_out && h.ejected_until.take().is_some_and(|t| t > now) {
                tracing::info!(upstream = %self.name, endpoint = i, "ejected endpoint answered: restored");
            }
            return;
        }
        h.consecutive_failures += 1;
        if h.consecutive_failures < EJECT_AFTER || h.ejected_until.is_some_and(|t| t > now) {
            return;
        }
        if healthy_others == 0 {
            // The last one standing fails too: the replicas ejected earlier (which may
            // have recovered since) get their traffic back, and this one is ejected.
            drop(h);
            if !self.end_ejections_but(i) {
                return;
            }
            h = self.endpoints[i].health.lock();
        }
        let period = crate::backoff::doubling(BASE_EJECTION, MAX_EJECTION, h.ejections);
        h.ejections += 1;
        h.ejected_until = Some(now + period);
        h.consecutive_failures = 0;
        crate::telemetry::metrics::endpoint_ejected(&self.name);
        tracing::warn!(
            upstream = %self.name,
            endpoint = i,
            ejection_ms = period.as_millis() as u64,
            "endpoint ejected after repeated failures"
        );
    }

    /// Ends the outlier ejections of every endpoint but `i`; whether one of them takes
    /// traffic now (those ejected by hand stay out).
    fn end_ejections_but(&self, i: usize) -> bool {
        let mut any = false;
        for (j, endpoint) in self.endpoints.iter().enumerate().filter(|(j, _)| *j != i) {
            let mut h = endpoint.health.lock();
            if h.held_out {
                continue;
            }
            if h.ejected_until.take().is_some() {
                h.consecutive_failures = 0;
                tracing::info!(upstream = %self.name, endpoint = j, "ejection ended: the other endpoints fail too");
            }
            any = true;
        }
        any
    }

    /// Ejects endpoint `i` by hand: it takes no traffic until [`HttpPool::restore`].
    /// Refused for the last endpoint not ejected by hand. Ejecting one already ejected
    /// by hand changes nothing.
    pub(crate) fn eject(&self, i: usize) -> Result<(), EjectError> {
        if i >= self.len() {
            return Err(EjectError::NoSuchEndpoint(i));
        }
        if self.held_out(i) {
            return Ok(());
        }
        if (0..self.len()).all(|j| j == i || self.held_out(j)) {
            return Err(EjectError::LastEndpoint(i));
        }
        self.endpoints[i].health.lock().held_out = true;
        crate::telemetry::metrics::endpoint_ejected(&self.name);
        tracing::warn!(upstream = %self.name, endpoint = i, "endpoint ejected by the operator");
        Ok(())
    }

    /// Puts endpoint `i` back into service at once, whether the operator or outlier
    /// detection ejected it, with its failures forgotten.
    pub(crate) fn restore(&self, i: usize) -> Result<(), EjectError> {
        let endpoint = self.endpoints.get(i).ok_or(EjectError::NoSuchEndpoint(i))?;
        let mut h = endpoint.health.lock();
        h.held_out = false;
        h.ejected_until = None;
        h.consecutive_failures = 0;
        drop(h);
        tracing::info!(upstream = %self.name, endpoint = i, "endpoint restored by the operator");
        Ok(())
    }

    /// Whether each endpoint is currently ejected (for status pages).
    pub(crate) fn ejections(&self) -> Vec<bool> {
        let now = Instant::now();
        (0..self.len()).map(|i| self.ejected(i, now)).collect()
    }

    /// Each endpoint's health, in configuration order (for status pages).
    pub(crate) fn endpoints(&self) -> Vec<EndpointStatus<'_>> {
        let now = Instant::now();
        self.endpoints
            .iter()
            .map(|e| {
                let h = e.health.lock();
                EndpointStatus {
                    upstream: &e.upstream,
                    in_flight: e.in_flight.load(Ordering::Relaxed),
                    consecutive_failures: h.consecutive_failures,
                    ejections: h.ejections,
                    ejected_for: h.ejected_until.filter(|t| *t > now).map(|t| t - now),
                    held_out: h.held_out,
                }
            })
            .collect()
    }
}

/// One endpoint of a pool as a status page shows it.
pub(crate) struct EndpointStatus<'a> {
    /// How it is reached (its URL, its era).
    pub upstream: &'a HttpUpstream,
    /// Requests in flight to it now.
    pub in_flight: usize,
    /// Failed attempts in a row since its last success or ejection.
    pub consecutive_failures: u32,
    /// Times it was ejected.
    pub ejections: u32,
    /// While ejected by outlier detection: the time left.
    pub ejected_for: Option<Duration>,
    /// Ejected by the operator, until restored.
    pub held_out: bool,
}

/// One client session's view of a pooled upstream.
pub(crate) struct PoolLink {
    pool: Arc<HttpPool>,
    init: InitParams,
    links: tokio::sync::Mutex<Vec<Option<Arc<HttpLink>>>>,
    first_init: Mutex<Option<Arc<InitResult>>>,
    subscribers: Mutex<HashMap<u64, EventSink>>,
    get_wanted: std::sync::atomic::AtomicBool,
}

impl PoolLink {
    /// Opens a session on one endpoint (trying the others if it fails), so that the
    /// upstream's capabilities are known.
    pub(crate) async fn connect(pool: Arc<HttpPool>, init: InitParams) -> Result<Arc<PoolLink>, UpstreamError> {
        let link = Arc::new(PoolLink {
            links: tokio::sync::Mutex::new(vec![None; pool.len()]),
            pool,
            init,
            first_init: Mutex::new(None),
            subscribers: Mutex::new(HashMap::new()),
            get_wanted: std::sync::atomic::AtomicBool::new(false),
        });
        let mut tried = Vec::new();
        let mut last = UpstreamError::Connect("no endpoints".into());
        while tried.len() < link.pool.len() {
            let i = link.pool.pick(&tried);
            tried.push(i as u16);
            match link.endpoint_link(i).await {
                Ok(_) => return Ok(link),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Re-attaches to the endpoint sessions another process opened (see
    /// [`HttpLink::attach`]); endpoints without one open a session when first used.
    /// `None` when none of them names an endpoint of this pool.
    pub(crate) fn attach(pool: Arc<HttpPool>, init: InitParams, sessions: &[AttachedSession]) -> Option<Arc<PoolLink>> {
        let mut links: Vec<Option<Arc<HttpLink>>> = vec![None; pool.len()];
        let mut first_init = None;
        for session in sessions {
            let Some(i) = session.endpoint.map(usize::from).filter(|i| *i < pool.len()) else { continue };
            let link = HttpLink::attach(Arc::clone(&pool.endpoints[i].upstream), init.clone(), session);
            first_init = first_init.or_else(|| link.init_result());
            links[i] = Some(link);
        }
        first_init.as_ref()?;
        Some(Arc::new(PoolLink {
            links: tokio::sync::Mutex::new(links),
            pool,
            init,
            first_init: Mutex::new(first_init),
            subscribers: Mutex::new(HashMap::new()),
            get_wanted: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// The endpoint sessions opened so far, as another process re-attaches to them.
    fn attached(&self) -> Vec<AttachedSession> {
        let Ok(links) = self.links.try_lock() else { return Vec::new() };
        links.iter().enumerate().filter_map(|(i, link)| link.as_ref()?.attached(u16::try_from(i).ok())).collect()
    }

    /// Stops every endpoint session's streams, leaving the sessions to other replicas.
    async fn detach(&self) {
        for link in self.links.lock().await.iter().flatten() {
            link.stop();
        }
    }

    /// The initialize result of the first endpoint that answered.
    pub(crate) fn init_result(&self) -> Option<Arc<InitResult>> {
        self.first_init.lock().clone()
    }

    async fn endpoint_link(&self, i: usize) -> Result<Arc<HttpLink>, UpstreamError> {
        let mut links = self.links.lock().await;
        if let Some(link) = &links[i] {
            return Ok(Arc::clone(link));
        }
        let endpoint = &self.pool.endpoints[i];
        let connect = HttpLink::connect(Arc::clone(&endpoint.upstream), self.init.clone());
        let link = match tokio::time::timeout(self.pool.connect_timeout, connect).await {
            Ok(Ok(link)) => link,
            Ok(Err(e)) => {
                self.pool.record(i, true);
                return Err(e);
            }
            Err(_) => {
                self.pool.record(i, true);
                return Err(UpstreamError::Handshake("no answer to initialize in time".into()));
            }
        };
        for (key, sink) in self.subscribers.lock().iter() {
            link.shared.fanout.subscribe(*key, sink.clone().with_endpoint(i as u16));
        }
        self.first_init.lock().get_or_insert_with(|| link.init_result().unwrap_or_else(empty_init));
        if self.get_wanted.load(std::sync::atomic::Ordering::SeqCst) {
            link.want_get_stream().await;
        }
        links[i] = Some(Arc::clone(&link));
        Ok(link)
    }

    /// Opens the standalone GET stream of every endpoint session, now and later ones.
    pub(crate) async fn want_get_stream(&self) {
        self.get_wanted.store(true, std::sync::atomic::Ordering::SeqCst);
        let links: Vec<_> = self.links.lock().await.iter().flatten().cloned().collect();
        futures::future::join_all(links.iter().map(|link| link.want_get_stream())).await;
    }

    /// Sends one attempt to the endpoint the attempt layer chose (or one picked now).
    async fn call(&self, call: &UpstreamCall) -> Result<Reply, UpstreamError> {
        let i = call.endpoint.map_or_else(|| self.pool.pick(&call.avoid), usize::from);
        let link = self.endpoint_link(i).await?;
        let endpoint = &self.pool.endpoints[i];
        endpoint.in_flight.fetch_add(1, Ordering::Relaxed);
        let _in_flight = InFlight(&endpoint.in_flight);
        link.call(call).await
    }

    /// Sends a notification to every endpoint session opened so far.
    pub(crate) async fn notify(&self, n: Notification) -> Result<(), UpstreamError> {
        let links: Vec<Arc<HttpLink>> = self.links.lock().await.iter().flatten().cloned().collect();
        for link in links {
            link.notify(n.clone()).await?;
        }
        Ok(())
    }

    /// Answers a server-initiated request on the endpoint that made it.
    pub(crate) async fn respond(&self, endpoint: Option<u16>, id: Id, body: Reply) -> Result<(), UpstreamError> {
        let i = endpoint.map(usize::from).unwrap_or(0);
        let link = self.links.lock().await.get(i).cloned().flatten();
        match link {
            Some(link) => link.respond(id, body).await,
            None => Err(UpstreamError::SessionLost("no session with that endpoint".into())),
        }
    }

    /// Subscribes a session to unrelated events of every endpoint session.
    pub(crate) fn subscribe(&self, key: u64, sink: EventSink) {
        self.subscribers.lock().insert(key, sink.clone());
        if let Ok(links) = self.links.try_lock() {
            for (i, link) in links.iter().enumerate() {
                if let Some(link) = link {
                    link.shared.fanout.subscribe(key, sink.clone().with_endpoint(i as u16));
                }
            }
        }
    }

    /// Unsubscribes a session.
    pub(crate) fn unsubscribe(&self, key: u64) {
        self.subscribers.lock().remove(&key);
        if let Ok(links) = self.links.try_lock() {
            for link in links.iter().flatten() {
                link.shared.fanout.unsubscribe(key);
            }
        }
    }

    /// Ends every endpoint session.
    pub(crate) async fn close(&self) {
        let links: Vec<Arc<HttpLink>> = self.links.lock().await.iter().flatten().cloned().collect();
        futures::future::join_all(links.iter().map(|l| l.close())).await;
    }
}

impl Transport for PoolLink {
    fn send<'a>(&'a self, call: &'a UpstreamCall) -> BoxFuture<'a, Result<Reply, UpstreamError>> {
        Box::pin(self.call(call))
    }

    fn pick(&self, avoid: &[u16]) -> Option<u16> {
        u16::try_from(self.pool.pick(avoid)).ok()
    }

    fn record(&self, endpoint: u16, failed: bool) {
        if usize::from(endpoint) < self.pool.len() {
            self.pool.record(usize::from(endpoint), failed);
        }
    }

    fn has_untried(&self, endpoint: u16, tried: &[u16]) -> bool {
        (0..self.pool.len())
            .any(|j| j != usize::from(endpoint) && !tried.contains(&(j as u16)) && !self.pool.held_out(j))
    }

    fn has_spare(&self, endpoint: u16) -> bool {
        let now = Instant::now();
        (0..self.pool.len()).any(|j| j != usize::from(endpoint) && !self.pool.ejected(j, now))
    }

    fn notify(&self, n: Notification) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(PoolLink::notify(self, n))
    }

    fn respond(&self, endpoint: Option<u16>, id: Id, body: Reply) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(PoolLink::respond(self, endpoint, id, body))
    }

    fn init_result(&self) -> Option<Arc<InitResult>> {
        PoolLink::init_result(self)
    }

    fn subscribe(&self, key: u64, sink: EventSink) {
        PoolLink::subscribe(self, key, sink);
    }

    fn unsubscribe(&self, key: u64) {
        PoolLink::unsubscribe(self, key);
    }

    fn want_unrelated_stream(&self) -> BoxFuture<'_, ()> {
        Box::pin(PoolLink::want_get_stream(self))
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(PoolLink::close(self))
    }

    fn attached(&self) -> Vec<AttachedSession> {
        PoolLink::attached(self)
    }

    fn detach(&self) -> BoxFuture<'_, ()> {
        Box::pin(PoolLink::detach(self))
    }
}

fn empty_init() -> Arc<InitResult> {
    Arc::new(InitResult {
        protocol_version: crate::mcp::LATEST_LEGACY.to_owned(),
        capabilities: serde_json::json!({}),
        server_info: serde_json::Value::Null,
        instructions: None,
        raw: crate::jsonrpc::to_raw(&serde_json::json!({})),
    })
}

/// Decrements an endpoint's in-flight count when a call ends, however it ends.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(n: usize) -> HttpPool {
        let ups = (0..n)
            .map(|i| {
                Arc::new(
                    HttpUpstream::new(
                        "u",
                        &format!("http://127.0.0.1:{}/mcp", 1000 + i),
                        &Default::default(),
                        Duration::from_secs(1),
                        1024,
                    )
                    .unwrap(),
                )
            })
            .collect();
        HttpPool::new(Arc::from("u"), ups, Duration::from_secs(1))
    }

    #[tokio::test(start_paused = true)]
    async fn retries_avoid_tried_endpoints_and_failing_ones_are_ejected() {
        let p = pool(3);
        for _ in 0..50 {
            let i = p.pick(&[0, 1]);
            assert_eq!(i, 2);
        }
        for _ in 0..EJECT_AFTER {
            p.record(1, true);
        }
        assert_eq!(p.ejections(), vec![false, true, false]);
        for _ in 0..50 {
            assert_ne!(p.pick(&[]), 1);
        }
        // Ejection ends, and the next one lasts twice as long.
        tokio::time::advance(BASE_EJECTION + Duration::from_millis(1)).await;
        assert_eq!(p.ejections(), vec![false, false, false]);
        for _ in 0..EJECT_AFTER {
            p.record(1, true);
        }
        tokio::time::advance(BASE_EJECTION + Duration::from_millis(1)).await;
        assert_eq!(p.ejections(), vec![false, true, false]);
        // The last healthy endpoint is never left without traffic: when it fails too,
        // the others' ejections end and it is ejected instead.
        for _ in 0..EJECT_AFTER {
            p.record(0, true);
        }
        for _ in 0..EJECT_AFTER - 1 {
            p.record(2, true);
        }
        assert_eq!(p.ejections(), vec![true, true, false]);
        p.record(2, true);
        assert_eq!(p.ejections(), vec![false, false, true]);
        for _ in 0..EJECT_AFTER * 3 {
            p.record(0, true);
            p.record(1, true);
        }
        assert_eq!(p.ejections().iter().filter(|e| !**e).count(), 1, "one is always left: {:?}", p.ejections());
    }

    #[tokio::test(start_paused = true)]
    async fn of_two_replicas_the_one_with_requests_piling_up_gets_no_new_one() {
        let p = pool(2);
        p.endpoints[0].in_flight.store(3, Ordering::Relaxed);
        for _ in 0..50 {
            assert_eq!(p.pick(&[]), 1, "two distinct candidates are compared every time");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn when_the_last_one_standing_looks_stuck_an_ejected_one_gets_the_next_request() {
        let p = pool(2);
        for _ in 0..EJECT_AFTER {
            p.record(0, true);
        }
        assert_eq!(p.ejections(), vec![true, false]);
        p.record(1, false);
        p.endpoints[1].in_flight.store(PILE_UP, Ordering::Relaxed);
        assert_eq!(p.pick(&[]), 1, "it answered a moment ago: busy, not stuck");
        tokio::time::advance(STALL).await;
        assert_eq!(p.pick(&[]), 0, "requests pile up and none is answered");
        p.endpoints[1].in_flight.store(PILE_UP - 1, Ordering::Relaxed);
        assert_eq!(p.pick(&[]), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_endpoint_ejected_by_hand_takes_no_traffic_until_restored() {
        let p = pool(3);
        p.eject(1).unwrap();
        assert_eq!(p.ejections(), vec![false, true, false]);
        for _ in 0..50 {
            assert_ne!(p.pick(&[]), 1);
            assert_ne!(p.pick(&[0, 2]), 1, "not even as a last resort");
        }
        // Its answers and its time do not bring it back.
        p.record(1, false);
        tokio::time::advance(MAX_EJECTION * 2).await;
        assert_eq!(p.ejections(), vec![false, true, false]);
        assert_eq!(p.eject(5), Err(EjectError::NoSuchEndpoint(5)));
        p.eject(0).unwrap();
        assert_eq!(p.eject(2), Err(EjectError::LastEndpoint(2)), "one must stay in service");
        for _ in 0..20 {
            assert_eq!(p.pick(&[]), 2);
        }
        p.restore(1).unwrap();
        p.restore(0).unwrap();
        assert_eq!(p.ejections(), vec![false, false, false]);
        // Restoring also ends an ejection by outlier detection.
        for _ in 0..EJECT_AFTER {
            p.record(2, true);
        }
        assert_eq!(p.ejections(), vec![false, false, true]);
        p.restore(2).unwrap();
        assert_eq!(p.ejections(), vec![false, false, false]);
        assert_eq!(p.restore(3), Err(EjectError::NoSuchEndpoint(3)));
        assert_eq!(pool(1).eject(0), Err(EjectError::LastEndpoint(0)));
    }

    #[tokio::test]
    async fn a_pool_link_re_attaches_to_the_endpoint_sessions_it_is_given() {
        let pool = Arc::new(pool(3));
        let held = AttachedSession {
            endpoint: Some(2),
            session_id: "session-on-2".into(),
            version: "2025-06-18".into(),
            capabilities: vec!["tools".into(), "prompts".into()],
        };
        let elsewhere = AttachedSession { endpoint: Some(7), ..held.clone() };
        let link = PoolLink::attach(Arc::clone(&pool), InitParams::gateway_own(), &[held.clone(), elsewhere.clone()])
            .expect("one session fits the pool");
        assert_eq!(Transport::attached(&*link), vec![held], "only endpoints of this pool are attached");
        let init = link.init_result().expect("the capabilities the id carried");
        assert!(init.has("tools") && init.has("prompts") && !init.has("resources"));
        assert_eq!(init.protocol_version, "2025-06-18");
        assert!(PoolLink::attach(pool, InitParams::gateway_own(), &[elsewhere]).is_none(), "nothing fits");
    }

    #[tokio::test(start_paused = true)]
    async fn an_ejected_endpoint_that_answers_is_restored_at_once() {
        let p = pool(2);
        for _ in 0..EJECT_AFTER {
            p.record(0, true);
        }
        assert_eq!(p.ejections(), vec![true, false]);
        // A fallback attempt on it (the other one hangs) succeeds: it is back.
        p.record(0, false);
        assert_eq!(p.ejections(), vec![false, false]);
        // So the other one's failures may eject that one in turn.
        for _ in 0..EJECT_AFTER {
            p.record(1, true);
        }
        assert_eq!(p.ejections(), vec![false, true]);
    }
}

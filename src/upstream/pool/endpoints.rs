//! The replicas of one upstream and their health: the power of two choices on requests in
//! flight, outlier ejection that grows with each ejection, and ejection by hand.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use parking_lot::Mutex;

use crate::upstream::http::HttpUpstream;

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
pub(crate) struct HttpPool {
    /// The upstream's name.
    pub name: Arc<str>,
    pub(super) endpoints: Vec<Endpoint>,
    pub(super) connect_timeout: Duration,
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

    pub(super) fn ejected(&self, i: usize, now: Instant) -> bool {
        let h = self.endpoints[i].health.lock();
        h.held_out || h.ejected_until.is_some_and(|t| t > now)
    }

    pub(super) fn held_out(&self, i: usize) -> bool {
        self.endpoints[i].health.lock().held_out
    }

    /// Picks an endpoint: two distinct random candidates among the healthy ones not yet
    /// tried, the one with fewer requests in flight wins (so a hung one, whose requests
    /// pile up, stops getting new ones at once). Endpoints ejected by hand are never
    /// picked while another one is left.
    pub(super) fn pick(&self, tried: &[u16]) -> usize {
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
    pub(super) fn record(&self, i: usize, failed: bool) {
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

impl Endpoint {
    /// Counts a call in flight on it until the guard is dropped.
    pub(super) fn enter(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(&self.in_flight)
    }
}

/// Decrements an endpoint's in-flight count when a call ends, however it ends.
pub(super) struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::test_pool as pool;

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

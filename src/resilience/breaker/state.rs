//! The breaker state machine — closed, open, half-open — with no I/O. Time comes from
//! `tokio::time::Instant`, so tests drive it with a paused clock.
//!
//! Closed counts calls in a sliding window and consecutive failures; too many opens
//! it. Open refuses every call until its break is over, then lets a bounded number of
//! probes through (half-open); the first probe to succeed closes it, the first to fail
//! (or to take longer than `probe_timeout`) opens it again for twice as long.
//!
//! Each acquired [`Permit`] belongs to one period of one state (an epoch): results that
//! come back after the breaker has moved on are not counted, so a slow call started
//! before an outage cannot close a breaker, nor one started before recovery reopen it.
//!
//! An operator may hold a breaker open or closed ([`Breaker::force`], a [`Hold`]): held
//! open it refuses every call and never half-opens; held closed no failure opens it.
//! Only another hold, or a reset back to the automatic rules, ends a hold.
//!
//! A shared breaker also repeats the transitions of the same breaker on other replicas
//! ([`Breaker::apply_remote`], in `remote.rs`); the last writer wins, by wall-clock time.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::classify::{Outcome, Verdict};
use super::transition::{BreakerKey, Feed, Hold, Listener, Origin, State, Transition};
use super::window::Window;
use crate::config::BreakerConfig;

mod machine;
mod remote;

use machine::Inner;
pub use machine::Snapshot;

/// A circuit breaker for one upstream or one tool.
pub struct Breaker {
    key: BreakerKey,
    inner: Mutex<Inner>,
    listener: Option<Listener>,
    feed: Option<Feed>,
}

impl fmt::Debug for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker").field("key", &self.key).field("state", &self.inner.lock().state()).finish()
    }
}

impl Breaker {
    /// A closed breaker; `listener` hears of every transition.
    pub fn new(key: BreakerKey, cfg: BreakerConfig, listener: Option<Listener>) -> Arc<Breaker> {
        Breaker::observed(key, cfg, listener, None)
    }

    /// A closed breaker; `listener` hears of every transition, `feed` of every transition
    /// and operator action with its details (shared breakers publish from it).
    pub fn observed(
        key: BreakerKey,
        cfg: BreakerConfig,
        listener: Option<Listener>,
        feed: Option<Feed>,
    ) -> Arc<Breaker> {
        Arc::new(Breaker { key, inner: Mutex::new(Inner::new(cfg, Instant::now())), listener, feed })
    }

    /// Which breaker this is.
    pub fn key(&self) -> &BreakerKey {
        &self.key
    }

    /// The current state (an open breaker whose break is over is half-open).
    pub fn state(&self) -> State {
        let (state, change) = {
            let mut inner = self.inner.lock();
            let change = inner.refresh(Instant::now());
            (inner.state(), change)
        };
        self.report(change);
        state
    }

    /// Whether calls are being refused for a break (half-open is not open).
    pub fn is_open(&self) -> bool {
        self.state() == State::Open
    }

    /// The state and the counts behind it, as a status page shows them.
    pub fn snapshot(&self) -> Snapshot {
        let now = Instant::now();
        let (snapshot, change) = {
            let mut inner = self.inner.lock();
            let change = inner.refresh(now);
            (inner.snapshot(now), change)
        };
        self.report(change);
        snapshot
    }

    /// Admits a call, or says how long until the breaker may admit one.
    pub fn try_acquire(self: &Arc<Self>) -> Result<Permit, Duration> {
        self.try_acquire_at(Instant::now())
    }

    /// [`Breaker::try_acquire`] at `now` (a call admitted by several breakers reads the
    /// clock once for all of them).
    pub fn try_acquire_at(self: &Arc<Self>, now: Instant) -> Result<Permit, Duration> {
        let (admitted, change) = {
            let mut inner = self.inner.lock();
            let change = inner.refresh(now);
            (inner.admit(now).map(|probe| (probe, inner.epoch)), change)
        };
        self.report(change);
        let (probe, epoch) = admitted?;
        Ok(Permit { breaker: Arc::clone(self), epoch, probe, acquired: now, settled: false })
    }

    /// Holds the breaker open or closed, or with `None` hands it back to its automatic
    /// rules, closed with fresh counts. Calls admitted before are not counted. Logs the
    /// operator's action and tells the listener when the state changed; returns the
    /// state it left.
    pub fn force(&self, hold: Option<Hold>) -> State {
        let now = Instant::now();
        let note = match &hold {
            Some(Hold::Open { reason }) => Some(Arc::clone(reason)),
            _ => None,
        };
        let t = self.inner.lock().force(now, hold.clone());
        let (upstream, tool) = (&*self.key.upstream, self.key.tool.as_deref());
        let (from, to, reason) = (t.from.as_str(), t.to.as_str(), t.reason.as_str());
        match note {
            Some(note) => {
                tracing::warn!(upstream, tool, from, to, reason, note = %note, "circuit breaker held open by the operator")
            }
            None => tracing::info!(upstream, tool, from, to, reason, "circuit breaker set by the operator"),
        }
        if t.from != t.to
            && let Some(listener) = &self.listener
        {
            listener(&self.key, t.to);
        }
        // Replicas hear of every hold and reset, even one that kept the state: a hold
        // changes what may undo it, and repeating one heals a replica that missed it.
        if let Some(feed) = &self.feed {
            feed(&t.change(&self.key, hold, Origin::Local));
        }
        t.from
    }

    /// The operator's hold, if any.
    pub fn hold(&self) -> Option<Hold> {
        self.inner.lock().hold.clone()
    }

    /// The reason clients are told while the operator holds the breaker open.
    pub fn isolation(&self) -> Option<Arc<str>> {
        match &self.inner.lock().hold {
            Some(Hold::Open { reason }) => Some(Arc::clone(reason)),
            _ => None,
        }
    }

    /// Applies new settings (after a configuration reload), keeping the state. A new
    /// window length starts an empty window.
    pub fn reconfigure(&self, cfg: BreakerConfig) {
        let mut inner = self.inner.lock();
        if inner.cfg.window != cfg.window {
            inner.window = Window::new(cfg.window, Instant::now());
        }
        inner.cfg = cfg;
    }

    fn settle(&self, permit: &Permit, verdict: Verdict, now: Instant) {
        let took = now.saturating_duration_since(permit.acquired);
        let change = self.inner.lock().settle(now, permit.epoch, permit.probe, took, verdict);
        self.report(change);
    }

    fn report(&self, change: Option<Transition>) {
        if let Some(t) = change {
            t.report(&self.key, self.listener.as_ref());
            if let Some(feed) = &self.feed {
                // Automatic transitions happen only without a hold.
                feed(&t.change(&self.key, None, Origin::Local));
            }
        }
    }
}

/// Leave to make one call. Record how it went with [`Permit::record`]; a permit dropped
/// without a record counts as [`Outcome::Ignored`] (and frees its probe slot).
#[must_use = "a permit dropped at once counts as an ignored call"]
pub struct Permit {
    breaker: Arc<Breaker>,
    epoch: u64,
    probe: bool,
    acquired: Instant,
    settled: bool,
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit").field("key", &self.breaker.key).field("probe", &self.probe).finish()
    }
}

impl Permit {
    /// Whether this call is a half-open probe (and so bounded by `probe_timeout`).
    pub fn is_probe(&self) -> bool {
        self.probe
    }

    /// Which breaker admitted the call.
    pub fn key(&self) -> &BreakerKey {
        &self.breaker.key
    }

    /// Records how the call went.
    pub fn record(self, verdict: Verdict) {
        self.record_at(verdict, Instant::now());
    }

    /// Records how the call went, as of `now` (when it ended).
    pub fn record_at(mut self, verdict: Verdict, now: Instant) {
        self.settled = true;
        self.breaker.settle(&self, verdict, now);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.settled {
            self.breaker.settle(self, Verdict::new(Outcome::Ignored), Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    //! The state machine alone; then the operator's holds: forced open, forced closed, reset.

    use std::sync::atomic::Ordering;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::time::advance;
    use tower::ServiceExt;

    use crate::call::GatewayError;
    use crate::config::BreakerConfig;
    use crate::resilience::breaker::classify::Verdict;
    use crate::resilience::breaker::state::Breaker;
    use crate::resilience::breaker::test_support::{
        FAILURE, SUCCESS, assert_jittered, call, cfg, result, stack, transport_error,
    };
    use crate::resilience::breaker::transition::{Listener, Reason};
    use crate::resilience::breaker::{BreakerKey, Breakers, Hold, State};

    fn breaker(cfg: BreakerConfig) -> Arc<Breaker> {
        Breaker::new(BreakerKey { upstream: Arc::from("u"), tool: None }, cfg, None)
    }

    fn record(b: &Arc<Breaker>, verdicts: &[Verdict]) {
        for v in verdicts {
            b.try_acquire().unwrap().record(*v);
        }
    }

    /// Opens `b` by consecutive failures; returns the break.
    fn open(b: &Arc<Breaker>) -> Duration {
        record(b, &[FAILURE, FAILURE, FAILURE]);
        assert_eq!(b.state(), State::Open);
        b.try_acquire().unwrap_err()
    }

    #[tokio::test(start_paused = true)]
    async fn failures_further_apart_than_the_window_are_no_run() {
        let b = breaker(BreakerConfig { failure_rate: 1.1, ..cfg() });
        for _ in 0..5 {
            record(&b, &[FAILURE]);
            advance(cfg().window + Duration::from_secs(1)).await;
        }
        assert_eq!(b.state(), State::Closed, "five failures, each alone in its window");
        record(&b, &[FAILURE, FAILURE, FAILURE]);
        assert_eq!(b.state(), State::Open, "three within the window are a run");
    }

    #[tokio::test(start_paused = true)]
    async fn opens_after_consecutive_failures() {
        // A failure rate above 100% never opens it: only the consecutive count does.
        let b = breaker(BreakerConfig { failure_rate: 1.1, ..cfg() });
        record(&b, &[FAILURE, FAILURE, SUCCESS, FAILURE, FAILURE]);
        assert_eq!(b.state(), State::Closed, "a success resets the count");
        record(&b, &[FAILURE]);
        assert_eq!(b.state(), State::Open);
        assert_jittered(b.try_acquire().unwrap_err(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn failure_rate_opens_only_after_min_calls() {
        let b = breaker(BreakerConfig { consecutive_failures: 0, ..cfg() });
        record(&b, &[FAILURE, FAILURE, FAILURE]);
        assert_eq!(b.state(), State::Closed, "100% of 3 calls, but min_calls is 4");
        record(&b, &[FAILURE]);
        assert_eq!(b.state(), State::Open);

        let b = breaker(BreakerConfig { consecutive_failures: 0, ..cfg() });
        record(&b, &[SUCCESS, FAILURE, SUCCESS, SUCCESS, FAILURE]);
        assert_eq!(b.state(), State::Closed, "2 failures in 5 calls is under 50%");
        record(&b, &[FAILURE]);
        assert_eq!(b.state(), State::Open, "3 in 6 is 50%");
    }

    #[tokio::test(start_paused = true)]
    async fn old_calls_leave_the_window() {
        let b = breaker(BreakerConfig { consecutive_failures: 0, ..cfg() });
        record(&b, &[FAILURE, FAILURE, FAILURE]);
        advance(Duration::from_secs(11)).await;
        record(&b, &[SUCCESS, SUCCESS, SUCCESS, FAILURE]);
        assert_eq!(b.state(), State::Closed, "1 failure in the 4 calls of the window");
    }

    #[tokio::test(start_paused = true)]
    async fn slow_call_rate_opens() {
        let b = breaker(cfg());
        let slow = Verdict { slow: true, ..SUCCESS };
        record(&b, &[SUCCESS, SUCCESS, slow]);
        assert_eq!(b.state(), State::Closed);
        record(&b, &[slow]);
        assert_eq!(b.state(), State::Open, "2 slow calls in 4 is 50%");
    }

    #[tokio::test(start_paused = true)]
    async fn half_open_admits_exactly_the_configured_probes() {
        let b = breaker(cfg());
        let pause = open(&b);
        advance(pause).await;
        let first = b.try_acquire().unwrap();
        let second = b.try_acquire().unwrap();
        assert!(first.is_probe() && second.is_probe());
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(b.try_acquire().unwrap_err(), cfg().probe_timeout, "a third concurrent probe is refused");
        drop(first);
        let third = b.try_acquire().expect("a dropped probe frees its slot");
        assert_eq!(b.state(), State::HalfOpen, "an ignored probe decides nothing");
        drop((second, third));
    }

    #[tokio::test(start_paused = true)]
    async fn probe_success_closes_and_resets_the_break() {
        let b = breaker(cfg());
        let pause = open(&b);
        advance(pause).await;
        let other = b.try_acquire().unwrap();
        b.try_acquire().unwrap().record(SUCCESS);
        assert_eq!(b.state(), State::Closed);
        other.record(FAILURE);
        record(&b, &[FAILURE, FAILURE]);
        assert_eq!(b.state(), State::Closed, "a probe of the half-open period no longer counts");
        record(&b, &[FAILURE]);
        assert_eq!(b.state(), State::Open);
        assert_jittered(b.try_acquire().unwrap_err(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn probe_failure_reopens_with_a_doubled_break_up_to_max_break() {
        let b = breaker(cfg());
        let mut pause = open(&b);
        assert_jittered(pause, Duration::from_secs(1));
        for expected in [2, 4, 4, 4] {
            advance(pause).await;
            b.try_acquire().unwrap().record(FAILURE);
            assert_eq!(b.state(), State::Open);
            pause = b.try_acquire().unwrap_err();
            assert_jittered(pause, Duration::from_secs(expected));
            assert!(pause <= cfg().max_break);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_slower_than_probe_timeout_fails() {
        let b = breaker(cfg());
        let pause = open(&b);
        advance(pause).await;
        let probe = b.try_acquire().unwrap();
        advance(Duration::from_millis(600)).await;
        probe.record(SUCCESS);
        assert_eq!(b.state(), State::Open);
        assert_jittered(b.try_acquire().unwrap_err(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn calls_started_before_a_transition_are_not_counted() {
        let b = breaker(cfg());
        let old = b.try_acquire().unwrap();
        let pause = open(&b);
        advance(pause).await;
        old.record(SUCCESS);
        assert_eq!(b.state(), State::HalfOpen, "only a probe may close the breaker");
    }

    #[tokio::test(start_paused = true)]
    async fn every_transition_is_reported() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let listener: crate::resilience::breaker::transition::Listener =
            Arc::new(move |key: &BreakerKey, state| log.lock().unwrap().push((key.to_string(), state)));
        let key = BreakerKey { upstream: Arc::from("u"), tool: Some(Arc::from("t")) };
        let b = Breaker::new(key, cfg(), Some(listener));
        let pause = open(&b);
        assert!(b.is_open());
        advance(pause).await;
        assert!(!b.is_open(), "half-open is not open");
        record(&b, &[SUCCESS]);
        let seen = seen.lock().unwrap().clone();
        let expected = [State::Open, State::HalfOpen, State::Closed].map(|s| ("u/t".to_owned(), s));
        assert_eq!(seen, expected);
    }

    #[tokio::test(start_paused = true)]
    async fn a_snapshot_keeps_the_counts_that_opened_the_breaker() {
        use crate::resilience::breaker::transition::Reason;
        use crate::resilience::breaker::{Breakers, Totals};

        let b = breaker(BreakerConfig { consecutive_failures: 0, ..cfg() });
        let fresh = b.snapshot();
        assert_eq!((fresh.state, fresh.reason, fresh.tripped), (State::Closed, None, None));
        record(&b, &[SUCCESS, FAILURE, SUCCESS]);
        advance(Duration::from_secs(2)).await;
        let closed = b.snapshot();
        assert_eq!(closed.window, Totals { calls: 3, failures: 1, slow: 0 });
        assert_eq!((closed.consecutive_failures, closed.in_state), (0, Duration::from_secs(2)));

        record(&b, &[FAILURE]);
        advance(Duration::from_millis(300)).await;
        let open = b.snapshot();
        assert_eq!((open.state, open.reason, open.opens), (State::Open, Some(Reason::FailureRate), 1));
        assert_eq!(open.window, Totals::default(), "an open breaker counts nothing");
        assert_eq!(open.in_state, Duration::from_millis(300));
        let tripped = open.tripped.unwrap();
        assert_eq!(tripped.reason, Reason::FailureRate);
        assert_eq!(tripped.window, Totals { calls: 4, failures: 2, slow: 0 }, "the opening call included");
        assert_eq!((tripped.consecutive_failures, tripped.ago), (1, Duration::from_millis(300)));
        let retry_in = open.retry_in.unwrap();
        assert_jittered(retry_in + Duration::from_millis(300), Duration::from_secs(1));

        // Half-open after the break; a failed probe reopens it without a new trip from closed.
        advance(retry_in).await;
        let half = b.snapshot();
        assert_eq!((half.state, half.reason, half.retry_in), (State::HalfOpen, Some(Reason::BreakElapsed), None));
        record(&b, &[FAILURE]);
        let reopened = b.snapshot();
        assert_eq!((reopened.state, reopened.reason, reopened.opens), (State::Open, Some(Reason::ProbeFailed), 2));
        assert_eq!(reopened.tripped.map(|t| t.window), Some(tripped.window));

        // The registry reads every breaker, or one upstream's.
        let all = Breakers::new();
        let u: Arc<str> = Arc::from("u");
        let v: Arc<str> = Arc::from("v");
        all.upstream(&u, &cfg());
        all.tool(&u, &Arc::from("t"), &cfg());
        all.upstream(&v, &cfg());
        let mut seen = Vec::new();
        all.for_each_snapshot(None, |key, s| seen.push((key.to_string(), s.state)));
        seen.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(seen, [("u".into(), State::Closed), ("u/t".into(), State::Closed), ("v".into(), State::Closed)]);
        let mut only_u = 0;
        all.for_each_snapshot(Some("u"), |key, _| only_u += usize::from(&*key.upstream == "u"));
        assert_eq!(only_u, 2);
        all.for_each_snapshot(Some("nobody"), |_, _| panic!("no breakers"));
    }

    // --- the operator's holds: forced open, forced closed, reset ---------------------------

    fn isolated(reason: &str) -> Option<Hold> {
        Some(Hold::Open { reason: Arc::from(reason) })
    }

    fn watched() -> (Arc<Breaker>, Arc<Mutex<Vec<State>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let listener: Listener = Arc::new(move |_: &BreakerKey, state| log.lock().unwrap().push(state));
        let key = BreakerKey { upstream: Arc::from("u"), tool: Some(Arc::from("t")) };
        (Breaker::new(key, cfg(), Some(listener)), seen)
    }

    #[tokio::test(start_paused = true)]
    async fn held_open_it_refuses_and_never_half_opens_until_reset() {
        let (b, seen) = watched();
        let before = b.try_acquire().unwrap();
        assert_eq!(b.force(isolated("maintenance")), State::Closed);
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.isolation().as_deref(), Some("maintenance"));
        // A call admitted before the hold says nothing now.
        before.record(SUCCESS);
        advance(cfg().max_break * 100).await;
        assert_eq!(b.state(), State::Open, "no break ends a hold");
        assert!(b.try_acquire().is_err());
        let snapshot = b.snapshot();
        assert_eq!(snapshot.reason, Some(Reason::ForcedOpen));
        assert_eq!(snapshot.retry_in, None);
        assert_eq!(snapshot.hold, isolated("maintenance"));

        assert_eq!(b.force(None), State::Open);
        assert_eq!((b.state(), b.hold(), b.isolation()), (State::Closed, None, None));
        assert_eq!(b.snapshot().opens, 0);
        assert_eq!(*seen.lock().unwrap(), [State::Open, State::Closed], "each change of state is reported once");
        // Back to the automatic rules: failures open it again.
        for _ in 0..3 {
            b.try_acquire().unwrap().record(FAILURE);
        }
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.snapshot().reason, Some(Reason::ConsecutiveFailures));
    }

    #[tokio::test(start_paused = true)]
    async fn held_closed_no_failure_opens_it() {
        let (b, seen) = watched();
        assert_eq!(b.force(Some(Hold::Closed)), State::Closed);
        for _ in 0..50 {
            b.try_acquire().unwrap().record(FAILURE);
        }
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.snapshot().window.failures, 50, "calls are still counted");
        assert!(seen.lock().unwrap().is_empty(), "closed to closed is no transition");
        // Closing an isolated breaker holds it closed.
        b.force(isolated("x"));
        assert_eq!(b.force(Some(Hold::Closed)), State::Open);
        assert_eq!((b.state(), b.hold()), (State::Closed, Some(Hold::Closed)));
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_breaker_closed_by_hand_forgets_its_opens() {
        let (b, _) = watched();
        for _ in 0..3 {
            b.try_acquire().unwrap().record(FAILURE);
        }
        assert_eq!(b.state(), State::Open);
        b.force(None);
        assert_eq!(b.state(), State::Closed);
        b.try_acquire().unwrap().record(SUCCESS);
        assert_eq!(b.snapshot().window.calls, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn refused_calls_carry_the_operators_reason() {
        let breakers = Arc::new(Breakers::new());
        let (svc, calls) = stack(&breakers, |_| (Duration::ZERO, result()));
        svc.clone().oneshot(call(Some("t"))).await.unwrap();
        breakers.tool(&Arc::from("u"), &Arc::from("t"), &cfg()).unwrap().force(isolated("bad deploy"));
        let err = svc.clone().oneshot(call(Some("t"))).await.unwrap_err();
        let GatewayError::CircuitOpen { tool: Some(tool), isolated: Some(reason), .. } = &err else { panic!("{err:?}") };
        assert_eq!((&**tool, &**reason), ("t", "bad deploy"));
        svc.clone().oneshot(call(Some("other"))).await.unwrap();
        svc.clone().oneshot(call(None)).await.unwrap();
        assert!(breakers.is_open("u", Some("t")));

        breakers.upstream(&Arc::from("u"), &cfg()).force(isolated("whole upstream"));
        let err = svc.clone().oneshot(call(Some("other"))).await.unwrap_err();
        let GatewayError::CircuitOpen { tool: None, isolated: Some(reason), .. } = &err else { panic!("{err:?}") };
        assert_eq!(&**reason, "whole upstream");
        assert_eq!(calls.load(Ordering::SeqCst), 3, "refused calls never reach the upstream");

        // An automatic open carries no reason.
        let breakers = Arc::new(Breakers::new());
        let (svc, _) = stack(&breakers, |_| (Duration::ZERO, transport_error()));
        for _ in 0..3 {
            let _ = svc.clone().oneshot(call(None)).await;
        }
        let err = svc.clone().oneshot(call(None)).await.unwrap_err();
        assert!(matches!(err, GatewayError::CircuitOpen { isolated: None, .. }), "{err:?}");
    }
}

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
use rand::Rng;
use tokio::time::Instant;

use super::classify::{Outcome, Verdict};
use super::transition::{BreakerKey, Feed, Hold, Listener, Origin, Reason, State, Transition, wall_ms};
use super::window::{Totals, Window};
use crate::config::BreakerConfig;

mod remote;

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

/// One breaker as a status page shows it, read at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The state.
    pub state: State,
    /// How long the breaker has been in it (since it was created, if it never moved).
    pub in_state: Duration,
    /// Why it entered it; `None` for a breaker that never changed state.
    pub reason: Option<Reason>,
    /// The calls in the sliding window now. Only a closed breaker counts calls; every
    /// transition starts an empty window.
    pub window: Totals,
    /// Failures in a row now (closed only).
    pub consecutive_failures: u32,
    /// Opens since it last closed: the next break is `break · 2^opens`.
    pub opens: u32,
    /// While open: the time left until probes may go through (`None` while held open).
    pub retry_in: Option<Duration>,
    /// The operator's hold, if any.
    pub hold: Option<Hold>,
    /// The last time it opened from closed.
    pub tripped: Option<Tripped>,
}

/// What opened a closed breaker: the window and the run of failures at that moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tripped {
    /// The trigger (`consecutive_failures`, `failure_rate` or `slow_call_rate`).
    pub reason: Reason,
    /// The sliding window's counts, the call that opened it included.
    pub window: Totals,
    /// Failures in a row, that call included.
    pub consecutive_failures: u32,
    /// How long ago.
    pub ago: Duration,
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

#[derive(Debug, Clone, Copy)]
enum Phase {
    Closed,
    Open { until: Instant },
    HalfOpen { probes: u32 },
}

#[derive(Debug)]
struct Inner {
    cfg: BreakerConfig,
    phase: Phase,
    window: Window,
    consecutive: u32,
    /// When the last failure was counted: a run of failures ends with a success, or
    /// with a gap between two failures longer than the window.
    last_failure: Option<Instant>,
    /// Opens since the breaker last closed: sets the length of the next break.
    opens: u32,
    /// Bumped on every transition; permits of an older epoch are not counted.
    epoch: u64,
    /// When the current phase began, and why (none before the first transition).
    entered: Instant,
    reason: Option<Reason>,
    /// The last trip from closed to open, for status pages.
    tripped: Option<(Instant, Reason, Totals, u32)>,
    /// The operator's hold, which automatic transitions leave alone.
    hold: Option<Hold>,
    /// When the last transition that replicas hear of happened (wall clock, ms): a
    /// transition of another replica older than this is not repeated here.
    stamp_ms: u64,
}

impl Inner {
    fn new(cfg: BreakerConfig, now: Instant) -> Inner {
        Inner {
            cfg,
            phase: Phase::Closed,
            window: Window::new(cfg.window, now),
            consecutive: 0,
            last_failure: None,
            opens: 0,
            epoch: 0,
            entered: now,
            reason: None,
            tripped: None,
            hold: None,
            stamp_ms: 0,
        }
    }

    fn snapshot(&self, now: Instant) -> Snapshot {
        let retry_in = match self.phase {
            Phase::Open { .. } if self.held_open() => None,
            Phase::Open { until } => Some(until.saturating_duration_since(now)),
            Phase::Closed | Phase::HalfOpen { .. } => None,
        };
        Snapshot {
            state: self.state(),
            in_state: now.saturating_duration_since(self.entered),
            reason: self.reason,
            window: self.window.totals(now),
            consecutive_failures: self.consecutive,
            opens: self.opens,
            retry_in,
            tripped: self.tripped.map(|(at, reason, window, consecutive_failures)| Tripped {
                reason,
                window,
                consecutive_failures,
                ago: now.saturating_duration_since(at),
            }),
            hold: self.hold.clone(),
        }
    }

    fn held_open(&self) -> bool {
        matches!(self.hold, Some(Hold::Open { .. }))
    }

    fn state(&self) -> State {
        match self.phase {
            Phase::Closed => State::Closed,
            Phase::Open { .. } => State::Open,
            Phase::HalfOpen { .. } => State::HalfOpen,
        }
    }

    /// Open → half-open once the break is over (never while held open).
    fn refresh(&mut self, now: Instant) -> Option<Transition> {
        match self.phase {
            Phase::Open { until } if now >= until && !self.held_open() => {
                let from = self.enter(now, Phase::HalfOpen { probes: 0 }, Reason::BreakElapsed);
                Some(self.transition(from, Reason::BreakElapsed, None))
            }
            _ => None,
        }
    }

    /// `Ok(probe)` when a call may go, else how long to wait.
    fn admit(&mut self, now: Instant) -> Result<bool, Duration> {
        // Zero probes would leave the breaker half-open for ever.
        let limit = self.cfg.half_open_probes.max(1);
        match &mut self.phase {
            Phase::Closed => Ok(false),
            Phase::Open { until } => Err(until.saturating_duration_since(now)),
            Phase::HalfOpen { probes } if *probes < limit => {
                *probes += 1;
                Ok(true)
            }
            // A probe slot frees within `probe_timeout` at the latest.
            Phase::HalfOpen { .. } => Err(self.cfg.probe_timeout),
        }
    }

    fn settle(&mut self, now: Instant, epoch: u64, probe: bool, took: Duration, v: Verdict) -> Option<Transition> {
        if epoch != self.epoch {
            return None;
        }
        match &mut self.phase {
            Phase::Closed => self.closed_result(now, v),
            Phase::HalfOpen { probes } if probe => {
                *probes = probes.saturating_sub(1);
                self.probe_result(now, took, v.outcome)
            }
            _ => None,
        }
    }

    fn closed_result(&mut self, now: Instant, v: Verdict) -> Option<Transition> {
        let failure = match v.outcome {
            Outcome::Ignored => return None,
            Outcome::Success => false,
            Outcome::Failure => true,
        };
        self.window.record(now, failure, v.slow);
        // Failures far apart (no call between them for longer than the window) are not
        // a run: a tool called once an hour does not open on its fifth failure of a day.
        let stale = self.last_failure.is_some_and(|at| now.saturating_duration_since(at) > self.cfg.window);
        self.consecutive = match (failure, stale) {
            (false, _) => 0,
            (true, true) => 1,
            (true, false) => self.consecutive.saturating_add(1),
        };
        if failure {
            self.last_failure = Some(now);
        }
        // Held closed by the operator: counted, never opened.
        if self.hold.is_some() {
            return None;
        }
        self.trip_reason(now, failure, v.slow).map(|reason| self.open(now, reason))
    }

    fn trip_reason(&self, now: Instant, failure: bool, slow: bool) -> Option<Reason> {
        let cfg = &self.cfg;
        // Zero consecutive failures disables that trigger rather than opening at once.
        if failure && cfg.consecutive_failures > 0 && self.consecutive >= cfg.consecutive_failures {
            return Some(Reason::ConsecutiveFailures);
        }
        // A rate trips only on a call of its own kind: a call that neither failed nor was
        // slow needs no look at the window.
        if !failure && !slow {
            return None;
        }
        let totals = self.window.totals(now);
        if totals.calls == 0 || totals.calls < cfg.min_calls {
            return None;
        }
        let calls = f64::from(totals.calls);
        if failure && f64::from(totals.failures) / calls >= cfg.failure_rate {
            return Some(Reason::FailureRate);
        }
        if slow && f64::from(totals.slow) / calls >= cfg.slow_call_rate {
            return Some(Reason::SlowCallRate);
        }
        None
    }

    fn probe_result(&mut self, now: Instant, took: Duration, outcome: Outcome) -> Option<Transition> {
        let timed_out = took >= self.cfg.probe_timeout;
        match outcome {
            Outcome::Ignored => None,
            Outcome::Failure if timed_out => Some(self.open(now, Reason::ProbeTimedOut)),
            Outcome::Failure => Some(self.open(now, Reason::ProbeFailed)),
            Outcome::Success if took > self.cfg.probe_timeout => Some(self.open(now, Reason::ProbeTimedOut)),
            Outcome::Success => Some(self.close(now)),
        }
    }

    fn open(&mut self, now: Instant, reason: Reason) -> Transition {
        if matches!(self.phase, Phase::Closed) {
            self.tripped = Some((now, reason, self.window.totals(now), self.consecutive));
        }
        self.opens = self.opens.saturating_add(1);
        let break_for = break_length(&self.cfg, self.opens);
        // Overflow needs a break of centuries; fall back to a day rather than panic.
        let until = now.checked_add(break_for).unwrap_or_else(|| now + Duration::from_secs(86_400));
        let from = self.enter(now, Phase::Open { until }, reason);
        self.transition(from, reason, Some(break_for))
    }

    /// The operator's hold (or, with `None`, a reset): a fresh period in the state it
    /// asks for. A held-open breaker's break never ends; closing clears the opens.
    fn force(&mut self, now: Instant, hold: Option<Hold>) -> Transition {
        let (phase, reason) = match &hold {
            Some(Hold::Open { .. }) => (Phase::Open { until: now }, Reason::ForcedOpen),
            Some(Hold::Closed) => (Phase::Closed, Reason::ForcedClosed),
            None => (Phase::Closed, Reason::Reset),
        };
        if matches!(phase, Phase::Closed) {
            self.opens = 0;
            self.last_failure = None;
        }
        self.hold = hold;
        let from = self.enter(now, phase, reason);
        self.transition(from, reason, None)
    }

    fn close(&mut self, now: Instant) -> Transition {
        self.opens = 0;
        let from = self.enter(now, Phase::Closed, Reason::ProbeSucceeded);
        self.transition(from, Reason::ProbeSucceeded, None)
    }

    /// The transition from `from` to the present state.
    fn transition(&self, from: State, reason: Reason, break_for: Option<Duration>) -> Transition {
        Transition { from, to: self.state(), reason, break_for, at_ms: self.stamp_ms, shared: self.cfg.shared }
    }

    /// Moves to `phase` with fresh counts; returns the state left. Every transition but
    /// the lazy one to half-open (which each replica makes by its own clock) is stamped.
    fn enter(&mut self, now: Instant, phase: Phase, reason: Reason) -> State {
        let from = self.state();
        if reason != Reason::BreakElapsed {
            self.stamp_ms = wall_ms();
        }
        self.phase = phase;
        self.entered = now;
        self.reason = Some(reason);
        self.epoch = self.epoch.wrapping_add(1);
        self.window.clear();
        self.consecutive = 0;
        from
    }
}

/// `break_duration · 2^(opens-1)`, ±20% jitter (so that breakers opened by one outage do
/// not all probe at once), never longer than `max_break`.
fn break_length(cfg: &BreakerConfig, opens: u32) -> Duration {
    let base = crate::backoff::doubling(cfg.break_duration, cfg.max_break, opens.saturating_sub(1));
    let jitter: f64 = rand::rng().random_range(0.8..=1.2);
    Duration::try_from_secs_f64(base.as_secs_f64() * jitter).unwrap_or(base).min(cfg.max_break)
}

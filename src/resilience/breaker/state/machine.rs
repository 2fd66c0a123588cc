//! One breaker's state and its rules, behind the breaker's lock: the phase (closed, open
//! until a time, half-open with probes out), the sliding window, holds, and each
//! transition they make; and a breaker as a status page shows it ([`Snapshot`]).

use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use crate::config::BreakerConfig;
use crate::resilience::breaker::classify::{Outcome, Verdict};
use crate::resilience::breaker::transition::{Hold, Reason, State, Transition, wall_ms};
use crate::resilience::breaker::window::{Totals, Window};

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

#[derive(Debug, Clone, Copy)]
pub(super) enum Phase {
    Closed,
    Open { until: Instant },
    HalfOpen { probes: u32 },
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) cfg: BreakerConfig,
    pub(super) phase: Phase,
    pub(super) window: Window,
    pub(super) consecutive: u32,
    /// When the last failure was counted: a run of failures ends with a success, or
    /// with a gap between two failures longer than the window.
    pub(super) last_failure: Option<Instant>,
    /// Opens since the breaker last closed: sets the length of the next break.
    pub(super) opens: u32,
    /// Bumped on every transition; permits of an older epoch are not counted.
    pub(super) epoch: u64,
    /// When the current phase began, and why (none before the first transition).
    pub(super) entered: Instant,
    pub(super) reason: Option<Reason>,
    /// The last trip from closed to open, for status pages.
    pub(super) tripped: Option<(Instant, Reason, Totals, u32)>,
    /// The operator's hold, which automatic transitions leave alone.
    pub(super) hold: Option<Hold>,
    /// When the last transition that replicas hear of happened (wall clock, ms): a
    /// transition of another replica older than this is not repeated here.
    pub(super) stamp_ms: u64,
}

impl Inner {
    pub(super) fn new(cfg: BreakerConfig, now: Instant) -> Inner {
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

    pub(super) fn snapshot(&self, now: Instant) -> Snapshot {
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

    pub(super) fn held_open(&self) -> bool {
        matches!(self.hold, Some(Hold::Open { .. }))
    }

    pub(super) fn state(&self) -> State {
        match self.phase {
            Phase::Closed => State::Closed,
            Phase::Open { .. } => State::Open,
            Phase::HalfOpen { .. } => State::HalfOpen,
        }
    }

    /// Open → half-open once the break is over (never while held open).
    pub(super) fn refresh(&mut self, now: Instant) -> Option<Transition> {
        match self.phase {
            Phase::Open { until } if now >= until && !self.held_open() => {
                let from = self.enter(now, Phase::HalfOpen { probes: 0 }, Reason::BreakElapsed);
                Some(self.transition(from, Reason::BreakElapsed, None))
            }
            _ => None,
        }
    }

    /// `Ok(probe)` when a call may go, else how long to wait.
    pub(super) fn admit(&mut self, now: Instant) -> Result<bool, Duration> {
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

    pub(super) fn settle(
        &mut self,
        now: Instant,
        epoch: u64,
        probe: bool,
        took: Duration,
        v: Verdict,
    ) -> Option<Transition> {
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

    pub(super) fn closed_result(&mut self, now: Instant, v: Verdict) -> Option<Transition> {
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

    pub(super) fn trip_reason(&self, now: Instant, failure: bool, slow: bool) -> Option<Reason> {
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

    pub(super) fn probe_result(&mut self, now: Instant, took: Duration, outcome: Outcome) -> Option<Transition> {
        let timed_out = took >= self.cfg.probe_timeout;
        match outcome {
            Outcome::Ignored => None,
            Outcome::Failure if timed_out => Some(self.open(now, Reason::ProbeTimedOut)),
            Outcome::Failure => Some(self.open(now, Reason::ProbeFailed)),
            Outcome::Success if took > self.cfg.probe_timeout => Some(self.open(now, Reason::ProbeTimedOut)),
            Outcome::Success => Some(self.close(now)),
        }
    }

    pub(super) fn open(&mut self, now: Instant, reason: Reason) -> Transition {
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
    pub(super) fn force(&mut self, now: Instant, hold: Option<Hold>) -> Transition {
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

    pub(super) fn close(&mut self, now: Instant) -> Transition {
        self.opens = 0;
        let from = self.enter(now, Phase::Closed, Reason::ProbeSucceeded);
        self.transition(from, Reason::ProbeSucceeded, None)
    }

    /// The transition from `from` to the present state.
    pub(super) fn transition(&self, from: State, reason: Reason, break_for: Option<Duration>) -> Transition {
        Transition { from, to: self.state(), reason, break_for, at_ms: self.stamp_ms, shared: self.cfg.shared }
    }

    /// Moves to `phase` with fresh counts; returns the state left. Every transition but
    /// the lazy one to half-open (which each replica makes by its own clock) is stamped.
    pub(super) fn enter(&mut self, now: Instant, phase: Phase, reason: Reason) -> State {
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

//! Which breaker, the states it moves between, and its transitions: a structured event
//! for each, and a hook for the rest of the gateway (metrics, hiding tools and
//! `notifications/tools/list_changed`).
//!
//! A leaf of the breaker: the state machine in [`state`](super::state) reports through
//! these types and imports nothing back.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Which breaker: an upstream's own (`tool: None`) or one of its tools'.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BreakerKey {
    /// The upstream's name.
    pub upstream: Arc<str>,
    /// The tool name as the upstream knows it, for a tool's breaker.
    pub tool: Option<Arc<str>>,
}

impl fmt::Display for BreakerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.tool {
            Some(tool) => write!(f, "{}/{tool}", self.upstream),
            None => f.write_str(&self.upstream),
        }
    }
}

/// A breaker's state, as reported to status pages and listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Calls go through and are counted.
    Closed,
    /// Calls are refused without upstream traffic.
    Open,
    /// A bounded number of probe calls go through; the rest are refused.
    HalfOpen,
}

impl State {
    /// The state as logged: `closed`, `open` or `half_open`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Called after every transition with the breaker's key and its new state. Runs on the
/// task that caused the transition, outside the breaker's lock: keep it short.
pub type Listener = Arc<dyn Fn(&BreakerKey, State) + Send + Sync>;

/// Why a breaker changed state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Too many consecutive failures.
    ConsecutiveFailures,
    /// The failure rate in the window passed the threshold.
    FailureRate,
    /// The slow-call rate in the window passed the threshold.
    SlowCallRate,
    /// The break is over: probes may go through.
    BreakElapsed,
    /// A probe succeeded.
    ProbeSucceeded,
    /// A probe failed.
    ProbeFailed,
    /// A probe took longer than `probe_timeout`.
    ProbeTimedOut,
    /// The operator held it open (isolated it by hand).
    ForcedOpen,
    /// The operator held it closed.
    ForcedClosed,
    /// The operator handed it back to its automatic rules, closed with fresh counts.
    Reset,
    /// The same breaker of another replica opened or closed (shared breakers).
    Replica,
}

impl Reason {
    /// The reason as logged.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::ConsecutiveFailures => "consecutive_failures",
            Reason::FailureRate => "failure_rate",
            Reason::SlowCallRate => "slow_call_rate",
            Reason::BreakElapsed => "break_elapsed",
            Reason::ProbeSucceeded => "probe_succeeded",
            Reason::ProbeFailed => "probe_failed",
            Reason::ProbeTimedOut => "probe_timed_out",
            Reason::ForcedOpen => "forced_open",
            Reason::ForcedClosed => "forced_closed",
            Reason::Reset => "reset",
            Reason::Replica => "replica",
        }
    }
}

/// An operator's hold on a breaker: automatic transitions do not undo it; only another
/// hold or a reset does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// Held open: every call is refused, and clients are told `reason`. No probe goes
    /// through, however long it stays open.
    Open {
        /// What the operator said, shown to clients (printable ASCII, bounded).
        reason: Arc<str>,
    },
    /// Held closed: calls go through and are counted, but no failure opens it.
    Closed,
}

impl Hold {
    /// The state the hold keeps the breaker in.
    pub fn state(&self) -> State {
        match self {
            Hold::Open { .. } => State::Open,
            Hold::Closed => State::Closed,
        }
    }
}

/// Where a transition was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Here: by this replica's calls, its clock or its operator.
    Local,
    /// On another replica, and repeated here (shared breakers).
    Remote,
}

/// One transition with everything another replica needs to repeat it, as the breakers'
/// feed hears it (see [`Breakers::with_feed`](super::Breakers::with_feed)).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Which breaker.
    pub key: BreakerKey,
    /// The state it entered (for an operator's action that kept the state, that state).
    pub to: State,
    /// Why.
    pub reason: Reason,
    /// For an automatic open: how long the break lasts.
    pub break_for: Option<Duration>,
    /// The operator's hold after the change.
    pub hold: Option<Hold>,
    /// When it happened, in wall-clock milliseconds since the Unix epoch: the time by
    /// which the last writer wins among replicas.
    pub at_ms: u64,
    /// Where it was decided.
    pub origin: Origin,
    /// Whether the breaker is `shared` (so whether replicas hear of it).
    pub shared: bool,
}

/// Called with every transition and every operator action, outside the breaker's lock:
/// keep it short.
pub type Feed = Arc<dyn Fn(&Change) + Send + Sync>;

/// A transition another replica made, to repeat on this replica's breaker of the same key.
#[derive(Debug, Clone, PartialEq)]
pub enum Remote {
    /// It opened by itself, for a break that ends `break_for` from now.
    Opened {
        /// The break left.
        break_for: Duration,
    },
    /// A probe closed it.
    Closed,
    /// The operator held it open or closed.
    Held(Hold),
    /// The operator handed it back to its automatic rules.
    Reset,
}

impl Remote {
    /// Whether it is an operator's action (which only another one, or a reset, undoes).
    pub fn by_operator(&self) -> bool {
        matches!(self, Remote::Held(_) | Remote::Reset)
    }
}

/// The wall clock in milliseconds since the Unix epoch (0 before it).
pub(crate) fn wall_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// One state change, reported once the breaker's lock is released.
#[derive(Debug, Clone, Copy)]
pub(super) struct Transition {
    pub from: State,
    pub to: State,
    pub reason: Reason,
    /// How long the breaker stays open (for transitions to open).
    pub break_for: Option<Duration>,
    /// When it happened (wall clock, ms).
    pub at_ms: u64,
    /// Whether the breaker is `shared`.
    pub shared: bool,
}

impl Transition {
    /// The transition as the feed hears it; automatic transitions happen only without a
    /// hold.
    pub(super) fn change(&self, key: &BreakerKey, hold: Option<Hold>, origin: Origin) -> Change {
        Change {
            key: key.clone(),
            to: self.to,
            reason: self.reason,
            break_for: self.break_for,
            hold,
            at_ms: self.at_ms,
            origin,
            shared: self.shared,
        }
    }

    /// Logs the transition and tells the listener.
    pub(super) fn report(&self, key: &BreakerKey, listener: Option<&Listener>) {
        let upstream = &*key.upstream;
        let tool = key.tool.as_deref();
        let (from, to, reason) = (self.from.as_str(), self.to.as_str(), self.reason.as_str());
        let break_ms = self.break_for.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        if self.to == State::Open {
            tracing::warn!(upstream, tool, from, to, reason, break_ms, "circuit breaker opened");
        } else {
            tracing::info!(upstream, tool, from, to, reason, break_ms, "circuit breaker changed state");
        }
        if let Some(listener) = listener {
            listener(key, self.to);
        }
    }
}

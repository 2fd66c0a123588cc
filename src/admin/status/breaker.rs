//! One breaker as `/status.json` and the admin API list it, the order they are listed in,
//! and breakers counted by state.

use std::time::Duration;

use serde::Serialize;

use crate::resilience::breaker::transition::Reason;
use crate::resilience::breaker::{BreakerKey, Breakers, Hold, Snapshot, State, Totals};

#[derive(Debug, Default, Clone, Copy, Serialize)]
pub(super) struct StateCounts {
    pub(super) closed: usize,
    pub(super) open: usize,
    pub(super) half_open: usize,
}

impl StateCounts {
    pub(super) fn add(&mut self, state: State) {
        match state {
            State::Closed => self.closed += 1,
            State::Open => self.open += 1,
            State::HalfOpen => self.half_open += 1,
        }
    }
}

/// One breaker as listed.
#[derive(Debug, Serialize)]
pub(crate) struct Breaker {
    upstream: String,
    /// `null` for the upstream's own breaker.
    tool: Option<String>,
    state: &'static str,
    /// Time in this state.
    for_ms: u64,
    /// Why it entered it (`null` if it never changed state).
    reason: Option<&'static str>,
    /// Open: time until probes may go through.
    retry_in_ms: Option<u64>,
    /// Opens since it last closed.
    opens: u32,
    /// The failure rate that matters now: the one that opened it while it is not closed,
    /// the sliding window's while closed (`null` without calls).
    failure_rate: Option<f64>,
    /// The sliding window now (a breaker that is not closed counts no calls).
    window: Window,
    consecutive_failures: u32,
    /// The last time it opened from closed.
    tripped: Option<Tripped>,
    /// The operator's hold: `{"state": "open", "reason": …}` or `{"state": "closed"}`;
    /// `null` while it follows its automatic rules.
    forced: Option<Forced>,
}

#[derive(Debug, Serialize)]
struct Forced {
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl From<&Hold> for Forced {
    fn from(hold: &Hold) -> Forced {
        match hold {
            Hold::Open { reason } => Forced { state: "open", reason: Some(reason.to_string()) },
            Hold::Closed => Forced { state: "closed", reason: None },
        }
    }
}

#[derive(Debug, Serialize)]
struct Window {
    calls: u32,
    failures: u32,
    slow: u32,
    failure_rate: Option<f64>,
}

impl From<Totals> for Window {
    fn from(t: Totals) -> Window {
        Window { calls: t.calls, failures: t.failures, slow: t.slow, failure_rate: rate(t) }
    }
}

#[derive(Debug, Serialize)]
struct Tripped {
    reason: &'static str,
    ago_ms: u64,
    calls: u32,
    failures: u32,
    slow: u32,
    failure_rate: Option<f64>,
    consecutive_failures: u32,
}

/// `d` in whole milliseconds.
pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The failure rate of `t`; `None` without calls.
pub(super) fn rate(t: Totals) -> Option<f64> {
    (t.calls > 0).then(|| f64::from(t.failures) / f64::from(t.calls))
}

/// Every breaker, or `upstream`'s: not closed first, then by upstream and tool.
pub(crate) fn breakers(breakers: &Breakers, upstream: Option<&str>) -> Vec<Breaker> {
    let mut listed = Vec::new();
    breakers.for_each_snapshot(upstream, |key, s| listed.push(breaker(key, s)));
    sort(&mut listed);
    listed
}

/// Puts `listed` in listing order: not closed first, then by upstream and tool.
pub(super) fn sort(listed: &mut [Breaker]) {
    listed.sort_by(|a, b| (severity(a.state), &a.upstream, &a.tool).cmp(&(severity(b.state), &b.upstream, &b.tool)));
}

/// One breaker as listed.
pub(crate) fn breaker(key: &BreakerKey, s: &Snapshot) -> Breaker {
    let tripped = s.tripped.map(|t| Tripped {
        reason: t.reason.as_str(),
        ago_ms: millis(t.ago),
        calls: t.window.calls,
        failures: t.window.failures,
        slow: t.window.slow,
        failure_rate: rate(t.window),
        consecutive_failures: t.consecutive_failures,
    });
    let failure_rate = match (s.state, &tripped) {
        (State::Closed, _) | (_, None) => rate(s.window),
        (_, Some(t)) => t.failure_rate,
    };
    Breaker {
        upstream: key.upstream.to_string(),
        tool: key.tool.as_deref().map(str::to_owned),
        state: s.state.as_str(),
        for_ms: millis(s.in_state),
        reason: s.reason.map(Reason::as_str),
        retry_in_ms: s.retry_in.map(millis),
        opens: s.opens,
        failure_rate,
        window: s.window.into(),
        consecutive_failures: s.consecutive_failures,
        tripped,
        forced: s.hold.as_ref().map(Forced::from),
    }
}

impl Breaker {
    /// Its state, as listed (`closed`, `open`, `half_open`).
    pub(crate) fn state(&self) -> &'static str {
        self.state
    }
}

/// Listing order: open, half-open, closed; then by upstream and tool.
pub(super) fn severity(state: &str) -> u8 {
    match state {
        "open" => 0,
        "half_open" => 1,
        _ => 2,
    }
}

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

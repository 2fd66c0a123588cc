//! Repeating another replica's transition on this replica's breaker of the same key
//! (shared breakers). The last writer wins: a transition older than the breaker's own
//! last one is dropped. Automatic transitions never undo an operator's hold, here as on
//! the replica that made them; holds and resets always apply.

use tokio::time::Instant;

use super::Breaker;
use super::machine::{Inner, Phase};
use crate::resilience::breaker::transition::{Origin, Reason, Remote, State, Transition};

impl Breaker {
    /// Repeats `remote`, which another replica's breaker of this key made at `at_ms`
    /// (wall clock), unless the breaker is not `shared`, has changed since, or is held
    /// against an automatic change; an open lasts the break left, at most `max_break`.
    /// Tells the listener when the state changed and the feed (marked
    /// [`Origin::Remote`], so nobody publishes it again). Returns the state left and the
    /// state entered, or `None` when nothing was repeated.
    pub fn apply_remote(&self, remote: &Remote, at_ms: u64) -> Option<(State, State)> {
        let (t, hold) = {
            let mut inner = self.inner.lock();
            let t = inner.apply_remote(Instant::now(), remote, at_ms)?;
            (t, inner.hold.clone())
        };
        if t.from != t.to
            && let Some(listener) = &self.listener
        {
            listener(&self.key, t.to);
        }
        if let Some(feed) = &self.feed {
            feed(&t.change(&self.key, hold, Origin::Remote));
        }
        Some((t.from, t.to))
    }
}

impl Inner {
    fn apply_remote(&mut self, now: Instant, remote: &Remote, at_ms: u64) -> Option<Transition> {
        if !self.cfg.shared || at_ms <= self.stamp_ms {
            return None;
        }
        if self.hold.is_some() && !remote.by_operator() {
            return None;
        }
        let t = match remote {
            Remote::Opened { break_for } => {
                let break_for = (*break_for).min(self.cfg.max_break);
                let until = now.checked_add(break_for).filter(|_| !break_for.is_zero())?;
                let from = self.enter(now, Phase::Open { until }, Reason::Replica);
                self.transition(from, Reason::Replica, Some(break_for))
            }
            Remote::Closed if matches!(self.phase, Phase::Closed) => {
                // Already closed: its counts stand, and the close is the latest word.
                self.stamp_ms = at_ms;
                return None;
            }
            Remote::Closed => {
                self.opens = 0;
                let from = self.enter(now, Phase::Closed, Reason::Replica);
                self.transition(from, Reason::Replica, None)
            }
            Remote::Held(hold) if self.hold.as_ref() == Some(hold) => {
                self.stamp_ms = at_ms;
                return None;
            }
            Remote::Held(hold) => self.force(now, Some(hold.clone())),
            Remote::Reset => self.force(now, None),
        };
        // Stamped with the writer's time, so every replica orders by the same clock.
        self.stamp_ms = at_ms;
        Some(Transition { at_ms, ..t })
    }
}

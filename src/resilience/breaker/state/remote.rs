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

#[cfg(test)]
mod tests {
    //! Transitions repeated from other replicas (shared breakers): the last writer wins,
    //! holds beat automatic changes, and repeated changes are marked remote.

    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::time::advance;

    use crate::resilience::breaker::test_support::{FAILURE, SUCCESS, cfg};
    use crate::config::BreakerConfig;
    use crate::resilience::breaker::transition::{Change, Feed, Listener, Origin, Reason, Remote, wall_ms};
    use crate::resilience::breaker::{Breaker, BreakerKey, Hold, State};

    /// What one breaker told its listener and its feed.
    #[derive(Default)]
    struct Heard {
        states: Vec<State>,
        changes: Vec<Change>,
    }

    fn shared() -> BreakerConfig {
        BreakerConfig { shared: true, ..cfg() }
    }

    fn watched(cfg: BreakerConfig) -> (Arc<Breaker>, Arc<Mutex<Heard>>) {
        let heard = Arc::new(Mutex::new(Heard::default()));
        let (states, changes) = (Arc::clone(&heard), Arc::clone(&heard));
        let listener: Listener = Arc::new(move |_: &BreakerKey, state| states.lock().unwrap().states.push(state));
        let feed: Feed = Arc::new(move |change: &Change| changes.lock().unwrap().changes.push(change.clone()));
        let key = BreakerKey { upstream: Arc::from("u"), tool: Some(Arc::from("t")) };
        (Breaker::observed(key, cfg, Some(listener), Some(feed)), heard)
    }

    fn opened(ms: u64) -> Remote {
        Remote::Opened { break_for: Duration::from_millis(ms) }
    }

    /// A time later than every local transition so far.
    fn later() -> u64 {
        wall_ms() + 1_000
    }

    #[tokio::test(start_paused = true)]
    async fn a_remote_open_refuses_calls_for_the_break_left_then_probes_locally() {
        let (b, heard) = watched(shared());
        assert_eq!(b.apply_remote(&opened(700), later()), Some((State::Closed, State::Open)));
        let wait = b.try_acquire().unwrap_err();
        assert_eq!(wait, Duration::from_millis(700), "the break left, not a fresh one");
        assert_eq!(b.snapshot().reason, Some(Reason::Replica));
        advance(Duration::from_millis(700)).await;
        assert_eq!(b.state(), State::HalfOpen, "the break ends by this replica's clock");
        let probe = b.try_acquire().unwrap();
        assert!(probe.is_probe());
        probe.record(SUCCESS);
        assert_eq!(b.state(), State::Closed);
        let heard = heard.lock().unwrap();
        assert_eq!(heard.states, [State::Open, State::HalfOpen, State::Closed], "the listener hears every change");
        let origins: Vec<(State, Origin)> = heard.changes.iter().map(|c| (c.to, c.origin)).collect();
        assert_eq!(
            origins,
            [(State::Open, Origin::Remote), (State::HalfOpen, Origin::Local), (State::Closed, Origin::Local)],
            "the repeated open is marked remote; the local probe's outcome is local"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_remote_break_is_at_most_max_break() {
        let (b, _) = watched(shared());
        b.apply_remote(&opened(3_600_000), later());
        assert_eq!(b.try_acquire().unwrap_err(), cfg().max_break);
        let (b, _) = watched(shared());
        assert_eq!(b.apply_remote(&opened(0), later()), None, "a break already over opens nothing");
    }

    #[tokio::test(start_paused = true)]
    async fn a_remote_close_closes_an_open_breaker() {
        let (b, heard) = watched(shared());
        for _ in 0..3 {
            b.try_acquire().unwrap().record(FAILURE);
        }
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.apply_remote(&Remote::Closed, later()), Some((State::Open, State::Closed)));
        assert!(b.try_acquire().is_ok());
        assert_eq!(b.snapshot().opens, 0, "the next break starts short again");
        // Closing a closed breaker changes nothing and tells nobody.
        let before = heard.lock().unwrap().changes.len();
        assert_eq!(b.apply_remote(&Remote::Closed, later() + 1), None);
        assert_eq!(heard.lock().unwrap().changes.len(), before);
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_writer_wins() {
        let (b, _) = watched(shared());
        let t = later();
        assert!(b.apply_remote(&opened(2_000), t).is_some());
        assert_eq!(b.apply_remote(&Remote::Closed, t - 1), None, "an older close is stale");
        assert_eq!(b.apply_remote(&opened(2_000), t), None, "the same transition twice is repeated once");
        assert_eq!(b.state(), State::Open);
        assert!(b.apply_remote(&Remote::Closed, t + 1).is_some());
        // A local transition beats remote ones stamped before it.
        for _ in 0..3 {
            b.try_acquire().unwrap().record(FAILURE);
        }
        assert_eq!(b.state(), State::Open);
        let before_it = wall_ms() - 5_000;
        assert_eq!(b.apply_remote(&Remote::Closed, before_it), None, "stamped before the local open");
        assert_eq!(b.state(), State::Open);
    }

    #[tokio::test(start_paused = true)]
    async fn holds_beat_automatic_changes_and_travel_with_their_reason() {
        let (b, heard) = watched(shared());
        let isolated = Hold::Open { reason: Arc::from("bad deploy") };
        assert_eq!(b.apply_remote(&Remote::Held(isolated.clone()), later()), Some((State::Closed, State::Open)));
        assert_eq!(b.isolation().as_deref(), Some("bad deploy"));
        assert_eq!(heard.lock().unwrap().changes.last().map(|c| c.hold.clone()), Some(Some(isolated.clone())));
        assert_eq!(b.apply_remote(&Remote::Closed, later() + 10), None, "an automatic close never undoes a hold");
        assert_eq!(b.apply_remote(&Remote::Held(isolated), later() + 20), None, "the same hold again");
        assert_eq!(b.apply_remote(&Remote::Held(Hold::Closed), later() + 30), Some((State::Open, State::Closed)));
        assert_eq!(b.hold(), Some(Hold::Closed));
        assert_eq!(b.apply_remote(&opened(1_000), later() + 40), None, "nor does an automatic open");
        assert_eq!(b.apply_remote(&Remote::Reset, later() + 50), Some((State::Closed, State::Closed)));
        assert_eq!(b.hold(), None);
        // A local hold beats remote automatic changes too.
        b.force(Some(Hold::Closed));
        assert_eq!(b.apply_remote(&opened(1_000), later() + 60), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_breaker_that_is_not_shared_ignores_other_replicas() {
        let (b, heard) = watched(cfg());
        assert_eq!(b.apply_remote(&opened(1_000), later()), None);
        assert_eq!(b.apply_remote(&Remote::Held(Hold::Open { reason: Arc::from("r") }), later()), None);
        assert_eq!(b.state(), State::Closed);
        assert!(heard.lock().unwrap().changes.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_feed_hears_local_transitions_and_every_operator_action() {
        let (b, heard) = watched(shared());
        b.force(Some(Hold::Closed));
        b.force(Some(Hold::Closed));
        b.force(None);
        for _ in 0..3 {
            b.try_acquire().unwrap().record(FAILURE);
        }
        let heard = heard.lock().unwrap();
        let seen: Vec<(State, Reason, Option<Hold>, bool)> =
            heard.changes.iter().map(|c| (c.to, c.reason, c.hold.clone(), c.break_for.is_some())).collect();
        assert_eq!(
            seen,
            [
                (State::Closed, Reason::ForcedClosed, Some(Hold::Closed), false),
                (State::Closed, Reason::ForcedClosed, Some(Hold::Closed), false),
                (State::Closed, Reason::Reset, None, false),
                (State::Open, Reason::ConsecutiveFailures, None, true),
            ],
            "holds that keep the state are heard too (a replica that missed one is healed)"
        );
        assert!(heard.changes.iter().all(|c| c.shared && c.origin == Origin::Local && c.at_ms > 0));
        assert_eq!(heard.states, [State::Open], "the listener hears changes of state only");
    }
}

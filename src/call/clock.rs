//! The deadline of one request: when it started and when it must be over. The deadline
//! layer sets and extends it; the retry and attempt layers read it.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::Activity;

/// One request's deadline, shared by the layers that handle it.
#[derive(Debug)]
pub(crate) struct Clock {
    started: Instant,
    deadline: Mutex<Instant>,
    /// Progress that moves the deadline, once the deadline layer has said how.
    extension: OnceLock<Extension>,
}

/// How progress moves a deadline: to at least `idle` after the last progress, never past
/// `max` after the start.
#[derive(Debug)]
struct Extension {
    activity: Arc<Activity>,
    idle: Duration,
    max: Duration,
}

impl Clock {
    /// A clock whose deadline is `timeout` from now.
    pub(crate) fn new(timeout: Duration) -> Arc<Clock> {
        let now = Instant::now();
        Arc::new(Clock { started: now, deadline: Mutex::new(now + timeout), extension: OnceLock::new() })
    }

    /// The current deadline: the one set, moved by progress when progress extends it.
    pub(crate) fn deadline(&self) -> Instant {
        let set = *self.deadline.lock();
        let Some(extension) = self.extension.get() else {
            return set;
        };
        match extension.activity.last_progress() {
            Some(at) => set.max(at + extension.idle).min(self.started + extension.max),
            None => set,
        }
    }

    /// From now on each progress `activity` records moves the deadline to at least `idle`
    /// after it, never past `max` after the start. Only the first call counts.
    pub(crate) fn extend_on_progress(&self, activity: Arc<Activity>, idle: Duration, max: Duration) {
        let _ = self.extension.set(Extension { activity, idle, max });
    }

    /// Time left before the deadline.
    pub(crate) fn remaining(&self) -> Duration {
        self.deadline().saturating_duration_since(Instant::now())
    }

    /// Whether the deadline has passed.
    pub(crate) fn expired(&self) -> bool {
        self.remaining().is_zero()
    }

    /// How long the request has been allowed so far (deadline minus start).
    pub(crate) fn allowed(&self) -> Duration {
        self.deadline() - self.started
    }
}

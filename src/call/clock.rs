//! The deadline of one request: when it started and when it must be over. The deadline
//! layer sets and extends it; the retry and attempt layers read it.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// One request's deadline, shared by the layers that handle it.
#[derive(Debug)]
pub struct Clock {
    started: Instant,
    deadline: Mutex<Instant>,
}

impl Clock {
    /// A clock whose deadline is `timeout` from now.
    pub fn new(timeout: Duration) -> Arc<Clock> {
        let now = Instant::now();
        Arc::new(Clock { started: now, deadline: Mutex::new(now + timeout) })
    }

    /// When the request started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The current deadline.
    pub fn deadline(&self) -> Instant {
        *self.deadline.lock()
    }

    /// Moves the deadline.
    pub fn set_deadline(&self, at: Instant) {
        *self.deadline.lock() = at;
    }

    /// Time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.deadline().saturating_duration_since(Instant::now())
    }

    /// Whether the deadline has passed.
    pub fn expired(&self) -> bool {
        self.remaining().is_zero()
    }

    /// How long the request has been allowed so far (deadline minus start).
    pub fn allowed(&self) -> Duration {
        self.deadline() - self.started
    }
}

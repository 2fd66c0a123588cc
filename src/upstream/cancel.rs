//! The one guard both transports hold while a call waits for its answer.
//!
//! Dropping a call's future is how the gateway gives up on it (the client went away, a
//! deadline passed); the guard turns that drop into `notifications/cancelled` upstream.

/// Runs `on_drop(abandoned)` when dropped; `abandoned` is true unless [`disarm`] was
/// called, that is when the call's future was dropped before its answer came.
///
/// [`disarm`]: CancelGuard::disarm
pub(crate) struct CancelGuard<F: FnOnce(bool)> {
    on_drop: Option<F>,
    abandoned: bool,
}

impl<F: FnOnce(bool)> CancelGuard<F> {
    /// A guard for a call that has just been sent.
    pub(crate) fn new(on_drop: F) -> Self {
        Self { on_drop: Some(on_drop), abandoned: true }
    }

    /// Nothing to cancel: the answer came, or the request cannot have reached the upstream.
    pub(crate) fn disarm(&mut self) {
        self.abandoned = false;
    }
}

impl<F: FnOnce(bool)> Drop for CancelGuard<F> {
    fn drop(&mut self) {
        if let Some(on_drop) = self.on_drop.take() {
            on_drop(self.abandoned);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn a_dropped_guard_reports_whether_the_call_was_abandoned() {
        let seen = Cell::new(None);
        drop(CancelGuard::new(|abandoned| seen.set(Some(abandoned))));
        assert_eq!(seen.get(), Some(true));
        let mut guard = CancelGuard::new(|abandoned| seen.set(Some(abandoned)));
        guard.disarm();
        drop(guard);
        assert_eq!(seen.get(), Some(false));
    }
}

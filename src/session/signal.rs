//! A client request's cancellation: set once (the client sent `notifications/cancelled`
//! for it, or a shutdown's grace period ended) and awaited by the request's run.
//!
//! One flag and one waker, where a `CancellationToken` keeps a tree of tokens under a
//! lock and a list of waiters: each request has exactly one waiter (its run, in the
//! cancel layer), polled every time the request is, and nothing hangs below it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;

/// A request's cancellation, shared by the session (which sets it) and the request's
/// run (which waits for it).
#[derive(Clone, Default)]
pub(crate) struct CancelSignal(Arc<Inner>);

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    waiter: AtomicWaker,
}

impl std::fmt::Debug for CancelSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelSignal").field("cancelled", &self.is_cancelled()).finish()
    }
}

impl CancelSignal {
    /// A signal not set yet.
    pub(crate) fn new() -> CancelSignal {
        CancelSignal::default()
    }

    /// Sets the signal and wakes its waiter; setting it again changes nothing.
    pub(crate) fn cancel(&self) {
        if !self.0.cancelled.swap(true, Ordering::AcqRel) {
            self.0.waiter.wake();
        }
    }

    /// Whether the signal is set.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::Acquire)
    }

    /// Ready once the signal is set. One waiter at a time: a second future polled
    /// concurrently takes the wake-up over from the first.
    pub(crate) fn cancelled(&self) -> Cancelled<'_> {
        Cancelled { signal: self }
    }
}

/// The future of [`CancelSignal::cancelled`].
#[derive(Debug)]
pub(crate) struct Cancelled<'a> {
    signal: &'a CancelSignal,
}

impl Future for Cancelled<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.signal.is_cancelled() {
            return Poll::Ready(());
        }
        self.signal.0.waiter.register(cx.waker());
        // Set between the first look and the registration: its wake-up may have missed
        // the waker just registered.
        if self.signal.is_cancelled() { Poll::Ready(()) } else { Poll::Pending }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_waiter_wakes_when_the_signal_is_set_from_elsewhere() {
        let signal = CancelSignal::new();
        assert!(!signal.is_cancelled());
        let setter = signal.clone();
        let waiting = tokio::spawn(async move {
            setter.cancelled().await;
            setter.is_cancelled()
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "nothing set the signal yet");
        signal.cancel();
        signal.cancel();
        let woke = tokio::time::timeout(Duration::from_secs(5), waiting).await;
        assert!(matches!(woke, Ok(Ok(true))), "the waiter saw the signal: {woke:?}");
        // Set before it is awaited: ready at once.
        tokio::time::timeout(Duration::from_secs(1), signal.cancelled()).await.unwrap();
    }

    #[tokio::test]
    async fn a_signal_never_set_keeps_its_waiter_waiting() {
        let signal = CancelSignal::new();
        let waited = tokio::time::timeout(Duration::from_millis(30), signal.cancelled()).await;
        assert!(waited.is_err());
        assert!(!signal.is_cancelled());
    }
}

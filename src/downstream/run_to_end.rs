//! A request's future that runs to its end whatever the client does.
//!
//! A dropped connection is not a cancellation: a request's work goes on when its client
//! goes away (its messages wait in a resumable stream, its upstream side finishes
//! cleanly). Spawning every request into a task of its own would give that, at the
//! price of a task, a channel and a hand-off between threads per call; [`RunToEnd`]
//! instead is polled by the handler that awaits it and moves into a task of its own
//! only when it is dropped unfinished.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::FutureExt;

type Run<T> = Pin<Box<dyn Future<Output = Option<T>> + Send>>;

/// A future polled in place that finishes in a task of its own when dropped before its
/// end. Its output is `None` when the work panicked (the client then gets an internal
/// error instead of a dropped connection).
pub(super) struct RunToEnd<T: Send + 'static> {
    run: Option<Run<T>>,
}

impl<T: Send + 'static> RunToEnd<T> {
    /// Wraps `run`; nothing happens until it is polled or dropped.
    pub(super) fn new(run: impl Future<Output = T> + Send + 'static) -> RunToEnd<T> {
        RunToEnd { run: Some(Box::pin(AssertUnwindSafe(run).catch_unwind().map(Result::ok))) }
    }
}

impl<T: Send + 'static> Future for RunToEnd<T> {
    type Output = Option<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        // Polled again after its end (which `select!` and `.await` never do): it stays
        // finished.
        let Some(run) = self.run.as_mut() else { return Poll::Pending };
        let out = std::task::ready!(run.as_mut().poll(cx));
        self.run = None;
        Poll::Ready(out)
    }
}

impl<T: Send + 'static> Drop for RunToEnd<T> {
    fn drop(&mut self) {
        if let Some(run) = self.run.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(run);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::RunToEnd;

    #[tokio::test]
    async fn polled_to_its_end_it_gives_the_output() {
        assert_eq!(RunToEnd::new(async { 7 }).await, Some(7));
    }

    #[tokio::test]
    async fn dropped_unfinished_it_still_runs_to_its_end() {
        let done = Arc::new(AtomicBool::new(false));
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let flag = Arc::clone(&done);
        let run = RunToEnd::new(async move {
            let _ = started_tx.send(());
            tokio::time::sleep(Duration::from_millis(20)).await;
            flag.store(true, Ordering::SeqCst);
        });
        // Poll it until it has started, then drop it as a closed connection would.
        let waiting = tokio::spawn(async move {
            tokio::select! {
                _ = run => {}
                _ = std::future::pending::<()>() => {}
            }
        });
        started_rx.await.expect("started");
        waiting.abort();
        let _ = waiting.await;
        assert!(!done.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(done.load(Ordering::SeqCst), "the work was cut short");
    }

    #[tokio::test]
    async fn a_panic_is_an_output_of_none() {
        let run = RunToEnd::new(async {
            if std::hint::black_box(true) {
                panic!("boom");
            }
            1
        });
        assert_eq!(run.await, None);
    }
}

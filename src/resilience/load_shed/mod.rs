//! Load shedding: a cap on requests in flight to one upstream, with a short bounded
//! queue; beyond it, an immediate refusal ([`GatewayError::Overloaded`]) rather than
//! an ever-growing backlog that would time out anyway.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::Either;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::{Layer, Service};

use crate::call::{Answer, CallFuture, GatewayError, Holding, UpstreamCall};
use crate::config::ConcurrencyConfig;

/// The slots and queue of one upstream.
#[derive(Debug)]
pub struct Slots {
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    config: ConcurrencyConfig,
}

impl Slots {
    /// Slots for one upstream.
    pub fn new(config: ConcurrencyConfig) -> Arc<Slots> {
        Arc::new(Slots {
            permits: Arc::new(Semaphore::new(config.max_in_flight.max(1))),
            waiting: AtomicUsize::new(0),
            config,
        })
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.config.max_in_flight.max(1) - self.permits.available_permits()
    }

    /// Takes a slot, waiting in the queue if there is room in it.
    pub async fn acquire(&self, upstream: &str) -> Result<tokio::sync::OwnedSemaphorePermit, GatewayError> {
        if let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() {
            return Ok(permit);
        }
        let refuse = || {
            crate::telemetry::metrics::load_shed(upstream);
            GatewayError::Overloaded {
                scope: format!("upstream '{upstream}'"),
                retry_after: self.config.queue_timeout.max(Duration::from_secs(1)),
            }
        };
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.config.queue {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(refuse());
        }
        let waited = tokio::time::timeout(self.config.queue_timeout, Arc::clone(&self.permits).acquire_owned()).await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        match waited {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(refuse()),
        }
    }
}

/// Applies [`LoadShed`].
#[derive(Clone, Debug)]
pub struct LoadShedLayer {
    slots: Arc<Slots>,
}

impl LoadShedLayer {
    /// A layer over these slots.
    pub fn new(slots: Arc<Slots>) -> LoadShedLayer {
        LoadShedLayer { slots }
    }
}

impl<S> Layer<S> for LoadShedLayer {
    type Service = LoadShed<S>;
    fn layer(&self, inner: S) -> LoadShed<S> {
        LoadShed { inner, slots: Arc::clone(&self.slots) }
    }
}

/// Holds a slot for the whole life of a request (all its attempts).
#[derive(Clone, Debug)]
pub struct LoadShed<S> {
    inner: S,
    slots: Arc<Slots>,
}

impl<S> Service<UpstreamCall> for LoadShed<S>
where
    S: Service<UpstreamCall, Response = Answer, Error = GatewayError> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Answer;
    type Error = GatewayError;
    type Future = Either<Holding<S::Future, OwnedSemaphorePermit>, CallFuture>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: UpstreamCall) -> Self::Future {
        // The usual call: a slot is free and the stack below is ready (its layers always
        // are), so the call goes on at once, holding the slot, without a future of its own.
        if let Ok(permit) = Arc::clone(&self.slots.permits).try_acquire_owned() {
            let mut cx = Context::from_waker(std::task::Waker::noop());
            if let Poll::Ready(Ok(())) = self.inner.poll_ready(&mut cx) {
                return Either::Left(Holding::new(self.inner.call(req), permit));
            }
        }
        let mut inner = self.inner.clone();
        let slots = Arc::clone(&self.slots);
        Either::Right(Box::pin(async move {
            let _permit = slots.acquire(&req.upstream).await?;
            futures::future::poll_fn(|cx| inner.poll_ready(cx)).await?;
            inner.call(req).await
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn queues_briefly_then_refuses() {
        let slots = Slots::new(ConcurrencyConfig { max_in_flight: 2, queue: 1, queue_timeout: Duration::from_secs(1) });
        let a = slots.acquire("u").await.unwrap();
        let _b = slots.acquire("u").await.unwrap();
        assert_eq!(slots.in_flight(), 2);
        // One may wait; it gets the slot when `a` is released.
        let waiter = {
            let slots = Arc::clone(&slots);
            tokio::spawn(async move { slots.acquire("u").await.map(|_| ()) })
        };
        tokio::task::yield_now().await;
        // The queue is full: refused at once.
        assert!(matches!(slots.acquire("u").await, Err(GatewayError::Overloaded { .. })));
        drop(a);
        assert!(waiter.await.unwrap().is_ok());
        // A waiter that never gets a slot is refused after the queue timeout.
        let c = slots.acquire("u").await.unwrap();
        let started = tokio::time::Instant::now();
        assert!(matches!(slots.acquire("u").await, Err(GatewayError::Overloaded { .. })));
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        drop(c);
    }

    /// Through the layer: a call holds its slot until it ends, whether it got the slot
    /// at once or after waiting in the queue, and one past the queue is refused.
    #[tokio::test(start_paused = true)]
    async fn a_call_holds_its_slot_until_it_ends() {
        use tower::ServiceExt;
        let slots = Slots::new(ConcurrencyConfig { max_in_flight: 1, queue: 1, queue_timeout: Duration::from_secs(5) });
        let release = Arc::new(tokio::sync::Notify::new());
        let inner = {
            let release = Arc::clone(&release);
            tower::service_fn(move |_req: UpstreamCall| {
                let release = Arc::clone(&release);
                async move {
                    release.notified().await;
                    crate::resilience::test_support::ok()
                }
            })
        };
        let svc = LoadShedLayer::new(Arc::clone(&slots)).layer(inner);
        let call = || crate::resilience::test_support::call(true, Duration::from_secs(30));
        let first = tokio::spawn(svc.clone().oneshot(call()));
        tokio::task::yield_now().await;
        assert_eq!(slots.in_flight(), 1, "the first call took the slot at once");
        let queued = tokio::spawn(svc.clone().oneshot(call()));
        tokio::task::yield_now().await;
        let refused = svc.clone().oneshot(call()).await;
        assert!(matches!(refused, Err(GatewayError::Overloaded { .. })), "the queue holds one");
        release.notify_one();
        assert!(first.await.unwrap().is_ok());
        tokio::task::yield_now().await;
        assert_eq!(slots.in_flight(), 1, "the queued call has the slot now");
        release.notify_one();
        assert!(queued.await.unwrap().is_ok());
        assert_eq!(slots.in_flight(), 0);
    }
}

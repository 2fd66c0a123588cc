//! Load shedding: a cap on requests in flight to one upstream, with a short bounded
//! queue; beyond it, an immediate refusal ([`GatewayError::Overloaded`]) rather than
//! an ever-growing backlog that would time out anyway.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Semaphore;
use tower::{Layer, Service};

use crate::call::{Answer, CallFuture, GatewayError, UpstreamCall};
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
    type Future = CallFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: UpstreamCall) -> Self::Future {
        let mut inner = self.inner.clone();
        let slots = Arc::clone(&self.slots);
        Box::pin(async move {
            let _permit = slots.acquire(&req.upstream).await?;
            futures::future::poll_fn(|cx| inner.poll_ready(cx)).await?;
            inner.call(req).await
        })
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
}

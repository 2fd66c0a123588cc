//! The [`Layer`] that puts a [`CircuitBreaker`] in front of a service.

use std::sync::Arc;

use tower::Layer;

use super::CircuitBreaker;
use super::registry::Breakers;
use crate::config::BreakerConfig;

/// Applies [`CircuitBreaker`] with one upstream's settings; the breakers themselves live
/// in the shared [`Breakers`] registry, so status pages and `tools/list` can read them.
#[derive(Clone, Debug)]
pub struct BreakerLayer {
    breakers: Arc<Breakers>,
    cfg: BreakerConfig,
}

impl BreakerLayer {
    /// A layer creating missing breakers in `breakers` with `cfg`.
    pub fn new(breakers: Arc<Breakers>, cfg: BreakerConfig) -> BreakerLayer {
        BreakerLayer { breakers, cfg }
    }
}

impl<S> Layer<S> for BreakerLayer {
    type Service = CircuitBreaker<S>;

    fn layer(&self, inner: S) -> CircuitBreaker<S> {
        CircuitBreaker { inner, breakers: Arc::clone(&self.breakers), cfg: self.cfg }
    }
}

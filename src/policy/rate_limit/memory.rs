//! Limit state in this process: one keyed governor (GCRA) limiter per rule, on tokio's
//! clock so that tests with a paused clock see time move only when they move it.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

use super::rules::Rule;

/// tokio's monotonic clock, as time since the limiter was built.
#[derive(Debug, Clone)]
pub(crate) struct TokioClock {
    start: tokio::time::Instant,
}

impl Clock for TokioClock {
    type Instant = Duration;
    fn now(&self) -> Duration {
        self.start.elapsed()
    }
}

type Keyed = RateLimiter<String, DefaultKeyedStateStore<String>, TokioClock, NoOpMiddleware<Duration>>;

/// The limiters of every rule, in rule order.
pub(crate) struct MemoryStore {
    limiters: Vec<Keyed>,
    clock: TokioClock,
}

impl MemoryStore {
    /// One limiter per rule: a cell every `rate.interval()`, `burst` cells at most.
    pub(crate) fn new(rules: &[Rule]) -> Result<MemoryStore, String> {
        let clock = TokioClock { start: tokio::time::Instant::now() };
        let mut limiters = Vec::with_capacity(rules.len());
        for rule in rules {
            let burst = NonZeroU32::new(rule.burst).ok_or("burst must be at least 1")?;
            let quota = Quota::with_period(rule.rate.interval())
                .ok_or("the rate is too high: less than 1 ns between requests")?
                .allow_burst(burst);
            limiters.push(RateLimiter::new(quota, DefaultKeyedStateStore::default(), clock.clone()));
        }
        Ok(MemoryStore { limiters, clock })
    }

    /// Counts one request under `key` on the limiter of rule `rule`; `Err` holds how long
    /// until that limit would admit it.
    pub(crate) fn check(&self, rule: usize, key: &String) -> Result<(), Duration> {
        let Some(limiter) = self.limiters.get(rule) else { return Ok(()) };
        limiter.check_key(key).map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// Forgets keys whose limiters are back to full, so keyed state stays bounded.
    pub(crate) fn retain_recent(&self) {
        for limiter in &self.limiters {
            limiter.retain_recent();
        }
    }

    /// How many keys are remembered, over all rules.
    #[cfg(test)]
    pub(crate) fn keys(&self) -> usize {
        self.limiters.iter().map(|l| l.len()).sum()
    }
}

//! A sliding window of call counts, split into time buckets so that old calls fall out
//! without remembering each one.

use std::time::Duration;

use tokio::time::Instant;

/// Buckets per window: the window slides in steps of a tenth of its length.
const BUCKETS: usize = 10;

/// Calls, failures and slow calls counted in one bucket.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// Which step of time (since the window's origin) the counts belong to.
    step: u64,
    calls: u32,
    failures: u32,
    slow: u32,
}

/// Counts over the whole window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Calls counted.
    pub calls: u32,
    /// Of which failures.
    pub failures: u32,
    /// Of which slow.
    pub slow: u32,
}

/// Counts of the calls of the last `span` (rounded to a tenth).
#[derive(Debug, Clone)]
pub(super) struct Window {
    origin: Instant,
    width: Duration,
    buckets: [Bucket; BUCKETS],
}

impl Window {
    /// An empty window covering `span`.
    pub(super) fn new(span: Duration, now: Instant) -> Window {
        let width = (span / BUCKETS as u32).max(Duration::from_millis(1));
        Window { origin: now, width, buckets: [Bucket::default(); BUCKETS] }
    }

    /// Forgets every call.
    pub(super) fn clear(&mut self) {
        self.buckets = [Bucket::default(); BUCKETS];
    }

    /// Counts one call.
    pub(super) fn record(&mut self, now: Instant, failure: bool, slow: bool) {
        let step = self.step(now);
        let bucket = &mut self.buckets[slot(step)];
        if bucket.step != step {
            *bucket = Bucket { step, ..Bucket::default() };
        }
        bucket.calls = bucket.calls.saturating_add(1);
        bucket.failures = bucket.failures.saturating_add(u32::from(failure));
        bucket.slow = bucket.slow.saturating_add(u32::from(slow));
    }

    /// The counts of the buckets still inside the window.
    pub(super) fn totals(&self, now: Instant) -> Totals {
        let step = self.step(now);
        let oldest = step.saturating_sub(BUCKETS as u64 - 1);
        self.buckets.iter().filter(|b| (oldest..=step).contains(&b.step)).fold(Totals::default(), |t, b| Totals {
            calls: t.calls.saturating_add(b.calls),
            failures: t.failures.saturating_add(b.failures),
            slow: t.slow.saturating_add(b.slow),
        })
    }

    fn step(&self, now: Instant) -> u64 {
        let steps = now.saturating_duration_since(self.origin).as_nanos() / self.width.as_nanos();
        u64::try_from(steps).unwrap_or(u64::MAX)
    }
}

fn slot(step: u64) -> usize {
    // BUCKETS fits in u64 and the remainder fits in usize.
    (step % BUCKETS as u64) as usize
}

//! Requests and errors of the last 15 minutes in 10-second buckets, per upstream and in
//! total: what the status page draws. Fed from the one place requests are counted
//! ([`metrics::request`](super::metrics::request)), so it counts exactly what
//! `seawall_requests_total` counts.
//!
//! Recording is one or two atomic additions per series (the total and the upstream's),
//! without a lock or a sweeper: each bucket is one word holding the 10-second step it
//! counts beside its count, so the first request of a new step takes its bucket over
//! with one compare-and-swap. The upstream's series is found under a read lock; series
//! are only ever added, one per upstream name.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use parking_lot::RwLock;

use crate::hashing::Map as HashMap;

/// The time one bucket covers.
pub const BUCKET: Duration = Duration::from_secs(10);

/// Buckets kept: 15 minutes.
pub const BUCKETS: usize = 90;

/// Low bits of a bucket word: the count (a trillion per bucket).
const COUNT_BITS: u32 = 40;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
/// High bits: the step the count belongs to, modulo 2^24 (about five years of steps).
const TAG_MASK: u64 = (1 << (64 - COUNT_BITS)) - 1;

/// Most upstream names given a series of their own (upstream names come from the
/// configuration; this only bounds memory if a caller passes something else).
const MAX_SERIES: usize = 1024;

/// Outcomes of `seawall_requests_total` that count as errors, as the dashboard's and the
/// alerts' error ratios count them: the tool failed (`tool_error`, an `isError`
/// result), the upstream failed or could not be reached, or seawall refused the call to
/// protect it. Not errors: `ok`, `cancelled` (the client's doing) and `refused`
/// (turned down before it was sent, mostly a request the client got wrong).
const ERROR_OUTCOMES: &[&str] =
    &["tool_error", "error", "timeout", "upstream_error", "circuit_open", "shed", "rate_limited"];

/// Whether requests that ended with `outcome` count as errors.
pub fn is_error(outcome: &str) -> bool {
    ERROR_OUTCOMES.contains(&outcome)
}

/// A ring of buckets, one word each.
struct Ring([AtomicU64; BUCKETS]);

impl Ring {
    fn new() -> Ring {
        Ring(std::array::from_fn(|_| AtomicU64::new(0)))
    }

    /// Counts `n` events in `step`.
    fn add(&self, step: u64, n: u64) {
        let word = &self.0[slot(step)];
        let tag = step & TAG_MASK;
        let mut current = word.load(Ordering::Relaxed);
        loop {
            let seen = current >> COUNT_BITS;
            if seen == tag {
                // Only a step 15 minutes later could take this bucket over meanwhile.
                word.fetch_add(n, Ordering::Relaxed);
                return;
            }
            if is_later(seen, tag) {
                // This thread fell a whole ring behind; its event is too old to show.
                return;
            }
            let fresh = (tag << COUNT_BITS) | (n & COUNT_MASK);
            match word.compare_exchange_weak(current, fresh, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => current = now,
            }
        }
    }

    /// The count of `step` (zero when its bucket has moved on).
    fn count(&self, step: u64) -> u64 {
        let word = self.0[slot(step)].load(Ordering::Relaxed);
        if word >> COUNT_BITS == step & TAG_MASK { word & COUNT_MASK } else { 0 }
    }
}

fn slot(step: u64) -> usize {
    // The remainder is below BUCKETS, so it fits in usize.
    (step % BUCKETS as u64) as usize
}

/// Whether tag `a` is a later step than tag `b`, modulo the tag's width.
fn is_later(a: u64, b: u64) -> bool {
    let ahead = a.wrapping_sub(b) & TAG_MASK;
    ahead != 0 && ahead < (TAG_MASK >> 1)
}

/// The requests and errors of one upstream, or of all.
struct Series {
    requests: Ring,
    errors: Ring,
}

impl Series {
    fn new() -> Series {
        Series { requests: Ring::new(), errors: Ring::new() }
    }

    fn add(&self, step: u64, requests: u64, errors: u64) {
        self.requests.add(step, requests);
        if errors > 0 {
            self.errors.add(step, errors);
        }
    }

    fn counts(&self, now_step: u64) -> Counts {
        let steps = || (0..BUCKETS as u64).rev().map(move |back| now_step.checked_sub(back));
        let read = |ring: &Ring| steps().map(|s| s.map_or(0, |s| ring.count(s))).collect();
        Counts { requests: read(&self.requests), errors: read(&self.errors) }
    }
}

/// Counts of the last [`BUCKETS`] buckets, oldest first; the last one is the bucket in
/// progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts {
    /// Requests answered.
    pub requests: Vec<u64>,
    /// Of which errors (see [`is_error`]).
    pub errors: Vec<u64>,
}

impl Counts {
    fn zero() -> Counts {
        Counts { requests: vec![0; BUCKETS], errors: vec![0; BUCKETS] }
    }
}

/// The recent requests of every upstream and of the whole gateway.
pub struct Recent {
    origin: Instant,
    total: Series,
    upstreams: RwLock<HashMap<Box<str>, Arc<Series>>>,
}

impl Default for Recent {
    fn default() -> Self {
        Recent::new()
    }
}

impl Recent {
    /// Empty; buckets are counted from now.
    pub fn new() -> Recent {
        Recent::starting(Instant::now())
    }

    /// Empty; buckets are counted from `origin`.
    pub fn starting(origin: Instant) -> Recent {
        Recent { origin, total: Series::new(), upstreams: RwLock::new(HashMap::default()) }
    }

    /// Counts one request answered now.
    pub fn record(&self, upstream: &str, outcome: &str) {
        self.record_at(Instant::now(), upstream, outcome);
    }

    /// Counts one request answered at `now`.
    pub fn record_at(&self, now: Instant, upstream: &str, outcome: &str) {
        self.add(now, upstream, 1, u64::from(is_error(outcome)));
    }

    /// Counts `requests` requests, `errors` of them errors, answered at `now` (tests
    /// fill buckets with large counts this way).
    #[cfg(test)]
    pub(crate) fn record_many_at(&self, now: Instant, upstream: &str, requests: u64, errors: u64) {
        self.add(now, upstream, requests, errors);
    }

    fn add(&self, now: Instant, upstream: &str, requests: u64, errors: u64) {
        let step = self.step(now);
        self.total.add(step, requests, errors);
        // Counted under the read lock, so the common case clones nothing.
        if let Some(series) = self.upstreams.read().get(upstream) {
            series.add(step, requests, errors);
            return;
        }
        if let Some(series) = self.series(upstream) {
            series.add(step, requests, errors);
        }
    }

    /// The whole gateway's counts at `now`.
    pub fn total(&self, now: Instant) -> Counts {
        self.total.counts(self.step(now))
    }

    /// One upstream's counts at `now` (zeros for an upstream that answered nothing yet).
    pub fn upstream(&self, upstream: &str, now: Instant) -> Counts {
        let series = self.upstreams.read().get(upstream).cloned();
        series.map_or_else(Counts::zero, |s| s.counts(self.step(now)))
    }

    /// How much of the bucket in progress has passed at `now`.
    pub fn bucket_elapsed(&self, now: Instant) -> Duration {
        let since = now.saturating_duration_since(self.origin);
        let bucket_nanos = BUCKET.as_nanos();
        // The remainder is below one bucket's nanoseconds, which fit in u64.
        Duration::from_nanos((since.as_nanos() % bucket_nanos) as u64)
    }

    fn step(&self, now: Instant) -> u64 {
        // Whole seconds: a bucket is a whole number of them, and u64 division is cheap.
        now.saturating_duration_since(self.origin).as_secs() / BUCKET.as_secs()
    }

    /// The upstream's series, added if it is new (and there is room).
    fn series(&self, upstream: &str) -> Option<Arc<Series>> {
        let mut all = self.upstreams.write();
        if let Some(found) = all.get(upstream) {
            return Some(Arc::clone(found));
        }
        if all.len() >= MAX_SERIES {
            return None;
        }
        let series = Arc::new(Series::new());
        all.insert(Box::from(upstream), Arc::clone(&series));
        Some(series)
    }
}

static GLOBAL: LazyLock<Recent> = LazyLock::new(Recent::new);

/// The process's own series, fed by [`metrics::request`](super::metrics::request).
pub fn global() -> &'static Recent {
    &GLOBAL
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(v: &[u64]) -> u64 {
        v.iter().sum()
    }

    #[test]
    fn requests_land_in_their_bucket_per_upstream_and_in_total() {
        let t0 = Instant::now();
        let r = Recent::starting(t0);
        r.record_at(t0, "a", "ok");
        r.record_at(t0 + Duration::from_secs(1), "a", "error");
        r.record_at(t0 + Duration::from_secs(11), "b", "circuit_open");
        r.record_at(t0 + Duration::from_secs(12), "b", "tool_error");
        r.record_at(t0 + Duration::from_secs(13), "b", "cancelled");
        let now = t0 + Duration::from_secs(15);
        let a = r.upstream("a", now);
        assert_eq!(a.requests.len(), BUCKETS);
        assert_eq!((a.requests[BUCKETS - 2], a.errors[BUCKETS - 2]), (2, 1));
        assert_eq!((a.requests[BUCKETS - 1], a.errors[BUCKETS - 1]), (0, 0));
        let b = r.upstream("b", now);
        assert_eq!((b.requests[BUCKETS - 1], b.errors[BUCKETS - 1]), (3, 2));
        let total = r.total(now);
        assert_eq!((sum(&total.requests), sum(&total.errors)), (5, 3));
        assert_eq!(r.upstream("nobody", now), Counts::zero());
        assert_eq!(r.bucket_elapsed(now), Duration::from_secs(5));
    }

    #[test]
    fn old_buckets_fall_out_and_their_slots_are_reused() {
        let t0 = Instant::now();
        let r = Recent::starting(t0);
        r.record_at(t0, "a", "ok");
        // Still within 15 minutes: the oldest bucket.
        let at_edge = t0 + BUCKET * (BUCKETS as u32 - 1);
        assert_eq!(r.upstream("a", at_edge).requests[0], 1);
        // One bucket later it is gone, and the same slot counts the new step afresh.
        let later = t0 + BUCKET * BUCKETS as u32;
        assert_eq!(sum(&r.upstream("a", later).requests), 0);
        r.record_at(later, "a", "timeout");
        let counts = r.upstream("a", later);
        assert_eq!((sum(&counts.requests), sum(&counts.errors)), (1, 1));
        assert_eq!(counts.requests[BUCKETS - 1], 1);
        // A late event of a step the ring has left behind changes nothing.
        r.record_at(t0, "a", "ok");
        assert_eq!(sum(&r.upstream("a", later).requests), 1);
    }

    #[test]
    fn concurrent_records_are_all_counted() {
        let r = Arc::new(Recent::new());
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let r = Arc::clone(&r);
                std::thread::spawn(move || {
                    for n in 0..10_000 {
                        r.record(if i % 2 == 0 { "even" } else { "odd" }, if n % 10 == 0 { "error" } else { "ok" });
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let now = Instant::now();
        let total = r.total(now);
        assert_eq!((sum(&total.requests), sum(&total.errors)), (40_000, 4_000));
        assert_eq!(sum(&r.upstream("even", now).requests), 20_000);
    }

    #[test]
    fn tags_compare_across_their_wrap() {
        assert!(is_later(5, 4));
        assert!(!is_later(4, 5));
        assert!(!is_later(4, 4));
        assert!(is_later(0, TAG_MASK), "step 2^24 follows step 2^24 - 1");
    }
}

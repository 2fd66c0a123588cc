//! Exponential backoff, written once: the doubling delay `min(cap, base·2^n)` and its
//! full-jitter draw.
//!
//! Every delay that grows on repeated failure — retry backoff, breaker open periods,
//! endpoint ejection, process restarts, stream reconnects — reads [`doubling`]. It is a
//! leaf of its own so that transports and policies can both use it without importing
//! each other.

use std::time::Duration;

/// `min(cap, base·2^n)`, without overflow.
pub(crate) fn doubling(base: Duration, cap: Duration, n: u32) -> Duration {
    let factor = 1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX);
    base.checked_mul(factor).unwrap_or(cap).min(cap)
}

/// A delay drawn uniformly from `0..=doubling(base, cap, n)`.
///
/// Full jitter spreads the retries of many clients that failed together, so they do not
/// arrive at a recovering upstream in waves.
pub(crate) fn full_jitter(base: Duration, cap: Duration, n: u32) -> Duration {
    let ceiling = doubling(base, cap, n);
    if ceiling.is_zero() {
        return Duration::ZERO;
    }
    let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rand::random_range(0..=nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_exponentially_up_to_the_cap() {
        let (base, cap) = (Duration::from_millis(100), Duration::from_secs(2));
        assert_eq!(doubling(base, cap, 0), Duration::from_millis(100));
        assert_eq!(doubling(base, cap, 3), Duration::from_millis(800));
        assert_eq!(doubling(base, cap, 10), cap);
        assert_eq!(doubling(base, cap, 200), cap);
        for n in 0..8 {
            assert!(full_jitter(base, cap, n) <= doubling(base, cap, n));
        }
    }

    #[test]
    fn a_huge_base_stops_at_the_cap() {
        assert_eq!(doubling(Duration::MAX, Duration::from_secs(1), 5), Duration::from_secs(1));
        assert_eq!(full_jitter(Duration::ZERO, Duration::from_secs(1), 5), Duration::ZERO);
    }
}

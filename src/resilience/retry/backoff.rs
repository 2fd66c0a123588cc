//! Exponential backoff with full jitter: attempt n waits U(0, min(cap, base·2^n)).
//!
//! Full jitter spreads the retries of many clients that failed together, so they do not
//! arrive at a recovering upstream in waves.

use std::time::Duration;

/// The delay before retry number `retry` (0 for the first retry).
pub fn full_jitter(base: Duration, cap: Duration, retry: u32) -> Duration {
    let ceiling = ceiling(base, cap, retry);
    if ceiling.is_zero() {
        return Duration::ZERO;
    }
    let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rand::random_range(0..=nanos))
}

/// min(cap, base·2^retry), without overflow.
pub fn ceiling(base: Duration, cap: Duration, retry: u32) -> Duration {
    let factor = 1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
    base.checked_mul(factor).unwrap_or(cap).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_exponentially_up_to_the_cap() {
        let (base, cap) = (Duration::from_millis(100), Duration::from_secs(2));
        assert_eq!(ceiling(base, cap, 0), Duration::from_millis(100));
        assert_eq!(ceiling(base, cap, 3), Duration::from_millis(800));
        assert_eq!(ceiling(base, cap, 10), cap);
        assert_eq!(ceiling(base, cap, 200), cap);
        for retry in 0..8 {
            assert!(full_jitter(base, cap, retry) <= ceiling(base, cap, retry));
        }
    }
}

//! Whether a failed attempt may be tried again — read from the failure's one
//! classification, recorded at the point of failure, never guessed from text.

use std::time::Duration;

use crate::call::{Class, Retry};

/// The decision on one failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Do not retry.
    Stop,
    /// Retry after the usual backoff.
    Retry,
    /// Retry no sooner than this (the upstream's `Retry-After`).
    RetryAfter(Duration),
}

/// Decides whether attempt number `attempt` (1-based), which failed as `class` says, may
/// be retried. `idempotent` says whether sending the request twice is safe.
pub fn decide(class: &Class, idempotent: bool, attempt: u32) -> Decision {
    match class.retry {
        Retry::Never => Decision::Stop,
        // Never left the gateway: safe to send once more whatever the method.
        Retry::NotSent if idempotent || attempt == 1 => Decision::Retry,
        Retry::NotSent => Decision::Stop,
        _ if !idempotent => Decision::Stop,
        Retry::IfIdempotent => Decision::Retry,
        Retry::After(after) => Decision::RetryAfter(after),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::{GatewayError, UpstreamError};
    use crate::resilience::test_support::failed;

    fn v(error: GatewayError, idempotent: bool, attempt: u32) -> Decision {
        decide(&error.class(), idempotent, attempt)
    }

    #[test]
    fn only_idempotent_requests_retry_after_reaching_the_upstream() {
        let reset = || failed(UpstreamError::Io("reset".into()));
        assert_eq!(v(reset(), true, 1), Decision::Retry);
        assert_eq!(v(reset(), false, 1), Decision::Stop);
        let refused = || failed(UpstreamError::Connect("refused".into()));
        assert_eq!(v(refused(), false, 1), Decision::Retry);
        assert_eq!(v(refused(), false, 2), Decision::Stop);
        assert_eq!(v(refused(), true, 2), Decision::Retry);
        for status in [502, 503, 504] {
            assert_eq!(v(failed(UpstreamError::HttpStatus { status, retry_after: None }), true, 1), Decision::Retry);
        }
        assert_eq!(v(failed(UpstreamError::HttpStatus { status: 500, retry_after: None }), true, 1), Decision::Stop);
        for status in [429, 503] {
            let limited = failed(UpstreamError::HttpStatus { status, retry_after: Some(Duration::from_secs(1)) });
            assert_eq!(v(limited, true, 1), Decision::RetryAfter(Duration::from_secs(1)));
        }
        assert_eq!(v(failed(UpstreamError::Protocol("x".into())), true, 1), Decision::Stop);
        assert_eq!(v(GatewayError::Cancelled, true, 1), Decision::Stop);
    }
}

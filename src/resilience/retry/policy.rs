//! Whether a failed attempt may be tried again — decided from what the transport
//! recorded at the point of failure, never by guessing from text.

use std::time::Duration;

use crate::errors::GatewayError;
use crate::upstream::UpstreamError;

/// The verdict on one failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Do not retry.
    Stop,
    /// Retry after the usual backoff.
    Retry,
    /// Retry no sooner than this (the upstream's `Retry-After`).
    RetryAfter(Duration),
}

/// Decides whether attempt number `attempt` (1-based), which failed with `error`, may be
/// retried. `idempotent` says whether sending the request twice is safe.
pub fn verdict(error: &GatewayError, idempotent: bool, attempt: u32) -> Verdict {
    let GatewayError::Upstream { source, .. } = error else {
        // Timeouts of the whole request, refusals and client faults are final; an attempt
        // timeout is turned into `AttemptTimeout` by the retry layer itself.
        return Verdict::Stop;
    };
    if !source.may_have_reached() {
        // Never left the gateway: safe to send once more whatever the method.
        return if idempotent || attempt == 1 { Verdict::Retry } else { Verdict::Stop };
    }
    if !idempotent {
        return Verdict::Stop;
    }
    match source {
        UpstreamError::Io(_) | UpstreamError::ProcessExited | UpstreamError::SessionLost(_) => Verdict::Retry,
        UpstreamError::HttpStatus { status: 502..=504, .. } => Verdict::Retry,
        UpstreamError::HttpStatus { status: 429, retry_after } => match retry_after {
            Some(after) => Verdict::RetryAfter(*after),
            None => Verdict::Retry,
        },
        _ => Verdict::Stop,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn up(source: UpstreamError) -> GatewayError {
        GatewayError::Upstream { upstream: Arc::from("u"), source }
    }

    #[test]
    fn only_idempotent_requests_retry_after_reaching_the_upstream() {
        let reset = up(UpstreamError::Io("reset".into()));
        assert_eq!(verdict(&reset, true, 1), Verdict::Retry);
        assert_eq!(verdict(&reset, false, 1), Verdict::Stop);
        let refused = up(UpstreamError::Connect("refused".into()));
        assert_eq!(verdict(&refused, false, 1), Verdict::Retry);
        assert_eq!(verdict(&refused, false, 2), Verdict::Stop);
        assert_eq!(verdict(&refused, true, 2), Verdict::Retry);
        for status in [502, 503, 504] {
            assert_eq!(verdict(&up(UpstreamError::HttpStatus { status, retry_after: None }), true, 1), Verdict::Retry);
        }
        assert_eq!(verdict(&up(UpstreamError::HttpStatus { status: 500, retry_after: None }), true, 1), Verdict::Stop);
        let limited = up(UpstreamError::HttpStatus { status: 429, retry_after: Some(Duration::from_secs(1)) });
        assert_eq!(verdict(&limited, true, 1), Verdict::RetryAfter(Duration::from_secs(1)));
        assert_eq!(verdict(&up(UpstreamError::Protocol("x".into())), true, 1), Verdict::Stop);
        assert_eq!(verdict(&GatewayError::Cancelled, true, 1), Verdict::Stop);
    }
}

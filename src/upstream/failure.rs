//! How an HTTP upstream's failures read: a status that is not an MCP answer, a failed
//! handshake, and whether a failure means the upstream refuses a protocol era (it
//! answered, and not as that era's server would) rather than that it failed.

use std::time::Duration;

use http::header::RETRY_AFTER;

use crate::call::UpstreamError;

/// Whether a failed handshake means the upstream refuses that protocol era (it
/// answered, and not as that era's server would), rather than that it failed: a
/// client error status (not 408 or 429), a JSON-RPC error or an answer that is not the
/// era's handshake result, or something that is not MCP at all.
pub(crate) fn refuses_era(e: &UpstreamError) -> bool {
    match e {
        UpstreamError::HttpStatus { status, .. } => (400..500).contains(status) && !matches!(status, 408 | 429),
        UpstreamError::Handshake(_) | UpstreamError::Protocol(_) => true,
        UpstreamError::Connect(_)
        | UpstreamError::NotRunning(_)
        | UpstreamError::Io(_)
        | UpstreamError::ProcessExited { .. }
        | UpstreamError::Restarting
        | UpstreamError::TooLarge { .. }
        | UpstreamError::SessionLost(_) => false,
    }
}

/// A failed handshake as the error callers see: unreachable stays unreachable, the rest
/// is a handshake failure (nothing was served).
pub(crate) fn handshake_error(e: UpstreamError) -> UpstreamError {
    match e {
        UpstreamError::Connect(m) => UpstreamError::Connect(m),
        other => UpstreamError::Handshake(other.to_string()),
    }
}

/// An HTTP status that is not an MCP answer, with its `Retry-After` in seconds.
pub(crate) fn status_error(status: http::StatusCode, headers: &http::HeaderMap) -> UpstreamError {
    let retry_after = headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    UpstreamError::HttpStatus { status: status.as_u16(), retry_after }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_answer_refuses_an_era_a_failure_does_not() {
        let status = |status| UpstreamError::HttpStatus { status, retry_after: None };
        for refused in [
            status(400),
            status(404),
            status(405),
            status(406),
            UpstreamError::Handshake("initialize refused: {}".into()),
            UpstreamError::Protocol("not JSON".into()),
        ] {
            assert!(refuses_era(&refused), "{refused}");
        }
        for failed in [
            status(408),
            status(429),
            status(500),
            status(503),
            UpstreamError::Connect("refused".into()),
            UpstreamError::Io("reset".into()),
            UpstreamError::TooLarge { limit: 1 },
        ] {
            assert!(!refuses_era(&failed), "{failed}");
        }
    }
}

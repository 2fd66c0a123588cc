//! What a finished (or abandoned) call says about the health of the upstream and of the
//! tool it called. Decided here, once, by error type and JSON-RPC error code; the state
//! machine only counts.

use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::errors::GatewayError;
use crate::jsonrpc::code;
use crate::upstream::service::Abandon;
use crate::upstream::{Reply, UpstreamError};

/// How one call counts on a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The upstream (or tool) did its job, even if the answer was an error the request caused.
    Success,
    /// The upstream (or tool) could not do its job.
    Failure,
    /// Says nothing about health (client cancellation, seawall's own refusals): not counted.
    Ignored,
}

/// An [`Outcome`] and whether the call was slow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// How the call counts.
    pub outcome: Outcome,
    /// The call took longer than `slow_call` (only counted when the outcome is not ignored).
    pub slow: bool,
}

impl Verdict {
    /// A verdict that is not slow.
    pub fn new(outcome: Outcome) -> Verdict {
        Verdict { outcome, slow: false }
    }
}

/// Why a call ended the way it did, as far as breakers care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The upstream answered: a result (`isError` results included: the tool ran and
    /// answered) or an error the request caused (-32600, -32601, -32602, -32002, 4xx).
    Answered,
    /// The upstream answered with an error of its own: -32603, or a server error in
    /// -32099..=-32000 other than -32002 (-32001, a timeout, included).
    FailedAnswer,
    /// The upstream could not be reached, or its connection or protocol broke
    /// (connect, spawn, handshake, I/O, process exit, HTTP 5xx, invalid MCP).
    Unreachable,
    /// No answer in time: a deadline or probe timeout.
    NoAnswer,
    /// Not about the upstream's health: cancelled by the client, refused by seawall,
    /// rate-limited (HTTP 429), an oversized answer.
    Irrelevant,
}

impl Cause {
    /// The cause of a finished call.
    pub fn of(result: &Result<Reply, GatewayError>) -> Cause {
        match result {
            Ok(Ok(_)) => Cause::Answered,
            Ok(Err(error)) => answer_cause(error),
            Err(e) => error_cause(e),
        }
    }

    /// The cause of a call whose future was dropped before it finished: a client
    /// cancellation is not the upstream's fault, an expired deadline is. A drop with no
    /// reason recorded counts as an expired deadline only when the deadline has passed.
    pub fn abandoned(why: Abandon, deadline_passed: bool) -> Cause {
        match why {
            Abandon::ClientCancelled => Cause::Irrelevant,
            Abandon::DeadlineExpired => Cause::NoAnswer,
            Abandon::None if deadline_passed => Cause::NoAnswer,
            Abandon::None => Cause::Irrelevant,
        }
    }

    /// How the cause counts when one breaker sees the call.
    pub fn outcome(self) -> Outcome {
        match self {
            Cause::Answered => Outcome::Success,
            Cause::FailedAnswer | Cause::Unreachable | Cause::NoAnswer => Outcome::Failure,
            Cause::Irrelevant => Outcome::Ignored,
        }
    }

    /// The verdict when one breaker sees the call; `slow` is dropped for ignored calls.
    pub fn verdict(self, slow: bool) -> Verdict {
        let outcome = self.outcome();
        Verdict { outcome, slow: slow && outcome != Outcome::Ignored }
    }
}

/// How a finished call counts on a breaker that sees every call: its outcome, and
/// whether it took longer than `slow`.
pub fn outcome(result: &Result<Reply, GatewayError>, elapsed: Duration, slow: Duration) -> Verdict {
    Cause::of(result).verdict(elapsed > slow)
}

/// How a `tools/call` counts on the upstream's breaker and on the tool's, when both see
/// it. Each failure counts once, on the breaker it says something about, so that one
/// broken tool does not open the whole upstream:
///
/// | cause          | upstream                  | tool           |
/// |----------------|---------------------------|----------------|
/// | `Answered`     | success (never slow)      | success (slow?) |
/// | `FailedAnswer` | success: it answered      | failure        |
/// | `Unreachable`  | failure                   | ignored        |
/// | `NoAnswer`     | ignored; failure if probe | failure        |
/// | `Irrelevant`   | ignored                   | ignored        |
///
/// A half-open upstream whose probe got no answer in time has failed its probe, whatever
/// tool it went to. Returns `(upstream, tool)`.
pub fn split(cause: Cause, slow: bool, upstream_probing: bool) -> (Verdict, Verdict) {
    use Outcome::{Failure, Ignored, Success};
    let (upstream, tool) = match cause {
        Cause::Answered => (Success, Success),
        Cause::FailedAnswer => (Success, Failure),
        Cause::Unreachable => (Failure, Ignored),
        Cause::NoAnswer if upstream_probing => (Failure, Failure),
        Cause::NoAnswer => (Ignored, Failure),
        Cause::Irrelevant => (Ignored, Ignored),
    };
    (Verdict::new(upstream), Verdict { outcome: tool, slow: slow && tool != Ignored })
}

fn error_cause(e: &GatewayError) -> Cause {
    match e {
        GatewayError::Upstream { source, .. } => match source {
            UpstreamError::HttpStatus { status, .. } => status_cause(*status),
            UpstreamError::TooLarge { .. } => Cause::Irrelevant,
            UpstreamError::Connect(_)
            | UpstreamError::NotRunning(_)
            | UpstreamError::Handshake(_)
            | UpstreamError::Io(_)
            | UpstreamError::ProcessExited
            | UpstreamError::Protocol(_)
            | UpstreamError::SessionLost(_) => Cause::Unreachable,
        },
        GatewayError::Unavailable { .. } => Cause::Unreachable,
        GatewayError::Timeout { .. } => Cause::NoAnswer,
        GatewayError::InvalidParams(_)
        | GatewayError::MethodNotFound(_)
        | GatewayError::UnknownTool(_)
        | GatewayError::UnknownPrompt(_)
        | GatewayError::ResourceNotFound(_)
        | GatewayError::Cancelled
        | GatewayError::CircuitOpen { .. }
        | GatewayError::Overloaded { .. }
        | GatewayError::Internal(_) => Cause::Irrelevant,
    }
}

fn status_cause(status: u16) -> Cause {
    match status {
        500..=599 => Cause::Unreachable,
        // The upstream asks us to slow down; the retry layer honours it. Counting it would
        // turn rate limiting into an outage.
        429 => Cause::Irrelevant,
        _ => Cause::Answered,
    }
}

fn answer_cause(error: &RawValue) -> Cause {
    #[derive(Deserialize)]
    struct ErrorCode {
        code: i64,
    }
    match serde_json::from_str::<ErrorCode>(error.get()) {
        Ok(ErrorCode { code: code::INTERNAL_ERROR }) => Cause::FailedAnswer,
        Ok(ErrorCode { code: code::RESOURCE_NOT_FOUND }) => Cause::Answered,
        Ok(ErrorCode { code: -32099..=-32000 }) => Cause::FailedAnswer,
        // We cancelled it: says nothing about the upstream.
        Ok(ErrorCode { code: code::REQUEST_CANCELLED }) => Cause::Irrelevant,
        Ok(_) => Cause::Answered,
        // An error object without a numeric code breaks the protocol.
        Err(_) => Cause::FailedAnswer,
    }
}

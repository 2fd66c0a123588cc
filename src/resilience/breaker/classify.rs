//! How a finished call counts on the breakers that saw it. What a failure says about
//! health is decided once, by [`crate::call::GatewayError::class`] and
//! [`crate::call::Answer::health`]; this module only splits it between the upstream's
//! breaker and the tool's.

#[cfg(test)]
use std::time::Duration;

use crate::call::{Answer, GatewayError, Health};

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

    /// The verdict of a breaker that sees every call; `slow` is dropped for ignored calls.
    pub fn of(health: Health, slow: bool) -> Verdict {
        let outcome = match health {
            Health::Answered => Outcome::Success,
            Health::FailedAnswer | Health::Unreachable | Health::NoAnswer => Outcome::Failure,
            Health::Crashed | Health::Irrelevant => Outcome::Ignored,
        };
        Verdict { outcome, slow: slow && outcome != Outcome::Ignored }
    }
}

/// What a finished call says about health.
pub fn health(result: &Result<Answer, GatewayError>) -> Health {
    match result {
        Ok(answer) => answer.health(),
        Err(e) => e.class().health,
    }
}

/// How a finished call counts on a breaker that sees every call: its outcome, and
/// whether it took longer than `slow`.
#[cfg(test)]
pub fn outcome(result: &Result<Answer, GatewayError>, elapsed: Duration, slow: Duration) -> Verdict {
    Verdict::of(health(result), elapsed > slow)
}

/// How a `tools/call` counts on the upstream's breaker and on the tool's, when both see
/// it. Each failure counts once, on the breaker it says something about, so that one
/// broken tool does not open the whole upstream:
///
/// | health         | upstream                  | tool           |
/// |----------------|---------------------------|----------------|
/// | `Answered`     | success (never slow)      | success (slow?) |
/// | `FailedAnswer` | success: it answered      | failure        |
/// | `Crashed`      | ignored: it is restarted  | ignored here¹  |
/// | `Unreachable`  | failure                   | ignored        |
/// | `NoAnswer`     | ignored; failure if probe | failure        |
/// | `Irrelevant`   | ignored                   | ignored        |
///
/// A half-open upstream whose probe got no answer in time has failed its probe, whatever
/// tool it went to. Returns `(upstream, tool)`.
///
/// ¹ An attempt that met its process's death may be retried, and a retry that succeeds
/// clears the tool: [`super::blame`] counts the death on the tool once the call as a
/// whole failed with it.
pub fn split(health: Health, slow: bool, upstream_probing: bool) -> (Verdict, Verdict) {
    use Outcome::{Failure, Ignored, Success};
    let (upstream, tool) = match health {
        Health::Answered => (Success, Success),
        Health::FailedAnswer => (Success, Failure),
        Health::Crashed => (Ignored, Ignored),
        Health::Unreachable => (Failure, Ignored),
        Health::NoAnswer if upstream_probing => (Failure, Failure),
        Health::NoAnswer => (Ignored, Failure),
        Health::Irrelevant => (Ignored, Ignored),
    };
    (Verdict::new(upstream), Verdict { outcome: tool, slow: slow && tool != Ignored })
}

#[cfg(test)]
mod tests {
    //! What counts as a failure.

    use std::sync::Arc;
    use std::time::Duration;

    use crate::resilience::breaker::test_support::{is_error_result, result, rpc_error, transport_error};
    use crate::call::{Answer, GatewayError, Health, UpstreamError};
    use crate::resilience::breaker::classify::{Outcome, Verdict};
    use crate::resilience::breaker::classify::{outcome, split};
    use crate::resilience::test_support::failed;

    fn upstream(source: UpstreamError) -> Result<Answer, GatewayError> {
        Err(failed(source))
    }

    fn counted(r: &Result<Answer, GatewayError>) -> Outcome {
        outcome(r, Duration::ZERO, Duration::from_secs(1)).outcome
    }

    #[test]
    fn answers_and_client_faults_are_successes() {
        for r in [result(), is_error_result(), rpc_error(-32600), rpc_error(-32601), rpc_error(-32602), rpc_error(-32002)] {
            assert_eq!(counted(&r), Outcome::Success, "{r:?}");
        }
        let not_found = upstream(UpstreamError::HttpStatus { status: 404, retry_after: None });
        assert_eq!(counted(&not_found), Outcome::Success);
    }

    #[test]
    fn upstream_faults_are_failures() {
        let failures = [
            rpc_error(-32603),
            rpc_error(-32001),
            rpc_error(-32000),
            rpc_error(-32099),
            Ok(Answer::parse(Err(crate::jsonrpc::to_raw(&serde_json::json!({ "message": "no code" }))), false)),
            transport_error(),
            upstream(UpstreamError::Connect("refused".into())),
            upstream(UpstreamError::NotRunning("restarting".into())),
            upstream(UpstreamError::Handshake("bad version".into())),
            upstream(UpstreamError::Protocol("not json".into())),
            upstream(UpstreamError::HttpStatus { status: 503, retry_after: None }),
            Err(GatewayError::Timeout { upstream: Arc::from("u"), after: Duration::from_secs(1) }),
            Err(GatewayError::Unavailable { upstream: Arc::from("u"), reason: "down".into() }),
        ];
        for r in failures {
            assert_eq!(counted(&r), Outcome::Failure, "{r:?}");
        }
    }

    #[test]
    fn refusals_and_cancellations_are_ignored() {
        let ignored = [
            Err(GatewayError::Cancelled),
            Err(GatewayError::CircuitOpen {
                upstream: Arc::from("u"),
                tool: None,
                retry_after: Duration::ZERO,
                isolated: None,
            }),
            Err(GatewayError::Overloaded { scope: "gateway".into(), retry_after: Duration::ZERO }),
            Err(GatewayError::InvalidParams("x".into())),
            Err(GatewayError::UnknownTool("x".into())),
            Err(GatewayError::MethodNotFound("x".into())),
            upstream(UpstreamError::HttpStatus { status: 429, retry_after: None }),
            rpc_error(-32800),
            // A supervised process that crashed is restarted: not the upstream's failure.
            upstream(UpstreamError::ProcessExited { implicated: true }),
            upstream(UpstreamError::ProcessExited { implicated: false }),
        ];
        for r in ignored {
            assert_eq!(counted(&r), Outcome::Ignored, "{r:?}");
        }
    }

    #[test]
    fn slowness_is_flagged_except_on_ignored_calls() {
        let slow = Duration::from_millis(100);
        assert!(outcome(&result(), Duration::from_millis(101), slow).slow);
        assert!(!outcome(&result(), Duration::from_millis(100), slow).slow);
        assert!(!outcome(&Err(GatewayError::Cancelled), Duration::from_secs(9), slow).slow);
    }

    #[test]
    fn each_failure_counts_on_the_breaker_it_is_about() {
        let v = |o| Verdict::new(o);
        use Outcome::{Failure, Ignored, Success};
        assert_eq!(split(Health::FailedAnswer, false, false), (v(Success), v(Failure)));
        assert_eq!(split(Health::Unreachable, false, false), (v(Failure), v(Ignored)));
        assert_eq!(split(Health::NoAnswer, false, false), (v(Ignored), v(Failure)));
        assert_eq!(split(Health::NoAnswer, false, true), (v(Failure), v(Failure)));
        // A process death counts on the tool only once the call as a whole failed with it.
        assert_eq!(split(Health::Crashed, false, false), (v(Ignored), v(Ignored)));
        assert_eq!(split(Health::Answered, true, false), (v(Success), Verdict { outcome: Success, slow: true }));
    }
}
